import type { Protocol } from '../translation/types.js'

// A pass-through request target, read as the provider will route it. The gateway decides what a
// pass-through call costs (metered, free, unmetered), which model and which provider-side object
// it reaches, from its path; a provider decodes and normalises the path before it routes it, so
// any form two readers could route apart is refused before it is read: a fragment (which the
// provider's parser drops), percent-encoding (`%63hat/completions`, `models/x%3AgenerateContent`,
// double encoding), `;` parameters, empty and dot segments, a trailing slash or dot, a backslash,
// anything outside the printable ASCII a path may hold. What is left has one reading, which is
// classified case-insensitively, as a lenient router would route it.

/** What a pass-through endpoint costs, which decides how it is admitted. */
export type Cost = 'metered' | 'free' | 'unmetered'

/** The endpoint families whose answers report usage, read by a same-protocol pair. */
export type Reader = 'chat' | 'messages' | 'responses' | 'embeddings' | 'gemini' | 'converse' | 'invoke'

export interface Classified {
  cost: Cost
  reader: Reader | null
  /** The model the path names (`models/{m}`, a Gemini model's method), as a catalog's upstream_model names it. */
  pathModel: string | null
  /** A Gemini model method's name (`generateContent`), when the path ends in one. */
  method: string | null
  /** Path segments below the provider's base, lower case, a leading API version (`v1`, `v1beta`) left out. */
  segments: string[]
  /** The same segments as sent (ids keep their case). */
  raw: string[]
}

// the characters of a path segment (RFC 3986 pchar) less `%` (an escape) and `;` (parameters)
const PATH_CHARS = /^[A-Za-z0-9\-._~!$&'()*+,=:@/]*$/
// a query may hold escapes (its values are the provider's), never a fragment or a raw space
const QUERY_CHARS = /^[\x21-\x7e]*$/

/** Why a request target (path and query, below the provider's prefix) cannot be read as the provider will route it; null when it can. */
export function targetProblem (target: string): string | null {
  if (target.includes('#')) return 'fragment'
  const q = target.indexOf('?')
  const path = q === -1 ? target : target.slice(0, q)
  if (q !== -1 && !QUERY_CHARS.test(target.slice(q + 1))) return 'character in the query'
  if (path === '' || path === '/') return null
  if (!path.startsWith('/')) return 'provider prefix'
  if (!PATH_CHARS.test(path)) {
    if (path.includes('%')) return 'percent-encoding'
    if (path.includes(';')) return 'parameter'
    if (path.includes('\\')) return 'backslash'
    return 'character in the path'
  }
  if (path.endsWith('/')) return 'trailing slash'
  if (path.includes('//')) return 'empty segment'
  for (const segment of path.split('/')) {
    if (segment === '.' || segment === '..') return 'dot segment'
    if (segment.endsWith('.')) return 'trailing dot'
  }
  return null
}

const VERSION = /^v\d+(?:(?:alpha|beta)\d*)?$/

/** The POSTs that cost nothing at a provider, by their last segments (`*`: any): uploads, moderation, token counts, cancellations. */
const FREE_ENDS = [['files'], ['uploads'], ['uploads', '*', 'parts'], ['uploads', '*', 'complete'], ['cancel'], ['moderations'], ['count_tokens'], ['input_tokens']]
/** The same, as a Gemini method (`models/{m}:countTokens`, `batches/{id}:cancel`). */
const FREE_METHODS = new Set(['counttokens', 'cancel'])

/** The endpoints that report usage, by their last segments (lower case). */
const READERS: Array<[string[], Reader]> = [[['chat', 'completions'], 'chat'], [['messages'], 'messages'], [['responses'], 'responses'], [['embeddings'], 'embeddings']]
const GEMINI_METERED = new Set(['generatecontent', 'streamgeneratecontent'])

const endsWith = (segments: string[], tail: string[]): boolean =>
  segments.length >= tail.length && tail.every((s, i) => s === '*' || segments[segments.length - tail.length + i] === s)

/**
 * How a well-formed path (one targetProblem passed) is classified for `method` on a provider of
 * `protocol`: what it costs, which reader meters it, and the model it names.
 */
export function classify (protocol: Protocol, method: string, path: string, platform?: string): Classified {
  const sent = path.split('/').filter((s) => s !== '')
  let raw = sent
  // Gemini's uploads go to /upload/{version}/files
  if (protocol === 'gemini' && raw[0]?.toLowerCase() === 'upload') raw = raw.slice(1)
  if (VERSION.test(raw[0]?.toLowerCase() ?? '')) raw = raw.slice(1)
  // a cloud platform's URL, read as the vendor's API it serves: Azure's deployment, Vertex AI's
  // publisher model (a model the path names either way)
  const onPlatform = platformCall(platform, protocol, raw)
  if (onPlatform !== null) {
    if (onPlatform.vendor === null) return { cost: method === 'POST' ? 'metered' : 'free', reader: method === 'POST' ? 'messages' : null, pathModel: onPlatform.model, method: null, segments: ['messages'], raw: ['messages'] }
    raw = onPlatform.vendor
  }
  const segments = raw.map((s) => s.toLowerCase())
  const last = segments.at(-1) ?? ''
  // a Gemini model's method: `models/{m}:generateContent`, or a tuned model's
  const colon = protocol === 'gemini' ? last.lastIndexOf(':') : -1
  const geminiMethod = colon > 0 && segments.length >= 2 ? last.slice(colon + 1) : null
  const pathModel = onPlatform?.model ?? modelInPath(protocol, segments, raw)
  let reader: Reader | null = null
  if (method === 'POST') {
    if (protocol === 'gemini') reader = geminiMethod !== null && pathModel !== null && GEMINI_METERED.has(geminiMethod) ? 'gemini' : null
    else reader = READERS.find(([tail]) => endsWith(segments, tail))?.[1] ?? null
  }
  const cost: Cost = reader !== null
    ? 'metered'
    : method === 'GET' || method === 'HEAD' || method === 'OPTIONS' || method === 'DELETE' ||
      (geminiMethod !== null ? FREE_METHODS.has(geminiMethod) : FREE_ENDS.some((tail) => endsWith(segments, tail)))
      ? 'free'
      : 'unmetered'
  return { cost, reader, pathModel, method: geminiMethod === null ? null : (raw.at(-1) as string).slice(colon + 1), segments, raw }
}

/**
 * The model a path names: the segment after `models` (a Gemini tuned model's after
 * `tunedModels`, with its collection), less a Gemini method. Null when it names none.
 */
function modelInPath (protocol: Protocol, segments: string[], raw: string[]): string | null {
  for (let i = 0; i < segments.length - 1; i++) {
    const collection = segments[i]
    if (collection !== 'models' && !(protocol === 'gemini' && collection === 'tunedmodels')) continue
    let name = raw[i + 1] as string
    // a Gemini method follows the name; an OpenAI fine-tuned model's name holds colons of its own
    if (protocol === 'gemini') name = name.split(':', 1)[0] as string
    if (name === '') return null
    return collection === 'models' ? name : `tunedModels/${name}`
  }
  return null
}

/**
 * A cloud platform's call path: the model it names and the path the vendor's API would take
 * (below its version), or, for an Anthropic model's rawPredict on Vertex AI, a Messages call
 * (`vendor` null). Null when the path is no such call.
 *   azure   openai/deployments/{d}/chat/completions → chat/completions, model d
 *   vertex  projects/{p}/locations/{l}/publishers/{pub}/models/{m}:{method} → models/{m}:{method}
 *           (Gemini), or :rawPredict / :streamRawPredict (Messages), model m
 */
function platformCall (platform: string | undefined, protocol: Protocol, raw: string[]): { model: string, vendor: string[] | null } | null {
  const lower = raw.map((s) => s.toLowerCase())
  if (platform === 'azure' && lower[0] === 'openai' && lower[1] === 'deployments' && raw.length >= 4) {
    return { model: raw[2] as string, vendor: raw.slice(3) }
  }
  if (platform === 'vertex' && lower[0] === 'projects' && lower[2] === 'locations' && lower[4] === 'publishers' && lower[6] === 'models' && raw.length === 8) {
    const last = raw[7] as string
    const colon = last.indexOf(':')
    const model = colon === -1 ? last : last.slice(0, colon)
    if (model === '') return null
    const method = colon === -1 ? '' : last.slice(colon + 1).toLowerCase()
    if (protocol === 'messages') return method === 'rawpredict' || method === 'streamrawpredict' ? { model, vendor: null } : null
    return { model, vendor: raw.slice(6) }
  }
  return null
}

// AWS Bedrock Runtime's model calls: /model/{id}/{operation}
const BEDROCK_READERS = new Map<string, Reader>([['converse', 'converse'], ['converse-stream', 'converse'], ['invoke', 'invoke'], ['invoke-with-response-stream', 'invoke']])

/**
 * A pass-through target on an AWS Bedrock provider, checked as targetProblem checks any other,
 * except that `%3A` may stand for the `:` of a model id (the AWS SDKs encode it; Bedrock decodes
 * it, and it can make no segment or dot that would route the call elsewhere). Null when it can be read.
 */
export function bedrockTargetProblem (target: string): string | null {
  return targetProblem(target.replace(/%3A/gi, ':'))
}

/**
 * How a Bedrock Runtime path is classified: `/model/{id}/converse` and `/converse-stream` are read
 * by the Converse reader, `/invoke` and `/invoke-with-response-stream` by the InvokeModel reader
 * (an Anthropic model's Messages answer), `/count-tokens` is free, anything else unmetered. The
 * model is the path's, its `%3A` a colon.
 */
export function classifyBedrock (method: string, path: string): Classified {
  const raw = path.split('/').filter((s) => s !== '')
  const segments = raw.map((s) => s.toLowerCase())
  const inModel = segments.length === 3 && segments[0] === 'model'
  const pathModel = inModel ? (raw[1] as string).replace(/%3A/gi, ':') : null
  const reader = method === 'POST' && inModel ? BEDROCK_READERS.get(segments[2] as string) ?? null : null
  const cost: Cost = reader !== null
    ? 'metered'
    : method === 'GET' || method === 'HEAD' || method === 'OPTIONS' || method === 'DELETE' || (inModel && segments[2] === 'count-tokens') ? 'free' : 'unmetered'
  return { cost, reader, pathModel, method: null, segments, raw }
}

/** Whether a Bedrock path asks for an event stream. */
export const bedrockStreams = (c: Classified): boolean => c.segments[0] === 'model' && (c.segments[2] === 'converse-stream' || c.segments[2] === 'invoke-with-response-stream')
