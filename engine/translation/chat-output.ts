import type { ChatCompletion, ChatCompletionMessageToolCall } from 'openai/resources/chat/completions'
import type { CompletionUsage } from 'openai/resources/completions'
import type { Json, TranslateCtx } from './types.js'

// The answers written to a Chat Completions client, whole: the pairs in front of one and the demo
// provider write them here. A stream is written by the pairs' mappers, or replayed from the whole
// answer (replay.ts).

export type ToolCall = Extract<ChatCompletionMessageToolCall, { type: 'function' }>
export type FinishReason = ChatCompletion.Choice['finish_reason']

/** The assistant's message: its text (null when it only calls tools) and its tool calls. */
export function assistantMessage (text: string, toolCalls: ToolCall[]): ChatCompletion.Choice['message'] {
  return { role: 'assistant', content: text === '' && toolCalls.length > 0 ? null : text, refusal: null, ...(toolCalls.length > 0 ? { tool_calls: toolCalls } : {}) }
}

export function choice (index: number, message: ChatCompletion.Choice['message'], finish: FinishReason): ChatCompletion.Choice {
  return { index, message, finish_reason: finish, logprobs: null }
}

/** A chat.completion object; its usage when the answer has one. */
export function chatCompletion (ctx: Pick<TranslateCtx, 'id' | 'created' | 'model'>, choices: ChatCompletion.Choice[], usage?: CompletionUsage): Json {
  const out: ChatCompletion = { id: `chatcmpl-${ctx.id}`, object: 'chat.completion', created: ctx.created, model: ctx.model, choices }
  if (usage !== undefined) out.usage = usage
  return { ...out }
}
