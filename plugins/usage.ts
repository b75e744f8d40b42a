import { Type } from '@sinclair/typebox'
import { attemptError, definePlugin, usageId, type CallOutcome, type ContentRow, type UsageAttempt, type UsageRow } from './api/index.js'

// Gateway hooks: onAdmission (ask for the content, when stored), onCallEnd (record the call).
// One usage record per metered call that reached an upstream, refused calls excepted; a call
// whose client left mid-answer is recorded too, with what it was sent. The record is written with
// the call's other settlement writes, before the answer's last byte is sent. Prompt and
// completion text (what the client sent, and what it received, streamed or not) are stored only
// with store_content, and swept after retention_days. The record keeps the call's attempts at
// providers and the parameters it dropped: a few fields per attempt, made when the call ends.

const options = Type.Object({
  store_content: Type.Boolean({ default: false }),
  retention_days: Type.Number({ default: 30, exclusiveMinimum: 0 }),
  // kept so configs that set them stay valid: records are now committed with their call
  batch_size: Type.Optional(Type.Integer({ minimum: 1, deprecated: true })),
  flush_interval_ms: Type.Optional(Type.Integer({ minimum: 0, deprecated: true }))
}, { additionalProperties: false })

const DAY_MS = 86_400_000

/** The call's attempts as its record keeps them (most calls: one, that went well). */
function attemptsOf (outcome: CallOutcome): UsageAttempt[] {
  const list = outcome.attempts
  const out: UsageAttempt[] = new Array(list.length)
  for (let i = 0; i < list.length; i++) {
    const a = list[i] as CallOutcome['attempts'][number]
    out[i] = {
      provider: a.provider,
      upstream_model: outcome.upstreamModel,
      outcome: a.outcome,
      status: a.status,
      error: a.outcome === 'ok' ? null : attemptError(a),
      latency_ms: Math.max(0, Math.round(a.end - a.start))
    }
  }
  return out
}

export default definePlugin({
  name: 'usage',
  description: 'one usage record per call, with its tokens and cost; optionally its content',
  options,
  plugin: async (fastify, opts) => {
    const { store, clock } = fastify.gateway

    if (opts.store_content) {
      const sweep = async (): Promise<void> => {
        try {
          await store.usage.sweepContent(clock.now() - opts.retention_days * DAY_MS)
        } catch (err) {
          fastify.log.error({ err }, 'sweeping stored content failed')
        }
      }
      void sweep()
      const sweeper = setInterval(() => { void sweep() }, 3_600_000)
      sweeper.unref()
      fastify.addHook('onClose', async () => { clearInterval(sweeper) })
      fastify.gateway.addHook('onAdmission', (ctx) => { ctx.keepContent() })
    }

    fastify.gateway.addHook('onCallEnd', (outcome) => {
      if ((!outcome.attempted && !outcome.cacheHit) || outcome.model === null || outcome.endpoint === 'count_tokens') return
      const p = outcome.principal
      const row: UsageRow = {
        id: usageId(outcome.traceId),
        created_at: outcome.startedAt,
        trace_id: outcome.traceId,
        org_id: p?.org ?? null,
        project_id: p?.project ?? null,
        key_id: p?.keyId ?? null,
        endpoint: outcome.endpoint,
        model: outcome.model,
        provider: outcome.provider,
        stream: outcome.stream ? 1 : 0,
        status: outcome.status,
        prompt_tokens: outcome.usage.prompt_tokens,
        cached_input_tokens: outcome.usage.cached_input_tokens,
        completion_tokens: outcome.usage.completion_tokens,
        total_tokens: outcome.usage.prompt_tokens + outcome.usage.completion_tokens,
        cache_write_tokens: outcome.usage.cache_creation_input_tokens,
        images: outcome.usage.images ?? 0,
        cost_nano: outcome.costNano,
        cost_detail: outcome.costDetail,
        latency_ms: Math.max(0, outcome.endedAt - outcome.startedAt),
        ttft_ms: outcome.firstByteAt === null ? null : Math.max(0, outcome.firstByteAt - outcome.startedAt),
        cache_hit: outcome.cacheHit ? 1 : 0,
        saved_nano: outcome.savedNano,
        attempts: attemptsOf(outcome),
        dropped_params: outcome.dropped as string[],
        tags: outcome.tags as string[]
      }
      const content: ContentRow | undefined = opts.store_content && outcome.content !== null
        ? { usage_id: row.id, created_at: row.created_at, request: outcome.content.request, response: outcome.content.response }
        : undefined
      return store.usage.record(row, content)
    })
  }
})
