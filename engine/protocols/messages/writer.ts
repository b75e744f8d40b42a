import type { ContentBlock, Message, RawMessageStreamEvent, StopReason, TextBlock, ToolUseBlock } from '@anthropic-ai/sdk/resources/messages'
import { frame } from '../sse.js'
import type { SseEvent, TranslateCtx, Usage } from '../types.js'
import { toMessagesUsage, type MessagesUsageOut } from './usage.js'

// The answers a Messages client is sent by the pairs in front of another upstream: the message
// whole, or its stream of named events (message_start with the input counted so far,
// content_block_start / _delta / _stop, message_delta with the stop reason and the counts,
// message_stop).

const ZERO: Usage = { prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, cache_creation_input_tokens: 0 }

/** The Messages usage of a call, zero when the upstream reported none (a message always has one). */
export const messagesUsage = (usage: Usage | null): MessagesUsageOut => toMessagesUsage(usage ?? ZERO)

export const messageId = (ctx: Pick<TranslateCtx, 'id'>): string => `msg_${ctx.id}`

/**
 * A content block as the pairs write one: Anthropic's, a text block without its citations and a
 * tool_use block without its caller as well (the pairs have nothing for them: a client reads them
 * as absent).
 */
export type AnswerBlock = ContentBlock | Omit<TextBlock, 'citations'> | Omit<ToolUseBlock, 'caller'>

/** A message as the pairs write one: the SDK's, less what only Anthropic's own API fills in (container, diagnostics, stop details), with the counts they write. */
export type AnswerMessage = Omit<Message, 'container' | 'content' | 'diagnostics' | 'stop_details' | 'stop_reason' | 'usage'> & {
  content: AnswerBlock[]
  // a reason another protocol gave that Messages does not list goes as it came
  stop_reason: StopReason | string | null
  usage: MessagesUsageOut
}

/** A whole message: its content blocks, how it stopped (and the stop sequence it met), its usage. */
export function message (ctx: Pick<TranslateCtx, 'id' | 'model'>, content: AnswerBlock[], stopReason: StopReason | string | null, usage: Usage | null, stopSequence: string | null = null): AnswerMessage {
  return { id: messageId(ctx), type: 'message', role: 'assistant', model: ctx.model, content, stop_reason: stopReason, stop_sequence: stopSequence, usage: messagesUsage(usage) }
}

/** A stream event: its type is the SSE event's name too. */
export function event (type: RawMessageStreamEvent['type'] | 'error', data: object = {}): SseEvent {
  return frame({ type, ...data }, type)
}

/** The counts of message_start and message_delta: input and cache reads as known, no cache writes (the translated upstreams make none). */
const streamCounts = (u: MessagesUsageOut, output: number): MessagesUsageOut =>
  ({ input_tokens: u.input_tokens, cache_creation_input_tokens: 0, cache_read_input_tokens: u.cache_read_input_tokens, output_tokens: output })

/** message_start, with the input counted so far (none when the upstream tells it only at the end). */
export function messageStart (ctx: TranslateCtx, usage: Usage | null): SseEvent {
  return event('message_start', {
    message: { id: messageId(ctx), type: 'message', role: 'assistant', model: ctx.model, content: [], stop_reason: null, stop_sequence: null, usage: streamCounts(messagesUsage(usage), 0) }
  })
}

/** message_delta with the stop reason and the call's counts, then message_stop. */
export function messageEnd (stopReason: string, usage: Usage | null): SseEvent[] {
  const u = messagesUsage(usage)
  return [event('message_delta', { delta: { stop_reason: stopReason, stop_sequence: null }, usage: streamCounts(u, u.output_tokens) }), event('message_stop')]
}
