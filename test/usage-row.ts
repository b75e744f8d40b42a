import type { UsageRow } from '../engine/store/types.js'

/**
 * A usage record as the stores write and read it, for the store tests: a finished chat call of
 * 10 + 5 tokens by acme/web's key `k`, with `over` on top (`id` at least). A column added to
 * UsageRow gets its default here, once.
 */
export function usageRow (over: Partial<UsageRow> & Pick<UsageRow, 'id'>): UsageRow {
  return {
    created_at: 1000,
    trace_id: over.id,
    org_id: 'acme',
    project_id: 'web',
    key_id: 'k',
    endpoint: 'chat.completions',
    model: 'm',
    provider: 'p',
    stream: 0,
    status: 'ok',
    prompt_tokens: 10,
    cached_input_tokens: 0,
    completion_tokens: 5,
    total_tokens: 15,
    cache_write_tokens: 0,
    images: 0,
    cost_nano: 100,
    cost_detail: null,
    latency_ms: 1,
    ttft_ms: null,
    cache_hit: 0,
    saved_nano: 0,
    attempts: [],
    dropped_params: [],
    tags: [],
    error: null,
    requested_model: null,
    fallbacks: [],
    ...over
  }
}
