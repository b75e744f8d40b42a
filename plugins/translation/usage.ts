import type { CompletionUsage } from 'openai/resources/completions'
import type { Usage } from './types.js'

// Usage normalised (prompt_tokens counts all input, cached included) and mapped back to each protocol.

const n = (v: unknown): number => typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0

export function usageFromOpenAI (u: unknown): Usage | null {
  if (u === null || typeof u !== 'object') return null
  const o = u as Record<string, unknown>
  const details = o.prompt_tokens_details as Record<string, unknown> | null | undefined
  return {
    prompt_tokens: n(o.prompt_tokens),
    cached_input_tokens: n(details?.cached_tokens),
    completion_tokens: n(o.completion_tokens),
    cache_creation_input_tokens: 0
  }
}

export function usageFromMessages (u: unknown): Usage | null {
  if (u === null || typeof u !== 'object') return null
  const o = u as Record<string, unknown>
  const read = n(o.cache_read_input_tokens)
  const creation = n(o.cache_creation_input_tokens)
  return {
    prompt_tokens: n(o.input_tokens) + read + creation,
    cached_input_tokens: read,
    completion_tokens: n(o.output_tokens),
    cache_creation_input_tokens: creation
  }
}

export function toOpenAIUsage (u: Usage): CompletionUsage {
  return {
    prompt_tokens: u.prompt_tokens,
    completion_tokens: u.completion_tokens,
    total_tokens: u.prompt_tokens + u.completion_tokens,
    prompt_tokens_details: { cached_tokens: u.cached_input_tokens }
  }
}

export function toMessagesUsage (u: Usage): Record<string, number> {
  return {
    input_tokens: Math.max(u.prompt_tokens - u.cached_input_tokens - u.cache_creation_input_tokens, 0),
    cache_creation_input_tokens: u.cache_creation_input_tokens,
    cache_read_input_tokens: u.cached_input_tokens,
    output_tokens: u.completion_tokens
  }
}
