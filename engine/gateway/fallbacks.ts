import type { FallbackClass } from '../../config/schema.js'
import { NoCredentials, NoProvider, RequestTimeout, UpstreamClientError, UpstreamUnavailable } from '../kernel/errors.js'
import { tokensOfLength } from '../kernel/estimate.js'
import type { Catalog, CatalogModel } from './catalog.js'

// Aliases and fallbacks across models. A call names a model (or an alias); when that model cannot
// answer for one of the classes below, before the client has a byte, the next model its
// fallbacks (or the alias's targets) name for that class is tried, and so on down the chain:
//
//   rate_limited      every provider of the model answered 429 (after its retries)
//   unavailable       5xx, refused or reset connections, open breakers, no usable provider
//   timeout           no first byte within the request timeout
//   context_length    the prompt does not fit: known before sending when the gateway's count
//                     exceeds the model's context_length, else the provider's own refusal
//   content_filtered  the provider refused on content before any output (a 400 `content_filter`)
//
// A model the key is not granted is never tried, except an alias's own targets (the alias grants
// them); each model is tried once per call.

/** The class of a failure that lets a call move on to another model; null for any other (a client's mistake, a refusal of the gateway's own). */
export function fallbackClass (err: unknown): FallbackClass | null {
  if (err instanceof UpstreamClientError) {
    if (err.statusCode === 429) return 'rate_limited'
    if (isContextRefusal(err.statusCode, err.upstream)) return 'context_length'
    if (isContentFilter(err.statusCode, err.upstream)) return 'content_filtered'
    return null
  }
  if (err instanceof RequestTimeout) return 'timeout'
  if (err instanceof UpstreamUnavailable || err instanceof NoProvider || err instanceof NoCredentials) return 'unavailable'
  return null
}

const errorOf = (body: unknown): Record<string, unknown> => {
  const e = (body as { error?: unknown } | null)?.error
  return e !== null && typeof e === 'object' ? e as Record<string, unknown> : {}
}
const text = (v: unknown): string => typeof v === 'string' ? v : ''

/**
 * A provider's refusal of a prompt longer than its context, in each protocol's words: OpenAI's
 * `context_length_exceeded` code, Messages' "prompt is too long", Gemini's input token count
 * that exceeds its maximum (an INVALID_ARGUMENT).
 */
export function isContextRefusal (status: number, body: unknown): boolean {
  if (status !== 400 && status !== 413) return false
  const e = errorOf(body)
  if (e.code === 'context_length_exceeded') return true
  const message = text(e.message)
  if (/prompt is too long/i.test(message)) return true
  return /input token count.*exceeds the maximum|exceeds the maximum number of tokens|maximum context length/i.test(message)
}

/** A refusal on content before any output: a 400 whose error code is `content_filter` (Azure's answer). */
export function isContentFilter (status: number, body: unknown): boolean {
  if (status !== 400) return false
  const e = errorOf(body)
  return e.code === 'content_filter' || (e.innererror as { code?: unknown } | undefined)?.code === 'ResponsibleAIPolicyViolation'
}

// The fields of each protocol's body that make up the prompt.
const PROMPT_FIELDS = ['messages', 'system', 'input', 'instructions', 'contents', 'systemInstruction', 'tools', 'prompt'] as const

/**
 * The gateway's count of a body's prompt (estimate.ts, four characters a token) over its text
 * alone: the count that says, before sending, that a prompt cannot fit a model's context. Media
 * count nothing here; a provider that refuses them for length still moves the call on.
 */
export function promptCount (body: Record<string, unknown>): number {
  let chars = 0
  const walk = (v: unknown, depth: number): void => {
    if (depth > 64) return
    if (typeof v === 'string') { chars += v.length; return }
    if (Array.isArray(v)) { for (const x of v) walk(x, depth + 1); return }
    if (v === null || typeof v !== 'object') return
    for (const [k, x] of Object.entries(v as Record<string, unknown>)) {
      // media and their references are no text of the prompt
      if (k === 'data' || k === 'url' || k === 'image_url' || k === 'inlineData' || k === 'inline_data' || k === 'source' || k === 'file_data' || k === 'fileData' || k === 'type' || k === 'role') continue
      walk(x, depth + 1)
    }
  }
  for (const f of PROMPT_FIELDS) if (body[f] !== undefined) walk(body[f], 0)
  return tokensOfLength(chars)
}

/** One step of a call's chain that did not answer: the model and why. */
export interface FallbackStep { model: string, why: FallbackClass }

/**
 * The models a call may go on to: from the model that could not answer, for its class, the next
 * not tried yet and granted (an alias's targets are, through it).
 */
export class Chain {
  private readonly tried = new Set<string>()
  /** The models an alias stands for, granted through it. */
  private readonly viaAlias: ReadonlySet<string>
  readonly first: CatalogModel

  constructor (private readonly catalog: Catalog, readonly requested: CatalogModel, private readonly globs: readonly string[] | null) {
    this.viaAlias = new Set(requested.aliasOf ?? [])
    const first = requested.aliasOf === null ? requested : this.catalog.get(requested.aliasOf[0] as string)
    this.first = first ?? requested
    this.tried.add(this.first.id)
  }

  /** Whether a call to `model` has somewhere to go for this class (the context check before sending asks). */
  hasNext (model: CatalogModel, why: FallbackClass): boolean {
    return this.candidates(model, why).some((m) => !this.tried.has(m.id))
  }

  /** The next model to try after `model` failed for `why`; undefined when the chain ends. */
  next (model: CatalogModel, why: FallbackClass): CatalogModel | undefined {
    for (const m of this.candidates(model, why)) {
      if (this.tried.has(m.id)) continue
      this.tried.add(m.id)
      return m
    }
    return undefined
  }

  // the model's own fallbacks for this class first, then the alias's next targets (an alias answers by the first that answers, for any class)
  private candidates (model: CatalogModel, why: FallbackClass): CatalogModel[] {
    const out: CatalogModel[] = []
    for (const rule of model.fallbacks) {
      if (!rule.on.has(why)) continue
      for (const id of rule.models) {
        const m = this.catalog.get(id)
        if (m !== undefined && m.active && m.aliasOf === null && (this.viaAlias.has(id) || this.catalog.grants(id, this.globs))) out.push(m)
      }
    }
    for (const id of this.requested.aliasOf ?? []) {
      const m = this.catalog.get(id)
      if (m !== undefined && m.active) out.push(m)
    }
    return out
  }
}
