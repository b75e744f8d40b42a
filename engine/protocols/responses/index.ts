import { isObj } from '../../kernel/json.js'
import type { Codec } from '../codec.js'
import { errorFrame } from '../chat/stream.js'
import type { Json } from '../types.js'
import { withServerTools } from '../usage.js'
import { RESPONSES_FIELDS } from './table.js'
import { responsesText } from './text.js'
import { aggregate, replay, responsesToolUses, watch } from './stream.js'
import { responsesError, usageFromResponses } from './writer.js'

// The Responses codec: its reader (request.ts), its field table (table.ts), its writer (the
// response object, its items and its event stream, writer.ts; its usage there too), its stream
// (stream.ts), and here what a provider that serves the Responses API itself is sent by a
// Responses client. An error inside a stream is the numeric-code shape's, as a chat stream's.

export const responsesCodec: Codec<Json, Json> = {
  protocol: 'responses',
  path: '/responses',
  fields: RESPONSES_FIELDS,
  text: responsesText,
  // and what the service itself decides (nothing is stored, no history is kept)
  structural: new Set(['model', 'input', 'instructions', 'stream', 'store', 'include', 'client_metadata', 'stream_options', 'truncation', 'previous_response_id', 'conversation', 'background']),
  own: (body, ctx) => ({ ...body, model: ctx.upstreamModel }),
  usage: (body) => withServerTools(usageFromResponses(body.usage), responsesToolUses(body.output)),
  error (status: number, body: unknown): Json {
    if (isObj((body as Json | null)?.error)) return body as Json
    return responsesError(status, body)
  },
  errorFrame,
  watch,
  aggregate,
  replay
}
