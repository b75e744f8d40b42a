import type { Config } from '../../config/schema.js'
import type { PostgresStoreOptions } from './postgres/index.js'
import type { PeerBus, Store } from './types.js'

// Which store a config names, and opening it with only its own code loaded (`loadStore`): a
// command that opens a SQLite store and exits loads neither the PostgreSQL client nor Redis's.
// A serving gateway opens it through `openStore` (index.ts), which has both at hand.

export interface StoreOptions {
  /** Time source for heartbeats and sweeps (tests pass a fake one). */
  now?: () => number
  /** Hears write failures the store retries or cannot report to a caller. */
  onError?: (err: unknown, what: string) => void
  /**
   * How the processes sharing a SQLite file tell each other what they must know at once (a quota
   * window closing, a lease asked back): the cluster's bus in a worker of `serve --workers N`; by
   * default the stores of this process on the same file. PostgreSQL's instances talk over Redis.
   */
  bus?: PeerBus
}

/** The PostgreSQL + Redis store's options, when the config names that store; null for SQLite. */
export function postgresOptions (config: Config, opts: StoreOptions = {}): PostgresStoreOptions | null {
  const { postgres, redis } = config.store
  if (postgres === undefined || redis === undefined) return null
  return { postgres, redis, prefix: config.store.redis_prefix, now: opts.now, onError: opts.onError }
}

/** Opens the store the config names, as openStore does, loading only that store's code. */
export async function loadStore (config: Config, opts: StoreOptions = {}): Promise<Store> {
  const pg = postgresOptions(config, opts)
  if (pg !== null) return new (await import('./postgres/index.js')).PostgresStore(pg)
  return new (await import('./sqlite/index.js')).SqliteStore(config.store.sqlite, opts)
}
