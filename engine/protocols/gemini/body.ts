import { InvalidField } from '../../kernel/errors.js'
import { dataUrl } from '../content.js'
import { isObj } from '../fields.js'
import { finishReasonOf, FOREIGN_SIGNATURE, objectsIn, splitSignature, withSignature } from './wire.js'
import type { TranslateCtx } from '../types.js'
import type { GeminiChunk, GeminiContent, GeminiFunctionDeclaration, GeminiPart, GeminiResponse, GeminiTool, GeminiToolConfig } from './types.js'

// The Gemini side of the pairs in front of a Gemini upstream: building `contents`, tools and
// toolConfig from another protocol's conversation, and reading the candidates of an answer or
// of a stream chunk back.

/**
 * Reasoning efforts as Gemini thinking budgets: the table Google's own OpenAI-compatible endpoint
 * uses (`none` to `high`), then the efforts above it (`xhigh`, and the Messages API's `max`) at
 * the largest budget a Gemini model takes. Gemini's own thinkingLevel names read the same way.
 */
export const THINKING_BUDGET: ReadonlyMap<string, number> = new Map([['none', 0], ['minimal', 512], ['low', 1024], ['medium', 8192], ['high', 24576], ['xhigh', 32768], ['max', 32768]])

type Role = 'user' | 'model'
/** A turn of `contents`, as the pairs build one. */
export interface Turn { role: Role, parts: GeminiPart[] }

/** A function's arguments, or its result's `response`: a JSON object. */
type Args = Record<string, unknown>

/**
 * The conversation as Gemini takes it: turns of one role merged (the function responses of
 * parallel calls are one user turn), function responses named after the call they answer
 * (Gemini pairs them by name and order, the other protocols by id), and each call's thought
 * signature put back on its part from the id that carried it.
 */
export class ContentsBuilder {
  readonly contents: Turn[] = []
  private readonly names = new Map<string, string>()
  // the order of the calls, and the call each function response answers
  private readonly positions = new Map<string, number>()
  private readonly answers = new Map<GeminiPart, string>()

  push (role: Role, parts: GeminiPart[]): void {
    if (parts.length === 0) return
    const last = this.contents[this.contents.length - 1]
    if (last?.role === role) last.parts.push(...parts)
    else this.contents.push({ role, parts: [...parts] })
  }

  /** A functionCall part for a call the client names by `id`. */
  call (id: string, name: string, args: Args): GeminiPart {
    this.names.set(id, name)
    this.positions.set(id, this.positions.size)
    const { signature } = splitSignature(id)
    const part: GeminiPart = { functionCall: { name, args } }
    if (signature !== undefined) part.thoughtSignature = signature
    return part
  }

  /** A functionResponse part for the result of the call `id`; `field` names the id in the client's request. */
  result (id: string, field: string, response: Args): GeminiPart {
    const name = this.names.get(id)
    if (name === undefined) throw new InvalidField({ field, reason: 'must be the id of a tool call made earlier in the conversation' })
    const part: GeminiPart = { functionResponse: { name, response } }
    this.answers.set(part, id)
    return part
  }

  /**
   * The contents: function responses in the order of their calls (Gemini pairs them by name and
   * order), and Google's placeholder signature on the first function call of every step of the
   * current turn (after the last user text) that has none: calls made by another model.
   */
  build (): Turn[] {
    for (const c of this.contents) {
      if (c.role !== 'user') continue
      const at = (p: GeminiPart): number => this.positions.get(this.answers.get(p) ?? '') ?? 0
      const responses = c.parts.filter((p) => this.answers.has(p)).sort((a, b) => at(a) - at(b))
      c.parts = c.parts.map((p) => this.answers.has(p) ? responses.shift() as GeminiPart : p)
    }
    let start = 0
    for (let i = this.contents.length - 1; i >= 0; i--) {
      const c = this.contents[i] as Turn
      if (c.role === 'user' && c.parts.some((p) => typeof p.text === 'string')) { start = i + 1; break }
    }
    for (const c of this.contents.slice(start)) {
      const first = c.role === 'model' ? c.parts.find((p) => p.functionCall !== undefined) : undefined
      if (first !== undefined && first.thoughtSignature === undefined) first.thoughtSignature = FOREIGN_SIGNATURE
    }
    return this.contents
  }
}

/** A tool the client declared, in JSON Schema. */
export interface ToolSpec { name: string, description?: string, parameters?: unknown }

/** Function tools → Gemini's tools: one entry holding every declaration, schemas as JSON Schema. */
export function geminiTools (tools: ToolSpec[]): GeminiTool[] {
  if (tools.length === 0) return []
  return [{
    functionDeclarations: tools.map((t) => {
      const d: GeminiFunctionDeclaration = { name: t.name }
      if (t.description !== undefined) d.description = t.description
      if (t.parameters !== undefined && t.parameters !== null) d.parametersJsonSchema = t.parameters
      return d
    })
  }]
}

export type ToolMode = 'AUTO' | 'ANY' | 'NONE'

export function geminiToolConfig (mode: ToolMode, allowed?: string[]): Required<Pick<GeminiToolConfig, 'functionCallingConfig'>> {
  const config: NonNullable<GeminiToolConfig['functionCallingConfig']> = { mode }
  if (allowed !== undefined && allowed.length > 0) config.allowedFunctionNames = allowed
  return { functionCallingConfig: config }
}

/** A data: URI (of an image, a PDF…) as inlineData; null for any other URL. */
export function inlineData (url: string): GeminiPart | null {
  const inline = dataUrl(url)
  return inline === null ? null : { inlineData: { mimeType: inline.mediaType, data: inline.data } }
}

const EXTENSIONS = new Map([
  ['png', 'image/png'], ['jpg', 'image/jpeg'], ['jpeg', 'image/jpeg'], ['gif', 'image/gif'], ['webp', 'image/webp'], ['heic', 'image/heic'], ['heif', 'image/heif'],
  ['pdf', 'application/pdf'], ['mp4', 'video/mp4'], ['mov', 'video/quicktime'], ['webm', 'video/webm'], ['mp3', 'audio/mp3'], ['wav', 'audio/wav']
])

/** An http(s) URL as fileData, its MIME type from its extension when it has a known one. */
export function fileData (url: string): Required<Pick<GeminiPart, 'fileData'>> {
  let ext: string | undefined
  try { ext = /\.([a-z0-9]+)$/i.exec(new URL(url).pathname)?.[1]?.toLowerCase() } catch { ext = undefined }
  const mimeType = ext === undefined ? undefined : EXTENSIONS.get(ext)
  return { fileData: mimeType === undefined ? { fileUri: url } : { mimeType, fileUri: url } }
}

/** An image a client gives by URL (a data: URI or an http(s) URL) as a Gemini part. */
export const imagePart = (url: string): GeminiPart => inlineData(url) ?? fileData(url)

// ---------------------------------------------------------------------------------------------
// Reading answers

/** One part of a Gemini answer, in the terms the other protocols need. */
export type Piece =
  | { kind: 'text', text: string, signature?: string }
  | { kind: 'thought', text: string, signature?: string }
  | { kind: 'call', name: string, args: Args, id?: string, signature?: string }

export interface Candidate { index: number, pieces: Piece[], finishReason: string | null }

const sig = (p: GeminiPart): { signature?: string } => typeof p.thoughtSignature === 'string' && p.thoughtSignature !== '' ? { signature: p.thoughtSignature } : {}

/** The parts of a candidate's content (an upstream's: each field checked); parts with no equivalent elsewhere (inline images, code execution) are left out. */
export function piecesOf (content: GeminiContent | undefined): Piece[] {
  const out: Piece[] = []
  for (const p of isObj(content) ? objectsIn(content.parts) : []) {
    if (isObj(p.functionCall)) {
      const fc = p.functionCall
      const piece: Piece = { kind: 'call', name: typeof fc.name === 'string' ? fc.name : '', args: isObj(fc.args) ? fc.args : {}, ...sig(p) }
      if (typeof fc.id === 'string' && fc.id !== '') piece.id = fc.id
      out.push(piece)
    } else if (typeof p.text === 'string') {
      if (p.text === '' && p.thoughtSignature === undefined) continue
      out.push({ kind: p.thought === true ? 'thought' : 'text', text: p.text, ...sig(p) })
    }
  }
  return out
}

/** The candidates of an answer or a stream chunk, by index; a blocked prompt is one candidate with its blockReason. */
export function candidatesOf (body: GeminiResponse): Candidate[] {
  const list = objectsIn(body.candidates)
  if (list.length === 0 && isObj(body.promptFeedback) && typeof body.promptFeedback.blockReason === 'string') {
    return [{ index: 0, pieces: [], finishReason: 'SAFETY' }]
  }
  return list.map((c, i) => ({
    index: typeof c.index === 'number' && Number.isInteger(c.index) && c.index >= 0 && c.index < 64 ? c.index : i,
    pieces: piecesOf(c.content),
    finishReason: finishReasonOf(c.finishReason)
  }))
}

/**
 * The id a client gets for the `n`th call of an answer: the upstream's own id, or one made from
 * the call's id (`prefix` + ctx id + n), with the call's thought signature in it.
 */
export function clientCallId (ctx: TranslateCtx, prefix: string, n: number, piece: Extract<Piece, { kind: 'call' }>): string {
  return withSignature(piece.id ?? `${prefix}${ctx.id}_${n}`, piece.signature)
}

/** The error a Gemini stream frame carries, if it is one. */
export function streamError (chunk: GeminiChunk): { status: number, message: string, code: string } | null {
  if (chunk.error === undefined || chunk.error === null) return null
  const e = isObj(chunk.error) ? chunk.error : {}
  return {
    status: typeof e.code === 'number' ? e.code : 500,
    message: typeof e.message === 'string' ? e.message : typeof chunk.error === 'string' ? chunk.error : 'The upstream provider failed.',
    code: typeof e.status === 'string' ? e.status : 'INTERNAL'
  }
}
