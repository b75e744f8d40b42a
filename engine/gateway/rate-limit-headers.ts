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

// Anthropic's reset time changes once a second while every call writes it: the last one is kept
let lastSecond = NaN
let lastTime = ''

/** An RFC 3339 time to the second, as Anthropic writes it. */
function rfc3339 (ms: number): string {
  const second = Math.floor(ms / 1000)
  if (second !== lastSecond) {
    lastTime = new Date(second * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z')
    lastSecond = second
  }
  return lastTime
}

/** Where the headers go: a Fastify reply (its `header`), or a record for a refusal's headers. */
export interface HeaderSink { header: (name: string, value: string) => unknown }

/** A record of headers as a sink. */
class HeaderRecord implements HeaderSink {
  readonly out: Record<string, string> = {}
  header (name: string, value: string): void { this.out[name] = value }
}

/** One reading's three headers, in `style`, into `sink`; `limitText` is `limit` as a string, when the caller keeps it. */
export function putLimitHeaders (sink: HeaderSink, style: 'openai' | 'anthropic', kind: 'requests' | 'tokens', now: number, limit: number, remaining: number, resetAt: number, limitText = String(limit)): void {
  const n = NAMES[style][kind]
  sink.header(n[0], limitText)
  sink.header(n[1], String(remaining > 0 ? remaining : 0))
  sink.header(n[2], style === 'openai' ? openAiDuration(resetAt - now) : rfc3339(Math.max(resetAt, now)))
}

/** The headers of the readings given (requests, tokens), in `style`, as a record. */
export function rateLimitHeaders (style: 'openai' | 'anthropic', now: number, requests: LimitReading | null, tokens: LimitReading | null): Record<string, string> {
  const record = new HeaderRecord()
  if (requests !== null) putLimitHeaders(record, style, 'requests', now, requests.limit, requests.remaining, requests.resetAt)
  if (tokens !== null) putLimitHeaders(record, style, 'tokens', now, tokens.limit, tokens.remaining, tokens.resetAt)
  return record.out
}

/** Every name these headers may have (CORS exposes them). */
export const RATE_LIMIT_HEADER_NAMES: string[] = [...NAMES.openai.requests, ...NAMES.openai.tokens, ...NAMES.anthropic.requests, ...NAMES.anthropic.tokens]
