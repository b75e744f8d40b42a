import type { Price } from './catalog.js'
import type { Usage } from './translation/types.js'

// The spec's billing rule, exact in integer nano-dollars:
//   (prompt − cached) × input + cached × cached_input + completion × output
// Prices are nano-dollars per token (catalog.ts), so a charge is a sum of integer products and
// a million small charges add up to exactly the charge of their summed tokens.

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

const ZERO: Usage = { prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, cache_creation_input_tokens: 0 }

export interface SettleInput {
  usage: Usage | null
  status: string | null
  stream: boolean
  relayedText?: string
  requestBody?: unknown
  settled?: Settlement
}

/**
 * The usage a call is billed for, computed once per call and shared by the usage, quota and
 * ledger plugins. Reported usage is used as it is. When the upstream never reported it (a client
 * abort or upstream failure mid-stream, or an upstream that sends no usage), the input is
 * estimated from the request and the output from the text relayed to the client; a reported
 * output count lower than what was relayed is raised to it.
 */
export function settle (call: SettleInput, price: Price | null): Settlement {
  if (call.settled !== undefined) return call.settled
  let usage = call.usage ?? ZERO
  let estimated = false
  const relayed = call.relayedText ?? ''
  if (call.usage === null && (call.stream || call.status === 'ok')) {
    const messages = (call.requestBody as { messages?: unknown, system?: unknown } | undefined)
    const prompt = messages === undefined ? 0 : estimateTokens(JSON.stringify([messages.system ?? '', messages.messages ?? []]))
    usage = { ...ZERO, prompt_tokens: prompt, completion_tokens: estimateTokens(relayed) }
    estimated = true
  } else if (call.usage !== null && call.status !== 'ok' && relayed !== '') {
    const out = estimateTokens(relayed)
    if (out > usage.completion_tokens) { usage = { ...usage, completion_tokens: out }; estimated = true }
  }
  const settled = { usage, cost: chargeOf(usage, price), estimated }
  call.settled = settled
  return settled
}

// An image costs at most about 1,600 input tokens on the providers we know of.
const IMAGE_TOKENS = 1_600

/**
 * An upper bound of a request's input tokens, for holds: one token per character of text (a
 * token is rarely shorter), plus a fixed allowance per image. Base64 payloads are not counted as
 * text, since a provider counts an image by its size in pixels, not its bytes.
 */
export function estimatePromptTokens (body: unknown): number {
  let tokens = 0
  const visit = (node: unknown, key: string): void => {
    if (typeof node === 'string') {
      if (key === 'data' || node.startsWith('data:')) return
      tokens += node.length
    } else if (Array.isArray(node)) {
      for (const v of node) visit(v, key)
    } else if (node !== null && typeof node === 'object') {
      const o = node as Record<string, unknown>
      if (o.type === 'image' || o.type === 'image_url') tokens += IMAGE_TOKENS
      for (const k in o) visit(o[k], k)
    }
  }
  visit((body as { messages?: unknown })?.messages, '')
  visit((body as { system?: unknown })?.system, '')
  visit((body as { tools?: unknown })?.tools, '')
  return tokens
}
