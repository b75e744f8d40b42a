import { chatToGemini } from './chat-to-gemini.js'
import { chatToMessages } from './chat-to-messages.js'
import { geminiPassthrough } from './gemini-passthrough.js'
import { geminiToChat } from './gemini-to-chat.js'
import { geminiToMessages } from './gemini-to-messages.js'
import { messagesToChat } from './messages-to-chat.js'
import { messagesToGemini } from './messages-to-gemini.js'
import { messagesPassthrough, openaiPassthrough } from './passthrough.js'
import { responsesPassthrough } from './responses-passthrough.js'
import { responsesToChat } from './responses-to-chat.js'
import { responsesToGemini } from './responses-to-gemini.js'
import { responsesToMessages } from './responses-to-messages.js'
import type { Protocol, TranslateCtx, TranslatorPair } from './types.js'

export type { Json, Protocol, SseEvent, StreamMapper, TranslateCtx, TranslatorPair, Usage } from './types.js'

const PAIRS: Record<Protocol, Partial<Record<Protocol, TranslatorPair>>> = {
  openai: { openai: openaiPassthrough, messages: chatToMessages, gemini: chatToGemini },
  messages: { messages: messagesPassthrough, openai: messagesToChat, gemini: messagesToGemini },
  responses: { responses: responsesPassthrough, openai: responsesToChat, messages: responsesToMessages, gemini: responsesToGemini },
  gemini: { gemini: geminiPassthrough, openai: geminiToChat, messages: geminiToMessages },
  mcp: {}
}

/** The pair for a client protocol in front of an upstream protocol. */
export function pairFor (client: Protocol, upstream: Protocol): TranslatorPair {
  const pair = PAIRS[client][upstream]
  if (pair === undefined) throw new Error(`no translator from ${client} clients to ${upstream} upstreams`)
  return pair
}

/** The upstream path of a call through `pair` (a Gemini path names the model and whether it streams). */
export function upstreamPath (pair: TranslatorPair, ctx: TranslateCtx): string {
  return typeof pair.path === 'string' ? pair.path : pair.path(ctx)
}
