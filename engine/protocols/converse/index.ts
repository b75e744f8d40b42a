import { isObj, type Json } from '../../kernel/json.js'
import type { SseEvent, StreamMapper, TranslateCtx, TranslatedRequest, TranslatedResponse } from '../../translation/types.js'
import { messagesError, readAnswer } from './answer.js'
import { converseRequest } from './request.js'
import { ConverseToMessages } from './stream.js'

export { EventStreamParser, converseFrame, invokeFrame } from './stream.js'
export { isAnthropicModel } from './request.js'
export { errorName, messagesError, readTokenUsage, usageOf } from './answer.js'

/**
 * A codec of an upstream protocol reached through the Messages shape: Messages requests written
 * in its wire format, its answers, stream frames and errors read back as Messages ones. A client
 * protocol's pair to Messages composed with it (engine/translation/compose.ts) is that client's
 * pair to this upstream.
 */
export interface ViaMessagesCodec {
  /** The upstream path of a call (below base_url). */
  path: (ctx: TranslateCtx) => string
  request: (messages: Json, ctx: TranslateCtx) => TranslatedRequest
  /** An answer → the Messages answer, with the usage read from the upstream's own counts. */
  response: (body: Json, ctx: TranslateCtx) => { body: Json, usage: TranslatedResponse['usage'] }
  /** An error answer → a Messages error body. */
  error: (status: number, body: unknown) => Json
  /** The stream's frames (as the upstream's framing reads them) → Messages frames. */
  stream: (ctx: TranslateCtx) => Pick<StreamMapper, 'push' | 'end' | 'usage' | 'finished'> & { excepted: () => boolean }
}

/** Bedrock's model ids hold `:` and `/` (inference profile ARNs): one path segment, percent-encoded. */
export const modelSegment = (model: string): string => encodeURIComponent(model)

export const converseCodec: ViaMessagesCodec = {
  path: (ctx) => `/model/${modelSegment(ctx.upstreamModel)}/${ctx.stream ? 'converse-stream' : 'converse'}`,
  request: converseRequest,
  response (body, ctx) {
    const { message, usage } = readAnswer(body, ctx)
    return { body: message as unknown as Json, usage }
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
