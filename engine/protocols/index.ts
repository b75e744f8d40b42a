import type { ErrorBodyInput } from '../kernel/errors.js'
import { chatCodec } from './chat/index.js'
import type { Codec, ReplayCtx } from './codec.js'
import { geminiCodec } from './gemini/index.js'
import { messagesCodec } from './messages/index.js'
import { responsesCodec } from './responses/index.js'
import { isObj } from './fields.js'
import { eventsOf, type AggregateOptions, type Splitter, type StreamEventLike } from './stream-events.js'
import type { Json, Protocol, SseEvent } from './types.js'

export type { Codec, ReplayCtx } from './codec.js'
export type { AggregateOptions, Splitter, StreamEventLike } from './stream-events.js'

/** Each client protocol's codec, by its own request and answer types. */
export interface Codecs {
  openai: typeof chatCodec
  messages: typeof messagesCodec
  responses: typeof responsesCodec
  gemini: typeof geminiCodec
}

/** Every protocol's codec. A protocol added is a folder beside the others and one entry here. */
export const CODECS: Readonly<Codecs> = {
  openai: chatCodec,
  messages: messagesCodec,
  responses: responsesCodec,
  gemini: geminiCodec
}

/** A protocol's codec, its types unknown (the protocol is known only when the call runs). */
export const codecOf = (protocol: Protocol): Codec => CODECS[protocol]

/**
 * The whole answer a stream in `protocol` stands for; null when the stream is not a complete
 * answer (it stopped before its last event, or carried an error).
 */
export function aggregateStream (protocol: Protocol, stream: string | Iterable<StreamEventLike>, opts: AggregateOptions = {}): Json | null {
  const codec: Codec | undefined = CODECS[protocol]
  if (codec === undefined) return null
  const whole = codec.aggregate(eventsOf(stream), opts)
  return isObj(whole) ? whole : null
}

/** The stream events of `body`, a whole answer in `protocol`; `split` cuts its texts into deltas. */
export function replayStream (protocol: Protocol, body: Json, ctx: ReplayCtx, split?: Splitter): SseEvent[] {
  const codec: Codec | undefined = CODECS[protocol]
  if (codec === undefined) throw new Error(`no stream replay for ${protocol} answers`)
  return codec.replay(body, ctx, split)
}

/** An error inside a stream, in the client's own format. */
export const errorEvent = (client: Protocol, e: ErrorBodyInput): SseEvent => CODECS[client].errorFrame(e)
