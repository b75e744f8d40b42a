import { Type } from '@sinclair/typebox'
import { LRUCache } from 'lru-cache'
import { hash } from 'node:crypto'
import { definePlugin, isPromise, Unauthorized, type ApiKey, type Principal } from './api/index.js'

// Phase: onRequest. Sets request.principal from `Authorization: Bearer <key>`, else from the
// header a route's config names in apiKeyHeader (`x-api-key` on the Messages routes,
// `x-goog-api-key` on the Gemini routes), else from the query parameter it names in apiKeyQuery
// (`?key=` on the Gemini routes). Verified keys are cached by the
// key's hash for cache_ttl_s; a revoked key is dropped from the cache as soon as the store says
// so (at once in this process, within a second in the other workers of the store).

const options = Type.Object({
  cache_size: Type.Integer({ default: 10_000, minimum: 0 }),
  cache_ttl_s: Type.Number({ default: 10, minimum: 0 })
}, { additionalProperties: false })

const BEARER = /^Bearer\s+(\S+)\s*$/i

function bearer (header: string | undefined): string | undefined {
  if (header === undefined) return undefined
  return BEARER.exec(header)?.[1]
}

const toPrincipal = (k: ApiKey): Principal => ({ keyId: k.id, org: k.org, project: k.project, models: k.models, passthrough: k.passthrough })

export default definePlugin({
  name: 'auth',
  description: 'API keys: Authorization: Bearer (x-api-key on /v1/messages; x-goog-api-key or ?key= on the Gemini API); 401 otherwise',
  options,
  plugin: async (fastify, opts) => {
    const { keys } = fastify.gateway.store
    const cache = opts.cache_size > 0 && opts.cache_ttl_s > 0
      ? new LRUCache<string, Principal>({ max: opts.cache_size, ttl: opts.cache_ttl_s * 1000 })
      : null
    const hashByKeyId = new Map<string, string>()
    if (cache !== null) {
      keys.onRevoked((keyId) => {
        const h = hashByKeyId.get(keyId)
        if (h !== undefined) { cache.delete(h); hashByKeyId.delete(keyId) }
      })
    }
    const admit = (request: { principal: Principal | null }, h: string, found: ApiKey | undefined): void => {
      if (found === undefined) throw new Unauthorized()
      const principal = toPrincipal(found)
      if (cache !== null) {
        cache.set(h, principal)
        hashByKeyId.set(principal.keyId, h)
      }
      request.principal = principal
    }

    fastify.addHook('onRequest', (request, _reply, done) => {
      const config = request.routeConfig
      if (config.auth === false || request.method === 'OPTIONS') { done(); return }
      let key = bearer(request.headers.authorization)
      if (key === undefined && config.apiKeyHeader !== undefined && config.apiKeyHeader !== false) {
        const h = request.headers[config.apiKeyHeader === true ? 'x-api-key' : config.apiKeyHeader]
        if (typeof h === 'string' && h.trim() !== '') key = h.trim()
      }
      if (key === undefined && config.apiKeyQuery !== undefined) {
        const q = (request.query as Record<string, unknown> | undefined)?.[config.apiKeyQuery]
        if (typeof q === 'string' && q !== '') key = q
      }
      if (key === undefined) { done(new Unauthorized()); return }
      const h = hash('sha256', key, 'hex')
      const cached = cache?.get(h)
      if (cached !== undefined) {
        request.principal = cached
        done()
        return
      }
      try {
        const found = keys.verify(key)
        if (isPromise(found)) {
          found.then((k) => { admit(request, h, k); done() }).catch(done)
          return
        }
        admit(request, h, found)
      } catch (err) {
        done(err as Error)
        return
      }
      done()
    })
  }
})
