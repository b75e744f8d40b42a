import type { ThinkingConfigParam } from '@anthropic-ai/sdk/resources/messages'
import type { ChatCompletion, ChatCompletionContentPart, ChatCompletionMessage, ChatCompletionCreateParamsBase, ChatCompletionMessageParam } from 'openai/resources/chat/completions'
import { InvalidField } from '../../kernel/errors.js'
import { parseToolArguments, textParts } from '../content.js'
import { entry, kindOf, list, text, type Dropped } from '../fields.js'
import type { Json } from '../types.js'

// A Chat Completions request as the pairs in front of another upstream protocol read it. Its
// conversation is read once, for every such pair: each message checked (a wrong type is a 400
// naming its field), what no other protocol can carry reported, and the turns handed over typed.
// A user's content stays as the client wrote it (each upstream takes other media), with where it
// sits for a 400.

/**
 * A Chat Completions request: the SDK's, with the Messages fields some OpenAI-compatible servers
 * take and some clients send (table.ts says where each goes).
 */
export interface ChatRequest extends ChatCompletionCreateParamsBase {
  top_k?: number | null
  thinking?: ThinkingConfigParam | null
}

/**
 * A client's body as a Chat Completions request. The route's schema has checked what the gateway
 * itself reads (the model, each message an object with a role, stream, max_tokens); every other
 * field is checked where a pair reads it (fields.ts), so the SDK's type says what the body claims
 * to be, not what has been proven of it.
 */
export const readChatRequest = (body: Json): ChatRequest => body as unknown as ChatRequest

/** An upstream's answer as the SDK types it: a pair checks each field where it reads it, as the answer is not the gateway's. */
export const readChatCompletion = (body: Json): ChatCompletion => body as unknown as ChatCompletion

/** A completion's message as DeepSeek, vLLM and other OpenAI-compatible servers write it: the SDK's, with the reasoning text beside the answer. */
export type CompletionMessage = ChatCompletionMessage & { reasoning_content?: string | null }

/** A part of a user's content: the SDK's, and the video some OpenAI-compatible servers take. */
export type ChatUserPart = ChatCompletionContentPart | { type: 'video_url', video_url: { url: string } }

/** A tool call of an assistant's turn, its arguments parsed. */
export interface ChatCall { id: string, name: string, input: Json }

export type ChatTurn =
  | { role: 'system', text: string }
  | { role: 'user', content: string | readonly ChatUserPart[], at: string }
  | { role: 'assistant', texts: string[], calls: ChatCall[] }
  | { role: 'tool', id: string, text: string, at: string }

/** `body.messages` as turns; the results of calls to tools that were dropped go with them. */
export function readChatTurns (messages: readonly ChatCompletionMessageParam[], dropped: Dropped): ChatTurn[] {
  const turns: ChatTurn[] = []
  // tool calls dropped with their custom tools: their results go too
  const droppedCalls = new Set<string>()
  const other = (p: Json): void => dropped.add(`messages.${kindOf(p.type)}`)
  for (const [i, raw] of list(messages, 'messages').entries()) {
    const at = `messages[${i}]`
    const m = entry(raw, at)
    if ('name' in m && m.name !== undefined && m.name !== null && m.role !== 'function') dropped.add('messages.name')
    switch (m.role) {
      case 'system':
      case 'developer': {
        const t = textParts(m.content, `${at}.content`, other).join('\n')
        if (t !== '') turns.push({ role: 'system', text: t })
        break
      }
      case 'user':
        turns.push({ role: 'user', content: m.content, at: `${at}.content` })
        break
      case 'assistant': {
        const texts = textParts(m.content, `${at}.content`, other)
        const calls: ChatCall[] = []
        for (const [j, rawCall] of list(m.tool_calls, `${at}.tool_calls`).entries()) {
          const cat = `${at}.tool_calls[${j}]`
          const call = entry(rawCall, cat)
          if (call.type === 'custom') {
            dropped.add('messages.tool_calls.custom')
            if (typeof call.id === 'string') droppedCalls.add(call.id)
            continue
          }
          const fn = entry(call.function, `${cat}.function`)
          calls.push({ id: text(call.id, `${cat}.id`), name: text(fn.name, `${cat}.function.name`), input: parseToolArguments(fn.arguments) })
        }
        if (m.refusal !== undefined && m.refusal !== null) dropped.add('messages.refusal')
        if (m.audio !== undefined && m.audio !== null) dropped.add('messages.audio')
        if (m.function_call !== undefined && m.function_call !== null) dropped.add('messages.function_call')
        turns.push({ role: 'assistant', texts, calls })
        break
      }
      case 'tool': {
        const id = text(m.tool_call_id, `${at}.tool_call_id`)
        const t = textParts(m.content, `${at}.content`, other).join('\n')
        if (!droppedCalls.has(id)) turns.push({ role: 'tool', id, text: t, at: `${at}.tool_call_id` })
        break
      }
      case 'function':
        dropped.add('messages.function')
        break
      default:
        throw new InvalidField({ field: `${at}.role`, reason: 'must be system, developer, user, assistant, tool or function' })
    }
  }
  return turns
}
