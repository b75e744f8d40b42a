import { Type } from '@sinclair/typebox'
import { LRUCache } from 'lru-cache'
import { hashKey, type ApiKey } from './store/keys.js'
import { Unauthorized } from './errors.js'
import { definePlugin } from './registry.js'
import { syncHook, type Principal } from './context.js'

// Phase: onRequest. Sets request.principal from `Authorization: Bearer <key>` (and `x-api-key`
// on routes whose config has apiKeyHeader, i.e. /v1/messages). Verified keys are cached by hash
// for cache_ttl_s, and dropped from the cache at once when revoked in this process; other
// workers see a revocation within cache_ttl_s.

const options = Type.Object({
  cache_size: Type.Integer({ default: 10_000, minimum: 0 }),
  cache_ttl_s: Type.Number({ default: 10, minimum: 0 })
}, { additionalProperties: false })

function bearer (header: string | undefined): string | undefined {
  if (header === undefined) return undefined
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header)
  return m?.[1]
}

export default definePlugin({
  name: 'auth',
  options,
  plugin: async (fastify, opts) => {
    const { store } = fastify.gw
    const cache = opts.cache_size > 0 && opts.cache_ttl_s > 0
      ? new LRUCache<string, Principal>({ max: opts.cache_size, ttl: opts.cache_ttl_s * 1000 })
      : null
    const byKeyId = new Map<string, string>()
    fastify.gw.events.on('key-revoked', (keyId: string) => {
      const hash = byKeyId.get(keyId)
      if (hash !== undefined) { cache?.delete(hash); byKeyId.delete(keyId) }
    })

    const toPrincipal = (k: ApiKey): Principal => ({ keyId: k.id, org: k.org, project: k.project, models: k.models })

    fastify.addHook('onRequest', syncHook((request) => {
      const config = request.routeConfig
      if (config.auth === false || request.method === 'OPTIONS') return
      let key = bearer(request.headers.authorization)
      if (key === undefined && config.apiKeyHeader === true) {
        const h = request.headers['x-api-key']
        if (typeof h === 'string' && h !== '') key = h.trim()
      }
      if (key === undefined) throw new Unauthorized()
      const hash = hashKey(key)
      const cached = cache?.get(hash)
      if (cached !== undefined) {
        request.principal = cached
        return
      }
      const found = store.keys.verify(key)
      if (found === undefined) throw new Unauthorized()
      const principal = toPrincipal(found)
      if (cache !== null) {
        cache.set(hash, principal)
        byKeyId.set(principal.keyId, hash)
      }
      request.principal = principal
    }))
  }
})
