import rateLimit from '@fastify/rate-limit'
import { Type } from '@sinclair/typebox'
import type { onRequestHookHandler } from 'fastify'
import { RateLimited } from './errors.js'
import { definePlugin } from './registry.js'
import type { RateLimitRepository } from './store/policies.js'
import type { Clock } from './context.js'

// Phase: onRequest, first in the chain: `max` requests per `window_s` per client IP, counted
// before auth, so requests without a valid key count too. Built on @fastify/rate-limit with a
// store in the shared SQLite file, so all workers of one machine count together (high limits
// are counted in steps of 64 hits per write: see sqliteStore). The client IP
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

/** Hits a worker counts ahead in one store write while the limit is far (≥ 16× this away). */
const AHEAD = 64

/**
 * The @fastify/rate-limit store interface over the shared SQLite counters. Below a limit of
 * 16 × AHEAD every hit is one atomic UPSERT, group-committed with the other hits of the same
 * event-loop turn (store/grouped.ts). Above it, while the key's window is at least that
 * far from the limit, the worker adds AHEAD hits at once and counts them down locally, so only
 * one hit in AHEAD writes; near the limit it counts hit by hit again. Hits counted ahead but not
 * used by the end of the window only make the count higher, never let a request past `max`.
 */
function sqliteStore (repo: RateLimitRepository, clock: Clock, windowMs: number, max: number) {
  const ahead = new Map<string, { resetAt: number, count: number, unused: number }>()
  return class SqliteRateLimitStore {
    static sweep (now: number): void {
      for (const [key, a] of ahead) if (a.resetAt <= now) ahead.delete(key)
    }

    incr (key: string, cb: IncrCallback, timeWindow: number = windowMs): void {
      try {
        const now = clock.now()
        const a = ahead.get(key)
        if (a !== undefined && a.unused > 0 && a.resetAt > now) {
          a.unused--
          cb(null, { current: a.count - a.unused, ttl: a.resetAt - now })
          return
        }
        if (max < AHEAD * 16) {
          repo.incrGrouped(key, now, timeWindow).then(
            ({ count, reset_at: resetAt }) => { cb(null, { current: count, ttl: Math.max(0, resetAt - now) }) },
            (err: Error) => { cb(err) })
          return
        }
        const { count, reset_at: resetAt, granted } = repo.take(key, now, timeWindow, max, AHEAD)
        if (granted > 1) ahead.set(key, { resetAt, count, unused: granted - 1 })
        else ahead.delete(key)
        cb(null, { current: count - granted + 1, ttl: Math.max(0, resetAt - now) })
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
    const Store = sqliteStore(store.rateLimits, clock, opts.window_s * 1000, opts.max)
    await fastify.register(rateLimit, {
      global: false,
      max: opts.max,
      timeWindow: opts.window_s * 1000,
      allowList: opts.allow_list,
      store: Store,
      errorResponseBuilder: (_request, ctx) => new RateLimited({}, { headers: { 'retry-after': String(Math.max(1, Math.ceil(ctx.ttl / 1000))) } })
    })
    // an instance hook (not the per-route one) so that it runs before the auth plugin's
    fastify.addHook('onRequest', fastify.rateLimit() as onRequestHookHandler)
    const sweeper = setInterval(() => { store.rateLimits.sweep(clock.now()); Store.sweep(clock.now()) }, Math.max(60_000, opts.window_s * 1000))
    sweeper.unref()
    fastify.addHook('onClose', async () => { clearInterval(sweeper) })
  }
})
