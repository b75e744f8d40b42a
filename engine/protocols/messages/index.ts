import type { Message } from '@anthropic-ai/sdk/resources/messages'
import { errorBody, messagesTypeFor } from '../../kernel/errors.js'
import type { Codec } from '../codec.js'
import { isObj } from '../fields.js'
import type { Json } from '../types.js'
import { upstreamMessage } from '../upstream-error.js'
import type { MessagesRequest } from './request.js'
import { MESSAGES_FIELDS } from './table.js'
import { messagesText } from './text.js'
import { aggregate, errorFrame, replay, watch } from './stream.js'
import { usageFromMessages } from './usage.js'

// The Messages codec: its reader (request.ts), its field table (table.ts), its usage
// (usage.ts), its stream (stream.ts), and here what a Messages upstream is sent by a Messages
// client and what its errors look like.

/** An upstream's error body in the Messages shape, its own type and message kept. */
export function messagesError (status: number, body: unknown): Json {
  if (isObj(body) && body.type === 'error' && isObj(body.error)) {
    const e = body.error
    if (typeof e.type === 'string' && typeof e.message === 'string') return body
    return { ...body, error: { ...e, type: typeof e.type === 'string' ? e.type : messagesTypeFor(status), message: upstreamMessage(status, body) } }
  }
  return errorBody('messages', { status, message: upstreamMessage(status, body) })
}

export const messagesCodec: Codec<MessagesRequest, Message> = {
  protocol: 'messages',
  path: '/v1/messages',
  fields: MESSAGES_FIELDS,
  text: messagesText,
  structural: new Set(['model', 'messages', 'max_tokens', 'system', 'stream']),
  own: (body, ctx) => ({ ...body, model: ctx.upstreamModel }),
  usage: (body) => usageFromMessages(body.usage),
  error: messagesError,
  errorFrame,
  watch,
  aggregate,
  replay: (body, ctx, split) => replay(body, ctx, split)
}
