import type { ContentBlockParam, Message, MessageCreateParamsBase, MessageParam, TextBlockParam, Tool, ToolUnion } from '@anthropic-ai/sdk/resources/messages'
import type { MessageCreateParamsBase as BetaMessageCreateParamsBase } from '@anthropic-ai/sdk/resources/beta/messages/messages'
import { InvalidField } from '../../kernel/errors.js'
import { joinText } from '../content.js'
import { entry, isObj, kindOf, list, optBoolean, optEntry, optText, sortFields, text, type Dropped } from '../fields.js'
import { MESSAGES_TOOL_FIELDS } from './table.js'
import type { Json } from '../types.js'

// A Messages request as the pairs in front of another upstream protocol read it, once for every
// such pair: the conversation as checked turns of blocks, the system texts (at the top, and the
// mid-conversation system entries in their place), and the custom tools. A wrong type is a 400
// naming its field; what no other protocol can carry (cache breakpoints, server tools) is reported.

/** A system entry in the conversation, which some clients send between the turns. */
export interface MessagesSystemEntry { role: 'system', content: string | TextBlockParam[] }

/** The fields of the beta Messages API only (Claude Code sends them). */
type BetaOnly = Exclude<keyof BetaMessageCreateParamsBase, keyof MessageCreateParamsBase>

/**
 * A Messages request: the SDK's, with the beta API's fields, the sampling fields the SDK no
 * longer types (the API takes them) and the system entries some clients put in the conversation.
 */
export interface MessagesRequest extends Omit<MessageCreateParamsBase, 'messages'>, Partial<Pick<BetaMessageCreateParamsBase, BetaOnly>> {
  messages: Array<MessageParam | MessagesSystemEntry>
  temperature?: number
  top_p?: number
  top_k?: number
}

/**
 * A client's body as a Messages request. The route's schema has checked what the gateway itself
 * reads (the model, each message an object with a role, stream, max_tokens); every other field is
 * checked where a pair reads it (fields.ts), so the SDK's type says what the body claims to be,
 * not what has been proven of it.
 */
export const readMessagesRequest = (body: Json): MessagesRequest => body as unknown as MessagesRequest

/** An upstream's answer as the SDK types it: a pair checks each field where it reads it, as the answer is not the gateway's. */
export const readMessage = (body: Json): Message => body as unknown as Message

export type MessagesTurn =
  | { role: 'system', text: string }
  | { role: 'user' | 'assistant', blocks: readonly ContentBlockParam[], at: string }

/** A cache_control breakpoint: the other protocols cache prefixes on their own, with no say from the client. */
export const noteCache = (block: object, dropped: Dropped): void => {
  if ('cache_control' in block && block.cache_control !== undefined && block.cache_control !== null) dropped.add('cache_control')
}

/** The text of a system prompt (a string or text blocks); its breakpoints and other blocks reported. */
function systemText (content: unknown, field: string, dropped: Dropped): string {
  if (Array.isArray(content)) for (const b of content) if (isObj(b)) noteCache(b, dropped)
  return joinText(content ?? '', field, (p) => dropped.add(`system.${kindOf(p.type)}`))
}

/** The top-level system prompt, then the conversation in order; a turn's string content is one text block. */
export function readMessagesTurns (body: MessagesRequest, dropped: Dropped): { system: string, turns: MessagesTurn[] } {
  const system = systemText(body.system, 'system', dropped)
  const turns: MessagesTurn[] = []
  for (const [i, raw] of list(body.messages, 'messages').entries()) {
    const at = `messages[${i}]`
    const m = entry(raw, at)
    if (m.role === 'system') {
      turns.push({ role: 'system', text: systemText(m.content, `${at}.content`, dropped) })
      continue
    }
    if (m.role !== 'user' && m.role !== 'assistant') throw new InvalidField({ field: `${at}.role`, reason: 'must be user, assistant or system' })
    const blocks: readonly ContentBlockParam[] = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : list(m.content, `${at}.content`).map((b, j) => entry(b, `${at}.content[${j}]`))
    turns.push({ role: m.role, blocks, at })
  }
  return { system, turns }
}

export interface MessagesTool { name: string, description?: string, schema?: Tool.InputSchema, strict?: boolean }

/** A tool the client's own code runs: one with an input schema, or no server tool's type. */
const isCustom = (t: ToolUnion): t is Tool =>
  ('input_schema' in t && t.input_schema !== undefined) || t.type === undefined || t.type === null || t.type === 'custom'

/** The custom tools; a server tool (web_search_20250305, bash_20250124…) runs at Anthropic, so nothing upstream runs it: reported. */
export function readMessagesTools (body: MessagesRequest, dropped: Dropped): MessagesTool[] {
  const out: MessagesTool[] = []
  for (const [i, raw] of list(body.tools, 'tools').entries()) {
    const at = `tools[${i}]`
    const t = entry(raw, at)
    if (!isCustom(t)) { dropped.add(`tools.${kindOf(t.type)}`); continue }
    noteCache(t, dropped)
    sortFields(t, MESSAGES_TOOL_FIELDS, dropped, undefined, 'tools.')
    const tool: MessagesTool = { name: text(t.name, `${at}.name`) }
    const description = optText(t.description, `${at}.description`)
    if (description !== undefined) tool.description = description
    const schema = optEntry(t.input_schema, `${at}.input_schema`)
    if (schema !== undefined) tool.schema = schema
    const strict = optBoolean(t.strict, `${at}.strict`)
    if (strict !== undefined) tool.strict = strict
    out.push(tool)
  }
  return out
}
