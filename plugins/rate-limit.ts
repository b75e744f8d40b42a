import type {} from '@fastify/rate-limit'
import { Type } from '@sinclair/typebox'
import type { onRequestHookHandler } from 'fastify'
import { definePlugin, isPromise, RateLimited, retryAfterHeaders, type RateLimitHit, type RateLimitStore } from './api/index.js'

// Phase: onRequest, on the whole app: `max` requests per `window_s` per client IP on every route
// (/v1, /admin, /console and the health checks), counted before auth, so failed key and admin
// token guesses count too. Built on @fastify/rate-limit with the gateway store's hit counters
// behind its store interface, so every worker (and instance) counts together. The client IP is
// Fastify's request.ip: the socket's address, or X-Forwarded-For when server.trust_proxy is on.
// 429 carries Retry-After and the message "You are being rate limited." (Messages shape on
// /v1/messages, as every error there).

const options = Type.Object({
  max: Type.Integer({ default: 120, minimum: 1 }),
  window_s: Type.Number({ default: 60, exclusiveMinimum: 0 }),
  allow_list: Type.Array(Type.String(), { default: [] })
}, { additionalProperties: false })

type IncrCallback = (err: Error | null, res?: { current: number, ttl: number }) => void

/** @fastify/rate-limit's store interface over the gateway store's counters. */
function storeClass (counters: RateLimitStore, now: () => number, windowMs: number, max: number) {
  return class GatewayRateLimitStore {
    incr (key: string, cb: IncrCallback, timeWindow = windowMs): void {
      const t = now()
      const answer = (hit: RateLimitHit): void => { cb(null, { current: hit.count, ttl: Math.max(0, hit.resetAt - t) }) }
      try {
        const hit = counters.hit(key, t, timeWindow, max)
        if (isPromise(hit)) hit.then(answer, (err: Error) => { cb(err) })
        else answer(hit)
      } catch (err) {
        cb(err as Error)
      }
    }

    child (): GatewayRateLimitStore { return new GatewayRateLimitStore() }
  }
}

export default definePlugin({
  name: 'rate-limit',
  description: 'per client IP, on every route, before auth: 429 past max per window',
  options,
  scope: 'app',
  plugin: async (fastify, opts) => {
    const { store, clock } = fastify.gateway
    // loaded when the chain is mounted, not with the plugin's definition (`config check` reads its options alone)
    const { default: rateLimit } = await import('@fastify/rate-limit')
    await fastify.register(rateLimit, {
      global: false,
      max: opts.max,
      timeWindow: opts.window_s * 1000,
      allowList: opts.allow_list,
      store: storeClass(store.rateLimits, clock.now, opts.window_s * 1000, opts.max),
      errorResponseBuilder: (_request, ctx) => new RateLimited({}, { headers: retryAfterHeaders(ctx.ttl / 1000) })
    })
    // an instance hook (not the per-route one) so that it runs before the /v1 chain's auth
    fastify.addHook('onRequest', fastify.rateLimit() as onRequestHookHandler)
  }
})
