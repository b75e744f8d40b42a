import type { CompletionUsage } from 'openai/resources/completions'
import type { Usage } from './types.js'

// Usage normalised (prompt_tokens counts all input, cached included) and mapped back to each protocol.

const n = (v: unknown): number => typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0

export function usageFromOpenAI (u: unknown): Usage | null {
  if (u === null || typeof u !== 'object') return null
  const o = u as Record<string, unknown>
  const details = o.prompt_tokens_details as Record<string, unknown> | null | undefined
  const out = o.completion_tokens_details as Record<string, unknown> | null | undefined
  const usage: Usage = {
    prompt_tokens: n(o.prompt_tokens),
    cached_input_tokens: n(details?.cached_tokens),
    completion_tokens: n(o.completion_tokens),
    cache_creation_input_tokens: 0
  }
  // audio tokens bill at their own rates (gpt-4o-audio, gpt-realtime); part of the counts above
  const audioIn = Math.min(n(details?.audio_tokens), usage.prompt_tokens)
  const audioOut = Math.min(n(out?.audio_tokens), usage.completion_tokens)
  if (audioIn > 0) usage.audio_input_tokens = audioIn
  if (audioOut > 0) usage.audio_output_tokens = audioOut
  return usage
}

/**
 * Anthropic's usage: the input is input_tokens + cache reads + cache writes. The writes come as
 * cache_creation_input_tokens and, split by how long they stay, in cache_creation's
 * ephemeral_5m_input_tokens and ephemeral_1h_input_tokens (which bill at different rates).
 */
export function usageFromMessages (u: unknown): Usage | null {
  if (u === null || typeof u !== 'object') return null
  const o = u as Record<string, unknown>
  const read = n(o.cache_read_input_tokens)
  const split = o.cache_creation !== null && typeof o.cache_creation === 'object' ? o.cache_creation as Record<string, unknown> : null
  const hour = n(split?.ephemeral_1h_input_tokens)
  // the total, else the split's sum when only the split came
  const creation = o.cache_creation_input_tokens === undefined || o.cache_creation_input_tokens === null
    ? hour + n(split?.ephemeral_5m_input_tokens)
    : n(o.cache_creation_input_tokens)
  const usage: Usage = {
    prompt_tokens: n(o.input_tokens) + read + creation,
    cached_input_tokens: read,
    completion_tokens: n(o.output_tokens),
    cache_creation_input_tokens: creation
  }
  if (hour > 0) usage.cache_write_1h_tokens = Math.min(hour, creation)
  // the tools Anthropic ran (server_tool_use: {web_search_requests, web_fetch_requests…}), billed per use
  const tools = o.server_tool_use
  if (tools !== null && typeof tools === 'object') {
    const uses: Record<string, number> = {}
    let any = false
    for (const [k, v] of Object.entries(tools as Record<string, unknown>)) {
      if (!k.endsWith('_requests') || n(v) === 0) continue
      uses[k.slice(0, -'_requests'.length)] = n(v)
      any = true
    }
    if (any) usage.server_tools = uses
  }
  return usage
}

/** Usage with the uses of server tools counted in it (a zero usage when there was none). */
export function withServerTools (usage: Usage | null, uses: Readonly<Record<string, number>> | null): Usage | null {
  if (uses === null) return usage
  const base: Usage = usage ?? { prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, cache_creation_input_tokens: 0 }
  return { ...base, server_tools: { ...base.server_tools, ...uses } }
}

export function toOpenAIUsage (u: Usage): CompletionUsage {
  const out: CompletionUsage = {
    prompt_tokens: u.prompt_tokens,
    completion_tokens: u.completion_tokens,
    total_tokens: u.prompt_tokens + u.completion_tokens,
    prompt_tokens_details: { cached_tokens: u.cached_input_tokens }
  }
  if ((u.audio_input_tokens ?? 0) > 0) out.prompt_tokens_details = { cached_tokens: u.cached_input_tokens, audio_tokens: u.audio_input_tokens }
  if ((u.audio_output_tokens ?? 0) > 0) out.completion_tokens_details = { audio_tokens: u.audio_output_tokens }
  return out
}

export function toMessagesUsage (u: Usage): Record<string, unknown> {
  const out: Record<string, unknown> = {
    input_tokens: Math.max(u.prompt_tokens - u.cached_input_tokens - u.cache_creation_input_tokens, 0),
    cache_creation_input_tokens: u.cache_creation_input_tokens,
    cache_read_input_tokens: u.cached_input_tokens,
    output_tokens: u.completion_tokens
  }
  if (u.cache_creation_input_tokens > 0) {
    const hour = Math.min(u.cache_write_1h_tokens ?? 0, u.cache_creation_input_tokens)
    out.cache_creation = { ephemeral_5m_input_tokens: u.cache_creation_input_tokens - hour, ephemeral_1h_input_tokens: hour }
  }
  return out
}
