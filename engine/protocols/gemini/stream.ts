import { errorBody, type ErrorBodyInput } from '../../kernel/errors.js'
import { isObj } from '../fields.js'
import { frame } from '../sse.js'
import { DONE, parsed, pieces, type StreamEventLike } from '../stream-events.js'
import type { SseEvent, StreamMapper, Usage } from '../types.js'
import { withServerTools } from '../usage.js'
import { geminiAnswer, type GeminiCandidate, type GeminiChunk, type GeminiContent, type GeminiPart, type GeminiResponse } from './types.js'
import { finishReasonOf, geminiToolUses, objectsIn, usageFromGemini } from './wire.js'

// A Gemini stream (`alt=sse`): `data:` frames, each a GenerateContentResponse with the new parts
// only and the usage so far; the last with every candidate's finishReason; no [DONE]. Watched
// as it passes (the usage of the last chunk, the tools Google ran, the end on finishReason),
// folded into the whole answer, replayed from one, and an error inside it.

function parse (data: string): GeminiChunk | null {
  try {
    const v = JSON.parse(data) as unknown
    return isObj(v) ? geminiAnswer(v) : null
  } catch {
    return null
  }
}

export function watch (): StreamMapper {
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
        const parts = isObj(c.content) ? objectsIn(c.content.parts) : []
        for (const p of parts) if (isObj(p.executableCode)) code.set(index, (code.get(index) ?? 0) + 1)
        if (!ended.get(index)) ended.set(index, finishReasonOf(c.finishReason) !== null)
        for (const p of parts) {
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

/** An error inside a stream, as Google writes it: a data frame with an `error` object. */
export const errorFrame = (e: ErrorBodyInput): SseEvent => frame(errorBody('gemini', e))

// The top-level fields of an answer a stream carries beside its candidates (the last chunk's kept).
const GEMINI_TOP = ['promptFeedback', 'usageMetadata', 'modelVersion', 'responseId', 'createTime'] as const

/** `key` of `from` into `to`, when `from` has it. */
function copy<K extends keyof GeminiResponse> (to: GeminiResponse, from: GeminiResponse, key: K): void {
  if (from[key] !== undefined) to[key] = from[key]
}

/** A Gemini stream folded into its GenerateContentResponse. */
export function aggregate (events: Iterable<StreamEventLike>): GeminiResponse | null {
  const candidates = new Map<number, { role: string, parts: GeminiPart[], rest: Omit<GeminiCandidate, 'content' | 'index'> }>()
  const top: GeminiResponse = {}
  let finished = false
  for (const ev of events) {
    const json = parsed(ev)
    if (json === DONE || json === null) continue
    const data = geminiAnswer(json)
    if (data.error !== undefined) return null
    objectsIn(data.candidates).forEach((c, i) => {
      const index = typeof c.index === 'number' ? c.index : i
      let acc = candidates.get(index)
      if (acc === undefined) {
        acc = { role: 'model', parts: [], rest: {} }
        candidates.set(index, acc)
      }
      const { content: raw, index: _index, ...rest } = c
      const content: GeminiContent = isObj(raw) ? raw : {}
      if (typeof content.role === 'string') acc.role = content.role
      for (const part of objectsIn(content.parts)) {
        const last = acc.parts[acc.parts.length - 1]
        // a piece of text continues the text part before it (a thought continues a thought)
        const piece = typeof part.text === 'string' && Object.keys(part).every((k) => k === 'text' || k === 'thought')
        if (piece && last !== undefined && typeof last.text === 'string' && (last.thought === true) === (part.thought === true)) last.text += part.text as string
        else acc.parts.push({ ...part })
      }
      Object.assign(acc.rest, rest)
      if (c.finishReason !== undefined) finished = true
    })
    for (const k of GEMINI_TOP) copy(top, data, k)
  }
  if (!finished) return null
  return {
    candidates: [...candidates.entries()].sort(([a], [b]) => a - b).map(([index, c]) => ({ content: { role: c.role, parts: c.parts }, ...c.rest, index })),
    ...top
  }
}

/**
 * A GenerateContentResponse as Gemini streams it: a chunk per piece of text (a part's other
 * fields, its signature, on the first), other parts whole, then a chunk with every candidate's
 * finishReason and the usage.
 */
export function replay (body: GeminiResponse): SseEvent[] {
  const ids: GeminiResponse = {}
  copy(ids, body, 'modelVersion')
  copy(ids, body, 'responseId')
  const out: SseEvent[] = []
  const candidates = objectsIn(body.candidates)
  candidates.forEach((c, i) => {
    const index = typeof c.index === 'number' ? c.index : i
    const content: GeminiContent = isObj(c.content) ? c.content : {}
    for (const part of objectsIn(content.parts)) {
      const split: GeminiPart[] = typeof part.text === 'string' && part.text !== ''
        ? pieces(part.text).map((text, k) => k === 0 ? { ...part, text } : part.thought === true ? { text, thought: true } : { text })
        : [part]
      for (const p of split) out.push(frame({ candidates: [{ content: { role: 'model', parts: [p] }, index }], ...ids }))
    }
  })
  const last: GeminiResponse = {
    candidates: candidates.map((c, i) => {
      const { content: _content, ...rest } = c
      return { content: { role: 'model', parts: [] }, ...rest, index: typeof c.index === 'number' ? c.index : i }
    })
  }
  copy(last, body, 'promptFeedback')
  copy(last, body, 'usageMetadata')
  out.push(frame({ ...last, ...ids }))
  return out
}
