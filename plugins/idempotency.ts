import { Type } from '@sinclair/typebox'
import { definePlugin, DuplicateRequest, then } from './api/index.js'

// Gateway hooks: onAdmission (take the key), onCallEnd (keep or release it).
// Idempotency-Key is scoped to the API key. A repeat while the first request is in flight, or
// within ttl_s after it was answered, gets 409 duplicate_request. A request that failed without
// being billed (refused, or failed before its answer started) releases its key before its error
// is sent, so the client can retry with it at once; a call answered from a response cache is not
// billed but succeeded, and keeps its key. Without the header, the client's
// {prefix}Trace-ID request header serves as the key when trace_fallback is on. The store takes a
// key atomically, so exactly one of many concurrent duplicates (on any worker) gets through.
//
// A key is taken with an expiry of ttl_s plus a slack (1% of ttl_s, at most a minute) from the
// start, so a call answered within the slack, which is most of them, needs no second write:
// its key refuses repeats for at least ttl_s after the answer and at most the slack longer.
// Only a call that outlasts the slack moves the expiry to ttl_s after its answer.

const options = Type.Object({
  ttl_s: Type.Number({ default: 86_400, exclusiveMinimum: 0 }),
  trace_fallback: Type.Boolean({ default: true }),
  // kept so configs that set it stay valid: expired keys are swept by the store
  sweep_interval_s: Type.Optional(Type.Number({ exclusiveMinimum: 0, deprecated: true }))
}, { additionalProperties: false })

const MAX_KEY_LENGTH = 255
const MAX_SLACK_MS = 60_000

interface TakenKey { scope: string, key: string, takenAt: number }

declare module 'fastify' {
  interface FastifyRequest {
    /** The Idempotency-Key this request holds (idempotency plugin). */
    idempotencyKey: TakenKey | null
  }
}

export default definePlugin({
  name: 'idempotency',
  description: 'Idempotency-Key per API key: 409 duplicate_request on a repeat',
  options,
  plugin: async (fastify, opts) => {
    const { store, clock, headers } = fastify.gateway
    const ttlMs = opts.ttl_s * 1000
    const slackMs = Math.min(MAX_SLACK_MS, Math.floor(ttlMs / 100))
    const traceHeader = headers.trace.toLowerCase()
    fastify.decorateRequest('idempotencyKey', null)

    fastify.gateway.addHook('onAdmission', ({ request }) => {
      let key = request.headers['idempotency-key']
      if (key === undefined && opts.trace_fallback) key = request.headers[traceHeader]
      if (typeof key !== 'string' || key === '') return
      if (key.length > MAX_KEY_LENGTH) key = key.slice(0, MAX_KEY_LENGTH)
      const taken: TakenKey = { scope: request.principal?.keyId ?? 'anonymous', key, takenAt: clock.now() }
      return then(store.idempotency.take(taken.scope, key, request.id, taken.takenAt, ttlMs + slackMs), (ok) => {
        if (!ok) throw new DuplicateRequest()
        request.idempotencyKey = taken
      })
    })

    fastify.gateway.addHook('onCallEnd', (outcome, { request }) => {
      const taken = request.idempotencyKey
      if (taken === null) return
      if (!outcome.billed && !outcome.cacheHit) return store.idempotency.release(taken.scope, taken.key, request.id)
      const now = clock.now()
      if (now - taken.takenAt > slackMs) return store.idempotency.keep(taken.scope, taken.key, request.id, now + ttlMs)
    })
  }
})
