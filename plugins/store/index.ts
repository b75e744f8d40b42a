import type { Config } from '../../config/schema.js'
import { PostgresStore } from './postgres/index.js'
import { SqliteStore, type SqliteStoreOptions } from './sqlite/index.js'
import type { Store } from './types.js'

export type { Store } from './types.js'

export type StoreOptions = SqliteStoreOptions

/**
 * How long the balance holds of a process that stopped may stay before the live ones release
 * them (the balance plugin's stale_hold_s), in ms; undefined for the store's default.
 */
export function staleHoldMs (config: Config): number | undefined {
  const entry = config.plugins.find((p) => p.name === 'balance' && p.enabled !== false)
  const s = (entry?.options as { stale_hold_s?: unknown } | undefined)?.stale_hold_s
  return typeof s === 'number' ? s * 1000 : undefined
}

/** Opens the store the config names. */
export function openStore (config: Config, opts: StoreOptions = {}): Store & { startMaintenance: (o?: { staleHoldMs?: number }) => void } {
  const { postgres, redis } = config.store
  if (postgres !== undefined && redis !== undefined) return new PostgresStore({ postgres, redis, prefix: config.store.redis_prefix, now: opts.now, onError: opts.onError })
  return new SqliteStore(config.store.sqlite, opts)
}
