// The contract between the gateway's call pipeline and the protocol translators. A pair maps one
// client protocol onto one upstream protocol; passthrough is a pair too, which only extracts
// usage. Pairs are pure: no I/O, no clock, no module state; ids and time come in through ctx.
import type { Json, Protocol, StreamMapper, TranslateCtx, UpstreamProtocol, Usage } from '../protocols/types.js'

export type { Json, Protocol, SseEvent, StreamMapper, TranslateCtx, UpstreamProtocol, Usage } from '../protocols/types.js'

/** The upstream request body, and the client fields that could not be mapped onto it. */
export interface TranslatedRequest {
  body: Json
  /**
   * Client fields dropped because the upstream protocol has no equivalent: top-level names
   * (`seed`), or `field.kind` for one kind of entry in a list (`tools.web_search`). Listed in
   * the {prefix}Dropped-Params response header with those dropped as unsupported by the model.
   */
  dropped: string[]
}

export interface TranslatedResponse {
  /** The client's body; null means "unchanged": relay the upstream bytes as they are. */
  body: Json | null
  usage: Usage | null
}

export interface TranslatorPair {
  client: Protocol
  upstream: UpstreamProtocol
  /**
   * Upstream path below the provider's base_url: '/chat/completions', '/v1/messages' or
   * '/responses'; a function of the call for Gemini, whose path names the model and the stream
   * (upstreamPath() in index.ts resolves either).
   */
  path: string | ((ctx: TranslateCtx) => string)
  /** The upstream request. Throws a GatewayError (engine/kernel/errors.ts) when it cannot be mapped. */
  request: (body: Json, ctx: TranslateCtx) => TranslatedRequest
  response: (body: Json, ctx: TranslateCtx) => TranslatedResponse
  /** An upstream error status and body → the client's error body (status is kept). */
  error: (status: number, body: unknown) => Json
  stream: (ctx: TranslateCtx) => StreamMapper
  /**
   * A pair to Messages: the client's own fields each Messages field it writes is made from, where
   * the names differ (`metadata` ← `user`, `safety_identifier`, `metadata`). A later leg that
   * cannot carry a Messages field (Converse, compose.ts) reports it by these names, those the
   * client sent; a field not listed keeps its Messages name, which is then the client's too.
   */
  messagesOrigins?: Readonly<Record<string, readonly string[]>>
}

/** A pair of calls answered whole (embeddings, image generation): no stream. */
export type WholePair = Omit<TranslatorPair, 'stream'>
