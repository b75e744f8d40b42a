import type { Candidate, GenerateContentResponse } from '@google/genai'
import { isObj } from '../fields.js'
import { clone, type CodecText, type Rewrite, type StreamText, type TextDelta } from '../text.js'
import type { Json } from '../types.js'

// The texts of Gemini (engine/protocols/text.ts): the system instruction and the contents' text
// parts (thoughts aside) and a function response's text output, in a generateContent request or
// an embeddings one; a candidate's parts in an answer and in each chunk of a stream, a chunk's
// text being one delta of its candidate.

/** Rewrites, in place, the text parts of Gemini contents (not thoughts), and the text output of function responses. */
function mapParts (parts: unknown, fn: Rewrite): void {
  for (const part of Array.isArray(parts) ? parts : []) {
    if (!isObj(part) || part.thought === true) continue
    if (typeof part.text === 'string') part.text = fn(part.text)
    else if (isObj(part.functionResponse) && isObj(part.functionResponse.response) && typeof part.functionResponse.response.output === 'string') {
      part.functionResponse.response.output = fn(part.functionResponse.response.output)
    }
  }
}

function request (body: Json, fn: Rewrite, endpoint?: string): void {
  if (endpoint === 'embeddings') {
    for (const r of Array.isArray(body.requests) ? body.requests : [body]) if (isObj(r) && isObj(r.content)) mapParts(r.content.parts, fn)
    return
  }
  if (typeof body.systemInstruction === 'string') body.systemInstruction = fn(body.systemInstruction)
  else if (isObj(body.systemInstruction)) mapParts(body.systemInstruction.parts, fn)
  for (const c of Array.isArray(body.contents) ? body.contents : []) if (isObj(c)) mapParts(c.parts, fn)
}

/** An answer or a chunk's candidates as the SDK types them; not trusted for all that, so each field read is checked first. */
const candidatesOf = (data: Json): Candidate[] => {
  const candidates = (data as Pick<GenerateContentResponse, 'candidates'>).candidates
  return Array.isArray(candidates) ? candidates : []
}

function answer (body: Json, fn: Rewrite): void {
  for (const c of candidatesOf(body)) if (isObj(c) && isObj(c.content)) mapParts(c.content.parts, fn)
}

/** A candidate's text parts in one chunk (thoughts aside). */
function texts (c: Json): string[] {
  const parts = isObj(c.content) && Array.isArray(c.content.parts) ? c.content.parts : []
  return parts.filter((p): p is Json => isObj(p) && p.thought !== true && typeof p.text === 'string').map((p) => p.text as string)
}

const candidateIndex = (c: Json): string => `c${String(c.index ?? 0)}`

const stream: StreamText = {
  deltas (ev) {
    const out: TextDelta[] = []
    for (const c of candidatesOf(ev.data)) {
      if (!isObj(c)) continue
      const text = texts(c).join('')
      if (text !== '') out.push({ block: candidateIndex(c), text })
    }
    return out
  },
  withDeltas (ev, blocks) {
    const copy = clone(ev)
    for (const c of candidatesOf(copy.data)) {
      if (!isObj(c) || !isObj(c.content) || !Array.isArray(c.content.parts)) continue
      // the candidate's new text goes in its first text part; its other text parts are emptied
      let text: string | undefined = blocks.get(candidateIndex(c)) ?? ''
      for (const p of c.content.parts) {
        if (!isObj(p) || p.thought === true || typeof p.text !== 'string') continue
        p.text = text ?? ''
        text = undefined
      }
    }
    return copy
  },
  textEvent (like, block, text) {
    const { candidates: _candidates, usageMetadata: _usage, ...rest } = like.data
    const candidate: Candidate = { content: { role: 'model', parts: [{ text }] }, index: Number(block.slice(1)) }
    return { ...like, data: { ...rest, candidates: [candidate] } }
  },
  closes (ev) {
    const out: string[] = []
    for (const c of candidatesOf(ev.data)) {
      if (isObj(c) && typeof c.finishReason === 'string' && c.finishReason !== '') out.push(candidateIndex(c))
    }
    return ev.data.error !== undefined ? 'all' : out
  },
  mapWholeTexts () {}
}

export const geminiText: CodecText = { request, answer, stream }
