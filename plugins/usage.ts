import { Type } from '@sinclair/typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { settle } from './billing.js'
import { afterResponse, syncHook, type CallInfo } from './context.js'
import { definePlugin } from './registry.js'
import type { UsageRow } from './store/usage.js'

// Phases: preHandler (watch the response), then when it is over, finished or aborted. One usage record per metered call that reached the upstream stage
// (PRODUCT.md §4), written off the response path: queued on the app's deferred writer and
// committed in batched transactions every flush_interval_ms (or at batch_size), with the other
// post-response writes; the queue is flushed when the app closes, so a graceful stop loses none. Prompt and completion text are stored only
// with store_content, and swept after retention_days.

const options = Type.Object({
  store_content: Type.Boolean({ default: false }),
  retention_days: Type.Number({ default: 30, exclusiveMinimum: 0 }),
  batch_size: Type.Integer({ default: 500, minimum: 1 }),
  flush_interval_ms: Type.Integer({ default: 5, minimum: 0 })
}, { additionalProperties: false })

const DAY_MS = 86_400_000

export function recordStatus (call: CallInfo, reply: FastifyReply): NonNullable<CallInfo['status']> {
  return call.status ?? (reply.statusCode < 400 ? 'ok' : 'upstream_error')
}

export default definePlugin({
  name: 'usage',
  options,
  plugin: async (fastify, opts) => {
    const { store, catalog, clock } = fastify.gw
    const writer = fastify.gw.writer
    writer.configure(opts.flush_interval_ms, opts.batch_size)

    let sweeper: NodeJS.Timeout | null = null
    if (opts.store_content) {
      const sweep = (): void => { store.usage.sweepContent(clock.now() - opts.retention_days * DAY_MS) }
      sweep()
      sweeper = setInterval(sweep, 3_600_000)
      sweeper.unref()
    }
    fastify.addHook('onClose', async () => {
      if (sweeper !== null) clearInterval(sweeper)
    })

    const record = (request: FastifyRequest, reply: FastifyReply): void => {
      const call = request.call
      // calls refused before an upstream was tried (validation, 404, admission) are not metered
      if (call === null || (call.provider === null && call.status === null)) return
      const status = recordStatus(call, reply)
      call.status = status
      const { usage, cost } = settle(call, catalog.get(call.model)?.price ?? null)
      const now = clock.now()
      const principal = request.principal
      const row: UsageRow = {
        id: 'usage_' + request.id.replace(/-/g, ''),
        created_at: call.startedAt,
        trace_id: request.id,
        org_id: principal?.org ?? null,
        project_id: principal?.project ?? null,
        key_id: principal?.keyId ?? null,
        endpoint: call.endpoint,
        model: call.model,
        provider: call.provider,
        stream: call.stream ? 1 : 0,
        status,
        prompt_tokens: usage.prompt_tokens,
        cached_input_tokens: usage.cached_input_tokens,
        completion_tokens: usage.completion_tokens,
        total_tokens: usage.prompt_tokens + usage.completion_tokens,
        cost_nano: cost,
        latency_ms: Math.max(0, now - call.startedAt),
        ttft_ms: call.firstByteAt === null ? null : Math.max(0, call.firstByteAt - call.startedAt)
      }
      const content = opts.store_content
        ? { usage_id: row.id, created_at: row.created_at, request: JSON.stringify(call.requestBody ?? null), response: call.responseText ?? call.relayedText ?? null }
        : undefined
      writer.add(() => { store.usage.insert(row, content) })
    }

    fastify.addHook('preHandler', syncHook((request, reply) => {
      if (request.routeConfig.metered === true) afterResponse(reply, () => record(request, reply))
    }))
  }
})
