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
    tool_call: usage.server_tools === undefined ? 0 : serverToolFees(usage.server_tools, price),
    tier: r.above ?? null
  }
}

/** The per-use fees of the tools the provider ran (web searches...), at the sheet's `server_tools` prices. */
function serverToolFees (uses: Readonly<Record<string, number>>, price: Price): number {
  let nano = 0
  for (const kind in uses) nano += (uses[kind] ?? 0) * (price.server_tools?.get(kind) ?? 0)
  return nano
}

// The most one call is billed for, whatever its upstream reports: a count past these is taken as
// the ceiling (and logged), so that a charge stays an exact integer of nano-dollars.
export const MAX_TOKENS_PER_CALL = 100_000_000
export const MAX_IMAGES_PER_CALL = 10_000
export const MAX_TOOL_USES_PER_CALL = 10_000

const TOKEN_COUNTS = ['prompt_tokens', 'cached_input_tokens', 'completion_tokens', 'cache_creation_input_tokens', 'cache_write_1h_tokens', 'reasoning_tokens', 'audio_input_tokens', 'audio_output_tokens'] as const

/** A count held between 0 and `max`, a whole number: NaN and negatives are 0. */
const within = (v: number, max: number): number => Number.isFinite(v) ? Math.min(max, Math.max(0, Math.floor(v))) : (v === Infinity ? max : 0)

/**
 * Usage an upstream reported, each count held to the ceilings above (a whole number between 0
 * and the ceiling); `clamped` says whether any count was changed.
 */
export function boundUsage (usage: Usage): { usage: Usage, clamped: boolean } {
  let out: Usage | null = null
  const set = <K extends keyof Usage>(k: K, v: Usage[K]): void => { (out ??= { ...usage })[k] = v }
  for (const k of TOKEN_COUNTS) {
    const v = usage[k]
    if (v === undefined) continue
    const b = within(v, MAX_TOKENS_PER_CALL)
    if (b !== v) set(k, b)
  }
  if (usage.images !== undefined) {
    const b = within(usage.images, MAX_IMAGES_PER_CALL)
    if (b !== usage.images) set('images', b)
  }
  if (usage.server_tools !== undefined) {
    let tools: Record<string, number> | null = null
    for (const kind in usage.server_tools) {
      const v = usage.server_tools[kind] as number
      const b = within(v, MAX_TOOL_USES_PER_CALL)
      if (b !== v) (tools ??= { ...usage.server_tools })[kind] = b
    }
    if (tools !== null) set('server_tools', tools)
  }
  return out === null ? { usage, clamped: false } : { usage: out, clamped: true }
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
  /** True when a count the upstream reported was past its ceiling (boundUsage) and billed as the ceiling. */
  clamped?: boolean
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
  /** Uses of server tools each call makes, counted when the upstream reports none (Chat Completions' `web_search_options` at an OpenAI provider). */
  perCallTools?: Readonly<Record<string, number>>
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
  // uses billed per call that the upstream reports nowhere (Chat Completions' web search)
  if (call.perCallTools !== undefined) {
    let tools: Record<string, number> | null = null
    for (const kind in call.perCallTools) if (usage.server_tools?.[kind] === undefined) (tools ??= { ...usage.server_tools })[kind] = call.perCallTools[kind] as number
    if (tools !== null) usage = { ...usage, server_tools: tools }
  }
  const bounded = boundUsage(usage)
  const detail = costOf(bounded.usage, price)
  return { usage: bounded.usage, cost: totalOf(detail), detail, estimated, clamped: bounded.clamped }
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
function visitText (body: unknown, fn: (text: string, key: string) => void, onObject?: (o: Record<string, unknown>) => void, withTools = true): void {
  if (body === null || typeof body !== 'object') return
  // two stacks side by side rather than a pair per node: this runs at every admission
  const nodes: unknown[] = []
  const keys: string[] = []
  for (const field of PROMPT_FIELDS) { nodes.push((body as Record<string, unknown>)[field]); keys.push(field) }
  if (withTools) {
    nodes.push((body as Record<string, unknown>).tools)
    keys.push('tools')
  }
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

// An image costs at most about 1,600 input tokens on the providers we know of: each resizes a
// larger one before it counts it.
const IMAGE_TOKENS = 1_600
const IMAGE_TYPES = new Set(['image', 'image_url', 'input_image'])
// blocks whose size in tokens the gateway cannot read: audio, files, video, a document that is
// no plain text (a PDF is pages of text and pictures, its bytes say neither)
const UNSIZED_TYPES = new Set(['input_audio', 'audio', 'file', 'input_file', 'video_url', 'input_video', 'video'])
// per message or block: the role and separator tokens a provider wraps each in
const PER_OBJECT = 4
// what a provider adds to the prompt of a call that declares tools (Anthropic's tool-use preamble is ~350)
const TOOLS_PREAMBLE = 1_000
// the fields of a request besides its prompt that a provider renders into the prompt, as JSON
const JSON_FIELDS = ['tools', 'response_format', 'output_format', 'text'] as const

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v)

/** The bytes of text as UTF-8: no tokenizer makes more tokens than bytes (a token is at least one). */
const utf8 = (text: string): number => Buffer.byteLength(text, 'utf8')

/** The tokens of a media or document block: a fixed allowance for an image, the text of a plain-text document, else unsized (Infinity). */
function mediaTokens (o: Record<string, unknown>): number {
  const type = o.type
  if (typeof type === 'string') {
    if (IMAGE_TYPES.has(type)) return IMAGE_TOKENS
    if (UNSIZED_TYPES.has(type)) return Infinity
    if (type === 'document') {
      const source = isObject(o.source) ? o.source : undefined
      // a plain-text document's text is counted where it stands (its `data`), its content blocks as blocks
      if (source?.type === 'text' || source?.type === 'content') return 0
      return Infinity
    }
    // a plain-text document's source: its text, which the visit skips as `data`
    if (type === 'text' && typeof o.data === 'string') return utf8(o.data)
  }
  const inline = isObject(o.inlineData) ? o.inlineData : isObject(o.inline_data) ? o.inline_data : undefined
  const file = isObject(o.fileData) ? o.fileData : isObject(o.file_data) ? o.file_data : undefined
  const media = inline ?? file
  if (media !== undefined) {
    const mime = String(media.mimeType ?? media.mime_type ?? '').toLowerCase()
    if (mime.startsWith('image/')) return IMAGE_TOKENS
    // inline plain text: its decoded bytes
    if (inline !== undefined && mime.startsWith('text/') && typeof inline.data === 'string') return Math.ceil(inline.data.length * 3 / 4)
    return Infinity
  }
  return 0
}

/**
 * An upper bound of a request's input tokens, for holds: one token per UTF-8 byte of text (no
 * tokenizer makes more: dense scripts and emoji are several bytes a character), a few tokens per
 * message or block, the tools and output schemas as the JSON they are, a fixed allowance per
 * image (providers resize a large one before counting it), the text of plain-text documents.
 * Infinity when the body holds a block whose size in tokens cannot be read from it (a PDF,
 * audio, video, a file by reference): the caller bounds it otherwise (a model's context window).
 */
export function estimatePromptTokens (body: unknown): number {
  let tokens = tokenIds(body)
  visitText(body, (text) => { tokens += utf8(text) }, (o) => { tokens += PER_OBJECT + mediaTokens(o) }, false)
  if (isObject(body)) {
    for (const field of JSON_FIELDS) {
      const v = body[field]
      if (v === undefined || v === null) continue
      tokens += utf8(JSON.stringify(v))
      if (field === 'tools' && Array.isArray(v) && v.length > 0) tokens += TOOLS_PREAMBLE
    }
    const g = body.generationConfig
    if (isObject(g)) for (const k of ['responseSchema', 'responseJsonSchema', 'response_schema', 'response_json_schema']) if (g[k] !== undefined) tokens += utf8(JSON.stringify(g[k]))
  }
  return tokens
}
