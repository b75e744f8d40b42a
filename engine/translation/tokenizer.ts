import { setImmediate as turn } from 'node:timers/promises'
import { Tiktoken } from 'js-tiktoken/lite'
import type { Json } from './types.js'

// Token counts for POST /v1/messages/count_tokens and Gemini's countTokens when the model's
// upstream cannot count them in that protocol: OpenAI's o200k_base encoding from js-tiktoken. It
// is an estimate of what another vendor's tokenizer would say, never a fake 0. The rank table is
// loaded on first use.
//
// js-tiktoken's byte-pair merge costs about the square of a piece's length in bytes (a piece is
// what the encoding's pattern splits text into: a word, a run of digits, punctuation or spaces),
// so one long piece ("AAAA…", a kanji run) held the event loop for seconds to minutes, and so did
// a large body of plain text. The count is therefore done in bounded steps:
//   - a piece longer than MAX_PIECE characters is cut into chunks of MAX_PIECE before the merge,
//     so the cost is linear in the input (a cut can shift the count by a token per chunk; normal
//     text has no such piece and is counted exactly as before), and a string longer than WINDOW
//     characters is split before the pattern runs over it, so no one match scans megabytes;
//   - work is metered as the sum of the squared UTF-8 lengths of the pieces (plus a constant per
//     piece, for the pattern match and lookups); after SLICE_WORK units the loop is given back
//     (a slice is about 5–15 ms of CPU), so other requests are served in between;
//   - past MAX_WORK units (about a second of CPU at worst; some 800 KB of English, 40,000 kanji)
//     the rest is not encoded but estimated linearly, at the tokens per character of what was.

export const MAX_PIECE = 64
export const WINDOW = 65_536
const PIECE_OVERHEAD = 32
export const SLICE_WORK = 100_000
export const MAX_WORK = 10_000_000

// An image is billed by its pixels, which we do not decode; a typical image is about this many.
const IMAGE_TOKENS = 1_600
// Per-message framing the providers add around each turn.
const PER_MESSAGE = 4

/** What the counter needs of an encoding: its pre-tokenizing pattern and the BPE itself. */
export interface Encoding {
  pattern: string
  /** Tokens of a text, special-token names such as <|endoftext|> counted as plain text. */
  encode: (text: string) => number
}

let loaded: Encoding | null = null

/** o200k_base, loaded on first use. */
export async function o200kBase (): Promise<Encoding> {
  if (loaded === null) {
    const ranks = (await import('js-tiktoken/ranks/o200k_base')).default
    const enc = new Tiktoken(ranks)
    loaded = { pattern: ranks.pat_str, encode: (text) => enc.encode(text, [], []).length }
  }
  return loaded
}

/** The work a piece is metered at: the square of its UTF-8 length, plus a constant. */
export function pieceWork (piece: string): number {
  const bytes = Buffer.byteLength(piece)
  return bytes * bytes + PIECE_OVERHEAD
}

/** Cuts of at most `size` UTF-16 units that do not split a surrogate pair. */
function * cuts (text: string, size: number): Generator<string> {
  for (let i = 0; i < text.length;) {
    let end = Math.min(i + size, text.length)
    const last = text.charCodeAt(end - 1)
    if (end < text.length && last >= 0xd800 && last <= 0xdbff) end--
    yield text.slice(i, end)
    i = end
  }
}

/** Tokens of the texts, in bounded steps (see the top of the file). `pause` yields the loop. */
export async function countTexts (texts: string[], enc: Encoding, pause: () => Promise<unknown> = turn): Promise<number> {
  const pattern = new RegExp(enc.pattern, 'gu')
  let tokens = 0
  let counted = 0
  let remaining = texts.reduce((n, t) => n + t.length, 0)
  let work = 0
  let slice = 0
  for (const text of texts.flatMap((t) => t.length > WINDOW ? [...cuts(t, WINDOW)] : [t])) {
    // [spanStart, spanEnd): whole pieces not encoded yet; `done`: characters accounted for
    let spanStart = 0
    let spanEnd = 0
    let done = 0
    const account = (to: number): void => {
      counted += to - done
      remaining -= to - done
      done = to
    }
    const flush = (): void => {
      if (spanEnd > spanStart) tokens += enc.encode(text.slice(spanStart, spanEnd))
      account(spanEnd)
      spanStart = spanEnd
    }
    // meters a piece; true when the slice is used up: encode what is pending, then yield
    const spend = (piece: string): boolean => {
      const w = pieceWork(piece)
      work += w
      slice += w
      if (slice < SLICE_WORK) return false
      flush()
      slice = 0
      return true
    }
    pattern.lastIndex = 0
    // eslint-disable-next-line no-unmodified-loop-condition -- `work` grows in flush(), called in the loop
    for (let m = pattern.exec(text); m !== null && work < MAX_WORK; m = pattern.exec(text)) {
      const piece = m[0]
      if (piece.length <= MAX_PIECE) {
        spanEnd = m.index + piece.length
        if (spend(piece)) await pause()
        continue
      }
      flush()
      let at = m.index
      for (const chunk of cuts(piece, MAX_PIECE)) {
        if (work >= MAX_WORK) break
        tokens += enc.encode(chunk)
        at += chunk.length
        spanStart = spanEnd = at
        account(at)
        if (spend(chunk)) await pause()
      }
    }
    flush()
    if (work >= MAX_WORK) break
    account(text.length) // characters no piece matched, which the encoder skips too
  }
  if (remaining > 0 && counted > 0) tokens += Math.ceil(remaining * tokens / counted)
  return tokens
}

function collect (node: unknown, texts: string[], counts: { images: number }): void {
  if (typeof node === 'string') { texts.push(node); return }
  if (Array.isArray(node)) { for (const v of node) collect(v, texts, counts); return }
  if (node === null || typeof node !== 'object') return
  const o = node as Json
  if (o.type === 'image' || o.type === 'image_url' || o.type === 'document') { counts.images++; return }
  for (const [k, v] of Object.entries(o)) {
    if (k === 'type' || k === 'cache_control' || k === 'id' || k === 'tool_use_id') continue
    collect(v, texts, counts)
  }
}

/** Input tokens of a Messages-shaped request: system, messages and tool definitions. */
export async function countTokens (body: Json, encoding?: Encoding): Promise<number> {
  const enc = encoding ?? await o200kBase()
  const texts: string[] = []
  const counts = { images: 0 }
  collect(body.system, texts, counts)
  const messages = Array.isArray(body.messages) ? body.messages : []
  collect(messages, texts, counts)
  if (Array.isArray(body.tools)) texts.push(JSON.stringify(body.tools))
  const n = counts.images * IMAGE_TOKENS + messages.length * PER_MESSAGE + await countTexts(texts.filter((t) => t !== ''), enc)
  return Math.max(1, n)
}

function collectParts (parts: unknown, texts: string[], counts: { images: number }): void {
  for (const part of Array.isArray(parts) ? parts : []) {
    if (part === null || typeof part !== 'object') continue
    const p = part as Json
    if (typeof p.text === 'string') texts.push(p.text)
    else if (p.inlineData !== undefined || p.fileData !== undefined) counts.images++
    else if (p.functionCall !== undefined) texts.push(JSON.stringify(p.functionCall))
    else if (p.functionResponse !== undefined) texts.push(JSON.stringify(p.functionResponse))
  }
}

/** Input tokens of a Gemini request: systemInstruction, contents and tools (as countTokens counts them). */
export async function countGeminiTokens (body: Json, encoding?: Encoding): Promise<number> {
  const enc = encoding ?? await o200kBase()
  const texts: string[] = []
  const counts = { images: 0 }
  const system = body.systemInstruction
  if (typeof system === 'string') texts.push(system)
  else if (system !== null && typeof system === 'object') collectParts((system as Json).parts, texts, counts)
  const contents = Array.isArray(body.contents) ? body.contents : []
  for (const c of contents) if (c !== null && typeof c === 'object') collectParts((c as Json).parts, texts, counts)
  if (Array.isArray(body.tools)) texts.push(JSON.stringify(body.tools))
  const n = counts.images * IMAGE_TOKENS + contents.length * PER_MESSAGE + await countTexts(texts.filter((t) => t !== ''), enc)
  return Math.max(1, n)
}
