import { errorBody, geminiStatusFor } from '../kernel/errors.js'
import { isObj } from '../protocols/fields.js'
import { geminiAnswerToolUses, geminiPath, geminiToolUses, geminiUpstreamPath, googleError, usageFromGemini } from '../protocols/gemini/wire.js'
import { withServerTools } from './usage.js'
import { upstreamMessage } from './passthrough.js'
import type { Json, SseEvent, StreamMapper, TranslatorPair, Usage } from './types.js'

// A Gemini client in front of a Gemini upstream: the model's name goes in the path, the body
// goes up as it is and the answer comes back byte for byte; the pair only reads the usage
// (every chunk carries it, the last one whole) and sees the answer end on its finishReason.

function parse (data: string): Json | null {
  try {
    const v = JSON.parse(data) as unknown
    return isObj(v) ? v : null
  } catch {
    return null
  }
}

function stream (): StreamMapper {
  let usage: Usage | null = null
  // per candidate, the tools Google ran for it (each chunk's metadata is the candidate's so far)
  const tools = new Map<number, Record<string, number>>()
  const code = new Map<number, number>()
  // per candidate, whether it has finished
  const ended = new Map<unknown, boolean>()
  const text: string[] = []
  return {
    push (ev: SseEvent): SseEvent[] {
      const chunk = parse(ev.data)
      if (chunk === null) return [ev]
      if (chunk.usageMetadata !== undefined) usage = usageFromGemini(chunk.usageMetadata) ?? usage
      for (const [i, c] of (Array.isArray(chunk.candidates) ? chunk.candidates : []).entries()) {
        if (!isObj(c)) continue
        const index = typeof c.index === 'number' ? c.index : i
        const ran = geminiToolUses({ groundingMetadata: c.groundingMetadata, urlContextMetadata: c.urlContextMetadata })
        if (ran !== null) tools.set(index, { ...tools.get(index), ...ran })
        for (const p of isObj(c.content) && Array.isArray(c.content.parts) ? c.content.parts : []) if (isObj(p) && isObj(p.executableCode)) code.set(index, (code.get(index) ?? 0) + 1)
        if (!ended.get(index)) ended.set(index, typeof c.finishReason === 'string' && c.finishReason !== '' && c.finishReason !== 'FINISH_REASON_UNSPECIFIED')
        for (const p of isObj(c.content) && Array.isArray(c.content.parts) ? c.content.parts : []) {
          if (!isObj(p)) continue
          if (typeof p.text === 'string') text.push(p.text)
          else if (isObj(p.functionCall)) text.push(JSON.stringify(p.functionCall.args ?? {}))
        }
      }
      // a prompt refused outright is a whole answer too
      if (isObj(chunk.promptFeedback) && typeof chunk.promptFeedback.blockReason === 'string' && ended.size === 0) ended.set(0, true)
      return [ev]
    },
    end: () => [],
    usage: () => {
      if (tools.size === 0 && code.size === 0) return usage
      const sum: Record<string, number> = {}
      for (const t of tools.values()) for (const k in t) sum[k] = (sum[k] ?? 0) + (t[k] as number)
      for (const c of code.values()) sum.code_execution = (sum.code_execution ?? 0) + c
      return withServerTools(usage, sum)
    },
    relayedText: () => text.join(''),
    finished: () => ended.size > 0 && [...ended.values()].every(Boolean)
  }
}

export const geminiPassthrough: TranslatorPair = {
  client: 'gemini',
  upstream: 'gemini',
  path: geminiUpstreamPath,
  request (body: Json) {
    if (body.model === undefined) return { body, dropped: [] }
    // the model is the path's: a catalog id in the body would only be refused upstream
    const { model: _model, ...rest } = body
    return { body: rest, dropped: [] }
  },
  response (body: Json) {
    // a stream read whole (no alt=sse) is an array of chunks: the last count is the call's
    if (Array.isArray(body)) {
      // read as the stream it was, the tools Google ran included
      const mapper = stream()
      for (const c of body as unknown[]) mapper.push({ data: JSON.stringify(c) })
      return { body: null, usage: mapper.usage() }
    }
    const usage = body.usageMetadata !== undefined ? usageFromGemini(body.usageMetadata) : null
    return { body: null, usage: withServerTools(usage, geminiAnswerToolUses(body.candidates)) }
  },
  error (status: number, raw: unknown): Json {
    const body = googleError(raw)
    // Google's own body goes back as it is, with what its shape promises filled in
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
  },
  stream
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
  error: geminiPassthrough.error,
  stream: () => { throw new Error('countTokens is never streamed') }
}
