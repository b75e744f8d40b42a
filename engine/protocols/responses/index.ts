import { isObj } from '../../kernel/json.js'
import type { Codec } from '../codec.js'
import { errorFrame } from '../chat/stream.js'
import type { Json } from '../types.js'
import { withServerTools } from '../usage.js'
import type { ResponsesRequest } from './request.js'
import { RESPONSES_FIELDS } from './table.js'
import { responsesText } from './text.js'
import { aggregate, replay, responsesToolUses, watch } from './stream.js'
import { responsesError, usageFromResponses, type ResponsesAnswer } from './writer.js'

// The Responses codec: its reader (request.ts), its field table (table.ts), its writer (the
// response object, its items and its event stream, writer.ts; its usage there too), its stream
// (stream.ts), and here what a provider that serves the Responses API itself is sent by a
// Responses client. An error inside a stream is the numeric-code shape's, as a chat stream's.

export type { ResponsesRequest } from './request.js'
export type { ResponsesAnswer, ResponsesStreamEvent } from './writer.js'

export const responsesCodec: Codec<ResponsesRequest, ResponsesAnswer> = {
  protocol: 'responses',
  path: '/responses',
  fields: RESPONSES_FIELDS,
  text: responsesText,
  // and what the service itself decides (nothing is stored, no history is kept)
  structural: new Set(['model', 'input', 'instructions', 'stream', 'store', 'include', 'client_metadata', 'stream_options', 'truncation', 'previous_response_id', 'conversation', 'background']),
  own: (body, ctx) => ({ ...body, model: ctx.upstreamModel }),
  usage: (body) => withServerTools(usageFromResponses(body.usage), responsesToolUses(body.output)),
  error (status: number, body: unknown): Json {
    if (isObj(body) && isObj(body.error)) return body
    return responsesError(status, body)
  },
  errorFrame,
  watch,
  aggregate,
  replay
}
