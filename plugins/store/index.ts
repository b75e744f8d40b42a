import type { Config } from '../../config/schema.js'
import { SqliteStore, type SqliteStoreOptions } from './sqlite/index.js'
import type { Store } from './types.js'

export type { Store } from './types.js'

export type StoreOptions = SqliteStoreOptions

/** Opens the store the config names. */
export function openStore (config: Config, opts: StoreOptions = {}): Store & { startMaintenance: (o?: { staleHoldMs?: number }) => void } {
  return new SqliteStore(config.store.sqlite, opts)
}
