import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import pg from 'pg'
import { Redis } from 'ioredis'
import { shippedFile, shippedFiles } from '../../../paths.js'
import { StoreUnavailable } from '../../kernel/errors.js'

const MIGRATIONS = ['engine', 'store', 'postgres', 'migrations']
const PROBE_MS = 250

// BIGINT columns come back as numbers: every amount is an integer far below 2^53
const TYPES = {
  getTypeParser: (oid: number, format?: 'text' | 'binary') => oid === 20 ? (v: string) => Number(v) : pg.types.getTypeParser(oid, format)
}

/** A lost connection (refused, reset, the server going away) of either store: worth trying again later. */
export function isConnectionError (err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code ?? ''
  const message = String((err as Error | null)?.message ?? '')
  const name = String((err as Error | null)?.name ?? '')
  return /^(ECONNREFUSED|ECONNRESET|ETIMEDOUT|EPIPE|ENOTFOUND|57P0[123]|08\d{3})$/.test(code) || name === 'MaxRetriesPerRequestError' ||
    /Connection is closed|Stream isn't writeable|enableOfflineQueue|Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|max retries per request/i.test(message)
}

/** A connection failure of either store, answered as 503 with Retry-After rather than a 500. */
export function unavailable (err: unknown): never {
  if (isConnectionError(err)) throw new StoreUnavailable({}, { headers: { 'retry-after': '1' } })
  throw err instanceof Error ? err : new Error(String(err))
}

/** Runs `fn` in a transaction on one connection of `pool`: committed when it resolves, rolled back when it throws. */
export async function inTransaction<T> (pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect()
  // a connection lost while the client is checked out is reported here, not as an uncaught error
  let lost: Error | undefined
  const onError = (err: Error): void => { lost = err }
  client.on('error', onError)
  try {
    await client.query('BEGIN')
    const result = await fn(client)
    await client.query('COMMIT')
    return result
  } catch (err) {
    if (isConnectionError(err)) lost ??= err as Error
    if (lost === undefined) await client.query('ROLLBACK').catch(() => {})
    throw err
  } finally {
    client.off('error', onError)
    // a client whose connection was lost is dropped, not handed out again
    client.release(lost)
  }
}

/**
 * Applies the pending migrations, in one transaction under an advisory lock (instances may start
 * together). `dir`: a folder of other migrations (tests).
 */
export async function migrate (pool: pg.Pool, dir?: string): Promise<void> {
  const files = (dir === undefined ? shippedFiles(...MIGRATIONS) : readdirSync(dir)).filter((f) => /^\d{3}_.*\.sql$/.test(f)).sort()
  const read = (file: string): string => dir === undefined ? shippedFile(...MIGRATIONS, file).toString('utf8') : readFileSync(join(dir, file), 'utf8')
  await inTransaction(pool, async (client) => {
    await client.query('SELECT pg_advisory_xact_lock(7461826)')
    await client.query('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)')
    const done = new Set((await client.query<{ version: number }>('SELECT version FROM schema_migrations')).rows.map((r) => r.version))
    for (const file of files) {
      const version = Number(file.slice(0, 3))
      if (done.has(version)) continue
      await client.query(read(file))
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

export interface ConnectionOptions {
  postgres: string
  redis: string
  /** Prefix of every Redis key and channel. */
  prefix: string
  connections: number
  onError: (err: unknown, what: string) => void
}

type ChannelListener = (message: string) => void

/**
 * What the repositories share: the pool, a Redis connection for commands and one subscribed to
 * the store's channels. `open()` connects, subscribes every channel asked for so far, and
 * migrates; every query waits for it.
 */
export class Connection {
  readonly pool: pg.Pool
  readonly redis: Redis
  readonly sub: Redis
  readonly prefix: string
  private readonly channels = new Map<string, ChannelListener[]>()
  private opened: Promise<void> | null = null
  private probe: NodeJS.Timeout | null = null

  constructor (opts: ConnectionOptions) {
    this.prefix = opts.prefix
    this.pool = pgPool(opts.postgres, opts.connections)
    this.pool.on('error', (err) => { opts.onError(err, 'PostgreSQL connection lost; it reconnects on the next query') })
    // fail fast while Redis is away (a 503, not a request that hangs), reconnect by itself
    const redisOptions = { lazyConnect: true, maxRetriesPerRequest: 1, retryStrategy: (n: number) => Math.min(1000, 50 * n) }
    // the commands of one event-loop turn (the Idempotency-Keys of the calls admitted in it) go
    // out in one write: a socket write is most of what a command costs here
    this.redis = new Redis(opts.redis, { ...redisOptions, enableAutoPipelining: true })
    this.sub = new Redis(opts.redis, redisOptions)
    for (const r of [this.redis, this.sub]) r.on('error', (err: Error) => { opts.onError(err, 'Redis connection error; reconnecting') })
    this.sub.on('message', (channel: string, message: string) => {
      for (const fn of this.channels.get(channel) ?? []) fn(message)
    })
  }

  /** Redis key or channel `parts` under the store's prefix. */
  key (...parts: Array<string | number>): string { return this.prefix + parts.join(':') }

  /** Hears `channel` (under the prefix) from open() on. */
  listen (channel: string, fn: ChannelListener): void {
    const list = this.channels.get(channel)
    if (list === undefined) this.channels.set(channel, [fn])
    else list.push(fn)
  }

  /** Connects both stores, subscribes, migrates. */
  get ready (): Promise<void> {
    this.opened ??= this.open()
    return this.opened
  }

  private async open (): Promise<void> {
    await Promise.all([this.redis.connect(), this.sub.connect()])
    if (this.channels.size > 0) await this.sub.subscribe(...this.channels.keys())
    await migrate(this.pool)
  }

  /**
   * PostgreSQL was found unreachable and has not answered since: what admission would take from
   * memory (a hold out of a lease, an open quota window) is refused instead, since the call's
   * end could not be committed. A probe every PROBE_MS clears it once PostgreSQL answers.
   */
  get lost (): boolean { return this.probe !== null }

  /** Throws 503 store_unavailable while PostgreSQL is lost. */
  assertReachable (): void {
    if (this.probe !== null) throw new StoreUnavailable({}, { headers: { 'retry-after': '1' } })
  }

  /** Notes how a PostgreSQL operation went: a lost connection starts the probe, anything else ends it. */
  observe (err: unknown): void {
    if (err !== undefined && isConnectionError(err)) {
      if (this.probe !== null) return
      this.probe = setInterval(() => { this.pool.query('SELECT 1').then(() => { this.observe(undefined) }, () => {}) }, PROBE_MS)
      this.probe.unref()
    } else if (this.probe !== null) {
      clearInterval(this.probe)
      this.probe = null
    }
  }

  /** A query once the store is open; connection failures become 503 store_unavailable. */
  async q<R extends pg.QueryResultRow = Record<string, unknown>> (sql: string, params: unknown[] = []): Promise<pg.QueryResult<R>> {
    await this.ready
    try {
      const res = await this.pool.query<R>(sql, params)
      if (this.probe !== null) this.observe(undefined)
      return res
    } catch (err) {
      this.observe(err)
      return unavailable(err)
    }
  }

  /** `fn` in a transaction once the store is open; connection failures become 503 store_unavailable. */
  async tx<T> (fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
    await this.ready
    try {
      const result = await inTransaction(this.pool, fn)
      if (this.probe !== null) this.observe(undefined)
      return result
    } catch (err) {
      this.observe(err)
      return unavailable(err)
    }
  }

  /** A Redis command once the store is open; connection failures become 503 store_unavailable. */
  async r<T> (fn: (redis: Redis) => Promise<T>): Promise<T> {
    await this.ready
    try {
      return await fn(this.redis)
    } catch (err) {
      return unavailable(err)
    }
  }

  async close (): Promise<void> {
    if (this.probe !== null) { clearInterval(this.probe); this.probe = null }
    this.redis.disconnect()
    this.sub.disconnect()
    await this.pool.end().catch(() => {})
  }
}
