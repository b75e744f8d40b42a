import rateLimit from '@fastify/rate-limit'
import { Type } from '@sinclair/typebox'
import type { onRequestHookHandler } from 'fastify'
import { RateLimited } from './errors.js'
import { definePlugin } from './registry.js'
import type { RateLimitRepository } from './store/policies.js'
import type { Clock } from './context.js'

// Phase: onRequest, first in the chain: `max` requests per `window_s` per client IP, counted
// before auth, so requests without a valid key count too. Built on @fastify/rate-limit with a
// store in the shared SQLite file, so all workers of one machine count together. The client IP
// is Fastify's request.ip: the socket's address, or X-Forwarded-For when server.trust_proxy is
// on. 429 carries Retry-After and the message "You are being rate limited." (Messages shape on
// /v1/messages, as every error there).

const options = Type.Object({
  max: Type.Integer({ default: 120, minimum: 1 }),
  window_s: Type.Number({ default: 60, exclusiveMinimum: 0 }),
  allow_list: Type.Array(Type.String(), { default: [] })
}, { additionalProperties: false })

interface IncrResult { current: number, ttl: number }
type IncrCallback = (err: Error | null, res?: IncrResult) => void

/** The @fastify/rate-limit store interface over the shared SQLite counters. */
function sqliteStore (repo: RateLimitRepository, clock: Clock, windowMs: number) {
  return class SqliteRateLimitStore {
    incr (key: string, cb: IncrCallback, timeWindow: number = windowMs): void {
      try {
        const now = clock.now()
        const { count, reset_at: resetAt } = repo.incr(key, now, timeWindow)
        cb(null, { current: count, ttl: Math.max(0, resetAt - now) })
      } catch (err) {
        cb(err as Error)
      }
    }

    child (): SqliteRateLimitStore { return new SqliteRateLimitStore() }
  }
}

export default definePlugin({
  name: 'rate-limit',
  options,
  plugin: async (fastify, opts) => {
    const { store, clock } = fastify.gw
    await fastify.register(rateLimit, {
      global: false,
      max: opts.max,
      timeWindow: opts.window_s * 1000,
      allowList: opts.allow_list,
      store: sqliteStore(store.rateLimits, clock, opts.window_s * 1000),
      errorResponseBuilder: (_request, ctx) => new RateLimited({}, { headers: { 'retry-after': String(Math.max(1, Math.ceil(ctx.ttl / 1000))) } })
    })
    // an instance hook (not the per-route one) so that it runs before the auth plugin's
    fastify.addHook('onRequest', fastify.rateLimit() as onRequestHookHandler)
    const sweeper = setInterval(() => store.rateLimits.sweep(clock.now()), Math.max(60_000, opts.window_s * 1000))
    sweeper.unref()
    fastify.addHook('onClose', async () => { clearInterval(sweeper) })
  }
})
