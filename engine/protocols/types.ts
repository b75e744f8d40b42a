// What every protocol's codec and every translation pair share: the protocols' names, the
// normalised usage, the call's context, an SSE frame and a stream mapper. Pure types.

/**
 * A model API's wire protocol. Clients speak 'openai' (Chat Completions), 'messages' (Anthropic
 * Messages), 'responses' (OpenAI Responses) or 'gemini' (Google's generateContent). Upstreams
 * speak 'openai', 'messages' or 'gemini', and 'responses' only for a provider that serves the
 * Responses API itself (its `responses: true` option). An MCP tool call is no model call and has
 * no translator: its calls are the plugin API's CallProtocol 'mcp'.
 */
export type Protocol = 'openai' | 'messages' | 'responses' | 'gemini'

/**
 * An upstream's wire protocol: a client protocol, or one only upstreams speak (AWS Bedrock's
 * Converse, reached through the Messages shape: engine/protocols/converse/).
 */
export type UpstreamProtocol = Protocol | 'converse'

import type { Json } from '../kernel/json.js'

export type { Json }

/** Token usage of one call, normalised: prompt_tokens counts all input, cached included. */
export interface Usage {
  prompt_tokens: number
  cached_input_tokens: number
  completion_tokens: number
  /** Anthropic's cache_creation_input_tokens (part of prompt_tokens); 0 for OpenAI upstreams. */
  cache_creation_input_tokens: number
  /** The part of cache_creation_input_tokens written for an hour (Anthropic's usage.cache_creation.ephemeral_1h_input_tokens). */
  cache_write_1h_tokens?: number
  /** Output tokens spent on reasoning (part of completion_tokens), when the upstream says. */
  reasoning_tokens?: number
  /** Audio input tokens (part of prompt_tokens), when the upstream says: OpenAI's prompt_tokens_details.audio_tokens (cached ones included: it does not split them), Gemini's AUDIO prompt tokens less its cached AUDIO ones. */
  audio_input_tokens?: number
  /** Audio output tokens (part of completion_tokens): OpenAI's completion_tokens_details.audio_tokens, Gemini's AUDIO candidate tokens. */
  audio_output_tokens?: number
  /** Images generated (an image generation call; imageUsage() in images.ts sets it), billed at the model's per_image price. */
  images?: number
  /** The request's image `size` (`1024x1024`), which picks the per_image price; `default` when absent or not listed. */
  image_size?: string
  /** Uses of tools the provider ran itself, by kind (`web_search`: Anthropic's usage.server_tool_use.web_search_requests, Gemini's grounding queries, Responses' web_search_call items), billed at the model's `server_tools` prices. */
  server_tools?: Record<string, number>
}

export interface TranslateCtx {
  /** Catalog model id the client asked for. */
  model: string
  /** Name sent upstream (`upstream_model`). */
  upstreamModel: string
  /** An id for generated objects when the upstream gives none (e.g. `chatcmpl-…`, `msg_…`, `resp_…`), from the trace id. */
  id: string
  /** Unix seconds, for `created` / `created_at`. */
  created: number
  /** The client asked for a streamed answer. */
  stream: boolean
  /** The client asked for the usage chunk (OpenAI client: stream_options.include_usage). */
  includeUsage: boolean
  /** translation.flatten: the spec's simplified cross-protocol behaviour. */
  flatten: boolean
  /** max_tokens sent to a Messages upstream when the client gave none. */
  defaultMaxTokens: number
  /**
   * The model's supported_parameters: a parameter with no equivalent in the upstream protocol
   * is still sent when the model lists it (an OpenAI-compatible server that takes `top_k`).
   */
  supported?: ReadonlySet<string>
  /**
   * The client's request body as the pair's request() receives it. A Responses answer echoes
   * the request's fields (instructions, tools, temperature…) and names namespaced tool calls as
   * the client declared them, so the Responses pairs read it in response() and stream(); the
   * pairs in front of a Gemini client read whether it asked to see thoughts.
   */
  clientRequest?: Json
}

/** One SSE frame. `raw`, when set, is the frame's exact text as received (with its trailing blank line). */
export interface SseEvent {
  event?: string
  data: string
  raw?: string
  /** The data's JSON value, on a frame made in this process from one (sse.ts ValueFrame): a mapper reads it instead of parsing `data`, and changes nothing in it. */
  value?: unknown
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
  /**
   * Frames that tell the client the stream failed after it started (an upstream reset, an idle
   * timeout), in its own protocol; the relay writes them, then ends the stream. Pairs without
   * it get the generic error frame of their client protocol (sse.ts errorEvent).
   */
  fail?: (error: { status: number, message: string, code?: string | number, type?: string }) => SseEvent[]
}
