import { Type } from '@sinclair/typebox'
import { hash } from 'node:crypto'
import { definePlugin, isPromise, KeyExpired, Unauthorized, type ApiKey, type Principal } from './api/index.js'

// Phase: onRequest. Sets request.principal from `Authorization: Bearer <key>`, else from the
// header a route's config names in apiKeyHeader (`x-api-key` on the Messages routes,
// `x-goog-api-key` on the Gemini routes), else from the query parameter it names in apiKeyQuery
// (`?key=` on the Gemini routes). Verified keys are cached by the key's hash for cache_ttl_s; a
// key that changes (revoked, updated, rotated) is dropped from the cache as soon as the store says
// so, and every key of an organization or project that changes (deleted, say): at once in this
// process, before the change is answered in the workers and instances on the store's bus, within
// a second in any other process on the store. A key past its expires_at (a rotated key past its
// grace) answers 401 saying it expired, checked on every request against the gateway's clock.
// When a key was last used is written behind: at most once a minute per key and process, with
// the store's other writes.

const options = Type.Object({
  cache_size: Type.Integer({ default: 10_000, minimum: 0 }),
  cache_ttl_s: Type.Number({ default: 10, minimum: 0 })
}, { additionalProperties: false })

const BEARER = /^Bearer\s+(\S+)\s*$/i

function bearer (header: string | undefined): string | undefined {
  if (header === undefined) return undefined
  return BEARER.exec(header)?.[1]
}

const TOUCH_EVERY_MS = 60_000

const toPrincipal = (k: ApiKey): Principal => ({
  keyId: k.id, org: k.org, project: k.project, models: k.models, passthrough: k.passthrough, mcp: k.mcp, expiresAt: k.expires_at, limits: k.limits, budget: k.budget, lineage: k.lineage
})

export default definePlugin({
  name: 'auth',
  description: 'API keys: Authorization: Bearer (x-api-key on /v1/messages; x-goog-api-key or ?key= on the Gemini API); 401 otherwise',
  options,
  plugin: async (fastify, opts) => {
    const { store, clock } = fastify.gateway
    const { keys } = store
    // loaded when the chain is mounted, not with the plugin's definition (`config check` reads its options alone)
    const cache = opts.cache_size > 0 && opts.cache_ttl_s > 0
      ? new (await import('lru-cache')).LRUCache<string, Principal>({ max: opts.cache_size, ttl: opts.cache_ttl_s * 1000 })
      : null
    const hashByKeyId = new Map<string, string>()
    // a verdict read before a change is heard must not be cached after it
    let epoch = 0
    const stop = store.onChange((change) => {
      epoch++
      if (cache === null) return
      if (change.kind === 'key') {
        const h = hashByKeyId.get(change.id)
        if (h !== undefined) { cache.delete(h); hashByKeyId.delete(change.id) }
      } else {
        cache.clear()
        hashByKeyId.clear()
      }
    })
    fastify.addHook('onClose', (_instance, done) => { stop(); done() })

    const touched = new Map<string, number>()
    /** The principal, once it is known to be usable now; its use noted. */
    const use = (principal: Principal): Principal => {
      const now = clock.now()
      const expiresAt = principal.expiresAt ?? null
      if (expiresAt !== null && expiresAt <= now) throw new KeyExpired({ expired_at: new Date(expiresAt).toISOString() })
      const last = touched.get(principal.keyId)
      if (last === undefined || now - last >= TOUCH_EVERY_MS || now < last) {
        touched.set(principal.keyId, now)
        keys.touch(principal.keyId, now)
      }
      return principal
    }
    const admit = (request: { principal: Principal | null }, h: string, found: ApiKey | undefined, seen: number): void => {
      if (found === undefined) throw new Unauthorized()
      const principal = toPrincipal(found)
      if (cache !== null && seen === epoch) {
        cache.set(h, principal)
        hashByKeyId.set(principal.keyId, h)
      }
      request.principal = use(principal)
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
      try {
        const cached = cache?.get(h)
        if (cached !== undefined) {
          request.principal = use(cached)
          done()
          return
        }
        const seen = epoch
        const found = keys.verify(key)
        if (isPromise(found)) {
          found.then((k) => { admit(request, h, k, seen); done() }).catch(done)
          return
        }
        admit(request, h, found, seen)
      } catch (err) {
        done(err as Error)
        return
      }
      done()
    })
  }
})
