import type { Config } from '../../config/schema.js'
import { postgresOptions, type StoreOptions } from './open.js'
import { PostgresStore } from './postgres/index.js'
import { SqliteStore } from './sqlite/index.js'
import type { Store } from './types.js'

export type { Store } from './types.js'
export { loadStore, type StoreOptions } from './open.js'

/** Opens the store the config names. */
export function openStore (config: Config, opts: StoreOptions = {}): Store {
  const pg = postgresOptions(config, opts)
  return pg === null ? new SqliteStore(config.store.sqlite, opts) : new PostgresStore(pg)
}
