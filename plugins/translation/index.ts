import { chatToMessages } from './chat-to-messages.js'
import { messagesToChat } from './messages-to-chat.js'
import { messagesPassthrough, openaiPassthrough } from './passthrough.js'
import { responsesPassthrough } from './responses-passthrough.js'
import { responsesToChat } from './responses-to-chat.js'
import { responsesToMessages } from './responses-to-messages.js'
import type { Protocol, TranslatorPair } from './types.js'

export type { Json, Protocol, SseEvent, StreamMapper, TranslateCtx, TranslatorPair, Usage } from './types.js'

const PAIRS: Record<Protocol, Partial<Record<Protocol, TranslatorPair>>> = {
  openai: { openai: openaiPassthrough, messages: chatToMessages },
  messages: { messages: messagesPassthrough, openai: messagesToChat },
  responses: { responses: responsesPassthrough, openai: responsesToChat, messages: responsesToMessages }
}

/** The pair for a client protocol in front of an upstream protocol. */
export function pairFor (client: Protocol, upstream: Protocol): TranslatorPair {
  const pair = PAIRS[client][upstream]
  if (pair === undefined) throw new Error(`no translator from ${client} clients to ${upstream} upstreams`)
  return pair
}
