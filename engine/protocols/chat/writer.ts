import type { ChatCompletion, ChatCompletionChunk, ChatCompletionMessageFunctionToolCall } from 'openai/resources/chat/completions'
import type { CompletionUsage } from 'openai/resources/completions'
import { DONE, frame } from '../sse.js'
import type { SseEvent, TranslateCtx, Usage } from '../types.js'
import { toOpenAIUsage } from './usage.js'

// The answers a Chat Completions client is sent by the pairs in front of another upstream: the
// completion whole, or its stream of `chat.completion.chunk`s (a `usage: null` on each when the
// client asked for the usage chunk, which comes last but for [DONE]).

export type FinishReason = ChatCompletion.Choice['finish_reason']
export type ToolCall = ChatCompletionMessageFunctionToolCall

export const completionId = (ctx: Pick<TranslateCtx, 'id'>): string => `chatcmpl-${ctx.id}`

/** The usage of a completion, the reasoning tokens among the completion's when the upstream counted them. */
export function chatUsage (u: Usage): CompletionUsage {
  const usage = toOpenAIUsage(u)
  if (u.reasoning_tokens !== undefined) usage.completion_tokens_details = { reasoning_tokens: u.reasoning_tokens }
  return usage
}

/** The assistant's message of a choice: its text (null when it only calls tools) and its tool calls. */
export function assistantMessage (text: string, toolCalls: ToolCall[]): ChatCompletion.Choice['message'] {
  return { role: 'assistant', content: text === '' && toolCalls.length > 0 ? null : text, refusal: null, ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}) }
}

/** A whole completion. */
export function completion (ctx: TranslateCtx, choices: ChatCompletion.Choice[], usage: CompletionUsage | null): ChatCompletion {
  const out: ChatCompletion = { id: completionId(ctx), object: 'chat.completion', created: ctx.created, model: ctx.model, choices }
  if (usage !== null) out.usage = usage
  return out
}

/** One chunk of a stream: a delta of one choice. */
export function chunk (ctx: TranslateCtx, index: number, delta: ChatCompletionChunk.Choice.Delta, finish: FinishReason | null = null): SseEvent {
  const c: ChatCompletionChunk = { id: completionId(ctx), object: 'chat.completion.chunk', created: ctx.created, model: ctx.model, choices: [{ index, delta, finish_reason: finish, logprobs: null }] }
  if (ctx.includeUsage) c.usage = null
  return frame(c)
}

/** The end of a stream: the usage chunk when the client asked for it and the upstream counted, then [DONE]. */
export function streamEnd (ctx: TranslateCtx, usage: CompletionUsage | null): SseEvent[] {
  const out: SseEvent[] = []
  if (ctx.includeUsage && usage !== null) {
    const c: ChatCompletionChunk = { id: completionId(ctx), object: 'chat.completion.chunk', created: ctx.created, model: ctx.model, choices: [], usage }
    out.push(frame(c))
  }
  out.push(DONE)
  return out
}
