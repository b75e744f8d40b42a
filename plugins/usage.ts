import { Type } from '@sinclair/typebox'
import type { Counter, Registry } from 'prom-client'
import { attemptError, definePlugin, usageId, type CallOutcome, type ContentRow, type Principal, type UsageAttempt, type UsageRow } from './api/index.js'

// Gateway hooks: onAdmission (ask for the content, when stored), onCallEnd (record the call).
// One usage record per metered call that reached an upstream; a call whose client left
// mid-answer is recorded too, with what it was sent. A call refused once its key was known (a
// limit, a budget, the balance, a grant, a bad body, a guardrail, an idempotency conflict) is a
// record too, `refused` with its error's code and nothing spent, at most REFUSALS_PER_S a second
// per key and process: the rest are counted in modelgate_refusals_unrecorded_total, so that a
// client hammering a closed door cannot fill the store. Refusals before a key is known (no key, a
// bad one) have no record: the metrics count them. The record is written with
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
/** The most refused calls recorded a second per key (and process). */
export const REFUSALS_PER_S = 10

/** The call's attempts as its record keeps them (most calls: one, that went well). */
function attemptsOf (outcome: CallOutcome): UsageAttempt[] {
  const list = outcome.attempts
  const out: UsageAttempt[] = new Array(list.length)
  for (let i = 0; i < list.length; i++) {
    const a = list[i] as CallOutcome['attempts'][number]
    out[i] = {
      provider: a.provider,
      upstream_model: a.upstreamModel ?? outcome.upstreamModel,
      outcome: a.outcome,
      status: a.status,
      error: a.outcome === 'ok' ? null : attemptError(a),
      latency_ms: Math.max(0, Math.round(a.end - a.start))
    }
  }
  return out
}

/** The model a refused call named: the catalog model, else the body's `model` (cut short), else "". */
function modelNamed (outcome: CallOutcome, body: unknown): string {
  if (outcome.model !== null) return outcome.model
  const named = (body as { model?: unknown } | null)?.model
  return typeof named === 'string' ? named.slice(0, MAX_MODEL_NAME) : ''
}

const MAX_MODEL_NAME = 256

/**
 * The records of refused calls, within REFUSALS_PER_S a second per key; the refusals past that
 * are counted in the process's metrics instead. The counts are kept for the current second only.
 */
async function refusalRecorder (registry: Registry): Promise<{ row: (outcome: CallOutcome, now: number, body: unknown) => UsageRow | null }> {
  // loaded when serving only (a config check reads this module for its options); prom-client is CommonJS, its exports under default once bundled
  const prom = await import('prom-client') as typeof import('prom-client') & { default?: typeof import('prom-client') }
  const { Counter } = prom.default ?? prom
  const NAME = 'modelgate_refusals_unrecorded_total'
  // the registry outlives a reloaded configuration: the next generation's plugin finds the counter again
  const unrecorded = (registry.getSingleMetric(NAME) as Counter<'code'> | undefined) ??
    new Counter({ name: NAME, help: 'Refused calls of a known key past the usage records\' limit a second per key, by error code', labelNames: ['code'], registers: [registry] })
  let second = -1
  const counts = new Map<string, number>()
  return {
    row (outcome, now, body) {
      const p = outcome.principal as Principal
      const s = Math.floor(now / 1000)
      if (s !== second) { second = s; counts.clear() }
      const n = counts.get(p.keyId) ?? 0
      const code = outcome.error ?? String(outcome.httpStatus)
      if (n >= REFUSALS_PER_S) { unrecorded.inc({ code }); return null }
      counts.set(p.keyId, n + 1)
      return {
        id: usageId(outcome.traceId),
        created_at: outcome.startedAt,
        trace_id: outcome.traceId,
        org_id: p.org,
        project_id: p.project,
        key_id: p.keyId,
        endpoint: outcome.endpoint,
        model: modelNamed(outcome, body),
        provider: outcome.provider,
        stream: outcome.stream ? 1 : 0,
        status: 'refused',
        prompt_tokens: 0,
        cached_input_tokens: 0,
        completion_tokens: 0,
        total_tokens: 0,
        cache_write_tokens: 0,
        images: 0,
        cost_nano: 0,
        cost_detail: null,
        latency_ms: Math.max(0, outcome.endedAt - outcome.startedAt),
        ttft_ms: null,
        cache_hit: 0,
        saved_nano: 0,
        attempts: [],
        dropped_params: outcome.dropped as string[],
        tags: outcome.tags as string[],
        error: code
      }
    }
  }
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

    const refusals = await refusalRecorder(fastify.gateway.metrics)

    fastify.gateway.addHook('onCallEnd', (outcome, ctx) => {
      if (!outcome.attempted && !outcome.cacheHit) {
        if (outcome.status !== 'refused' || outcome.principal === null || outcome.httpStatus < 400) return
        const row = refusals.row(outcome, clock.now(), ctx.request.body)
        return row === null ? undefined : store.usage.record(row)
      }
      if (outcome.model === null || outcome.endpoint === 'count_tokens') return
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
        tags: outcome.tags as string[],
        error: null,
        requested_model: outcome.requestedModel ?? null,
        fallbacks: outcome.fallbacks === undefined || outcome.fallbacks.length === 0 ? [] : outcome.fallbacks.map((f) => ({ model: f.model, why: f.why }))
      }
      const content: ContentRow | undefined = opts.store_content && outcome.content !== null
        ? { usage_id: row.id, created_at: row.created_at, request: outcome.content.request, response: outcome.content.response }
        : undefined
      return store.usage.record(row, content)
    })
  }
})
