import { Type } from '@sinclair/typebox'
import { DuplicateRequest } from './errors.js'
import { afterResponse } from './context.js'
import { definePlugin } from './registry.js'

// Phases: preHandler (take the key), then when the response is over (keep or release it).
// Idempotency-Key is scoped to the API key (PRODUCT.md §6.3). A repeat while the first request
// is in flight, or within ttl_s after it was answered, gets 409 duplicate_request. A request
// that failed without being billed (any 4xx/5xx answer) releases its key so the client can
// retry with it. Without the header, the client's {prefix}Trace-ID request header serves as the
// key when trace_fallback is on. Applies to routes whose config says `metered`; the atomic
// UPSERT in the shared store lets exactly one of many concurrent duplicates through. The keys
// taken during one turn of the event loop are committed together (store/grouped.ts).
//
// A key is taken with an expiry of ttl_s plus a slack (1% of ttl_s, at most a minute) from the
// start, so a call answered within the slack, which is most of them, needs no second write:
// its key refuses repeats for at least ttl_s after the answer and at most the slack longer.
// Only a call that outlasts the slack moves the expiry to ttl_s after its answer.

const options = Type.Object({
  ttl_s: Type.Number({ default: 86_400, exclusiveMinimum: 0 }),
  trace_fallback: Type.Boolean({ default: true }),
  sweep_interval_s: Type.Number({ default: 300, exclusiveMinimum: 0 })
}, { additionalProperties: false })

const MAX_KEY_LENGTH = 255
const MAX_SLACK_MS = 60_000

export default definePlugin({
  name: 'idempotency',
  options,
  plugin: async (fastify, opts) => {
    const { store, clock, headers } = fastify.gw
    const ttlMs = opts.ttl_s * 1000
    const slackMs = Math.min(MAX_SLACK_MS, Math.floor(ttlMs / 100))
    const traceHeader = headers.trace.toLowerCase()

    const sweeper = setInterval(() => store.idempotency.sweep(clock.now()), opts.sweep_interval_s * 1000)
    sweeper.unref()
    fastify.addHook('onClose', async () => { clearInterval(sweeper) })

    fastify.addHook('preHandler', async (request, reply) => {
      if (request.routeConfig.metered !== true) return
      let key = request.headers['idempotency-key']
      if (key === undefined && opts.trace_fallback) key = request.headers[traceHeader]
      if (typeof key !== 'string' || key === '') return
      if (key.length > MAX_KEY_LENGTH) key = key.slice(0, MAX_KEY_LENGTH)
      const scope = request.principal?.keyId ?? 'anonymous'
      const takenAt = clock.now()
      if (!await store.idempotency.acquireGrouped(scope, key, request.id, takenAt, ttlMs + slackMs)) throw new DuplicateRequest()
      afterResponse(reply, () => {
        // an answer that started with a success status was billed; anything else frees the key
        const billed = reply.raw.headersSent && reply.statusCode < 400
        // extending can wait for the next batch (the key refuses duplicates either way); a release
        // cannot, since the client may retry at once
        const now = clock.now()
        if (!billed) store.idempotency.release(scope, key, request.id)
        else if (now - takenAt > slackMs) fastify.gw.writer.add(() => { store.idempotency.extend(scope, key, request.id, now + ttlMs) })
      })
    })
  }
})
