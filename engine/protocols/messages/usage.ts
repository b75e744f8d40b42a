import type { CacheCreation, Usage as MessagesUsage } from '@anthropic-ai/sdk/resources/messages'
import type { Usage } from '../types.js'

// A Messages usage object read into the normalised Usage, and written back from it.

/** The counts of a Messages usage the gateway writes (the SDK's Usage has more, all optional to a client). */
export type MessagesUsageOut = Pick<MessagesUsage, 'input_tokens' | 'cache_creation_input_tokens' | 'cache_read_input_tokens' | 'output_tokens'> & { cache_creation?: CacheCreation }

const n = (v: unknown): number => typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0

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

export function toMessagesUsage (u: Usage): MessagesUsageOut {
  const out: MessagesUsageOut = {
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
