// The contract between the route handlers and the protocol translators (STYLE.md "Translation").
// A pair maps one client protocol onto one upstream protocol; passthrough is a pair too, which
// only extracts usage. Pairs are pure: no I/O, no clock, no module state; ids and time come in ctx.

export type Protocol = 'openai' | 'messages'

export type Json = Record<string, unknown>

/** Token usage of one call, normalised (PRODUCT.md §4): prompt_tokens counts all input, cached included. */
export interface Usage {
  prompt_tokens: number
  cached_input_tokens: number
  completion_tokens: number
  /** Anthropic's cache_creation_input_tokens (part of prompt_tokens); 0 for OpenAI upstreams. */
  cache_creation_input_tokens: number
}

export interface TranslateCtx {
  /** Catalog model id the client asked for (what the client sees as `model` is the upstream's answer). */
  model: string
  /** Name sent upstream (`upstream_model`). */
  upstreamModel: string
  /** An id for generated objects when the upstream gives none (e.g. `chatcmpl-…`, `msg_…`), from the trace id. */
  id: string
  /** Unix seconds, for `created`. */
  created: number
  /** The client asked for the usage chunk (OpenAI client: stream_options.include_usage). */
  includeUsage: boolean
  /** translation.flatten: the spec's simplified cross-protocol behaviour. */
  flatten: boolean
  /** max_tokens sent to a Messages upstream when the OpenAI client gave none. */
  defaultMaxTokens: number
}

/** One SSE frame. `raw`, when set, is the frame's exact text as received (with its trailing blank line). */
export interface SseEvent {
  event?: string
  data: string
  raw?: string
}

/** A per-request stream mapper: fed upstream frames in order, returns the frames for the client. */
export interface StreamMapper {
  push: (ev: SseEvent) => SseEvent[]
  /** The upstream stream ended (normally or not): frames still owed to the client. */
  end: () => SseEvent[]
  /** Usage as far as the upstream reported it; null when it reported none. */
  usage: () => Usage | null
  /** Output text/arguments relayed so far, for estimating output tokens when usage never came. */
  relayedText: () => string
  /** True once the upstream reported the end of the message (finish_reason / message_stop). */
  finished: () => boolean
}

export interface TranslatedResponse {
  /** The client's body; null means "unchanged": relay the upstream bytes as they are. */
  body: Json | null
  usage: Usage | null
}

export interface TranslatorPair {
  client: Protocol
  upstream: Protocol
  /** Upstream path below the provider's base_url: '/chat/completions' or '/v1/messages'. */
  path: string
  /** The upstream request body. Throws a GatewayError (plugins/errors.ts) when it cannot be mapped. */
  request: (body: Json, ctx: TranslateCtx) => Json
  response: (body: Json, ctx: TranslateCtx) => TranslatedResponse
  /** An upstream error status and body → the client's error body (status is kept). */
  error: (status: number, body: unknown) => Json
  stream: (ctx: TranslateCtx) => StreamMapper
}
