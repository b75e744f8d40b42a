import type { ErrorBodyInput } from '../kernel/errors.js'
import type { FieldTable } from './fields.js'
import type { AggregateOptions, Splitter, StreamEventLike } from './stream-events.js'
import type { CodecText } from './text.js'
import type { Json, Protocol, SseEvent, StreamMapper, TranslateCtx, Usage } from './types.js'

// A protocol's codec: what modelgate knows of one wire format, in one folder
// (engine/protocols/<protocol>/). Its strict reader, its field table and its writers are typed
// by the protocol's own shapes and exported by the folder's modules for the translation pairs;
// this interface is what every codec has in common, so that what does not depend on the
// protocol (a same-protocol call, a cached answer replayed, a stream folded into a cache entry,
// an error inside a stream) is written once, over any codec.

/** The context a replayed stream needs: the ids an answer may leave out. */
export type ReplayCtx = Pick<TranslateCtx, 'id' | 'created' | 'model'>

/**
 * `Req` is the protocol's request body and `Res` its whole answer, as the provider's own SDK types
 * them (`ChatCompletionCreateParams` and `ChatCompletion`, `MessageCreateParams` and `Message`...).
 * A codec is written against its own types; what works over any codec holds a `Codec` (both
 * `unknown`), which every codec is, since its members are methods: it hands a codec a body it has
 * read as that codec's protocol, and reads what a codec returns as a value of no known shape.
 */
export interface Codec<Req = unknown, Res = unknown> {
  readonly protocol: Protocol
  /**
   * The path of a chat call below a provider's base_url: '/chat/completions', '/v1/messages',
   * '/responses'; a function of the call where the path names the model (Gemini).
   */
  readonly path: string | ((ctx: TranslateCtx) => string)
  /** Every top-level field of a client request of this protocol and its fate toward each other upstream protocol (<protocol>/table.ts). */
  readonly fields: FieldTable
  /** The fields the gateway reads itself (the model, the conversation, the stream flag...): never dropped as unsupported by a model. */
  readonly structural: ReadonlySet<string>
  /** A client's body of this protocol made ready for an upstream of the same protocol (the upstream's model name in it). */
  own (body: Req, ctx: TranslateCtx): Req
  /** The usage of a whole answer (null when it reports none). */
  usage (body: Res): Usage | null
  /** An upstream's error body in this protocol's error shape, what the upstream said kept. */
  error (status: number, body: unknown): Json
  /** An error inside a stream that has started, as this protocol writes one. */
  errorFrame (e: ErrorBodyInput): SseEvent
  /** A stream of this protocol read as it passes unchanged: its usage, its end, its text. */
  watch (ctx: TranslateCtx): StreamMapper
  /** A stream folded into its whole answer; null when it is not a complete answer. */
  aggregate (events: Iterable<StreamEventLike>, opts: AggregateOptions): Res | null
  /** A whole answer replayed as its stream, its texts cut into deltas by `split` (pieces of about 48 characters by default). */
  replay (body: Res, ctx: ReplayCtx, split?: Splitter): SseEvent[]
  /** Where the text sits in its requests, answers and stream events, for what reads or rewrites it (plugins/api/content-text.ts). */
  readonly text: CodecText
}
