import { randomBytes } from 'node:crypto'
import type { Config } from '../../../config/schema.js'
import { ChangeFeed } from '../changes.js'
import { Leases } from '../leases.js'
import { tenantPlan } from '../tenants.js'
import type { ChangeListener, Store, SyncMode, SyncReport } from '../types.js'
import { AuditRepository } from './audit.js'
import { EndOfCallBatch } from './batch.js'
import { RedisBus } from './bus.js'
import { Connection } from './db.js'
import { KeyRepository } from './keys.js'
import { LedgerRepository } from './ledger.js'
import { ProviderObjectRepository } from './objects.js'
import { AlertRepository } from './alerts.js'
import { OrgRepository } from './orgs.js'
import { defineScripts, IdempotencyRepository, RateLimitRepository } from './policies.js'
import { QuotaRepository } from './quota.js'
import { defineCacheScripts, ResponseCacheRepository } from './response-cache.js'
import { SessionRepository } from './sessions.js'
import { UsageRepository } from './usage.js'

export { inTransaction, migrate, pgPool } from './db.js'

// The store of several gateway instances: PostgreSQL holds what must last (tenants, keys, the
// ledger, quota usage, usage records), Redis what is hot and shared (idempotency keys, rate-limit
// counters, messages between instances). The same shape as the SQLite store, a repository per
// concern, with what each instance can decide alone kept in its memory:
//   - balances are held through a lease per instance and organization (../leases.ts), refilled
//     by one transaction guarded by balance − held, so no balance is ever overdrawn;
//   - rate-limit hits are taken from Redis counters several at a time (../rate-limit-leases.ts);
//   - quota windows are admitted from memory until a count that reaches the limit closes them
//     on every instance through the bus (../quota-latch.ts, ./bus.ts);
//   - the end-of-call writes (lease charges and give-backs, quota counts, usage records) are
//     committed in batches that grow with the load (./batch.ts), before the call's last byte;
//   - an Idempotency-Key is taken with SET NX PX; a change of the tenancy (a key revoked or
//     changed, a quota set, a tenant deleted) is told to every instance on the bus;
//   - the response cache's answers live in Redis alone, with their fills (./response-cache.ts).
// When PostgreSQL or Redis cannot be reached, operations fail at once with 503 store_unavailable
// (Retry-After: 1): money, quotas and idempotency fail closed.

const DAY_MS = 86_400_000

export interface PostgresStoreOptions {
  postgres: string
  redis: string
  /** Prefix of every Redis key and channel (tests use their own). */
  prefix?: string
  /** Pool size per instance. */
  connections?: number
  now?: () => number
  onError?: (err: unknown, what: string) => void
}

export class PostgresStore implements Store {
  readonly kind = 'postgres'
  readonly conn: Connection
  /** This instance's id in `holders`, in its leases and on the bus. */
  readonly holder = `${process.pid}:${randomBytes(4).toString('hex')}`
  readonly bus: RedisBus
  readonly batch: EndOfCallBatch
  readonly ledger: LedgerRepository
  readonly keys: KeyRepository
  readonly orgs: OrgRepository
  readonly usage: UsageRepository
  readonly balance: Leases
  readonly idempotency: IdempotencyRepository
  readonly rateLimits: RateLimitRepository
  readonly quota: QuotaRepository
  readonly audit: AuditRepository
  readonly sessions: SessionRepository
  readonly feed: ChangeFeed
  readonly cache: ResponseCacheRepository
  readonly objects: ProviderObjectRepository
  readonly alerts: AlertRepository
  /** Migrations applied, Redis connected and subscribed, this instance's heartbeat written. */
  readonly ready: Promise<void>
  private readonly now: () => number
  private readonly onError: (err: unknown, what: string) => void
  private readonly timers: NodeJS.Timeout[] = []
  private closed = false

  constructor (opts: PostgresStoreOptions) {
    this.now = opts.now ?? Date.now
    this.onError = opts.onError ?? (() => {})
    this.conn = new Connection({ postgres: opts.postgres, redis: opts.redis, prefix: opts.prefix ?? 'mg:', connections: opts.connections ?? 10, onError: this.onError })
    defineScripts(this.conn.redis)
    defineCacheScripts(this.conn.redis)
    // every channel is listened to before the connection opens: subscribed before the first read
    this.bus = new RedisBus(this.conn, this.holder, this.onError)
    this.batch = new EndOfCallBatch(this.conn, this.onError)
    this.ledger = new LedgerRepository(this.conn, this.holder, this.batch)
    this.feed = new ChangeFeed(this.bus, this.onError)
    this.audit = new AuditRepository(this.conn)
    this.sessions = new SessionRepository(this.conn)
    this.keys = new KeyRepository(this.conn, this.batch, this.audit, this.feed)
    this.orgs = new OrgRepository(this.conn, this.audit, this.feed)
    this.usage = new UsageRepository(this.conn, this.batch)
    this.balance = new Leases(this.ledger.leaseLedger(), this.holder, this.bus, () => { this.conn.assertReachable() })
    this.idempotency = new IdempotencyRepository(this.conn, this.now)
    this.rateLimits = new RateLimitRepository(this.conn)
    this.quota = new QuotaRepository(this.conn, this.batch, this.bus, this.now, this.onError)
    this.cache = new ResponseCacheRepository(this.conn, this.bus, this.onError)
    this.alerts = new AlertRepository(this.conn)
    this.objects = new ProviderObjectRepository(this.conn)
    this.ready = this.conn.ready.then(async () => { await this.ledger.heartbeat(this.now()) })
    this.ready.catch(() => {})
  }

  /**
   * Background work: a heartbeat three times per `staleHoldMs` (default 30 s), releasing the
   * leases of instances silent for longer, sweeping old quota windows and forgotten leases.
   */
  startMaintenance (opts: { staleHoldMs?: number } = {}): void {
    if (this.timers.length > 0 || this.closed) return
    const staleMs = opts.staleHoldMs ?? 30_000
    const every = (ms: number, fn: () => Promise<unknown>): void => {
      const t = setInterval(() => { fn().catch((err: unknown) => { this.onError(err, 'store maintenance failed') }) }, ms)
      t.unref()
      this.timers.push(t)
    }
    every(Math.max(50, Math.min(10_000, Math.floor(staleMs / 3))), async () => {
      const now = this.now()
      await this.ledger.heartbeat(now)
      await this.ledger.releaseDeadHolders(now - staleMs)
    })
    every(60_000, async () => {
      const now = this.now()
      this.rateLimits.sweep(now)
      await this.quota.sweep(now - 32 * DAY_MS)
      await this.sessions.sweep(now)
    })
  }

  /** Releases the leases of every other instance whose heartbeat is older than `before`; returns how many. */
  async releaseDeadHolders (before: number): Promise<number> {
    return await this.ledger.releaseDeadHolders(before)
  }

  async syncTenants (config: Config, now: number, mode: SyncMode = 'apply'): Promise<SyncReport> {
    const plan = tenantPlan(config)
    const warnings: string[] = []
    await this.conn.tx(async (client) => {
      // instances that start together apply the same file one after the other
      await client.query("SELECT pg_advisory_xact_lock(hashtext('modelgate:sync-tenants'))")
      await this.orgs.ensure(client, plan, now, mode, warnings)
      await this.keys.syncConfigKeys(client, plan.keys, now, mode, warnings)
    })
    // not waited for: an instance starting beside others would wait for each to answer
    void this.feed.publish({ kind: 'tenants' })
    return { warnings }
  }

  onChange (listener: ChangeListener): () => void {
    return this.feed.on(listener)
  }

  async flush (): Promise<void> {
    this.balance.flushIdle()
    await this.batch.flush()
  }

  observeWrites (fn: (seconds: number, writes: number) => void): void {
    const previous = this.batch.onBatch
    this.batch.onBatch = previous === null ? fn : (s, n) => { previous(s, n); fn(s, n) }
  }

  async ping (): Promise<void> {
    await this.ready
    await this.conn.pool.query('SELECT 1')
    await this.conn.redis.ping()
  }

  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    for (const t of this.timers) clearInterval(t)
    this.balance.stop()
    await this.ready.catch(() => {})
    await this.batch.close()
    // a graceful stop gives this instance's leases back at once
    await this.ledger.retire().catch((err: unknown) => { this.onError(err, 'leases not given back at close') })
    await this.conn.close()
  }
}
