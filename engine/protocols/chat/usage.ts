import type { CompletionUsage } from 'openai/resources/completions'
import type { Usage } from '../types.js'

// A Chat Completions usage object read into the normalised Usage, and written back from it.

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
