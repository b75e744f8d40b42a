import type { ErrorBodyInput } from '../kernel/errors.js'
import { chatCodec } from './chat/index.js'
import type { Codec, ReplayCtx } from './codec.js'
import { geminiCodec } from './gemini/index.js'
import { messagesCodec } from './messages/index.js'
import { responsesCodec } from './responses/index.js'
import { eventsOf, type AggregateOptions, type StreamEventLike } from './stream-events.js'
import type { Json, Protocol, SseEvent } from './types.js'

export type { Codec, ReplayCtx } from './codec.js'
export type { AggregateOptions, StreamEventLike } from './stream-events.js'

/** Every protocol's codec. A protocol added is a folder beside the others and one entry here. */
export const CODECS: Readonly<Record<Protocol, Codec>> = {
  openai: chatCodec,
  messages: messagesCodec,
  responses: responsesCodec,
  gemini: geminiCodec
}

export const codecOf = (protocol: Protocol): Codec => CODECS[protocol]

/**
 * The whole answer a stream in `protocol` stands for; null when the stream is not a complete
 * answer (it stopped before its last event, or carried an error).
 */
export function aggregateStream (protocol: Protocol, stream: string | Iterable<StreamEventLike>, opts: AggregateOptions = {}): Json | null {
  const codec = CODECS[protocol] as Codec | undefined
  return codec === undefined ? null : codec.aggregate(eventsOf(stream), opts)
}

/** The stream events of `body`, a whole answer in `protocol`. */
export function replayStream (protocol: Protocol, body: Json, ctx: ReplayCtx): SseEvent[] {
  const codec = CODECS[protocol] as Codec | undefined
  if (codec === undefined) throw new Error(`no stream replay for ${protocol} answers`)
  return codec.replay(body, ctx)
}

/** An error inside a stream, in the client's own format. */
export const errorEvent = (client: Protocol, e: ErrorBodyInput): SseEvent => CODECS[client].errorFrame(e)
