import type { CallProtocol, Endpoint } from '../../plugins/api/index.js'

// The rate-limit headers clients read, for a key with `limits`: OpenAI's
// (`x-ratelimit-limit-requests`, `-remaining-`, `-reset-`, and the `-tokens` forms; the reset as a
// duration such as `1s` or `6m0s`) on the OpenAI-shaped routes, Anthropic's
// (`anthropic-ratelimit-requests-limit`, `-remaining`, `-reset` as an RFC 3339 time, and the
// `-tokens-` forms) on /v1/messages. The numbers are those the limits are enforced with: the
// request's place in the key's rpm counter, and the tokens its tpm window had counted.

/** What one limit stands at for this call. */
export interface LimitReading { limit: number, remaining: number, resetAt: number }

/**
 * Which names a call's answer gets: none for a protocol with no such convention (Gemini, MCP), nor
 * on pass-through, whose answers (and their own rate-limit headers) are the provider's.
 */
export type HeaderStyle = 'openai' | 'anthropic' | null

export function headerStyle (endpoint: Endpoint, protocol: CallProtocol): HeaderStyle {
  if (endpoint === 'passthrough') return null
  if (protocol === 'openai' || protocol === 'responses') return 'openai'
  if (protocol === 'messages') return 'anthropic'
  return null
}

/** A time left as OpenAI writes it: `950ms`, `12s`, `1m5s`. */
export function openAiDuration (ms: number): string {
  const left = Math.max(0, Math.ceil(ms))
  if (left < 1000) return `${left}ms`
  const s = Math.ceil(left / 1000)
  return s < 60 ? `${s}s` : `${Math.floor(s / 60)}m${s % 60}s`
}

/** The header names, by style and kind: limit, remaining, reset. */
const NAMES = {
  openai: {
    requests: ['x-ratelimit-limit-requests', 'x-ratelimit-remaining-requests', 'x-ratelimit-reset-requests'],
    tokens: ['x-ratelimit-limit-tokens', 'x-ratelimit-remaining-tokens', 'x-ratelimit-reset-tokens']
  },
  anthropic: {
    requests: ['anthropic-ratelimit-requests-limit', 'anthropic-ratelimit-requests-remaining', 'anthropic-ratelimit-requests-reset'],
    tokens: ['anthropic-ratelimit-tokens-limit', 'anthropic-ratelimit-tokens-remaining', 'anthropic-ratelimit-tokens-reset']
  }
} as const

/** An RFC 3339 time to the second, as Anthropic writes it. */
const rfc3339 = (ms: number): string => new Date(ms).toISOString().replace(/\.\d{3}Z$/, 'Z')

/** The headers of the readings given (requests, tokens), in `style`, into `out`. */
export function rateLimitHeaders (style: 'openai' | 'anthropic', now: number, requests: LimitReading | null, tokens: LimitReading | null, out: Record<string, string> = {}): Record<string, string> {
  const names = NAMES[style]
  const put = (n: readonly [string, string, string], r: LimitReading): void => {
    out[n[0]] = String(r.limit)
    out[n[1]] = String(r.remaining > 0 ? r.remaining : 0)
    out[n[2]] = style === 'openai' ? openAiDuration(r.resetAt - now) : rfc3339(Math.max(r.resetAt, now))
  }
  if (requests !== null) put(names.requests, requests)
  if (tokens !== null) put(names.tokens, tokens)
  return out
}

/** Every name these headers may have (CORS exposes them). */
export const RATE_LIMIT_HEADER_NAMES: string[] = [...NAMES.openai.requests, ...NAMES.openai.tokens, ...NAMES.anthropic.requests, ...NAMES.anthropic.tokens]
