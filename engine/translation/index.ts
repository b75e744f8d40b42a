import { chatToGemini } from './chat-to-gemini.js'
import { embeddingsPassthrough, geminiEmbedPassthrough } from './embeddings-passthrough.js'
import { embeddingsToGemini } from './embeddings-to-gemini.js'
import { geminiEmbedToEmbeddings } from './gemini-embed-to-embeddings.js'
import { imagesPassthrough } from './images-passthrough.js'
import { imagesToGemini } from './images-to-gemini.js'
import { chatToMessages } from './chat-to-messages.js'
import { geminiPassthrough } from './passthrough.js'
import { geminiToChat } from './gemini-to-chat.js'
import { geminiToMessages } from './gemini-to-messages.js'
import { messagesToChat } from './messages-to-chat.js'
import { messagesToGemini } from './messages-to-gemini.js'
import { messagesPassthrough, openaiPassthrough } from './passthrough.js'
import { responsesPassthrough } from './passthrough.js'
import { responsesToChat } from './responses-to-chat.js'
import { responsesToGemini } from './responses-to-gemini.js'
import { responsesToMessages } from './responses-to-messages.js'
import { compose } from './compose.js'
import { converseCodec } from '../protocols/converse/index.js'
import type { Protocol, TranslateCtx, TranslatorPair, UpstreamProtocol, WholePair } from './types.js'

export type { Json, Protocol, UpstreamProtocol, SseEvent, StreamMapper, TranslateCtx, TranslatorPair, Usage, WholePair } from './types.js'

// Converse is reached from every client protocol through its pair to Messages (compose.ts)
const PAIRS: Record<Protocol, Partial<Record<UpstreamProtocol, TranslatorPair>>> = {
  openai: { openai: openaiPassthrough, messages: chatToMessages, gemini: chatToGemini, converse: compose(chatToMessages, converseCodec, 'converse') },
  messages: { messages: messagesPassthrough, openai: messagesToChat, gemini: messagesToGemini, converse: compose(messagesPassthrough, converseCodec, 'converse') },
  responses: { responses: responsesPassthrough, openai: responsesToChat, messages: responsesToMessages, gemini: responsesToGemini, converse: compose(responsesToMessages, converseCodec, 'converse') },
  gemini: { gemini: geminiPassthrough, openai: geminiToChat, messages: geminiToMessages, converse: compose(geminiToMessages, converseCodec, 'converse') }
}

/** The calls answered whole, by what they ask for: embeddings (OpenAI's and Google's shapes) and images (OpenAI's). */
export type WholeKind = 'embeddings' | 'images'

const WHOLE_PAIRS: Record<WholeKind, Partial<Record<Protocol, Partial<Record<UpstreamProtocol, WholePair>>>>> = {
  embeddings: {
    openai: { openai: embeddingsPassthrough, gemini: embeddingsToGemini },
    gemini: { gemini: geminiEmbedPassthrough, openai: geminiEmbedToEmbeddings }
  },
  images: {
    openai: { openai: imagesPassthrough, gemini: imagesToGemini }
  }
}

/** The pair of a call answered whole; undefined where the upstream protocol has no such call (a Messages upstream). */
export function wholePairFor (kind: WholeKind, client: Protocol, upstream: UpstreamProtocol): WholePair | undefined {
  return WHOLE_PAIRS[kind][client]?.[upstream]
}

/** The pair for a client protocol in front of an upstream protocol; undefined where there is none (a Chat client in front of a native Responses upstream). */
export function pairOf (client: Protocol, upstream: UpstreamProtocol): TranslatorPair | undefined {
  return PAIRS[client][upstream]
}

/** The pair for a client protocol in front of an upstream protocol. */
export function pairFor (client: Protocol, upstream: UpstreamProtocol): TranslatorPair {
  const pair = PAIRS[client][upstream]
  if (pair === undefined) throw new Error(`no translator from ${client} clients to ${upstream} upstreams`)
  return pair
}

/** The upstream path of a call through `pair` (a Gemini path names the model and whether it streams). */
export function upstreamPath (pair: Pick<TranslatorPair, 'path'>, ctx: TranslateCtx): string {
  return typeof pair.path === 'string' ? pair.path : pair.path(ctx)
}
