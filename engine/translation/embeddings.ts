import { geminiPartObjects, topLevelObjects, type BodyObjects } from '../gateway/body-objects.js'
import { mediaUrlProblem } from '../gateway/media-url.js'
import { InvalidBody, InvalidField, InvalidImageUrl, MissingField } from '../kernel/errors.js'
import { isObj, optCount, optText } from '../protocols/fields.js'
import type { Json, Usage } from './types.js'

// What the embedding pairs share: the two client shapes checked (OpenAI's POST /embeddings,
// Google's embedContent and batchEmbedContents), their inputs read, vectors written as the client
// asked (floats, or OpenAI's base64 of little-endian float32), and usage.
//
//   OpenAI   {model, input: string | string[] | number[] | number[][], encoding_format?, dimensions?, user?}
//            → {object: "list", data: [{object: "embedding", index, embedding}], model, usage: {prompt_tokens, total_tokens}}
//   Google   embedContent {content: {parts}, taskType?, title?, outputDimensionality?} → {embedding: {values}}
//            batchEmbedContents {requests: [{model, content, taskType?, title?, outputDimensionality?}]} → {embeddings: [{values}]}

const given = (v: unknown): boolean => v !== undefined && v !== null

/** An OpenAI input: text, or a list of token ids. */
export type EmbeddingInput = string | number[]

const isTokens = (v: unknown): v is number[] => Array.isArray(v) && v.every((t) => Number.isInteger(t) && (t as number) >= 0)

/**
 * The inputs of an OpenAI embeddings body, one per vector asked for: a string, a list of strings,
 * a list of token ids (one input), or a list of such lists.
 */
export function embeddingInputs (input: unknown): EmbeddingInput[] {
  if (typeof input === 'string') return [input]
  if (!Array.isArray(input) || input.length === 0) return []
  if (input.every((v) => typeof v === 'number')) return [input as number[]]
  return input as EmbeddingInput[]
}

/** The fields of an OpenAI embeddings request the gateway reads, checked. */
export function checkEmbeddingsBody (body: unknown): Json {
  if (!isObj(body)) throw new InvalidBody()
  if (!given(body.model) || body.model === '') throw new MissingField({ field: 'model' })
  if (typeof body.model !== 'string') throw new InvalidField({ field: 'model', reason: 'must be a string' })
  const input = body.input
  if (!given(input)) throw new MissingField({ field: 'input' })
  const shape = 'must be a string, an array of strings, an array of token ids or an array of such arrays'
  if (typeof input === 'string') {
    if (input === '') throw new InvalidField({ field: 'input', reason: 'must not be empty' })
  } else if (!Array.isArray(input)) {
    throw new InvalidField({ field: 'input', reason: shape })
  } else {
    if (input.length === 0) throw new InvalidField({ field: 'input', reason: 'must not be empty' })
    if (!input.every((v) => typeof v === 'number')) {
      const texts = typeof input[0] === 'string'
      for (const [i, v] of input.entries()) {
        if (texts ? typeof v !== 'string' : !isTokens(v)) throw new InvalidField({ field: `input[${i}]`, reason: texts ? 'must be a string, as input[0] is' : shape })
        if (v.length === 0) throw new InvalidField({ field: `input[${i}]`, reason: 'must not be empty' })
      }
    } else if (!isTokens(input)) {
      throw new InvalidField({ field: 'input', reason: 'token ids must be non-negative integers' })
    }
  }
  const format = body.encoding_format
  if (given(format) && format !== 'float' && format !== 'base64') throw new InvalidField({ field: 'encoding_format', reason: 'must be "float" or "base64"' })
  optCount(body.dimensions, 'dimensions')
  optText(body.user, 'user')
  return body
}

/** The method of Google's embedding API a call came by. */
export type GeminiEmbedMethod = 'embedContent' | 'batchEmbedContents'

/**
 * One content to embed, as Google's requests carry it. A file it names by URL is held to the
 * media URL rules, and noted in `objects` with whatever else its parts name of the provider's
 * account (engine/gateway/body-objects.ts).
 */
function checkContent (content: unknown, field: string, objects?: BodyObjects): void {
  if (!given(content)) throw new MissingField({ field })
  if (!isObj(content)) throw new InvalidField({ field, reason: 'must be an object with parts' })
  const parts = content.parts
  if (!Array.isArray(parts) || parts.length === 0) throw new InvalidField({ field: `${field}.parts`, reason: 'must be a non-empty array' })
  for (const [i, p] of parts.entries()) {
    const at = `${field}.parts[${i}]`
    if (!isObj(p)) throw new InvalidField({ field: at, reason: 'must be an object' })
    if (given(p.text) && typeof p.text !== 'string') throw new InvalidField({ field: `${at}.text`, reason: 'must be a string' })
    if (isObj(p.fileData)) {
      const uri = p.fileData.fileUri
      if (mediaUrlProblem(uri, 'none') !== undefined) throw new InvalidImageUrl({ field: `${at}.fileData.fileUri` })
      objects?.url(uri as string, `${at}.fileData.fileUri`)
    }
    if (objects !== undefined) geminiPartObjects(p, at, objects)
  }
}

function checkSettings (r: Json, prefix: string): void {
  optText(r.taskType, `${prefix}taskType`)
  optText(r.title, `${prefix}title`)
  optCount(r.outputDimensionality, `${prefix}outputDimensionality`)
}

/** The bare name of a Gemini model reference (`models/x` → `x`). */
const bare = (name: string): string => name.startsWith('models/') ? name.slice('models/'.length) : name

/**
 * A body of Google's embedContent or batchEmbedContents, checked; `model` is the catalog id the
 * path names, which every request of a batch that names one must name too (Google's rule). What
 * it names of the provider's account is noted in `objects`.
 */
export function checkGeminiEmbedBody (body: unknown, method: GeminiEmbedMethod, model: string, objects?: BodyObjects): Json {
  if (!isObj(body)) throw new InvalidBody()
  if (objects !== undefined) topLevelObjects(body, objects)
  if (method === 'embedContent') {
    checkContent(body.content, 'content', objects)
    checkSettings(body, '')
    return body
  }
  const requests = body.requests
  if (!given(requests)) throw new MissingField({ field: 'requests' })
  if (!Array.isArray(requests) || requests.length === 0) throw new InvalidField({ field: 'requests', reason: 'must be a non-empty array' })
  for (const [i, r] of requests.entries()) {
    if (!isObj(r)) throw new InvalidField({ field: `requests[${i}]`, reason: 'must be an object' })
    if (given(r.model) && (typeof r.model !== 'string' || bare(r.model) !== bare(model))) {
      throw new InvalidField({ field: `requests[${i}].model`, reason: `must be the model the path names, models/${bare(model)}` })
    }
    checkContent(r.content, `requests[${i}].content`, objects)
    checkSettings(r, `requests[${i}].`)
    if (objects !== undefined) topLevelObjects(r, objects)
  }
  return body
}

/** The requests of a Google embedding body: a batch's, or embedContent's one. */
export function geminiRequests (body: Json): Json[] {
  return Array.isArray(body.requests) ? body.requests as Json[] : [body]
}

/** The text of one content: its text parts, one per line. */
export function contentText (content: unknown): string {
  const parts = isObj(content) && Array.isArray(content.parts) ? content.parts : []
  return parts.filter((p): p is Json => isObj(p) && typeof p.text === 'string').map((p) => p.text as string).join('\n')
}

/** The model reference Google's requests carry: `models/{name}` (a name with its own collection kept). */
export const geminiModelRef = (model: string): string => model.includes('/') ? model : `models/${model}`

// ---------------------------------------------------------------------------------------------
// Vectors

/** A vector as OpenAI's encoding_format "base64" sends it: its float32 values, little-endian, in base64. */
export function vectorToBase64 (values: readonly number[]): string {
  const buf = Buffer.allocUnsafe(values.length * 4)
  for (let i = 0; i < values.length; i++) buf.writeFloatLE(values[i] as number, i * 4)
  return buf.toString('base64')
}

/** A base64 vector back to its float32 values. */
export function vectorFromBase64 (text: string): number[] {
  const buf = Buffer.from(text, 'base64')
  const out = new Array<number>(Math.floor(buf.length / 4))
  for (let i = 0; i < out.length; i++) out[i] = buf.readFloatLE(i * 4)
  return out
}

/** The numbers of a vector an upstream sent (anything else is an empty vector). */
export function numbers (v: unknown): number[] {
  return Array.isArray(v) ? v.filter((x): x is number => typeof x === 'number') : []
}

/** An OpenAI embeddings list of `vectors`, each encoded as the client asked. */
export function openaiList (vectors: number[][], format: unknown, model: string, promptTokens: number): Json {
  return {
    object: 'list',
    data: vectors.map((v, index) => ({ object: 'embedding', index, embedding: format === 'base64' ? vectorToBase64(v) : v })),
    model,
    usage: { prompt_tokens: promptTokens, total_tokens: promptTokens }
  }
}

// ---------------------------------------------------------------------------------------------
// Usage

/** Usage of an embedding call: input tokens only. */
export const embeddingUsage = (promptTokens: number): Usage => ({ prompt_tokens: promptTokens, cached_input_tokens: 0, completion_tokens: 0, cache_creation_input_tokens: 0 })

/** An estimate of a text's tokens where the upstream reports none: about four characters a token. */

/** A Gemini embedding answer's token count, when it reports one (usageMetadata.promptTokenCount). */
export function geminiEmbedTokens (body: Json): number | null {
  const u = body.usageMetadata
  return isObj(u) && typeof u.promptTokenCount === 'number' && u.promptTokenCount >= 0 ? Math.floor(u.promptTokenCount) : null
}
