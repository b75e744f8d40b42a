import { nanoToUsd } from '../../engine/kernel/money.js'
import type { CostDetail, UsageRow } from '../../engine/store/types.js'
import type { CostDetail as CostDetailAnswer, UsageDetail, UsageRecord } from './answers.js'

const COST_PARTS = ['input', 'cached_input', 'cache_write', 'output', 'images', 'per_request', 'tool_call'] as const satisfies ReadonlyArray<keyof CostDetail>

/** A charge by part as the API shows it: decimal strings summing exactly to cost_usd, and the tier. */
export function costDetail (d: CostDetail | null): CostDetailAnswer | null {
  if (d === null) return null
  const parts = Object.fromEntries(COST_PARTS.map((part) => [part, nanoToUsd(d[part] ?? 0)])) as Record<typeof COST_PARTS[number], string>
  return { ...parts, tier: d.tier ?? null }
}

/** A usage_records row as the API shows it (the UsageRecord of the admin API). */
export function usageRecord (r: UsageRow): UsageRecord {
  return {
    id: r.id,
    created_at: new Date(r.created_at).toISOString(),
    trace_id: r.trace_id,
    org: r.org_id,
    project: r.project_id,
    key_id: r.key_id,
    endpoint: r.endpoint,
    model: r.model,
    provider: r.provider,
    stream: r.stream === 1,
    status: r.status,
    error: r.error ?? null,
    requested_model: r.requested_model ?? null,
    fallbacks: r.fallbacks ?? [],
    prompt_tokens: r.prompt_tokens,
    cached_input_tokens: r.cached_input_tokens,
    completion_tokens: r.completion_tokens,
    total_tokens: r.total_tokens,
    cache_write_tokens: r.cache_write_tokens ?? 0,
    images: r.images ?? 0,
    cost_usd: nanoToUsd(r.cost_nano),
    cost_detail: costDetail(r.cost_detail ?? null),
    latency_ms: r.latency_ms,
    ttft_ms: r.ttft_ms,
    cache_hit: r.cache_hit === 1,
    saved_usd: nanoToUsd(r.saved_nano),
    tags: r.tags ?? []
  }
}

/** A record as the admin API shows it: the UsageRecord with the call's attempts and the parameters it dropped. */
export function usageDetail (r: UsageRow): UsageDetail {
  return { ...usageRecord(r), attempts: r.attempts, dropped_params: r.dropped_params }
}
