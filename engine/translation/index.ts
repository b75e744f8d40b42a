import { chatToGemini } from './chat-to-gemini.js'
import { embeddingsPassthrough, geminiEmbedPassthrough } from './embeddings-passthrough.js'
import { embeddingsToGemini } from './embeddings-to-gemini.js'
import { geminiEmbedToEmbeddings } from './gemini-embed-to-embeddings.js'
import { imagesPassthrough } from './images-passthrough.js'
import { imagesToGemini } from './images-to-gemini.js'
import { chatToMessages } from './chat-to-messages.js'
import { geminiToChat } from './gemini-to-chat.js'
import { geminiToMessages } from './gemini-to-messages.js'
import { messagesToChat } from './messages-to-chat.js'
import { messagesToGemini } from './messages-to-gemini.js'
import { OWN_PAIRS } from './passthrough.js'
import { responsesToChat } from './responses-to-chat.js'
import { responsesToGemini } from './responses-to-gemini.js'
import { responsesToMessages } from './responses-to-messages.js'
import { CODECS } from '../protocols/index.js'
import { compose, type Bridge } from './compose.js'
import type { Protocol, TranslateCtx, TranslatorPair, WholePair } from './types.js'

export type { Bridge } from './compose.js'
export type { Json, Protocol, SseEvent, StreamMapper, TranslateCtx, TranslatorPair, Usage, WholePair } from './types.js'

/**
 * The translation table. A direct pair for each (client protocol, upstream protocol) written by
 * hand; a same-protocol pair is the protocol's codec alone (passthrough.ts).
 */
const PAIRS: Record<Protocol, Partial<Record<Protocol, TranslatorPair>>> = {
  openai: { openai: OWN_PAIRS.openai, messages: chatToMessages, gemini: chatToGemini },
  messages: { messages: OWN_PAIRS.messages, openai: messagesToChat, gemini: messagesToGemini },
  responses: { responses: OWN_PAIRS.responses, openai: responsesToChat, messages: responsesToMessages, gemini: responsesToGemini },
  gemini: { gemini: OWN_PAIRS.gemini, openai: geminiToChat, messages: geminiToMessages }
}

/**
 * The upstream protocols spoken through another's shape: each one codec (a Bridge, compose.ts)
 * from the protocol it goes `via`. Every client protocol that has a pair toward `via` reaches
 * it through that pair and the bridge, with no pair of its own. None ships yet; AWS Bedrock's
 * Converse API (via Messages) is the first.
 */
const BRIDGES: Partial<Record<Protocol, Bridge>> = {}

const composed = new Map<string, TranslatorPair>()

/** The pair of a client in front of a bridged upstream: the client's pair toward the bridge's `via`, then the bridge. */
function bridged (client: Protocol, upstream: Protocol): TranslatorPair | undefined {
  const bridge = BRIDGES[upstream]
  const first = bridge === undefined ? undefined : PAIRS[client][bridge.via]
  if (bridge === undefined || first === undefined) return undefined
  const key = `${client}>${upstream}`
  let pair = composed.get(key)
  if (pair === undefined) {
    pair = compose(first, bridge, CODECS[client].fields)
    composed.set(key, pair)
  }
  return pair
}

/** Every upstream protocol a client protocol reaches, through a pair of its own or a bridge. */
export function upstreamsOf (client: Protocol): Protocol[] {
  const direct = Object.keys(PAIRS[client]) as Protocol[]
  const viaBridge = (Object.keys(BRIDGES) as Protocol[]).filter((u) => !direct.includes(u) && bridged(client, u) !== undefined)
  return [...direct, ...viaBridge]
}

/** The calls answered whole, by what they ask for: embeddings (OpenAI's and Google's shapes) and images (OpenAI's). */
export type WholeKind = 'embeddings' | 'images'

const WHOLE_PAIRS: Record<WholeKind, Partial<Record<Protocol, Partial<Record<Protocol, WholePair>>>>> = {
  embeddings: {
    openai: { openai: embeddingsPassthrough, gemini: embeddingsToGemini },
    gemini: { gemini: geminiEmbedPassthrough, openai: geminiEmbedToEmbeddings }
  },
  images: {
    openai: { openai: imagesPassthrough, gemini: imagesToGemini }
  }
}

/** The pair of a call answered whole; undefined where the upstream protocol has no such call (a Messages upstream). */
export function wholePairFor (kind: WholeKind, client: Protocol, upstream: Protocol): WholePair | undefined {
  return WHOLE_PAIRS[kind][client]?.[upstream]
}

/** The pair for a client protocol in front of an upstream protocol; undefined where there is none (a Chat client in front of a native Responses upstream). */
export function pairOf (client: Protocol, upstream: Protocol): TranslatorPair | undefined {
  return PAIRS[client][upstream] ?? bridged(client, upstream)
}

/** The pair for a client protocol in front of an upstream protocol. */
export function pairFor (client: Protocol, upstream: Protocol): TranslatorPair {
  const pair = pairOf(client, upstream)
  if (pair === undefined) throw new Error(`no translator from ${client} clients to ${upstream} upstreams`)
  return pair
}

/** The upstream path of a call through `pair` (a Gemini path names the model and whether it streams). */
export function upstreamPath (pair: Pick<TranslatorPair, 'path'>, ctx: TranslateCtx): string {
  return typeof pair.path === 'string' ? pair.path : pair.path(ctx)
}
