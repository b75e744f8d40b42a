import type { Message } from '@anthropic-ai/sdk/resources/messages'
import { isObj, type Json } from '../../kernel/json.js'
import type { SseEvent, StreamMapper, TranslateCtx, TranslatedResponse } from '../../translation/types.js'
import { messagesError, readAnswer, type MessagesErrorBody } from './answer.js'
import { converseRequest } from './request.js'
import { ConverseToMessages } from './stream.js'
import type { ConverseAnswer, ConverseBody } from './types.js'

export { EventStreamParser, converseFrame, invokeFrame } from './stream.js'
export { isAnthropicModel } from './request.js'
export { errorName, messagesError, readTokenUsage, usageOf } from './answer.js'
export type { ConverseAnswer, ConverseBody, ConverseStreamEvents } from './types.js'

/**
 * A codec of an upstream protocol reached through the Messages shape: Messages requests written
 * in its wire format, its answers, stream frames and errors read back as Messages ones. A client
 * protocol's pair to Messages composed with it (engine/translation/compose.ts) is that client's
 * pair to this upstream. `Req` is the upstream's request body and `Res` its answer, as its SDK
 * types them.
 */
export interface ViaMessagesCodec<Req extends Json = Json, Res = unknown> {
  /** The upstream path of a call (below base_url). */
  path: (ctx: TranslateCtx) => string
  /** A Messages request (read strictly: a Messages client's body comes as it was sent) → the upstream's, and what it could not carry. */
  request: (messages: Json, ctx: TranslateCtx) => { body: Req, dropped: string[] }
  /** An answer → the Messages answer, with the usage read from the upstream's own counts. */
  response: (body: Res, ctx: TranslateCtx) => { body: Message, usage: TranslatedResponse['usage'] }
  /** An error answer → a Messages error body. */
  error: (status: number, body: unknown) => MessagesErrorBody
  /** The stream's frames (as the upstream's framing reads them) → Messages frames. */
  stream: (ctx: TranslateCtx) => Pick<StreamMapper, 'push' | 'end' | 'usage' | 'finished'> & { excepted: () => boolean }
}

/** Bedrock's model ids hold `:` and `/` (inference profile ARNs): one path segment, percent-encoded. */
export const modelSegment = (model: string): string => encodeURIComponent(model)

export const converseCodec: ViaMessagesCodec<ConverseBody, ConverseAnswer> = {
  path: (ctx) => `/model/${modelSegment(ctx.upstreamModel)}/${ctx.stream ? 'converse-stream' : 'converse'}`,
  request: converseRequest,
  response (body, ctx) {
    const { message, usage } = readAnswer(body, ctx)
    return { body: message, usage }
  },
  error: (status, body) => messagesError(status, body, isObj(body) && typeof body.__type === 'string' ? body.__type : undefined),
  stream (ctx) {
    const s = new ConverseToMessages(ctx)
    return {
      push: (ev: SseEvent) => s.push(ev),
      end: () => s.end(),
      usage: () => s.usage(),
      finished: () => s.finished(),
      excepted: () => s.excepted
    }
  }
}
