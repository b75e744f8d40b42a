import type { Price, Rates } from './catalog.js'
import type { CostDetail } from '../store/types.js'
import type { Usage } from '../translation/types.js'
import { estimateTokens } from '../kernel/estimate.js'

// The charge, exact in integer nano-dollars, follows the provider's price sheet:
//   input tokens neither read from nor written to a cache   × input
//   cache reads (cached_input_tokens)                        × cached_input
//   cache writes (cache_creation_input_tokens): the 1-hour part × cache_write_1h, the rest × cache_write
//   completion tokens (reasoning included)                   × output
// where audio tokens bill at their own rates inside those parts: the audio input tokens (taken as
// uncached first, so a call is never charged less than its sheet says) × input_audio, the audio
// output tokens × output_audio;
// at the rates of the highest tier whose above_input_tokens the prompt exceeds (the base rates when
// none), plus per_image for each image generated (by the request's size) and per_request once.
// Rates are nano-dollars per token (catalog.ts), so a charge is a sum of integer products and a
// million small charges add up to exactly the charge of their summed tokens (within one tier).

export const ZERO_USAGE: Readonly<Usage> = Object.freeze({ prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, cache_creation_input_tokens: 0 })

export type { CostDetail }

export const ZERO_COST: Readonly<CostDetail> = Object.freeze({ input: 0, cached_input: 0, cache_write: 0, output: 0, images: 0, per_request: 0, tool_call: 0, tier: null })

/** The sum of a charge's parts. */
export function totalOf (d: CostDetail): number {
  return d.input + d.cached_input + d.cache_write + d.output + d.images + d.per_request + d.tool_call
}

/** The rates a call of `promptTokens` bills at: the highest tier it exceeds, else the base. */
export function ratesFor (price: Price, promptTokens: number): Rates & { above?: number } {
  const tiers = price.tiers
  if (tiers !== undefined) {
    for (let i = tiers.length - 1; i >= 0; i--) {
      const tier = tiers[i] as Rates & { above: number }
      if (promptTokens > tier.above) return tier
    }
  }
  return price
}

/** The price of one image of `size`: its own, else the default. */
export function imagePrice (price: Price, size: string | undefined): number {
  const sheet = price.per_image
  if (sheet === undefined) return 0
  return (size === undefined ? undefined : sheet.get(size)) ?? sheet.get('default') ?? 0
}

/** What a call with this usage costs, by part. */
export function costOf (usage: Usage | null, price: Price | null): CostDetail {
  if (usage === null || price === null) return { ...ZERO_COST }
  const prompt = usage.prompt_tokens
  const cached = Math.min(usage.cached_input_tokens, prompt)
  const writes = Math.min(usage.cache_creation_input_tokens, prompt - cached)
  const hour = Math.min(usage.cache_write_1h_tokens ?? 0, writes)
  const r = ratesFor(price, prompt)
  const write = r.cache_write ?? r.input
  const images = usage.images ?? 0
  const fresh = prompt - cached - writes
  const audioIn = Math.min(usage.audio_input_tokens ?? 0, fresh)
  const audioOut = Math.min(usage.audio_output_tokens ?? 0, usage.completion_tokens)
  return {
    input: (fresh - audioIn) * r.input + audioIn * (r.input_audio ?? r.input),
    cached_input: cached * r.cached_input,
    cache_write: (writes - hour) * write + hour * (r.cache_write_1h ?? write),
    output: (usage.completion_tokens - audioOut) * r.output + audioOut * (r.output_audio ?? r.output),
    images: images > 0 ? images * imagePrice(price, usage.image_size) : 0,
    per_request: price.per_request ?? 0,
    tool_call: 0,
    tier: r.above ?? null
  }
}

export function chargeOf (usage: Usage | null, price: Price | null): number {
  return totalOf(costOf(usage, price))
}

/**
 * An upper bound of what a call can cost, for holds: `tokens` (prompt and output) at the highest
 * token rate of every tier, `images` at the highest image price, and the per-request price.
 */
export function worstCaseCharge (price: Price, tokens: number, images = 0): number {
  let rate = 0
  for (const r of [price, ...price.tiers ?? []]) rate = Math.max(rate, r.input, r.output, r.cached_input, r.cache_write ?? 0, r.cache_write_1h ?? 0, r.input_audio ?? 0, r.output_audio ?? 0)
  const image = price.per_image === undefined ? 0 : Math.max(...price.per_image.values())
  return tokens * rate + images * image + (price.per_request ?? 0)
}

export { estimateTokens }

export interface Settlement {
  usage: Usage
  cost: number
  /** The cost by part (summing to `cost`). */
  detail: CostDetail
  /** True when some counts were estimated because the upstream never reported them. */
  estimated: boolean
}

export interface SettleInput {
  /** The client got part of an answer: the call is charged. Otherwise it costs nothing. */
  billed: boolean
  /** Usage the upstream reported; null when it reported none. */
  usage: Usage | null
  /** The call ended normally (the upstream finished its answer). */
  complete: boolean
  /** Output text relayed to the client, for estimating output when usage never came. */
  relayedText: string
  /** The client body, for estimating input when usage never came. */
  requestBody: unknown
}

/**
 * The usage a call is billed for. A call that never got an answer to its client (refused, or
 * failed before the first byte) costs nothing. Reported usage is used as it is; when the
 * upstream never reported it (a client abort or upstream failure mid-stream, or an upstream that
 * sends no usage), the input is estimated from the request and the output from the text relayed;
 * a reported output count lower than what was relayed is raised to it.
 */
export function settle (call: SettleInput, price: Price | null): Settlement {
  if (!call.billed) return { usage: { ...ZERO_USAGE }, cost: 0, detail: { ...ZERO_COST }, estimated: false }
  let usage = call.usage
  let estimated = false
  if (usage === null) {
    usage = { ...ZERO_USAGE, prompt_tokens: estimateTokens(promptText(call.requestBody)) + tokenIds(call.requestBody), completion_tokens: estimateTokens(call.relayedText) }
    estimated = true
  } else if (!call.complete && call.relayedText !== '') {
    const out = estimateTokens(call.relayedText)
    if (out > usage.completion_tokens) { usage = { ...usage, completion_tokens: out }; estimated = true }
  }
  const detail = costOf(usage, price)
  return { usage, cost: totalOf(detail), detail, estimated }
}

// The text of a request's prompt (system, messages or input, instructions; Gemini's contents and
// systemInstruction), for an estimate.
function promptText (body: unknown): string {
  const texts: string[] = []
  visitText(body, (text) => { texts.push(text) })
  return texts.join('\n')
}

// (and the inputs of embeddings, OpenAI's and Google's, and an image generation's prompt)
const PROMPT_FIELDS = ['system', 'messages', 'input', 'instructions', 'contents', 'systemInstruction', 'prompt', 'content', 'requests'] as const
// strings that are no text: base64 payloads, and Gemini's opaque thought signatures
const NOT_TEXT = new Set(['data', 'thoughtSignature'])

/**
 * Calls `fn` with every string inside the prompt fields of a request, skipping base64 payloads.
 * Iterative, so a hostile nesting depth cannot overflow the stack.
 */
function visitText (body: unknown, fn: (text: string, key: string) => void, onObject?: (o: Record<string, unknown>) => void): void {
  if (body === null || typeof body !== 'object') return
  // two stacks side by side rather than a pair per node: this runs at every admission
  const nodes: unknown[] = []
  const keys: string[] = []
  for (const field of PROMPT_FIELDS) { nodes.push((body as Record<string, unknown>)[field]); keys.push(field) }
  nodes.push((body as Record<string, unknown>).tools)
  keys.push('tools')
  while (nodes.length > 0) {
    const node = nodes.pop()
    const key = keys.pop() as string
    if (typeof node === 'string') {
      if (!NOT_TEXT.has(key) && !node.startsWith('data:')) fn(node, key)
    } else if (Array.isArray(node)) {
      for (let i = node.length - 1; i >= 0; i--) { nodes.push(node[i]); keys.push(key) }
    } else if (node !== null && typeof node === 'object') {
      const o = node as Record<string, unknown>
      onObject?.(o)
      for (const k in o) { nodes.push(o[k]); keys.push(k) }
    }
  }
}

/** The token ids an embeddings request gives as its input (a list of ids, or a list of such lists): one token each. */
function tokenIds (body: unknown): number {
  const input = body !== null && typeof body === 'object' ? (body as Record<string, unknown>).input : undefined
  if (!Array.isArray(input)) return 0
  let n = 0
  for (const v of input) {
    if (typeof v === 'number') n++
    else if (Array.isArray(v)) n += v.length
  }
  return n
}

// An image costs at most about 1,600 input tokens on the providers we know of.
const IMAGE_TOKENS = 1_600
const IMAGE_TYPES = new Set(['image', 'image_url', 'input_image'])
// a Gemini part's inlineData or fileData
const isMedia = (v: unknown): boolean => v !== null && typeof v === 'object'

/**
 * An upper bound of a request's input tokens, for holds: one token per character of text (a
 * token is rarely shorter), plus a fixed allowance per image. Base64 payloads are not counted as
 * text, since a provider counts an image by its size in pixels, not its bytes.
 */
export function estimatePromptTokens (body: unknown): number {
  let tokens = tokenIds(body)
  visitText(body, (text) => { tokens += text.length }, (o) => { if (IMAGE_TYPES.has(o.type as string) || isMedia(o.inlineData) || isMedia(o.fileData)) tokens += IMAGE_TOKENS })
  return tokens
}
