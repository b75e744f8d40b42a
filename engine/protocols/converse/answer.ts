import type { ContentBlock as MessagesBlock, Message, StopReason as MessagesStopReason, Usage as MessagesUsage } from '@anthropic-ai/sdk/resources/messages'
import type { ErrorResponse } from '@anthropic-ai/sdk/resources/shared'
import { UpstreamUnavailable, messagesTypeFor } from '../../kernel/errors.js'
import { isObj } from '../../kernel/json.js'
import type { TranslateCtx, Usage } from '../../translation/types.js'
import type { ConverseAnswer, ConverseContentBlock, StopReason, TokenUsage } from './types.js'

// The Converse reader: an answer, its usage and its errors, read strictly (an answer that is not
// Converse's shape is the upstream's fault: a 502, never a half-built reply) and handed on as the
// Messages shape, which every client protocol's pair already reads.

/** A Converse answer that is not what Converse sends. */
const malformed = (what: string): Error => new UpstreamUnavailable({}, { cause: new Error(`malformed Converse answer: ${what}`) })

const count = (v: unknown, what: string): number => {
  if (v === undefined || v === null) return 0
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw malformed(what)
  return Math.floor(v)
}

// Converse's stop reasons → Messages'. A guardrail or content filter that stopped the answer is
// Messages' refusal (Chat's content_filter); a malformed output or tool call ends the turn.
export const STOP_REASONS: ReadonlyMap<string, MessagesStopReason> = new Map<StopReason, MessagesStopReason>([
  ['end_turn', 'end_turn'],
  ['tool_use', 'tool_use'],
  ['max_tokens', 'max_tokens'],
  ['stop_sequence', 'stop_sequence'],
  ['guardrail_intervened', 'refusal'],
  ['content_filtered', 'refusal'],
  ['model_context_window_exceeded', 'model_context_window_exceeded'],
  ['malformed_model_output', 'end_turn'],
  ['malformed_tool_use', 'end_turn']
])

/** A Converse stop reason as Messages says it (an unknown one ends the turn). */
export const stopReasonOf = (v: unknown): MessagesStopReason => (typeof v === 'string' ? STOP_REASONS.get(v) : undefined) ?? 'end_turn'

/** Converse's usage read strictly: inputTokens is the uncached input; the cache's reads and writes beside it, the writes split by TTL in cacheDetails. */
export function readTokenUsage (u: unknown): TokenUsage {
  if (!isObj(u)) throw malformed('usage')
  const out: TokenUsage = { inputTokens: count(u.inputTokens, 'usage.inputTokens'), outputTokens: count(u.outputTokens, 'usage.outputTokens') }
  const read = count(u.cacheReadInputTokens, 'usage.cacheReadInputTokens')
  const write = count(u.cacheWriteInputTokens, 'usage.cacheWriteInputTokens')
  if (read > 0) out.cacheReadInputTokens = read
  if (write > 0) out.cacheWriteInputTokens = write
  if (Array.isArray(u.cacheDetails)) {
    out.cacheDetails = u.cacheDetails.map((d, i) => {
      if (!isObj(d) || (d.ttl !== '5m' && d.ttl !== '1h')) throw malformed(`usage.cacheDetails[${i}]`)
      return { ttl: d.ttl, inputTokens: count(d.inputTokens, `usage.cacheDetails[${i}].inputTokens`) }
    })
  }
  return out
}

/** Converse's usage as a Messages usage: the same three parts of the input, the writes split 5m / 1h. */
export function messagesUsage (u: TokenUsage): MessagesUsage {
  const write = u.cacheWriteInputTokens ?? 0
  const hour = Math.min(write, (u.cacheDetails ?? []).filter((d) => d.ttl === '1h').reduce((s, d) => s + d.inputTokens, 0))
  return {
    input_tokens: u.inputTokens,
    output_tokens: u.outputTokens,
    cache_read_input_tokens: u.cacheReadInputTokens ?? 0,
    cache_creation_input_tokens: write,
    cache_creation: write > 0 ? { ephemeral_5m_input_tokens: write - hour, ephemeral_1h_input_tokens: hour } : null,
    server_tool_use: null,
    service_tier: null,
    inference_geo: null
  } as MessagesUsage
}

/** Converse's usage normalised (prompt_tokens counts all input: uncached, read and written). */
export function usageOf (u: TokenUsage): Usage {
  const write = u.cacheWriteInputTokens ?? 0
  const read = u.cacheReadInputTokens ?? 0
  const out: Usage = { prompt_tokens: u.inputTokens + read + write, cached_input_tokens: read, completion_tokens: u.outputTokens, cache_creation_input_tokens: write }
  const hour = Math.min(write, (u.cacheDetails ?? []).filter((d) => d.ttl === '1h').reduce((s, d) => s + d.inputTokens, 0))
  if (hour > 0) out.cache_write_1h_tokens = hour
  return out
}

function block (b: ConverseContentBlock, i: number): MessagesBlock | null {
  const at = `output.message.content[${i}]`
  if (!isObj(b)) throw malformed(at)
  if (typeof b.text === 'string') return { type: 'text', text: b.text, citations: null }
  if (isObj(b.toolUse)) {
    const t = b.toolUse
    if (typeof t.toolUseId !== 'string' || typeof t.name !== 'string') throw malformed(`${at}.toolUse`)
    return { type: 'tool_use', id: t.toolUseId, name: t.name, input: t.input ?? {}, caller: { type: 'direct' } } as MessagesBlock
  }
  if (isObj(b.reasoningContent)) {
    const r = b.reasoningContent
    if (isObj(r.reasoningText) && typeof r.reasoningText.text === 'string') {
      return { type: 'thinking', thinking: r.reasoningText.text, signature: typeof r.reasoningText.signature === 'string' ? r.reasoningText.signature : '' }
    }
    if (typeof r.redactedContent === 'string') return { type: 'redacted_thinking', data: r.redactedContent }
    throw malformed(`${at}.reasoningContent`)
  }
  return null // citations, guard content and blocks added later carry nothing a client's protocol shows
}

/** A Converse answer → the Messages answer, and the call's usage. */
export function readAnswer (body: ConverseAnswer, ctx: Pick<TranslateCtx, 'id' | 'model'>): { message: Message, usage: Usage } {
  const message = isObj(body.output) ? body.output.message : undefined
  if (!isObj(message) || !Array.isArray(message.content)) throw malformed('output.message')
  const usage = readTokenUsage(body.usage)
  const content: MessagesBlock[] = []
  for (const [i, b] of message.content.entries()) {
    const out = block(b, i)
    if (out !== null) content.push(out)
  }
  const out: Message = {
    id: `msg_${ctx.id}`,
    type: 'message',
    role: 'assistant',
    model: ctx.model,
    content,
    stop_reason: stopReasonOf(body.stopReason),
    stop_sequence: null,
    usage: messagesUsage(usage),
    container: null
  } as Message
  return { message: out, usage: usageOf(usage) }
}

// Bedrock's error names (x-amzn-ErrorType, or __type in the body) → Messages error types
const ERROR_TYPES = new Map<string, string>([
  ['ThrottlingException', 'rate_limit_error'],
  ['ServiceQuotaExceededException', 'rate_limit_error'],
  ['ValidationException', 'invalid_request_error'],
  ['AccessDeniedException', 'permission_error'],
  ['ResourceNotFoundException', 'not_found_error'],
  ['ModelTimeoutException', 'timeout_error'],
  ['ModelNotReadyException', 'overloaded_error'],
  ['ServiceUnavailableException', 'overloaded_error'],
  ['ModelErrorException', 'api_error'],
  ['ModelStreamErrorException', 'api_error'],
  ['InternalServerException', 'api_error']
])

/** The error's name: `ThrottlingException` from `x-amzn-ErrorType: ThrottlingException:http://…` or a body's `__type`. */
export function errorName (body: unknown, header?: string): string | undefined {
  const raw = header ?? (isObj(body) && typeof body.__type === 'string' ? body.__type : undefined)
  if (raw === undefined) return undefined
  const name = raw.split(':')[0] ?? raw
  return name.slice(name.lastIndexOf('#') + 1)
}

/** A Messages error body as the gateway writes one (Anthropic's request id aside: Bedrock's answer has none). */
export type MessagesErrorBody = Pick<ErrorResponse, 'type'> & { error: { type: string, message: string } }

/** A Bedrock error body (`{message}`) as a Messages error body, so that every client's pair maps it as it maps Anthropic's. */
export function messagesError (status: number, body: unknown, header?: string): MessagesErrorBody {
  const name = errorName(body, header)
  const lower = isObj(body) ? body.Message ?? body.message : undefined
  const message = typeof lower === 'string' && lower !== '' ? lower : `The upstream provider answered ${status}${name !== undefined ? ` (${name})` : ''}.`
  const type = (name !== undefined ? ERROR_TYPES.get(name.charAt(0).toUpperCase() + name.slice(1)) : undefined) ?? messagesTypeFor(status)
  return { type: 'error', error: { type, message } }
}
