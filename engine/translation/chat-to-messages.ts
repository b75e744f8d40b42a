import type { ContentBlockParam, MessageCreateParamsBase, MessageParam, OutputConfig, TextBlock, Tool, ToolChoice, ToolUseBlock } from '@anthropic-ai/sdk/resources/messages'
import type { ChatCompletionChunk } from 'openai/resources/chat/completions'
import { errorBody, InvalidField, UnsupportedOnUpstream } from '../kernel/errors.js'
import { messagesImageSource } from '../protocols/content.js'
import { column, Dropped, entry, isObj, kindOf, list, mapValue, optBoolean, optCount, optEntry, optText, sortFields, strings, text } from '../protocols/fields.js'
import { upstreamMessage } from '../protocols/upstream-error.js'
import { frame } from '../protocols/sse.js'
import type { Json, SseEvent, StreamMapper, TranslateCtx, TranslatedRequest, TranslatorPair, Usage } from './types.js'
import { toOpenAIUsage } from '../protocols/chat/usage.js'
import { assistantMessage, chunk as chatChunk, completion, streamEnd, type FinishReason } from '../protocols/chat/writer.js'
import { usageFromMessages } from '../protocols/messages/usage.js'
import { readMessage } from '../protocols/messages/request.js'
import { objects } from '../protocols/stream-events.js'
import { CHAT_FIELDS } from '../protocols/chat/table.js'
import { readChatRequest, readChatTurns, type ChatRequest, type ChatUserPart } from '../protocols/chat/request.js'

// An OpenAI Chat Completions client in front of a Messages upstream: requests, answers and
// streams mapped both ways (how each field maps: docs/api.md).

export const FINISH_REASON: ReadonlyMap<string, FinishReason> = new Map<string, FinishReason>([
  ['end_turn', 'stop'],
  ['stop_sequence', 'stop'],
  ['pause_turn', 'stop'],
  ['max_tokens', 'length'],
  ['model_context_window_exceeded', 'length'],
  ['tool_use', 'tool_calls'],
  ['refusal', 'content_filter']
])

const finishOf = (stop: unknown): FinishReason => (typeof stop === 'string' ? FINISH_REASON.get(stop) : undefined) ?? 'stop'

// The fate of each Chat Completions field toward a Messages upstream.
const FIELDS = column(CHAT_FIELDS, 'messages')

// OpenAI reasoning efforts → Messages output_config.effort. `none` is left out on purpose: a
// Messages model reasons only when `thinking` asks it to, so no effort already means none.
const EFFORT = new Map<string, NonNullable<OutputConfig['effort']>>([
  ['minimal', 'low'],
  ['low', 'low'],
  ['medium', 'medium'],
  ['high', 'high'],
  ['xhigh', 'xhigh'],
  ['max', 'max']
])

// `default` is the standard tier on both sides; flex, scale and priority have no Messages equivalent.
const SERVICE_TIER = new Map<string, NonNullable<MessageCreateParamsBase['service_tier']>>([['auto', 'auto'], ['default', 'standard_only']])

function imageBlock (url: string, field: string): ContentBlockParam {
  return { type: 'image', source: messagesImageSource(url, field) }
}

/** A user's OpenAI content (string or parts) → Messages blocks; empty text is dropped (Anthropic refuses it). */
function userBlocks (content: string | readonly ChatUserPart[], field: string, ctx: TranslateCtx): ContentBlockParam[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }]
  const out: ContentBlockParam[] = []
  for (const [i, raw] of list(content, field).entries()) {
    const at = `${field}[${i}]`
    const part = entry(raw, at)
    switch (part.type) {
      case 'text': {
        const t = text(part.text, `${at}.text`)
        if (t !== '') out.push({ type: 'text', text: t })
        break
      }
      case 'image_url': {
        if (ctx.flatten) break // the spec's simplified mode drops images silently
        const url = typeof part.image_url === 'string' ? part.image_url : text(entry(part.image_url, `${at}.image_url`).url, `${at}.image_url.url`)
        out.push(imageBlock(url, `${at}.image_url.url`))
        break
      }
      case 'video_url':
        throw new UnsupportedOnUpstream({ feature: 'Video input', model: ctx.model })
      case 'input_audio':
        throw new UnsupportedOnUpstream({ feature: 'Audio input', model: ctx.model })
      case 'file':
        throw new UnsupportedOnUpstream({ feature: 'File input', model: ctx.model })
      default:
        throw new InvalidField({ field: `${at}.type`, reason: 'must be text, image_url, input_audio, file or video_url' })
    }
  }
  if (!ctx.flatten || out.length === 0) return out
  return [{ type: 'text', text: out.map((b) => b.type === 'text' ? b.text : '').join('\n') }]
}

function toolChoice (body: ChatRequest, dropped: Dropped): ToolChoice | undefined {
  const choice = body.tool_choice
  let out: ToolChoice | undefined
  if (choice === 'auto') out = { type: 'auto' }
  else if (choice === 'none') out = { type: 'none' }
  else if (choice === 'required') out = { type: 'any' }
  else if (typeof choice === 'object' && choice !== null && !Array.isArray(choice)) {
    if (choice.type === 'function') out = { type: 'tool', name: text(entry(choice.function, 'tool_choice.function').name, 'tool_choice.function.name') }
    else if (choice.type === 'allowed_tools') {
      // the mode maps; the subset it allows does not (Messages offers every tool given)
      const mode = entry(choice.allowed_tools, 'tool_choice.allowed_tools').mode
      out = { type: mode === 'required' ? 'any' : 'auto' }
      dropped.add('tool_choice.allowed_tools')
    } else if (choice.type === 'custom') dropped.add('tool_choice') // custom tools are dropped
    else throw new InvalidField({ field: 'tool_choice.type', reason: 'must be function, custom or allowed_tools' })
  } else if (choice !== undefined && choice !== null) {
    throw new InvalidField({ field: 'tool_choice', reason: 'must be auto, none, required or an object' })
  }
  if (optBoolean(body.parallel_tool_calls, 'parallel_tool_calls') === false && out?.type !== 'none') {
    out = { ...(out ?? { type: 'auto' }), disable_parallel_tool_use: true }
  }
  return out
}

function tools (body: ChatRequest, dropped: Dropped): Tool[] {
  const out: Tool[] = []
  for (const [i, raw] of list(body.tools, 'tools').entries()) {
    const at = `tools[${i}]`
    const t = entry(raw, at)
    if (t.type !== 'function' && t.type !== undefined) { dropped.add(`tools.${kindOf(t.type)}`); continue }
    const fn = entry(t.function, `${at}.function`)
    const schema = optEntry(fn.parameters, `${at}.function.parameters`)
    const tool: Tool = { name: text(fn.name, `${at}.function.name`), input_schema: (schema as Tool.InputSchema | undefined) ?? { type: 'object', properties: {} } }
    const description = optText(fn.description, `${at}.function.description`)
    if (description !== undefined) tool.description = description
    const strict = optBoolean(fn.strict, `${at}.function.strict`)
    if (strict !== undefined) tool.strict = strict
    out.push(tool)
  }
  return out
}

/** response_format and reasoning_effort → output_config. */
function outputConfig (body: ChatRequest, dropped: Dropped): OutputConfig | undefined {
  const out: OutputConfig = {}
  const format = optEntry(body.response_format, 'response_format')
  if (format?.type === 'json_schema') {
    const schema = optEntry(format.json_schema, 'response_format.json_schema')?.schema
    if (isObj(schema)) out.format = { type: 'json_schema', schema }
    else dropped.add('response_format')
  } else if (format !== undefined && format.type !== 'text') {
    // json_object: Messages has no "any JSON object" mode (a json_schema format wants a closed
    // schema), and OpenAI already requires the prompt itself to ask for JSON, so the model is
    // instructed either way; what is lost is the guarantee, and the header says so.
    dropped.add('response_format')
  }
  const effort = body.reasoning_effort === 'none' ? undefined : mapValue(EFFORT, body.reasoning_effort, 'reasoning_effort', dropped)
  if (effort !== undefined) out.effort = effort
  return Object.keys(out).length > 0 ? out : undefined
}

/** user, safety_identifier or metadata.user_id → metadata.user_id: the first one given wins; another, different one is reported. */
function userId (body: ChatRequest, dropped: Dropped): string | undefined {
  const metadata = optEntry(body.metadata, 'metadata')
  if (metadata !== undefined && Object.keys(metadata).some((k) => k !== 'user_id' && metadata[k] !== null)) dropped.add('metadata')
  const given: Array<[string, string | undefined]> = [
    ['user', optText(body.user, 'user')],
    ['safety_identifier', optText(body.safety_identifier, 'safety_identifier')],
    ['metadata', optText(metadata?.user_id, 'metadata.user_id')]
  ]
  const chosen = given.find(([, v]) => v !== undefined)?.[1]
  for (const [name, v] of given) if (v !== undefined && v !== chosen) dropped.add(name)
  return chosen
}

function request (client: Json, ctx: TranslateCtx): TranslatedRequest {
  const body = readChatRequest(client)
  const n = body.n
  if (n !== undefined && n !== null && (typeof n !== 'number' || !Number.isInteger(n) || n < 1)) throw new InvalidField({ field: 'n', reason: 'must be a positive integer' })
  if (typeof n === 'number' && n > 1) throw new UnsupportedOnUpstream({ feature: 'n > 1', model: ctx.model })
  const dropped = new Dropped()
  const system: string[] = []
  const turns: Array<{ role: 'user' | 'assistant', content: ContentBlockParam[] }> = []
  const push = (role: 'user' | 'assistant', content: ContentBlockParam[]): void => {
    if (content.length === 0) return
    const last = turns[turns.length - 1]
    if (last !== undefined && last.role === role) last.content.push(...content)
    else turns.push({ role, content: [...content] })
  }
  for (const turn of readChatTurns(body.messages, dropped)) {
    switch (turn.role) {
      case 'system':
        system.push(turn.text)
        break
      case 'user':
        push('user', userBlocks(turn.content, turn.at, ctx))
        break
      case 'assistant': {
        const content: ContentBlockParam[] = turn.texts.filter((t) => t !== '').map((t) => ({ type: 'text', text: t }))
        for (const call of turn.calls) content.push({ type: 'tool_use', id: call.id, name: call.name, input: call.input })
        push('assistant', content)
        break
      }
      case 'tool':
        push('user', [{ type: 'tool_result', tool_use_id: turn.id, content: turn.text }])
        break
    }
  }
  // tool results lead their user turn (Anthropic wants them before any text)
  for (const t of turns) {
    if (t.role === 'user' && t.content.some((b) => b.type === 'tool_result')) {
      t.content = [...t.content.filter((b) => b.type === 'tool_result'), ...t.content.filter((b) => b.type !== 'tool_result')]
    }
  }

  const messages: MessageParam[] = turns
  const out: MessageCreateParamsBase = {
    model: ctx.upstreamModel,
    messages,
    max_tokens: optCount(body.max_completion_tokens, 'max_completion_tokens') ?? optCount(body.max_tokens, 'max_tokens') ?? ctx.defaultMaxTokens
  }
  if (system.length > 0) out.system = system.join('\n\n')
  if (body.stop !== undefined && body.stop !== null) out.stop_sequences = strings(body.stop, 'stop')
  const user = userId(body, dropped)
  if (user !== undefined) out.metadata = { user_id: user }
  const defined = tools(body, dropped)
  const choice = toolChoice(body, dropped)
  if (defined.length > 0) {
    out.tools = defined
    if (choice !== undefined) out.tool_choice = choice
  } else if (choice?.type === 'any' || choice?.type === 'tool') {
    dropped.add('tool_choice') // no tool left to force
  }
  const config = outputConfig(body, dropped)
  if (config !== undefined) out.output_config = config
  const tier = mapValue(SERVICE_TIER, body.service_tier, 'service_tier', dropped)
  if (tier !== undefined) out.service_tier = tier
  const upstream: Json = { ...out }
  sortFields(body, FIELDS, dropped, upstream)
  return { body: upstream, dropped: dropped.list() }
}

function response (upstream: Json, ctx: TranslateCtx) {
  const body = readMessage(upstream)
  const content = objects(body.content)
  const text = content.filter((b): b is TextBlock => b.type === 'text' && typeof b.text === 'string').map((b) => b.text).join('')
  const toolCalls = content.filter((b): b is ToolUseBlock => b.type === 'tool_use').map((b) => ({
    id: typeof b.id === 'string' ? b.id : '',
    type: 'function' as const,
    function: { name: typeof b.name === 'string' ? b.name : '', arguments: JSON.stringify(b.input ?? {}) }
  }))
  const usage = usageFromMessages(body.usage)
  const out = completion(ctx, [{ index: 0, message: assistantMessage(text, toolCalls), finish_reason: finishOf(body.stop_reason), logprobs: null }], usage === null ? null : toOpenAIUsage(usage))
  return { body: { ...out }, usage }
}

function error (status: number, body: unknown): Json {
  const e = isObj(body) ? body.error : undefined
  const type = isObj(e) ? e.type : undefined
  return errorBody('openai', { status, message: upstreamMessage(status, body), openaiType: typeof type === 'string' ? type : undefined })
}

function stream (ctx: TranslateCtx): StreamMapper {
  const toolIndex = new Map<unknown, number>()
  let tools = 0
  let rawUsage: Json | null = null
  let finishReason: FinishReason | null = null
  let done = false
  const text: string[] = []

  const chunk = (delta: ChatCompletionChunk.Choice.Delta, finish: FinishReason | null = null): SseEvent => chatChunk(ctx, 0, delta, finish)
  const usage = (): Usage | null => rawUsage === null ? null : usageFromMessages(rawUsage)
  const finish = (): SseEvent[] => {
    if (done) return []
    done = true
    const u = usage()
    return streamEnd(ctx, u === null ? null : toOpenAIUsage(u))
  }
  const objectAt = (o: Json, key: string): Json => isObj(o[key]) ? o[key] as Json : {}

  return {
    push (ev: SseEvent): SseEvent[] {
      let data: unknown
      if (ev.value !== undefined) data = ev.value
      else try { data = JSON.parse(ev.data) } catch { return [] }
      if (!isObj(data)) return []
      switch (data.type ?? ev.event) {
        case 'message_start':
          rawUsage = { ...objectAt(objectAt(data, 'message'), 'usage') }
          return [chunk({ role: 'assistant', content: '' })]
        case 'content_block_start': {
          const block = objectAt(data, 'content_block')
          if (block.type === 'tool_use') {
            const i = tools++
            toolIndex.set(data.index, i)
            const name = typeof block.name === 'string' ? block.name : ''
            return [chunk({ tool_calls: [{ index: i, id: typeof block.id === 'string' ? block.id : '', type: 'function', function: { name, arguments: '' } }] })]
          }
          if (block.type === 'text' && typeof block.text === 'string' && block.text !== '') {
            text.push(block.text)
            return [chunk({ content: block.text })]
          }
          return []
        }
        case 'content_block_delta': {
          const d = objectAt(data, 'delta')
          if (d.type === 'text_delta' && typeof d.text === 'string') {
            text.push(d.text)
            return [chunk({ content: d.text })]
          }
          if (d.type === 'input_json_delta' && typeof d.partial_json === 'string') {
            const i = toolIndex.get(data.index)
            if (i === undefined || d.partial_json === '') return []
            text.push(d.partial_json)
            return [chunk({ tool_calls: [{ index: i, function: { arguments: d.partial_json } }] })]
          }
          return []
        }
        case 'message_delta': {
          rawUsage = { ...rawUsage, ...objectAt(data, 'usage') }
          const stop = objectAt(data, 'delta').stop_reason
          if (stop === undefined || stop === null) return []
          finishReason = finishOf(stop)
          return [chunk({}, finishReason)]
        }
        case 'message_stop':
          if (finishReason === null) { finishReason = 'stop'; return [chunk({}, 'stop'), ...finish()] }
          return finish()
        case 'error': {
          const e = objectAt(data, 'error')
          return [frame({ error: { message: typeof e.message === 'string' ? e.message : 'upstream error', type: typeof e.type === 'string' ? e.type : 'api_error', param: null, code: null } })]
        }
        default:
          return [] // ping, content_block_stop, thinking and signature deltas
      }
    },
    end: () => finishReason !== null ? finish() : [],
    usage,
    relayedText: () => text.join(''),
    finished: () => finishReason !== null
  }
}

/** The chat fields each Messages field is made from, where the names differ (see TranslatorPair.messagesOrigins). */
const ORIGINS = {
  metadata: ['user', 'safety_identifier', 'metadata'],
  output_config: ['response_format', 'reasoning_effort'],
  'tool_choice.disable_parallel_tool_use': ['parallel_tool_calls'],
  'tools.strict': ['tools.function.strict']
} as const

export const chatToMessages: TranslatorPair = { client: 'openai', upstream: 'messages', path: '/v1/messages', request, response, error, stream, messagesOrigins: ORIGINS }
