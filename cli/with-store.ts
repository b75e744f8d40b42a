import type { Config } from '../config/schema.js'
import type { Store } from '../engine/store/types.js'

/**
 * Opens the config's store with the config's missing tenants created (never changing or
 * restoring what is there: only serve and reload apply the file), runs `fn`, and closes the store.
 */
export async function withStore<T> (config: Config, fn: (store: Store) => Promise<T>): Promise<T> {
  const { loadStore } = await import('../engine/store/open.js')
  const store = await loadStore(config)
  try {
    await store.syncTenants(config, Date.now(), 'missing')
    return await fn(store)
  } finally {
    await store.close()
  }
}
