import { randomBytes } from 'node:crypto'
import { resolve } from 'node:path'
import type { Config } from '../../../config/schema.js'
import { LocalBus } from '../bus.js'
import { ChangeFeed } from '../changes.js'
import { Leases } from '../leases.js'
import { tenantPlan } from '../tenants.js'
import type { ChangeListener, PeerBus, Store, SyncMode, SyncReport } from '../types.js'
import { AuditRepository } from './audit.js'
import { ChangeLog } from './changes.js'
import { startCheckpointer, type Checkpointer } from './checkpointer.js'
import { openDatabase, type DB } from './db.js'
import { GroupCommit } from './group-commit.js'
import { KeyRepository } from './keys.js'
import { LedgerRepository, sqliteLeaseLedger } from './ledger.js'
import { ProviderObjectRepository } from './objects.js'
import { AlertRepository } from './alerts.js'
import { OrgRepository } from './orgs.js'
import { IdempotencyRepository, QuotaRepository, RateLimitRepository } from './policies.js'
import { ResponseCacheRepository } from './response-cache.js'
import { SessionRepository } from './sessions.js'
import { UsageRepository } from './usage.js'

export type { DB } from './db.js'

export interface SqliteStoreOptions {
  /** Time source for heartbeats and sweeps (tests pass a fake one). */
  now?: () => number
  /** Hears write failures the store retries or cannot report to a caller. */
  onError?: (err: unknown, what: string) => void
  /** Leases of a process silent for this long are released by the others (default 30 s; startMaintenance may set it). */
  holderTimeoutMs?: number
  /**
   * Messages to the other processes on the file (quota windows closing, leases asked back): the
   * cluster's bus in a worker of `serve --workers N`; by default the stores this process opens on
   * the same file.
   */
  bus?: PeerBus
}

const HEARTBEAT_MS = 10_000
const LEGACY_LEASE_MS = 6 * 3_600_000
const MAINTENANCE_MS = 60_000
const DAY_MS = 86_400_000

/**
 * The embedded store: one SQLite file (WAL) shared by the worker processes of one machine, a
 * repository per table, and inside it what makes it fast and exact: the writes of one event-loop
 * turn share a commit, balances and rate-limit hits are taken through per-process leases, quota
 * windows are admitted from memory until one closes, WAL checkpoints run on a thread. No Fastify
 * in here.
 */
export class SqliteStore implements Store {
  readonly kind = 'sqlite'
  readonly db: DB
  readonly commit: GroupCommit
  readonly orgs: OrgRepository
  readonly keys: KeyRepository
  readonly usage: UsageRepository
  readonly ledger: LedgerRepository
  readonly balance: Leases
  readonly idempotency: IdempotencyRepository
  readonly rateLimits: RateLimitRepository
  readonly quota: QuotaRepository
  readonly audit: AuditRepository
  readonly sessions: SessionRepository
  readonly changes: ChangeLog
  readonly cache: ResponseCacheRepository
  readonly objects: ProviderObjectRepository
  readonly alerts: AlertRepository
  /** This process's id in `holders` and in its leases. */
  readonly holder = `${process.pid}:${randomBytes(4).toString('hex')}`
  readonly bus: PeerBus
  private readonly localBus: LocalBus | null = null
  private readonly now: () => number
  private readonly onError: (err: unknown, what: string) => void
  private holderTimeoutMs: number
  private checkpointer: Checkpointer | null = null
  private timers: NodeJS.Timeout[] = []
  private closed = false

  constructor (file: string, opts: SqliteStoreOptions = {}) {
    this.now = opts.now ?? Date.now
    this.onError = opts.onError ?? (() => {})
    this.holderTimeoutMs = opts.holderTimeoutMs ?? 30_000
    // heard before anything is read, so that no window closing is missed
    if (opts.bus !== undefined) this.bus = opts.bus
    else {
      this.localBus = new LocalBus(file === ':memory:' ? `:memory:${this.holder}` : resolve(file), (err) => { this.onError(err, 'a message from another store failed') })
      this.bus = this.localBus
    }
    this.db = openDatabase(file)
    this.commit = new GroupCommit(this.db, (err) => { this.onError(err, 'queued writes not committed yet; retrying') })
    this.audit = new AuditRepository(this.db)
    this.sessions = new SessionRepository(this.db)
    this.changes = new ChangeLog(this.db, this.holder, new ChangeFeed(this.bus, this.onError), this.onError)
    this.orgs = new OrgRepository(this.db, this.audit, this.changes)
    this.keys = new KeyRepository(this.db, this.commit, this.audit, this.changes)
    this.usage = new UsageRepository(this.db, this.commit, this.onError)
    this.ledger = new LedgerRepository(this.db)
    this.balance = new Leases(sqliteLeaseLedger(this.ledger, this.commit, this.holder), this.holder, this.bus)
    this.idempotency = new IdempotencyRepository(this.db, this.commit)
    this.rateLimits = new RateLimitRepository(this.db, this.commit)
    this.quota = new QuotaRepository(this.db, this.commit, this.bus, this.now, this.onError)
    this.cache = new ResponseCacheRepository(this.db, this.commit, this.bus, this.onError)
    this.alerts = new AlertRepository(this.db)
    this.objects = new ProviderObjectRepository(this.db, this.commit)
    this.ledger.heartbeat(this.holder, this.now())
  }

  /**
   * Background work of a serving process: heartbeats, releasing the leases of processes that
   * stopped, sweeping expired rows, and WAL checkpoints on a thread. `staleHoldMs` (default
   * 30 s): how long a process may stay silent before the others release its leases.
   */
  startMaintenance (opts: { staleHoldMs?: number } = {}): void {
    if (this.timers.length > 0 || this.closed) return
    const every = (ms: number, fn: () => void): void => {
      const timer = setInterval(() => {
        try { fn() } catch (err) { this.onError(err, 'store maintenance failed') }
      }, ms)
      timer.unref()
      this.timers.push(timer)
    }
    // a process silent for staleHoldMs is taken for dead and its leases released; it beats three
    // times in that span, so a slow turn of its event loop does not cost it its leases
    if (opts.staleHoldMs !== undefined) this.holderTimeoutMs = opts.staleHoldMs
    const beatMs = Math.max(50, Math.min(HEARTBEAT_MS, Math.floor(this.holderTimeoutMs / 3)))
    // leases without a holder were written before holders existed: released once six hours old
    this.ledger.releaseOlderThan(this.now() - LEGACY_LEASE_MS)
    every(beatMs, () => {
      this.commit.later(() => { this.ledger.heartbeat(this.holder, this.now()) })
      this.releaseDeadHolders()
    })
    every(MAINTENANCE_MS, () => {
      const now = this.now()
      this.idempotency.sweep(now)
      this.rateLimits.sweepRows(now)
      this.quota.sweep(now - 32 * DAY_MS)
      this.changes.sweep(now - DAY_MS)
      this.cache.sweep(now)
      this.sessions.sweep(now)
    })
    if (!this.db.memory) this.checkpointer = startCheckpointer(this.db, (message) => { this.onError(new Error(message), 'WAL checkpoint failed') }, undefined, { writes: this.commit, chore: this.usage.journalChore() })
  }

  /** Releases the leases of processes whose heartbeat is older than the holder timeout. */
  releaseDeadHolders (): number {
    return this.ledger.releaseDeadHolders(this.holder, this.now() - this.holderTimeoutMs)
  }

  async syncTenants (config: Config, now: number, mode: SyncMode = 'apply'): Promise<SyncReport> {
    const plan = tenantPlan(config)
    const warnings: string[] = []
    this.db.transaction(() => {
      this.orgs.ensure(plan, now, mode, warnings)
      this.keys.syncConfigKeys(plan.keys, now, mode, warnings)
      this.changes.write({ kind: 'tenants' }, now)
    }).immediate()
    // not waited for: a worker starting beside others would wait for each to answer
    void this.changes.publish({ kind: 'tenants' })
    return { warnings }
  }

  onChange (listener: ChangeListener): () => void {
    const off = this.changes.feed.on(listener)
    this.changes.poll()
    return off
  }

  flush (): void {
    this.balance.flushIdle()
    this.commit.flush()
  }

  observeWrites (fn: (seconds: number, writes: number) => void): void {
    const previous = this.commit.onBatch
    this.commit.onBatch = previous === null ? fn : (s, n) => { previous(s, n); fn(s, n) }
  }

  ping (): void {
    this.db.prepare('SELECT 1').get()
  }

  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    for (const t of this.timers) clearInterval(t)
    this.balance.stop()
    this.localBus?.leave()
    this.changes.close()
    if (!this.db.open) return
    this.commit.flush()
    // a stopped gateway leaves no record in the usage journal
    try { this.usage.fold() } catch (err) { this.onError(err, 'usage journal not moved at close') }
    try { this.ledger.retire(this.holder) } catch (err) { this.onError(err, 'leases not given back at close') }
    await this.checkpointer?.stop()
    this.db.close()
  }
}
