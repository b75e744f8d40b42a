import { InvalidField } from '../../kernel/errors.js'
import { parseToolArguments, textParts } from '../content.js'
import { entry, kindOf, list, text, type Dropped } from '../fields.js'
import type { Json } from '../types.js'

// The conversation of a Chat Completions request read once, for every pair in front of another
// upstream protocol: each message checked (a wrong type is a 400 naming its field), what no other
// protocol can carry reported, and the turns handed over typed. A user's content stays as the
// client wrote it (each upstream takes other media), with where it sits for a 400.

export type ChatTurn =
  | { role: 'system', text: string }
  | { role: 'user', content: unknown, at: string }
  | { role: 'assistant', texts: string[], calls: Array<{ id: string, name: string, input: Json }> }
  | { role: 'tool', id: string, text: string, at: string }

/** `body.messages` as turns; the results of calls to tools that were dropped go with them. */
export function readChatTurns (messages: unknown, dropped: Dropped): ChatTurn[] {
  const turns: ChatTurn[] = []
  // tool calls dropped with their custom tools: their results go too
  const droppedCalls = new Set<string>()
  const other = (p: Json): void => dropped.add(`messages.${kindOf(p.type)}`)
  for (const [i, raw] of list(messages, 'messages').entries()) {
    const at = `messages[${i}]`
    const m = entry(raw, at)
    if (m.name !== undefined && m.name !== null && m.role !== 'function') dropped.add('messages.name')
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
        const calls: Array<{ id: string, name: string, input: Json }> = []
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
        for (const key of ['refusal', 'audio', 'function_call']) if (m[key] !== undefined && m[key] !== null) dropped.add(`messages.${key}`)
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
