import type { Price } from './catalog.js'
import type { Usage } from '../translation/types.js'

// The billing rule, exact in integer nano-dollars:
//   (prompt − cached) × input + cached × cached_input + completion × output
// Prices are nano-dollars per token (catalog.ts), so a charge is a sum of integer products and
// a million small charges add up to exactly the charge of their summed tokens.

export const ZERO_USAGE: Readonly<Usage> = Object.freeze({ prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, cache_creation_input_tokens: 0 })

export function chargeOf (usage: Usage | null, price: Price | null): number {
  if (usage === null || price === null) return 0
  const cached = Math.min(usage.cached_input_tokens, usage.prompt_tokens)
  return (usage.prompt_tokens - cached) * price.input + cached * price.cached_input + usage.completion_tokens * price.output
}

/** A rough token count of text: about four characters a token, at least one for non-empty text. */
export function estimateTokens (text: string): number {
  return text === '' ? 0 : Math.max(1, Math.ceil(text.length / 4))
}

export interface Settlement {
  usage: Usage
  cost: number
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
  if (!call.billed) return { usage: { ...ZERO_USAGE }, cost: 0, estimated: false }
  let usage = call.usage
  let estimated = false
  if (usage === null) {
    usage = { ...ZERO_USAGE, prompt_tokens: estimateTokens(promptText(call.requestBody)) + tokenIds(call.requestBody), completion_tokens: estimateTokens(call.relayedText) }
    estimated = true
  } else if (!call.complete && call.relayedText !== '') {
    const out = estimateTokens(call.relayedText)
    if (out > usage.completion_tokens) { usage = { ...usage, completion_tokens: out }; estimated = true }
  }
  return { usage, cost: chargeOf(usage, price), estimated }
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
