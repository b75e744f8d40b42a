import { errorBody, geminiStatusFor } from '../../kernel/errors.js'
import type { Codec } from '../codec.js'
import { isObj } from '../fields.js'
import type { Json, Usage } from '../types.js'
import { upstreamMessage } from '../upstream-error.js'
import { withServerTools } from '../usage.js'
import { GEMINI_FIELDS } from './table.js'
import { geminiText } from './text.js'
import { aggregate, errorFrame, replay, watch } from './stream.js'
import type { GeminiRequest, GeminiResponse } from './types.js'
import { geminiAnswerToolUses, geminiUpstreamPath, googleError, usageFromGemini } from './wire.js'

// The Gemini codec (generateContent, Google's REST shape, typed in types.ts): its reader
// (request.ts), its field table (table.ts), the upstream body built from another protocol's
// conversation and an answer's candidates read back (body.ts), the answer written for a Gemini
// client (writer.ts), paths, usage, finish reasons, schemas and thought signatures (wire.ts),
// its stream (stream.ts), and here what a Gemini upstream is sent by a Gemini client and what
// its errors look like.

/** Google's error body as its shape promises it (code, message, status), what Google said kept. */
export function geminiUpstreamError (status: number, raw: unknown): Json {
  const body = googleError(raw)
  if (isObj(body) && isObj(body.error)) {
    const e = body.error
    return {
      ...body,
      error: {
        ...e,
        code: typeof e.code === 'number' ? e.code : status,
        message: typeof e.message === 'string' ? e.message : upstreamMessage(status, body),
        status: typeof e.status === 'string' ? e.status : geminiStatusFor(status)
      }
    }
  }
  return errorBody('gemini', { status, message: upstreamMessage(status, body) })
}

/** The usage of a whole answer; a stream read whole (no alt=sse) is an array of chunks, read as the stream it was. */
function usage (body: GeminiResponse | GeminiResponse[]): Usage | null {
  if (Array.isArray(body)) {
    const mapper = watch()
    for (const c of body) mapper.push({ data: JSON.stringify(c) })
    return mapper.usage()
  }
  const u = body.usageMetadata !== undefined ? usageFromGemini(body.usageMetadata) : null
  return withServerTools(u, geminiAnswerToolUses(body.candidates))
}

export const geminiCodec: Codec<GeminiRequest, GeminiResponse> = {
  protocol: 'gemini',
  path: geminiUpstreamPath,
  fields: GEMINI_FIELDS,
  text: geminiText,
  // the settings inside generationConfig and toolConfig are mapped or dropped (and reported) by the pairs
  structural: new Set(['model', 'contents', 'systemInstruction', 'generationConfig', 'toolConfig', 'safetySettings', 'cachedContent']),
  own (body) {
    if (body.model === undefined) return body
    // the model is the path's: a catalog id in the body would only be refused upstream
    const { model: _model, ...rest } = body
    return rest
  },
  usage,
  error: geminiUpstreamError,
  errorFrame,
  watch,
  aggregate,
  replay
}
