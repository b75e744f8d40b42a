import type { Codec } from '../protocols/codec.js'
import { CODECS } from '../protocols/index.js'
import { geminiPath } from '../protocols/gemini/wire.js'
import type { Json, Protocol, TranslatorPair } from './types.js'

// Same protocol on both sides: the pair is its codec alone. The body goes up as the codec makes
// it ready for its own upstream (the upstream's model name; for a chat stream, the usage chunk
// asked for), and the answer comes back byte for byte: the pair only reads the usage, and the
// stream passes through the codec's watch (which drops the usage-only chunk a chat client did
// not ask for, and can end a broken Responses stream with response.failed).

/**
 * The pair of a protocol in front of its own upstream, from its codec. The body is the client's,
 * read as its protocol's (the route checked it so), and what the codec makes of it is that
 * protocol's body again, an object.
 */
export function ownPair (codec: Codec): TranslatorPair {
  return {
    client: codec.protocol,
    upstream: codec.protocol,
    path: codec.path,
    request: (body, ctx) => ({ body: codec.own(body, ctx) as Json, dropped: [] }),
    response: (body) => ({ body: null, usage: codec.usage(body) }),
    error: codec.error,
    stream: codec.watch
  }
}

export const OWN_PAIRS: Readonly<Record<Protocol, TranslatorPair>> = {
  openai: ownPair(CODECS.openai),
  messages: ownPair(CODECS.messages),
  responses: ownPair(CODECS.responses),
  gemini: ownPair(CODECS.gemini)
}

export const openaiPassthrough = OWN_PAIRS.openai
export const messagesPassthrough = OWN_PAIRS.messages
export const responsesPassthrough = OWN_PAIRS.responses
export const geminiPassthrough = OWN_PAIRS.gemini

/** Messages' count_tokens, to a Messages upstream: the body goes up with the upstream's model name, the count comes back as it is; a count bills nothing. */
export const countTokensPair: TranslatorPair = {
  client: 'messages',
  upstream: 'messages',
  path: '/v1/messages/count_tokens',
  request: (body, ctx) => ({ body: { ...body, model: ctx.upstreamModel }, dropped: [] }),
  response: () => ({ body: null, usage: null }),
  error: CODECS.messages.error,
  stream: () => { throw new Error('count_tokens is never streamed') }
}

/**
 * countTokens sent to a Gemini upstream: the contents alone go as they are; with a system
 * instruction, tools or settings they go as the generateContentRequest they belong to, which
 * names its model. The answer ({totalTokens}) comes back as it is.
 */
export const geminiCountTokensPair: TranslatorPair = {
  client: 'gemini',
  upstream: 'gemini',
  path: (ctx) => geminiPath(ctx.upstreamModel, false, 'countTokens'),
  request (body: Json, ctx) {
    const { model: _model, ...rest } = body
    if (Object.keys(rest).every((k) => k === 'contents')) return { body: rest, dropped: [] }
    const model = ctx.upstreamModel.includes('/') ? ctx.upstreamModel : `models/${ctx.upstreamModel}`
    return { body: { generateContentRequest: { model, ...rest } }, dropped: [] }
  },
  response: () => ({ body: null, usage: null }),
  error: CODECS.gemini.error,
  stream: () => { throw new Error('countTokens is never streamed') }
}
