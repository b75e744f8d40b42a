import type { ChatCompletion } from 'openai/resources/chat/completions'
import { errorBody, openaiTypeFor } from '../../kernel/errors.js'
import type { Codec } from '../codec.js'
import { isObj } from '../fields.js'
import type { Json, TranslateCtx } from '../types.js'
import { upstreamMessage } from '../upstream-error.js'
import type { ChatRequest } from './request.js'
import { CHAT_FIELDS } from './table.js'
import { chatText } from './text.js'
import { aggregate, errorFrame, replay, watch } from './stream.js'
import { usageFromOpenAI } from './usage.js'

// The Chat Completions codec ('openai'): its reader (request.ts), its field table (table.ts),
// its usage (usage.ts), its stream (stream.ts), and here what a Chat Completions upstream is
// sent by a Chat Completions client and what its errors look like.

/** An upstream's error body as the numeric-code shape promises it: many OpenAI-compatible servers answer `code: null`, or no code at all. */
export function chatError (status: number, body: unknown): Json {
  if (isObj(body) && isObj(body.error)) {
    const e = body.error
    return {
      ...body,
      error: {
        ...e,
        code: e.code ?? status,
        message: typeof e.message === 'string' ? e.message : upstreamMessage(status, body),
        type: typeof e.type === 'string' ? e.type : openaiTypeFor(status)
      }
    }
  }
  return errorBody('openai', { status, message: upstreamMessage(status, body) })
}

export const chatCodec: Codec<ChatRequest, ChatCompletion> = {
  protocol: 'openai',
  path: '/chat/completions',
  fields: CHAT_FIELDS,
  text: chatText,
  structural: new Set(['model', 'messages', 'stream', 'stream_options']),
  own (body: ChatRequest, ctx: TranslateCtx): ChatRequest {
    const out: ChatRequest = { ...body, model: ctx.upstreamModel }
    // the usage chunk is asked for always: the call is billed from it
    if (body.stream === true) out.stream_options = { ...(isObj(body.stream_options) ? body.stream_options : {}), include_usage: true }
    return out
  },
  usage: (body) => usageFromOpenAI(body.usage),
  error: chatError,
  errorFrame,
  watch,
  aggregate: (events, opts) => aggregate(events, opts.usage ?? null),
  replay
}
