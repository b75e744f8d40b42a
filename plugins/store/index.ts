import type { Config } from '../../config/schema.js'
import { PostgresStore } from './postgres/index.js'
import { SqliteStore } from './sqlite/index.js'
import type { PeerBus, Store } from './types.js'

export type { Store } from './types.js'

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

/** Opens the store the config names. */
export function openStore (config: Config, opts: StoreOptions = {}): Store {
  const { postgres, redis } = config.store
  if (postgres !== undefined && redis !== undefined) return new PostgresStore({ postgres, redis, prefix: config.store.redis_prefix, now: opts.now, onError: opts.onError })
  return new SqliteStore(config.store.sqlite, opts)
}
