import { EventEmitter } from 'node:events'
import { randomBytes, timingSafeEqual } from 'node:crypto'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import pg from 'pg'
import { Redis } from 'ioredis'
import type { Config } from '../../../config/schema.js'
import { fromRoot } from '../../../paths.js'
import { StoreUnavailable } from '../../gateway/errors.js'
import { usdToNano } from '../../gateway/money.js'
import { generateKey, hashKey } from '../sqlite/keys.js'
import type {
  ApiKey, ContentRow, Cursor, IdempotencyStore, KeySource, KeyStore, NewKey, OrgRow, OrgStore, ProjectRow, QuotaStore, QuotaUsage,
  RateLimitHit, RateLimitStore, BalanceStore, Store, UsageBucket, UsageFilter, UsageRow, UsageStore, UsageTotals
} from '../types.js'

// The store of several gateway instances: PostgreSQL holds what must last (tenants, keys, the
// ledger with one row per balance hold, quota usage, usage records), Redis what is hot and shared
// (idempotency keys, rate-limit counters, revocation messages). Every operation is one atomic
// statement or script, so any number of instances agree without locks held across calls:
//   - a hold is taken by one UPDATE guarded by balance − held ≥ amount, so no balance is ever
//     overdrawn; it is settled by deleting its row and applying the charge in the same statement,
//     so a charge is applied once;
//   - quota usage is added with INSERT … ON CONFLICT DO UPDATE (an atomic increment, never a
//     reseeded total) and read by primary key on every admission;
//   - the end-of-call writes (settlements, quota counts, usage records) of at most 10 ms are
//     committed in one transaction, a statement each, summed per organization and quota window;
//   - an Idempotency-Key is taken with SET NX PX; rate-limit hits are counted by INCR on a key per
//     fixed window, whose start the gateway's clock decides;
//   - a revocation is published on Redis: every instance drops the key from its cache at once.
// A call's settlement, quota count and record promises settle when their batch is committed,
// before the call's last byte. When
// PostgreSQL or Redis cannot be reached, operations fail at once with 503 store_unavailable
// (Retry-After: 1): money, quotas and idempotency fail closed.

const MIGRATIONS = fromRoot('plugins', 'store', 'postgres', 'migrations')
const BATCH_MS = 10
const BATCH_ROWS = 500
const RETRY_MS = 250
const DAY_MS = 86_400_000

const USAGE_COLUMNS = ['id', 'created_at', 'trace_id', 'org_id', 'project_id', 'key_id', 'endpoint', 'model', 'provider', 'stream', 'status',
  'prompt_tokens', 'cached_input_tokens', 'completion_tokens', 'total_tokens', 'cost_nano', 'latency_ms', 'ttft_ms'] as const satisfies ReadonlyArray<keyof UsageRow>

// BIGINT columns come back as numbers: every amount is an integer far below 2^53
const TYPES = {
  getTypeParser: (oid: number, format?: 'text' | 'binary') => oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format)
}

const newKeyId = (): string => 'key_' + randomBytes(8).toString('hex')
const configKeyId = (keyHash: string): string => 'key_' + hashKey('config-key-id:' + keyHash).slice(0, 16)
const hintOf = (key: string): string => key.slice(0, 7) + '…'

interface KeyRow { id: string, hash: string, hint: string, org_id: string, project_id: string, name: string, models: string, passthrough: string, source: KeySource, created_at: number, revoked_at: number | null }

const toApiKey = (row: KeyRow): ApiKey => ({
  id: row.id, org: row.org_id, project: row.project_id, name: row.name, models: JSON.parse(row.models) as string[],
  passthrough: JSON.parse(row.passthrough) as string[], hint: row.hint, source: row.source, created_at: row.created_at, revoked: row.revoked_at !== null
})

/** A connection failure of either store, answered as 503 with Retry-After rather than a 500. */
function unavailable (err: unknown): never {
  const code = (err as { code?: string } | null)?.code ?? ''
  const message = String((err as Error | null)?.message ?? '')
  const name = String((err as Error | null)?.name ?? '')
  if (/^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|57P0[123]|08\d{3})$/.test(code) || name === 'MaxRetriesPerRequestError' ||
    /Connection is closed|Stream isn't writeable|enableOfflineQueue|Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|max retries per request/i.test(message)) {
    throw new StoreUnavailable({}, { headers: { 'retry-after': '1' } })
  }
  throw err as Error
}

/** Runs `fn` in a transaction on one connection of `pool`: committed when it resolves, rolled back when it throws. */
export async function inTransaction<T> (pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect()
  try {
    await client.query('BEGIN')
    const result = await fn(client)
    await client.query('COMMIT')
    return result
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {})
    throw err
  } finally {
    client.release()
  }
}

/** Applies the pending migrations, in one transaction under an advisory lock (instances may start together). */
export async function migrate (pool: pg.Pool): Promise<void> {
  await inTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock(7461826)')
    await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)')
    const done = new Set((await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version))
    for (const file of readdirSync(MIGRATIONS).filter((f) => /^\d{3}_.*\.sql$/.test(f)).sort()) {
      const version = Number(file.slice(0, 3))
      if (done.has(version)) continue
      await client.query(readFileSync(join(MIGRATIONS, file), 'utf8'))
      await client.query('INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)', [version, file, Date.now()])
    }
  })
}

/**
 * A pool whose BIGINT columns come back as numbers. Its sessions commit with
 * synchronous_commit = off: a commit returns once it is in PostgreSQL's WAL buffers, not on disk,
 * so a crash of the database server (not of a gateway) can lose its last few hundred
 * milliseconds of commits (up to three times wal_writer_delay, 600 ms by default) — the promise
 * the SQLite store makes with synchronous = NORMAL. It made calls about 60% faster here.
 */
export function pgPool (url: string, max = 10): pg.Pool {
  return new pg.Pool({ connectionString: url, max, types: TYPES, connectionTimeoutMillis: 2000, options: '-c synchronous_commit=off' })
}

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

/** The end-of-call writes of a few milliseconds, committed together: settlements, quota counts, usage records. */
interface PendingBatch {
  settles: Array<{ id: string | null, org: string, charge: number }>
  quotas: Array<{ scope: string, window: number, tokens: number, cost: number }>
  rows: UsageRow[]
  contents: ContentRow[]
  done: Promise<void>
  resolve: () => void
  reject: (err: unknown) => void
}

export class PostgresStore implements Store {
  readonly kind = 'postgres'
  readonly pool: pg.Pool
  readonly redis: Redis
  private readonly sub: Redis
  private readonly prefix: string
  private readonly now: () => number
  private readonly onError: (err: unknown, what: string) => void
  /** Migrations applied, Redis connected, this instance's heartbeat written. */
  readonly ready: Promise<void>
  readonly holder = `${process.pid}:${randomBytes(4).toString('hex')}`
  private readonly revocations = new EventEmitter()
  private batch: PendingBatch | null = null
  /** Batches waiting for PostgreSQL to come back. */
  private readonly retrying = new Set<PendingBatch>()
  private batchTimer: NodeJS.Timeout | null = null
  private readonly timers: NodeJS.Timeout[] = []
  private readonly openHolds = new Map<string, string[]>()
  private closed = false

  readonly keys: KeyStore
  readonly orgs: OrgStore
  readonly usage: UsageStore
  readonly balance: BalanceStore
  readonly idempotency: IdempotencyStore
  readonly rateLimits: RateLimitStore
  readonly quota: QuotaStore

  constructor (opts: PostgresStoreOptions) {
    this.prefix = opts.prefix ?? 'mg:'
    this.now = opts.now ?? Date.now
    this.onError = opts.onError ?? (() => {})
    this.pool = pgPool(opts.postgres, opts.connections ?? 10)
    this.pool.on('error', (err) => { this.onError(err, 'PostgreSQL connection lost; it reconnects on the next query') })
    // fail fast while Redis is away (a 503, not a request that hangs), reconnect by itself
    const redisOptions = { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: (n: number) => Math.min(1000, 50 * n) }
    this.redis = new Redis(opts.redis, redisOptions)
    this.sub = new Redis(opts.redis, redisOptions)
    for (const r of [this.redis, this.sub]) r.on('error', (err: Error) => { this.onError(err, 'Redis connection error; reconnecting') })
    this.redis.defineCommand('mgHit', { numberOfKeys: 1, lua: "local c = redis.call('INCR', KEYS[1]) if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end return c" })
    this.redis.defineCommand('mgKeep', { numberOfKeys: 1, lua: "if redis.call('GET', KEYS[1]) == ARGV[1] then local t = redis.call('PTTL', KEYS[1]) if tonumber(ARGV[2]) > t then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 1 end return 0" })
    this.redis.defineCommand('mgRelease', { numberOfKeys: 1, lua: "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0" })
    this.ready = this.open()
    this.ready.catch(() => {})
    this.keys = this.keyStore()
    this.orgs = this.orgStore()
    this.usage = this.usageStore()
    this.balance = this.balanceStore()
    this.idempotency = this.idempotencyStore()
    this.rateLimits = this.rateLimitStore()
    this.quota = this.quotaStore()
  }

  private async open (): Promise<void> {
    await Promise.all([this.redis.connect(), this.sub.connect()])
    await this.sub.subscribe(`${this.prefix}revoked`)
    this.sub.on('message', (_channel: string, id: string) => { this.revocations.emit('revoked', id) })
    await migrate(this.pool)
    await this.pool.query('INSERT INTO holders (id, heartbeat_at) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at', [this.holder, this.now()])
  }

  /** A query once the store is open; connection failures become 503 store_unavailable. */
  async q<R extends pg.QueryResultRow = Record<string, unknown>> (sql: string, params: unknown[] = []): Promise<pg.QueryResult<R>> {
    await this.ready
    try {
      return await this.pool.query<R>(sql, params)
    } catch (err) {
      return unavailable(err)
    }
  }

  private async r<T> (fn: () => Promise<T>): Promise<T> {
    await this.ready
    try {
      return await fn()
    } catch (err) {
      return unavailable(err)
    }
  }

  private key (...parts: Array<string | number>): string { return this.prefix + parts.join(':') }

  private keyStore (): KeyStore {
    return {
      verify: async (secret) => {
        const hash = hashKey(secret)
        const row = (await this.q<KeyRow>('SELECT * FROM api_keys WHERE hash = $1', [hash])).rows[0]
        if (row === undefined || row.revoked_at !== null) return undefined
        if (!timingSafeEqual(Buffer.from(row.hash, 'hex'), Buffer.from(hash, 'hex'))) return undefined
        return toApiKey(row)
      },
      get: async (id) => {
        const row = (await this.q<KeyRow>('SELECT * FROM api_keys WHERE id = $1', [id])).rows[0]
        return row === undefined ? undefined : toApiKey(row)
      },
      list: async (org, project) => (await this.q<KeyRow>('SELECT * FROM api_keys WHERE ($1::text IS NULL OR org_id = $1) AND ($2::text IS NULL OR project_id = $2) ORDER BY created_at, id', [org ?? null, project ?? null])).rows.map(toApiKey),
      create: async (spec: NewKey, now: number, secret = generateKey()) => {
        const hash = hashKey(secret)
        const row: KeyRow = {
          id: spec.source === 'config' ? configKeyId(hash) : newKeyId(), hash, hint: hintOf(secret), org_id: spec.org, project_id: spec.project, name: spec.name ?? '',
          models: JSON.stringify(spec.models ?? ['*']), passthrough: JSON.stringify(spec.passthrough ?? []), source: spec.source, created_at: now, revoked_at: null
        }
        await this.q('INSERT INTO api_keys (id, hash, hint, org_id, project_id, name, models, passthrough, source, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)',
          [row.id, row.hash, row.hint, row.org_id, row.project_id, row.name, row.models, row.passthrough, row.source, row.created_at])
        return { ...toApiKey(row), key: secret }
      },
      revoke: async (id, now) => {
        const done = ((await this.q('UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL', [now, id])).rowCount ?? 0) > 0
        // every instance, this one included, hears it through the channel
        if (done) await this.r(async () => await this.redis.publish(this.key('revoked'), id))
        return done
      },
      onRevoked: (listener) => { this.revocations.on('revoked', listener) }
    }
  }

  private orgStore (): OrgStore {
    return {
      get: async (id) => (await this.q<OrgRow>('SELECT id, balance_nano, held_nano, spent_nano, created_at FROM organizations WHERE id = $1', [id])).rows[0],
      list: async () => (await this.q<OrgRow>('SELECT id, balance_nano, held_nano, spent_nano, created_at FROM organizations ORDER BY id')).rows,
      projects: async (org) => (await this.q<ProjectRow>('SELECT org_id, id, created_at FROM projects WHERE org_id = $1 ORDER BY id', [org])).rows,
      credit: async (id, amount) => ((await this.q('UPDATE organizations SET balance_nano = balance_nano + $1 WHERE id = $2', [amount, id])).rowCount ?? 0) > 0
    }
  }

  private balanceStore (): BalanceStore {
    return {
      hold: async (org, amount, now) => {
        const id = `hold:${this.holder}:${randomBytes(6).toString('hex')}`
        // one statement: the guard and the hold row together, whatever other instances do
        const res = await this.q(`WITH taken AS (
            UPDATE organizations SET held_nano = held_nano + $2 WHERE id = $1 AND balance_nano - held_nano >= $2 RETURNING id)
          INSERT INTO holds (id, org_id, amount_nano, holder, created_at) SELECT $3, id, $2, $4, $5 FROM taken`, [org, amount, id, this.holder, now])
        if ((res.rowCount ?? 0) === 0) return false
        const k = `${org}\n${amount}`
        const list = this.openHolds.get(k)
        if (list === undefined) this.openHolds.set(k, [id])
        else list.push(id)
        return true
      },
      settle: async (org, held, charge) => {
        const k = `${org}\n${held}`
        const list = this.openHolds.get(k)
        const id = list?.pop() ?? null
        if (list !== undefined && list.length === 0) this.openHolds.delete(k)
        // committed with the other end-of-call writes of these milliseconds (writeBatch)
        const b = this.pending()
        b.settles.push({ id, org, charge })
        await b.done
      }
    }
  }

  private idempotencyStore (): IdempotencyStore {
    return {
      take: async (scope, key, owner, _now, ttlMs) => await this.r(async () => (await this.redis.set(this.key('idem', scope, key), owner, 'PX', Math.max(1, Math.round(ttlMs)), 'NX')) === 'OK'),
      keep: async (scope, key, owner, until) => {
        await this.r(async () => await (this.redis as unknown as { mgKeep: (k: string, o: string, ms: number) => Promise<number> }).mgKeep(this.key('idem', scope, key), owner, Math.max(1, Math.round(until - this.now()))))
      },
      release: async (scope, key, owner) => {
        await this.r(async () => await (this.redis as unknown as { mgRelease: (k: string, o: string) => Promise<number> }).mgRelease(this.key('idem', scope, key), owner))
      }
    }
  }

  private rateLimitStore (): RateLimitStore {
    return {
      hit: async (key, now, windowMs): Promise<RateLimitHit> => {
        const start = Math.floor(now / windowMs) * windowMs
        const count = await this.r(async () => await (this.redis as unknown as { mgHit: (k: string, ms: number) => Promise<number> }).mgHit(this.key('rl', key, start), Math.ceil(windowMs) + 1000))
        return { count, resetAt: start + windowMs }
      }
    }
  }

  private quotaStore (): QuotaStore {
    return {
      used: async (scope, windowStart): Promise<QuotaUsage> => (await this.q<QuotaUsage>('SELECT tokens, cost_nano FROM quota_usage WHERE scope = $1 AND window_start = $2', [scope, windowStart])).rows[0] ?? { tokens: 0, cost_nano: 0 },
      count: async (scope, windowStart, tokens, costNano) => {
        const b = this.pending()
        b.quotas.push({ scope, window: windowStart, tokens, cost: costNano })
        await b.done
      }
    }
  }

  private usageStore (): UsageStore {
    const where = (f: UsageFilter, cursor: Cursor | undefined, params: unknown[]): string => {
      const conds: string[] = []
      const add = (sql: string, v: unknown): void => { params.push(v); conds.push(sql.replace('?', `$${params.length}`)) }
      if (f.org !== undefined) add('org_id = ?', f.org)
      if (f.project !== undefined) add('project_id = ?', f.project)
      if (f.key_id !== undefined) add('key_id = ?', f.key_id)
      if (f.model !== undefined) add('model = ?', f.model)
      if (f.since !== undefined) add('created_at >= ?', f.since)
      if (f.until !== undefined) add('created_at < ?', f.until)
      if (cursor !== undefined) {
        params.push(cursor.created_at, cursor.id)
        conds.push(`(created_at, id) < ($${params.length - 1}, $${params.length})`)
      }
      return conds.length === 0 ? '' : `WHERE ${conds.join(' AND ')}`
    }
    return {
      record: async (row, content) => await this.enqueue(row, content),
      page: async (f, limit, cursor) => {
        const params: unknown[] = []
        const w = where(f, cursor, params)
        params.push(limit)
        return (await this.q<UsageRow>(`SELECT * FROM usage_records ${w} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`, params)).rows
      },
      totals: async (f) => {
        const params: unknown[] = []
        const w = where(f, undefined, params)
        return (await this.q<UsageTotals>(`SELECT count(*)::bigint AS calls, coalesce(sum(prompt_tokens), 0)::bigint AS prompt_tokens,
          coalesce(sum(cached_input_tokens), 0)::bigint AS cached_input_tokens, coalesce(sum(completion_tokens), 0)::bigint AS completion_tokens,
          coalesce(sum(total_tokens), 0)::bigint AS total_tokens, coalesce(sum(cost_nano), 0)::bigint AS cost_nano FROM usage_records ${w}`, params)).rows[0] as UsageTotals
      },
      buckets: async (org, project, since, size) => (await this.q<UsageBucket>(`SELECT (created_at / $4::bigint) * $4::bigint AS t, count(*)::bigint AS calls,
          sum(prompt_tokens)::bigint AS prompt_tokens, sum(cached_input_tokens)::bigint AS cached_input_tokens,
          sum(completion_tokens)::bigint AS completion_tokens, sum(cost_nano)::bigint AS cost_nano
          FROM usage_records WHERE org_id = $1 AND project_id = $2 AND created_at >= $3 GROUP BY 1 ORDER BY 1`, [org, project, since, Math.max(1, Math.floor(size))])).rows,
      sweepContent: async (before) => (await this.q('DELETE FROM usage_content WHERE created_at < $1', [before])).rowCount ?? 0
    }
  }

  /** Queues a usage record into the current batch; resolves once that batch is committed. */
  /** The batch now filling, started (with its timer) when there is none. */
  private pending (): PendingBatch {
    if (this.batch === null) {
      let resolve!: () => void
      let reject!: (err: unknown) => void
      const done = new Promise<void>((res, rej) => { resolve = res; reject = rej })
      this.batch = { settles: [], quotas: [], rows: [], contents: [], done, resolve, reject }
      this.batchTimer = setTimeout(() => { void this.writeBatch() }, BATCH_MS)
    }
    return this.batch
  }

  private enqueue (row: UsageRow, content?: ContentRow): Promise<void> {
    const b = this.pending()
    b.rows.push(row)
    if (content !== undefined) b.contents.push(content)
    if (b.rows.length >= BATCH_ROWS) void this.writeBatch()
    return b.done
  }

  private async writeBatch (): Promise<void> {
    const b = this.batch
    if (b === null) return
    this.batch = null
    if (this.batchTimer !== null) { clearTimeout(this.batchTimer); this.batchTimer = null }
    await this.commitBatch(b)
  }

  /**
   * Commits a batch of end-of-call writes. While PostgreSQL cannot be reached the batch is kept and
   * tried again every RETRY_MS, so a call that was answered keeps its charge and its record (its
   * last byte waits); only a closing store, or an error that is not a lost connection, gives up.
   */
  private async commitBatch (b: PendingBatch): Promise<void> {
    const params: unknown[] = []
    const values = b.rows.map((row) => `(${USAGE_COLUMNS.map((c) => { params.push(row[c]); return `$${params.length}` }).join(', ')})`)
    try {
      await this.ready
      await inTransaction(this.pool, async (client) => {
        if (b.settles.length > 0) {
          // every hold row found goes and its amount leaves `held`; every charge is applied once,
          // capped at the balance (a hold already released as a silent instance's still pays)
          await client.query(`WITH s AS (SELECT * FROM unnest($1::text[], $2::text[], $3::bigint[]) AS s(id, org, charge)),
            d AS (DELETE FROM holds h USING s WHERE h.id = s.id RETURNING h.org_id, h.amount_nano),
            released AS (SELECT org_id, sum(amount_nano) AS amount FROM d GROUP BY org_id),
            charged AS (SELECT org, sum(charge) AS amount FROM s GROUP BY org)
            UPDATE organizations o SET held_nano = o.held_nano - coalesce(r.amount, 0),
              balance_nano = o.balance_nano - LEAST(c.amount, o.balance_nano), spent_nano = o.spent_nano + LEAST(c.amount, o.balance_nano)
            FROM charged c LEFT JOIN released r ON r.org_id = c.org WHERE o.id = c.org`,
          [b.settles.map((x) => x.id), b.settles.map((x) => x.org), b.settles.map((x) => x.charge)])
        }
        if (b.quotas.length > 0) {
          await client.query(`INSERT INTO quota_usage (scope, window_start, tokens, cost_nano)
            SELECT scope, win, sum(tokens), sum(cost) FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[]) AS q(scope, win, tokens, cost) GROUP BY scope, win
            ON CONFLICT (scope, window_start) DO UPDATE SET tokens = quota_usage.tokens + EXCLUDED.tokens, cost_nano = quota_usage.cost_nano + EXCLUDED.cost_nano`,
          [b.quotas.map((x) => x.scope), b.quotas.map((x) => x.window), b.quotas.map((x) => x.tokens), b.quotas.map((x) => x.cost)])
        }
        if (b.rows.length === 0) return
        await client.query(`INSERT INTO usage_records (${USAGE_COLUMNS.join(', ')}) VALUES ${values.join(', ')}`, params)
        if (b.contents.length > 0) {
          const cp: unknown[] = []
          const cv = b.contents.map((c) => { cp.push(c.usage_id, c.created_at, c.request, c.response); return `($${cp.length - 3}, $${cp.length - 2}, $${cp.length - 1}, $${cp.length})` })
          await client.query(`INSERT INTO usage_content (usage_id, created_at, request, response) VALUES ${cv.join(', ')}`, cp)
        }
      })
      this.retrying.delete(b)
      b.resolve()
    } catch (err) {
      let shown: unknown = err
      try { unavailable(err) } catch (e) { shown = e }
      if (!this.closed && (shown as { key?: string }).key === 'store_unavailable') {
        this.onError(err, 'end-of-call writes not committed yet; retrying')
        this.retrying.add(b)
        setTimeout(() => { void this.commitBatch(b) }, RETRY_MS).unref()
        return
      }
      this.retrying.delete(b)
      this.onError(err, 'end-of-call writes not committed')
      b.reject(shown)
    }
  }

  /**
   * Background work: a heartbeat three times per `staleHoldMs` (default 30 s), releasing the
   * holds of instances silent for longer, and sweeping old quota windows.
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
      await this.q('INSERT INTO holders (id, heartbeat_at) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at', [this.holder, now])
      await this.releaseDeadHolders(now - staleMs)
    })
    every(60_000, async () => { await this.q('DELETE FROM quota_usage WHERE window_start < $1', [this.now() - 32 * DAY_MS]) })
  }

  /** Releases the holds of every other instance whose heartbeat is older than `before`; returns how many. */
  async releaseDeadHolders (before: number): Promise<number> {
    const res = await this.q(`WITH dead AS (
        DELETE FROM holds WHERE holder <> $2 AND holder NOT IN (SELECT id FROM holders WHERE heartbeat_at >= $1) RETURNING org_id, amount_nano),
      sums AS (SELECT org_id, sum(amount_nano) AS amount FROM dead GROUP BY org_id)
      UPDATE organizations o SET held_nano = o.held_nano - sums.amount FROM sums WHERE o.id = sums.org_id`, [before, this.holder])
    await this.q('DELETE FROM holders WHERE heartbeat_at < $1 AND id <> $2', [before, this.holder])
    return res.rowCount ?? 0
  }

  async syncTenants (config: Config, now: number): Promise<void> {
    await this.ready
    try {
      const dropped = await inTransaction(this.pool, async (client) => {
        const wanted = new Set<string>()
        for (const tenant of config.tenants) {
          await client.query('INSERT INTO organizations (id, balance_nano, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING', [tenant.org, usdToNano(tenant.balance_usd), now])
          for (const project of tenant.projects) {
            await client.query('INSERT INTO projects (org_id, id, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [tenant.org, project.id, now])
            for (const k of project.keys) {
              const hash = hashKey(k.key)
              const id = configKeyId(hash)
              const existing = (await client.query<{ id: string, source: string }>('SELECT id, source FROM api_keys WHERE hash = $1', [hash])).rows[0]
              if (existing === undefined) {
                await client.query('INSERT INTO api_keys (id, hash, hint, org_id, project_id, name, models, passthrough, source, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)',
                  [id, hash, hintOf(k.key), tenant.org, project.id, k.name, JSON.stringify(k.models), JSON.stringify(k.passthrough), 'config', now])
                wanted.add(id)
              } else {
                wanted.add(existing.id)
                if (existing.source === 'config') {
                  await client.query('UPDATE api_keys SET org_id = $2, project_id = $3, name = $4, models = $5, passthrough = $6, revoked_at = NULL WHERE id = $1',
                    [existing.id, tenant.org, project.id, k.name, JSON.stringify(k.models), JSON.stringify(k.passthrough)])
                }
              }
            }
          }
        }
        return (await client.query<{ id: string }>("UPDATE api_keys SET revoked_at = $1 WHERE source = 'config' AND revoked_at IS NULL AND NOT (id = ANY($2::text[])) RETURNING id", [now, [...wanted]])).rows
      })
      for (const { id } of dropped) await this.redis.publish(this.key('revoked'), id)
    } catch (err) {
      unavailable(err)
    }
  }

  async flush (): Promise<void> {
    const b = this.batch
    if (b === null) return
    await this.writeBatch()
    await b.done.catch(() => {})
  }

  async ping (): Promise<void> {
    await this.ready
    await this.pool.query('SELECT 1')
    await this.redis.ping()
  }

  async close (): Promise<void> {
    if (this.closed) return
    this.closed = true
    for (const t of this.timers) clearInterval(t)
    await this.ready.catch(() => {})
    await this.flush().catch(() => {})
    // a last try for the batches still waiting on PostgreSQL; what fails now is reported
    for (const b of [...this.retrying]) await this.commitBatch(b)
    this.revocations.removeAllListeners()
    this.redis.disconnect()
    this.sub.disconnect()
    await this.pool.end().catch(() => {})
  }
}
