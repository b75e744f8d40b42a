import type {
  ContentBlock, ContentBlockParam, ImageBlockParam, Message, MessageDeltaUsage, OutputConfig, RawContentBlockDelta,
  RawMessageDeltaEvent, TextBlockParam, Tool, ToolChoice, ToolChoiceNone
} from '@anthropic-ai/sdk/resources/messages'
import { UnsupportedOnUpstream } from '../kernel/errors.js'
import { readMessage, type MessagesRequest } from '../protocols/messages/request.js'
import { messagesImageSource, parseToolArguments } from '../protocols/content.js'
import { buildResponse, failureCode, ResponseWriter, responsesError, usageFromAnthropic, type IncompleteReason, type OutputPart } from '../protocols/responses/writer.js'
import { allows, dropToward, messagesEffort, normalise, type Part } from '../protocols/responses/request.js'
import type { Json, SseEvent, StreamMapper, TranslateCtx, TranslatedRequest, TranslatorPair } from './types.js'
import { isObj } from '../kernel/json.js'

// A Responses client in front of a Messages upstream. Thinking blocks come back as reasoning
// items whose one summary is the thinking text, so that a client shows them; reasoning items
// sent back in the input are not forwarded (their signatures are not kept).

const INCOMPLETE: Record<string, IncompleteReason> = {
  max_tokens: 'max_output_tokens',
  model_context_window_exceeded: 'max_output_tokens',
  refusal: 'content_filter'
}

/** The Messages request a Responses client's is sent as: a `none` tool choice may say no parallel calls, as the others do. */
interface MessagesBody extends Omit<MessagesRequest, 'tool_choice'> {
  tool_choice?: Choice
}

type Choice = ToolChoice | (ToolChoiceNone & { disable_parallel_tool_use?: boolean })

function block (p: Part, ctx: TranslateCtx): TextBlockParam | ImageBlockParam {
  if (p.type === 'text') return { type: 'text', text: p.text }
  if (p.type === 'audio') throw new UnsupportedOnUpstream({ feature: 'Audio input', model: ctx.model })
  // `detail` only tunes OpenAI's image resolution; Messages has no such setting
  return { type: 'image', source: messagesImageSource(p.url, p.field) }
}

function request (body: Json, ctx: TranslateCtx): TranslatedRequest {
  const r = normalise(body, ctx)
  const dropped = r.dropped
  const system: string[] = r.instructions === null ? [] : [r.instructions]
  const turns: Array<{ role: 'user' | 'assistant', content: ContentBlockParam[] }> = []
  // consecutive turns of one role are one message
  const push = (role: 'user' | 'assistant', content: ContentBlockParam[]): void => {
    const last = turns[turns.length - 1]
    if (last?.role === role) last.content.push(...content)
    else if (content.length > 0) turns.push({ role, content })
  }
  for (const turn of r.turns) {
    switch (turn.role) {
      case 'system':
        system.push(turn.text)
        break
      case 'user':
        push('user', turn.parts.map((p) => block(p, ctx)))
        break
      case 'assistant':
        push('assistant', [{ type: 'text', text: turn.text }])
        break
      case 'call':
        push('assistant', [{ type: 'tool_use', id: turn.id, name: turn.name, input: parseToolArguments(turn.arguments) }])
        break
      case 'result':
        push('user', [{ type: 'tool_result', tool_use_id: turn.id, content: typeof turn.output === 'string' ? turn.output : turn.output.map((p) => block(p, ctx)) }])
        break
    }
  }
  // tool results lead their user turn
  for (const t of turns) {
    if (t.role === 'user') t.content = [...t.content.filter((b) => b.type === 'tool_result'), ...t.content.filter((b) => b.type !== 'tool_result')]
  }

  const maxTokens = r.maxOutputTokens ?? ctx.defaultMaxTokens
  const out: MessagesBody = system.length > 0
    ? { model: ctx.upstreamModel, messages: turns, system: system.join('\n\n'), max_tokens: maxTokens }
    : { model: ctx.upstreamModel, messages: turns, max_tokens: maxTokens }
  if (r.temperature !== undefined) out.temperature = r.temperature
  if (r.topP !== undefined) out.top_p = r.topP
  if (r.stop !== undefined) out.stop_sequences = r.stop
  if (r.stream !== undefined) out.stream = r.stream
  if (r.tools.length > 0) {
    out.tools = r.tools.map((t) => {
      // the client's schema passed as it wrote it: the upstream checks it is an object's
      const tool: Tool = { name: t.name, input_schema: (t.parameters as Tool.InputSchema | undefined) ?? { type: 'object', properties: {} } }
      if (t.description !== undefined) tool.description = t.description
      if (t.strict === true) tool.strict = true
      return tool
    })
    let choice: Choice | undefined
    if (r.toolChoice?.mode === 'tool') choice = { type: 'tool', name: r.toolChoice.name }
    else if (r.toolChoice !== undefined) choice = { type: r.toolChoice.mode === 'required' ? 'any' : r.toolChoice.mode }
    if (r.parallelToolCalls === false) choice = { ...(choice ?? { type: 'auto' }), disable_parallel_tool_use: true }
    if (choice !== undefined) out.tool_choice = choice
  }

  // output_config (structured output, effort) is refused by the models that predate it
  const config: OutputConfig = {}
  const configured = allows(ctx, 'output_config')
  if (r.format?.type === 'json_schema' && configured) config.format = { type: 'json_schema', schema: r.format.schema ?? {} }
  else if (r.format !== undefined) dropped.push('text.format') // json_object: no "any JSON object" mode on Messages
  if (r.effort !== undefined) {
    const effort = messagesEffort(r.effort)
    if (effort === undefined || !configured) dropped.push('reasoning.effort')
    else config.effort = effort
  }
  if (Object.keys(config).length > 0) out.output_config = config
  // what Messages has no setting for (text.verbosity): its column of the table
  dropToward(r, 'messages', 'config')

  // Messages metadata has one field, user_id: the first of user, safety_identifier, metadata.user_id
  const metaUser = typeof r.metadata?.user_id === 'string' ? r.metadata.user_id : undefined
  const userId = r.user ?? r.safetyIdentifier ?? metaUser
  if (userId !== undefined) out.metadata = { user_id: userId }
  if (r.user !== undefined && r.safetyIdentifier !== undefined) dropped.push('safety_identifier')
  if (r.metadata !== undefined && (Object.keys(r.metadata).some((k) => k !== 'user_id') || metaUser !== userId)) dropped.push('metadata')
  // what Messages has no field for (prompt_cache_key): its column of the table
  dropToward(r, 'messages', 'fields')
  return { body: { ...r.extra, ...out }, dropped }
}

function response (body: Json, ctx: TranslateCtx) {
  const answer = readMessage(body)
  const parts: OutputPart[] = []
  for (const b of Array.isArray(answer.content) ? answer.content : []) {
    if (b.type === 'text' && typeof b.text === 'string') parts.push({ kind: 'text', text: b.text })
    else if (b.type === 'tool_use') parts.push({ kind: 'call', id: String(b.id ?? ''), name: String(b.name ?? ''), arguments: JSON.stringify(b.input ?? {}) })
    else if (b.type === 'thinking' && typeof b.thinking === 'string') parts.push({ kind: 'reasoning', text: b.thinking })
  }
  const usage = usageFromAnthropic(answer.usage)
  return { body: buildResponse(ctx, parts, INCOMPLETE[String(answer.stop_reason)] ?? null, usage), usage }
}

/** A delta of a Messages stream: a block's (by its type) or the message's (its stop reason). */
type Delta = Partial<RawContentBlockDelta> & Partial<RawMessageDeltaEvent.Delta>

/**
 * A frame of a Messages stream as the pair reads it: the fields of its events as the SDK types
 * them, not trusted for all that (each is checked where it is read).
 */
interface Frame {
  type?: string
  index?: number
  message?: Partial<Message>
  content_block?: ContentBlock
  delta?: Delta
  usage?: MessageDeltaUsage
  error?: unknown
}

function stream (ctx: TranslateCtx): StreamMapper {
  const w = new ResponseWriter(ctx)
  const items = new Map<number, number>()
  // the usage fields as they came: message_start's, then each message_delta's over them
  let raw: object | null = null
  let incomplete: IncompleteReason | null | undefined
  const usage = () => raw === null ? null : usageFromAnthropic(raw)

  return {
    push (ev: SseEvent): SseEvent[] {
      let data: Frame
      if (ev.value !== undefined) data = ev.value as Frame
      else try { data = JSON.parse(ev.data) as Frame } catch { return [] }
      const index = typeof data.index === 'number' ? data.index : -1
      switch (data.type ?? ev.event) {
        case 'message_start':
          raw = { ...data.message?.usage }
          w.start()
          break
        case 'content_block_start': {
          const b: Partial<ContentBlock> = isObj(data.content_block) ? data.content_block : {}
          let initial: unknown
          if (b.type === 'text') { items.set(index, w.message()); initial = b.text } else if (b.type === 'tool_use') items.set(index, w.call(String(b.id ?? ''), String(b.name ?? '')))
          else if (b.type === 'thinking') { items.set(index, w.reasoning()); initial = b.thinking }
          const at = items.get(index)
          if (at !== undefined && typeof initial === 'string') w.append(at, initial)
          break
        }
        case 'content_block_delta': {
          const d: Delta = isObj(data.delta) ? data.delta : {}
          const at = items.get(index)
          const piece = d.type === 'text_delta' ? d.text : d.type === 'input_json_delta' ? d.partial_json : d.type === 'thinking_delta' ? d.thinking : undefined
          if (at !== undefined && typeof piece === 'string') w.append(at, piece)
          break
        }
        case 'content_block_stop': {
          const at = items.get(index)
          if (at !== undefined) w.close(at)
          break
        }
        case 'message_delta': {
          // counts in message_delta are cumulative: they replace what message_start said
          raw = { ...raw, ...data.usage }
          const stop = data.delta?.stop_reason
          if (typeof stop === 'string') incomplete = INCOMPLETE[stop] ?? null
          break
        }
        case 'message_stop':
          w.finish(incomplete ?? null, usage())
          break
        case 'error': {
          const e = isObj(data.error) ? data.error : {}
          w.fail({ code: failureCode(e), message: String(e.message ?? 'The upstream provider failed.') }, usage())
          break
        }
      }
      return w.take()
    },
    end () {
      if (incomplete !== undefined) w.finish(incomplete, usage())
      return w.take()
    },
    usage,
    relayedText: () => w.relayedText(),
    finished: () => w.finished(),
    fail (e) {
      w.fail({ code: failureCode(e), message: e.message }, usage())
      return w.take()
    }
  }
}

/** The Responses fields each Messages field is made from, where the names differ (see TranslatorPair.messagesOrigins). */
const ORIGINS = {
  metadata: ['user', 'safety_identifier', 'metadata'],
  output_config: ['text.format', 'reasoning.effort'],
  'tool_choice.disable_parallel_tool_use': ['parallel_tool_calls']
} as const

export const responsesToMessages: TranslatorPair = { client: 'responses', upstream: 'messages', path: '/v1/messages', request, response, error: responsesError, stream, messagesOrigins: ORIGINS }
