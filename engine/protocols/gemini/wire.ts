import { errorBody } from '../../kernel/errors.js'
import { isObj } from '../fields.js'
import { upstreamMessage } from '../upstream-error.js'
import type { RedactedThinkingBlockParam, ThinkingBlockParam } from '@anthropic-ai/sdk/resources/messages'
import type { Json, TranslateCtx, Usage } from '../types.js'
import type { GeminiUsageMetadata } from './types.js'

// What every pair with a Gemini side shares: the upstream path, usage, finish reasons, schemas
// in Google's OpenAPI subset, and how thought signatures cross protocols that have no place for
// them.

// ---------------------------------------------------------------------------------------------
// Paths

/**
 * The path of a generateContent call below the provider's base_url. A bare model name gets the
 * `models/` collection (`tunedModels/x` keeps its own); each segment is escaped, the slashes kept.
 */
export function geminiPath (model: string, stream: boolean, method: 'generateContent' | 'countTokens' | 'embedContent' | 'batchEmbedContents' = 'generateContent'): string {
  const name = model.includes('/') ? model : `models/${model}`
  const escaped = name.split('/').map(encodeURIComponent).join('/')
  if (method !== 'generateContent') return `/v1beta/${escaped}:${method}`
  return stream ? `/v1beta/${escaped}:streamGenerateContent?alt=sse` : `/v1beta/${escaped}:generateContent`
}

export const geminiUpstreamPath = (ctx: TranslateCtx): string => geminiPath(ctx.upstreamModel, ctx.stream)

/** The objects of a list in an upstream's answer, as its type has them; anything else in it, or a list that is none, is left out. */
export const objectsIn = <T extends object>(list: T[] | undefined): T[] => Array.isArray(list) ? list.filter((v): v is T => isObj(v)) : []

// ---------------------------------------------------------------------------------------------
// Usage

const n = (v: unknown): number => typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0

/**
 * usageMetadata → Usage: the prompt counts cached content (and the prompt of built-in tools,
 * billed as input), the completion counts thoughts.
 */
export function usageFromGemini (u: unknown): Usage | null {
  if (!isObj(u)) return null
  const thoughts = n(u.thoughtsTokenCount)
  const usage: Usage = {
    prompt_tokens: n(u.promptTokenCount) + n(u.toolUsePromptTokenCount),
    cached_input_tokens: n(u.cachedContentTokenCount),
    completion_tokens: n(u.candidatesTokenCount) + thoughts,
    cache_creation_input_tokens: 0
  }
  if (u.thoughtsTokenCount !== undefined) usage.reasoning_tokens = thoughts
  // audio bills at its own rates: the AUDIO entries of the prompt's breakdown (less those read
  // from a cache, which bill as cached input) and of the answer's
  const audioIn = Math.min(Math.max(0, audioTokens(u.promptTokensDetails) - audioTokens(u.cacheTokensDetails)), usage.prompt_tokens - usage.cached_input_tokens)
  const audioOut = Math.min(audioTokens(u.candidatesTokensDetails), usage.completion_tokens)
  if (audioIn > 0) usage.audio_input_tokens = audioIn
  if (audioOut > 0) usage.audio_output_tokens = audioOut
  return usage
}

/**
 * The tools Google ran for one candidate, by kind: its grounding's search queries (at least one
 * when it was grounded), its executed code parts. Null when it ran none.
 */
export function geminiToolUses (candidate: unknown): Record<string, number> | null {
  if (!isObj(candidate)) return null
  const uses: Record<string, number> = {}
  const g = candidate.groundingMetadata
  if (isObj(g)) uses.web_search = Math.max(1, Array.isArray(g.webSearchQueries) ? g.webSearchQueries.length : 0)
  const parts = isObj(candidate.content) && Array.isArray(candidate.content.parts) ? candidate.content.parts : []
  let code = 0
  for (const p of parts) if (isObj(p) && isObj(p.executableCode)) code++
  if (code > 0) uses.code_execution = code
  const urls = candidate.urlContextMetadata
  if (isObj(urls) && Array.isArray(urls.urlMetadata) && urls.urlMetadata.length > 0) uses.url_context = urls.urlMetadata.length
  return Object.keys(uses).length === 0 ? null : uses
}

/** The tools Google ran for an answer's candidates, summed; null when none. */
export function geminiAnswerToolUses (candidates: unknown): Record<string, number> | null {
  if (!Array.isArray(candidates)) return null
  let sum: Record<string, number> | null = null
  for (const c of candidates) {
    const u = geminiToolUses(c)
    if (u === null) continue
    sum ??= {}
    for (const k in u) sum[k] = (sum[k] ?? 0) + (u[k] as number)
  }
  return sum
}

/** The AUDIO tokens of a usageMetadata breakdown (`[{modality, tokenCount}]`). */
function audioTokens (details: unknown): number {
  if (!Array.isArray(details)) return 0
  let sum = 0
  for (const d of details) if (isObj(d) && d.modality === 'AUDIO') sum += n(d.tokenCount)
  return sum
}

/** Usage → usageMetadata; counts Google leaves out when they are 0 are left out. */
export function toGeminiUsage (u: Usage): GeminiUsageMetadata {
  const thoughts = Math.min(u.reasoning_tokens ?? 0, u.completion_tokens)
  const out: GeminiUsageMetadata = {
    promptTokenCount: u.prompt_tokens,
    candidatesTokenCount: u.completion_tokens - thoughts,
    totalTokenCount: u.prompt_tokens + u.completion_tokens
  }
  if (u.cached_input_tokens > 0) out.cachedContentTokenCount = u.cached_input_tokens
  if (thoughts > 0) out.thoughtsTokenCount = thoughts
  const prompt = withAudio(u.prompt_tokens, u.audio_input_tokens)
  if (prompt !== null) out.promptTokensDetails = prompt
  const candidates = withAudio(u.completion_tokens - thoughts, u.audio_output_tokens)
  if (candidates !== null) out.candidatesTokensDetails = candidates
  return out
}

/** A modality breakdown of `total` tokens with `audio` of them AUDIO (the rest TEXT); null without audio. */
function withAudio (total: number, audio = 0): NonNullable<GeminiUsageMetadata['promptTokensDetails']> | null {
  const a = Math.min(audio, total)
  if (a <= 0) return null
  return total > a ? [{ modality: 'TEXT', tokenCount: total - a }, { modality: 'AUDIO', tokenCount: a }] : [{ modality: 'AUDIO', tokenCount: a }]
}

// ---------------------------------------------------------------------------------------------
// Finish reasons

/** How an answer ended, in terms every protocol has: `tool` is a STOP after function calls. */
export type Finish = 'stop' | 'length' | 'filter' | 'tool'

// Answers withheld or cut by a filter (safety, recitation, blocklists, personal data).
const FILTERED = new Set(['SAFETY', 'RECITATION', 'BLOCKLIST', 'PROHIBITED_CONTENT', 'SPII', 'IMAGE_SAFETY', 'IMAGE_PROHIBITED_CONTENT', 'IMAGE_RECITATION', 'LANGUAGE'])

/** A candidate's finishReason as an upstream sent it (any string: Google adds reasons); null while it has not finished. */
export function finishReasonOf (reason: unknown): string | null {
  return typeof reason === 'string' && reason !== '' && reason !== 'FINISH_REASON_UNSPECIFIED' ? reason : null
}

/** A Gemini finishReason (or a prompt's blockReason) as a Finish. Any other reason ends the answer normally. */
export function finishOf (reason: unknown, called: boolean): Finish {
  if (reason === 'MAX_TOKENS') return 'length'
  if (typeof reason === 'string' && FILTERED.has(reason)) return 'filter'
  return called ? 'tool' : 'stop'
}

// ---------------------------------------------------------------------------------------------
// Errors

/** An upstream error (any shape) in Google's shape, for a Gemini client. */
export function geminiError (status: number, body: unknown): Json {
  return errorBody('gemini', { status, message: upstreamMessage(status, body) })
}

/** A Gemini upstream's error body: its object, also when it comes in a list of one (as Google's JSON streams send it). */
export const googleError = (body: unknown): unknown => Array.isArray(body) && body.length === 1 ? body[0] : body

// ---------------------------------------------------------------------------------------------
// Schemas

// Google's Schema fields whose int64 values JSON carries as strings.
const INT64 = new Set(['minItems', 'maxItems', 'minLength', 'maxLength', 'minProperties', 'maxProperties'])

/**
 * A schema in Google's OpenAPI subset (`parameters`, `responseSchema`) as JSON Schema: types in
 * lower case (`OBJECT` → `object`), `nullable` as a `null` type, int64 strings as numbers,
 * `example` as `examples`; `propertyOrdering` only orders Gemini's own output and goes.
 */
export function schemaFromGemini (schema: unknown): unknown {
  if (Array.isArray(schema)) return schema.map(schemaFromGemini)
  if (!isObj(schema)) return schema
  const out: Json = {}
  for (const [key, value] of Object.entries(schema)) {
    switch (key) {
      case 'type':
        if (typeof value === 'string') { if (value !== 'TYPE_UNSPECIFIED') out.type = value.toLowerCase() } else out.type = value
        break
      case 'nullable':
      case 'propertyOrdering':
        break
      case 'example':
        out.examples = [value]
        break
      case 'properties':
        out.properties = isObj(value) ? Object.fromEntries(Object.entries(value).map(([k, v]) => [k, schemaFromGemini(v)])) : value
        break
      case 'items':
      case 'anyOf':
        out[key] = schemaFromGemini(value)
        break
      default:
        out[key] = INT64.has(key) && typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value
    }
  }
  if (schema.nullable === true) {
    if (typeof out.type === 'string') out.type = [out.type, 'null']
    else if (Array.isArray(out.anyOf)) out.anyOf = [...out.anyOf, { type: 'null' }]
    if (Array.isArray(out.enum) && !out.enum.includes(null)) out.enum = [...out.enum, null]
  }
  return out
}

// ---------------------------------------------------------------------------------------------
// Thought signatures

/**
 * What Google documents for a function call the model did not make itself (history from another
 * model): Gemini 3 refuses a step whose first function call carries no signature.
 */
export const FOREIGN_SIGNATURE = 'skip_thought_signature_validator'

// A Gemini signature rides in a tool call's id, the one field every client sends back as it
// was: `<id>__ts<b|u><payload>`, the payload in base64url, of the signature's bytes when it is
// canonical base64 (`b`, the same length), else of its UTF-8 text (`u`). Ids stay within
// [A-Za-z0-9_-], which Anthropic requires of tool_use ids.
const MARK = '__ts'

const base64url = (b: Buffer): string => b.toString('base64url')

/** A call id that also carries the thought signature of its functionCall part. */
export function withSignature (id: string, signature: string | undefined): string {
  if (signature === undefined || signature === '') return id
  const bytes = Buffer.from(signature, 'base64')
  if (bytes.toString('base64') === signature) return `${id}${MARK}b${base64url(bytes)}`
  return `${id}${MARK}u${base64url(Buffer.from(signature, 'utf8'))}`
}

/** A call id back into the id and the signature it carries (none when it carries none). */
export function splitSignature (id: string): { id: string, signature?: string } {
  const at = id.indexOf(MARK)
  if (at === -1) return { id }
  const mode = id[at + MARK.length]
  const payload = id.slice(at + MARK.length + 1)
  if ((mode !== 'b' && mode !== 'u') || !/^[A-Za-z0-9_-]+$/.test(payload)) return { id }
  const bytes = Buffer.from(payload, 'base64url')
  return { id: id.slice(0, at), signature: mode === 'b' ? bytes.toString('base64') : bytes.toString('utf8') }
}

// Anthropic thinking blocks shown to a Gemini client ride in the thoughtSignature of the part
// that follows them (where Gemini puts its own signatures, and the one place the Gemini CLI keeps:
// it drops thought parts from its history). Canonical base64 of a marked JSON list of the blocks.
const THINKING = 'modelgate-thinking:'

/** Anthropic thinking blocks, as they ride in a signature. */
export type PackedThinking = ThinkingBlockParam | RedactedThinkingBlockParam

export function packThinking (blocks: PackedThinking[]): string {
  return Buffer.from(THINKING + JSON.stringify(blocks), 'utf8').toString('base64')
}

/**
 * The thinking blocks a signature carries; null for a signature the gateway did not write. A
 * block's type is checked, the rest goes up as it came back: Anthropic, which signed it, judges it.
 */
export function unpackThinking (signature: unknown): PackedThinking[] | null {
  if (typeof signature !== 'string' || signature.length < 28) return null
  const text = Buffer.from(signature, 'base64').toString('utf8')
  if (!text.startsWith(THINKING)) return null
  try {
    const blocks = JSON.parse(text.slice(THINKING.length)) as unknown
    return Array.isArray(blocks) ? blocks.filter((b): b is PackedThinking => isObj(b) && (b.type === 'thinking' || b.type === 'redacted_thinking')) : null
  } catch {
    return null
  }
}

// A Gemini signature shown to a Messages client as a thinking block's signature, marked so that
// it goes back to Gemini and a signature from an Anthropic model does not.
const GEMINI_SIGNATURE = 'gemini.'

export const asThinkingSignature = (signature: string): string => GEMINI_SIGNATURE + signature

/** The Gemini signature a thinking block carries; undefined when it comes from another model. */
export function fromThinkingSignature (signature: unknown): string | undefined {
  return typeof signature === 'string' && signature.startsWith(GEMINI_SIGNATURE) && signature.length > GEMINI_SIGNATURE.length
    ? signature.slice(GEMINI_SIGNATURE.length)
    : undefined
}
