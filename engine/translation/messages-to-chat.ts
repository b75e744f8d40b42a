import type { ContentBlockParam, StopReason, ToolResultBlockParam } from '@anthropic-ai/sdk/resources/messages'
import type { ChatCompletion, ChatCompletionChunk, ChatCompletionContentPart, ChatCompletionCreateParamsBase, ChatCompletionFunctionTool, ChatCompletionMessageFunctionToolCall, ChatCompletionMessageParam } from 'openai/resources/chat/completions'
import type { ReasoningEffort } from 'openai/resources/shared'
import { errorBody, InvalidField } from '../kernel/errors.js'
import { joinText, parseToolArguments, textOf } from '../protocols/content.js'
import { column, Dropped, entry, isObj, kindOf, mapValue, optBoolean, optEntry, optText, sortFields, strings, text } from '../protocols/fields.js'
import { upstreamMessage } from '../protocols/upstream-error.js'
import type { Json, SseEvent, StreamMapper, TranslateCtx, TranslatedRequest, TranslatorPair, Usage } from './types.js'
import { event, message, messageEnd, messageStart, type AnswerBlock } from '../protocols/messages/writer.js'
import { usageFromOpenAI } from '../protocols/chat/usage.js'
import { readChatCompletion, type CompletionMessage } from '../protocols/chat/request.js'
import { parseChunk, type Delta } from '../protocols/chat/stream.js'
import { objects } from '../protocols/stream-events.js'
import { MESSAGES_FIELDS } from '../protocols/messages/table.js'
import { noteCache, readMessagesRequest, readMessagesTools, readMessagesTurns, type MessagesRequest } from '../protocols/messages/request.js'

// A Messages client in front of an OpenAI Chat Completions upstream: requests, answers and
// streams mapped both ways (how each field maps: docs/api.md).

export const STOP_REASON: ReadonlyMap<string, StopReason> = new Map<string, StopReason>([
  ['stop', 'end_turn'],
  ['length', 'max_tokens'],
  ['tool_calls', 'tool_use'],
  ['function_call', 'tool_use'],
  ['content_filter', 'refusal']
])

const stopOf = (finish: unknown): StopReason => (typeof finish === 'string' ? STOP_REASON.get(finish) : undefined) ?? 'end_turn'

// The fate of each Messages field toward a Chat Completions upstream.
const FIELDS = column(MESSAGES_FIELDS, 'openai')

const EFFORT = new Map<string, ReasoningEffort>([['low', 'low'], ['medium', 'medium'], ['high', 'high'], ['xhigh', 'xhigh'], ['max', 'max']])

const SERVICE_TIER = new Map<string, NonNullable<ChatCompletionCreateParamsBase['service_tier']>>([['auto', 'auto'], ['standard_only', 'default']])

/** An extended-thinking budget → an effort: Claude Code's "think" (4k), "think hard" (10k) and "ultrathink" (32k) land on low, medium, high. */
function effortForBudget (budget: number): ReasoningEffort {
  if (budget < 4096) return 'low'
  if (budget < 16384) return 'medium'
  return 'high'
}

/**
 * thinking and output_config.effort → reasoning_effort. `disabled` is `none`, and wins; an
 * explicit effort comes next, then the thinking budget; `adaptive` alone is OpenAI's default,
 * `medium`. Sent only to a model that lists reasoning_effort; otherwise what asked for
 * reasoning is reported (asking for none from a model that does not reason loses nothing).
 */
function reasoningEffort (body: MessagesRequest, effort: unknown, ctx: TranslateCtx, dropped: Dropped): ReasoningEffort | undefined {
  const fromEffort = mapValue(EFFORT, effort, 'output_config.effort', dropped)
  let fromThinking: ReasoningEffort | undefined
  const thinking = optEntry(body.thinking, 'thinking')
  if (thinking !== undefined) {
    switch (thinking.type) {
      case 'disabled': fromThinking = 'none'; break
      case 'adaptive': fromThinking = 'medium'; break
      case 'enabled': {
        const budget = thinking.budget_tokens
        if (typeof budget !== 'number' || !Number.isFinite(budget)) throw new InvalidField({ field: 'thinking.budget_tokens', reason: 'must be a number' })
        fromThinking = effortForBudget(budget)
        break
      }
      default: dropped.add('thinking') // between_tools: no OpenAI equivalent
    }
  }
  const out = fromThinking === 'none' ? 'none' : fromEffort ?? fromThinking
  if (out === undefined || ctx.supported?.has('reasoning_effort') === true) return out
  if (out !== 'none') {
    if (fromEffort !== undefined) dropped.add('output_config.effort')
    if (fromThinking !== undefined) dropped.add('thinking')
  }
  return undefined
}

/** output_config.format (or the beta output_format) → response_format. */
function responseFormat (format: unknown, field: string, dropped: Dropped): ChatCompletionCreateParamsBase['response_format'] {
  const f = optEntry(format, field)
  if (f === undefined) return undefined
  if (f.type === 'json_schema' && isObj(f.schema)) return { type: 'json_schema', json_schema: { name: 'output', schema: f.schema } }
  dropped.add(field)
  return undefined
}

/** A Messages user block → an OpenAI content part (null: none, or nothing to send). */
function userPart (block: ContentBlockParam, at: string, ctx: TranslateCtx, dropped: Dropped): ChatCompletionContentPart | null {
  noteCache(block, dropped)
  switch (block.type) {
    case 'text': {
      const t = text(block.text, `${at}.text`)
      return t === '' ? null : { type: 'text', text: t }
    }
    case 'image': {
      // the spec's simplified mode leaves image blocks unconverted
      if (ctx.flatten) return block as unknown as ChatCompletionContentPart
      const source = entry(block.source, `${at}.source`)
      if (source.type === 'base64') return { type: 'image_url', image_url: { url: `data:${text(source.media_type, `${at}.source.media_type`)};base64,${text(source.data, `${at}.source.data`)}` } }
      if (source.type === 'url') return { type: 'image_url', image_url: { url: text(source.url, `${at}.source.url`) } }
      break
    }
    case 'document': {
      const source = entry(block.source, `${at}.source`)
      if (source.type === 'text') return { type: 'text', text: text(source.data, `${at}.source.data`) }
      break
    }
  }
  dropped.add(`messages.${kindOf(block.type)}`)
  return null
}

function toolResult (block: ToolResultBlockParam, at: string, dropped: Dropped): ChatCompletionMessageParam {
  const t = joinText(block.content ?? '', `${at}.content`, (p) => dropped.add(`messages.tool_result.${kindOf(p.type)}`))
  return { role: 'tool', tool_call_id: text(block.tool_use_id, `${at}.tool_use_id`), content: block.is_error === true && t === '' ? 'error' : t }
}

function turn (role: 'user' | 'assistant', blocks: readonly ContentBlockParam[], at: string, ctx: TranslateCtx, dropped: Dropped): ChatCompletionMessageParam[] {
  if (role === 'assistant') {
    const texts: string[] = []
    const calls: ChatCompletionMessageFunctionToolCall[] = []
    for (const [j, b] of blocks.entries()) {
      const bat = `${at}.content[${j}]`
      noteCache(b, dropped)
      if (b.type === 'text') texts.push(text(b.text, `${bat}.text`))
      else if (b.type === 'tool_use') calls.push({ id: text(b.id, `${bat}.id`), type: 'function', function: { name: text(b.name, `${bat}.name`), arguments: JSON.stringify(b.input ?? {}) } })
      else dropped.add(`messages.${kindOf(b.type)}`) // thinking, server tool blocks
    }
    const joined = texts.join('')
    return [calls.length > 0 ? { role: 'assistant', content: joined === '' ? null : joined, tool_calls: calls } : { role: 'assistant', content: joined }]
  }
  // a user turn: its tool results first, one tool message each, then what the user said
  const out: ChatCompletionMessageParam[] = []
  const parts: ChatCompletionContentPart[] = []
  for (const [j, b] of blocks.entries()) {
    const bat = `${at}.content[${j}]`
    if (b.type === 'tool_result') {
      noteCache(b, dropped)
      out.push(toolResult(b, bat, dropped))
    } else {
      const p = userPart(b, bat, ctx, dropped)
      if (p !== null) parts.push(p)
    }
  }
  if (parts.length > 0) {
    const onlyText = parts.every((p) => p.type === 'text')
    out.push({ role: 'user', content: onlyText ? parts.map((p) => p.type === 'text' ? p.text : '').join('\n') : parts })
  }
  return out
}

function tools (body: MessagesRequest, dropped: Dropped): ChatCompletionFunctionTool[] {
  return readMessagesTools(body, dropped).map((t) => {
    const fn: ChatCompletionFunctionTool['function'] = { name: t.name, parameters: t.schema ?? { type: 'object', properties: {} } }
    if (t.description !== undefined) fn.description = t.description
    if (t.strict !== undefined) fn.strict = t.strict
    return { type: 'function', function: fn }
  })
}

function toolChoice (body: MessagesRequest, out: ChatCompletionCreateParamsBase, dropped: Dropped): void {
  const choice = optEntry(body.tool_choice, 'tool_choice')
  if (choice === undefined) return
  let mapped: ChatCompletionCreateParamsBase['tool_choice']
  switch (choice.type) {
    case 'auto': mapped = 'auto'; break
    case 'any': mapped = 'required'; break
    case 'none': mapped = 'none'; break
    case 'tool': mapped = { type: 'function', function: { name: text(choice.name, 'tool_choice.name') } }; break
    default: throw new InvalidField({ field: 'tool_choice.type', reason: 'must be auto, any, tool or none' })
  }
  // OpenAI refuses tool_choice and parallel_tool_calls without tools (all of them server tools, say)
  if (out.tools === undefined) {
    if (mapped !== 'auto' && mapped !== 'none') dropped.add('tool_choice')
    return
  }
  out.tool_choice = mapped
  const parallel = 'disable_parallel_tool_use' in choice ? choice.disable_parallel_tool_use : undefined
  if (optBoolean(parallel, 'tool_choice.disable_parallel_tool_use') === true) out.parallel_tool_calls = false
}

function request (client: Json, ctx: TranslateCtx): TranslatedRequest {
  const body = readMessagesRequest(client)
  const dropped = new Dropped()
  const messages: ChatCompletionMessageParam[] = []
  const { system, turns } = readMessagesTurns(body, dropped)
  if (system !== '') messages.push({ role: 'system', content: system })
  for (const t of turns) {
    // the mid-conversation system entry stays a system message in its place
    if (t.role === 'system') messages.push({ role: 'system', content: t.text })
    else messages.push(...turn(t.role, t.blocks, t.at, ctx, dropped))
  }

  const out: ChatCompletionCreateParamsBase = { model: ctx.upstreamModel, messages }
  if (body.stream === true) out.stream_options = { include_usage: true }
  if (body.stop_sequences !== undefined && body.stop_sequences !== null) {
    const stop = strings(body.stop_sequences, 'stop_sequences')
    if (stop.length > 0) out.stop = stop
  }
  const metadata = optEntry(body.metadata, 'metadata')
  if (metadata !== undefined) {
    const user = optText(metadata.user_id, 'metadata.user_id')
    if (user !== undefined) out.user = user
    if (Object.entries(metadata).some(([k, v]) => k !== 'user_id' && v !== null)) dropped.add('metadata')
  }
  const defined = tools(body, dropped)
  if (defined.length > 0) out.tools = defined
  toolChoice(body, out, dropped)
  const config = optEntry(body.output_config, 'output_config')
  if (config !== undefined) sortFields(config, { format: 'mapped', effort: 'mapped' }, dropped, undefined, 'output_config.')
  const format = responseFormat(config?.format, 'output_config.format', dropped)
  const betaFormat = responseFormat(body.output_format, 'output_format', dropped)
  if (format !== undefined || betaFormat !== undefined) out.response_format = format ?? betaFormat
  const effort = reasoningEffort(body, config?.effort, ctx, dropped)
  if (effort !== undefined) out.reasoning_effort = effort
  const tier = mapValue(SERVICE_TIER, body.service_tier, 'service_tier', dropped)
  if (tier !== undefined) out.service_tier = tier

  const upstream: Json = { ...out }
  sortFields(body, FIELDS, dropped, upstream)
  // top_k is no OpenAI field, but OpenAI-compatible servers (vLLM, SGLang) take it
  if (body.top_k !== undefined && body.top_k !== null) {
    if (ctx.supported?.has('top_k') === true) upstream.top_k = body.top_k
    else dropped.add('top_k')
  }
  return { body: upstream, dropped: dropped.list() }
}

function response (upstream: Json, ctx: TranslateCtx) {
  const body = readChatCompletion(upstream)
  const choice: Partial<ChatCompletion.Choice> = (Array.isArray(body.choices) ? body.choices.find(isObj) : undefined) ?? {}
  const answer: Partial<CompletionMessage> = isObj(choice.message) ? choice.message : {}
  const content: AnswerBlock[] = []
  const t = typeof answer.content === 'string' ? answer.content : textOf(answer.content)
  if (t !== '') content.push({ type: 'text', text: t })
  for (const tc of objects(answer.tool_calls)) {
    const fn: Partial<ChatCompletionMessageFunctionToolCall.Function> = 'function' in tc && isObj(tc.function) ? tc.function : {}
    content.push({ type: 'tool_use', id: typeof tc.id === 'string' ? tc.id : '', name: typeof fn.name === 'string' ? fn.name : '', input: parseToolArguments(fn.arguments) })
  }
  const usage = usageFromOpenAI(body.usage)
  return {
    body: message(ctx, content, stopOf(choice.finish_reason), usage),
    usage
  }
}

function error (status: number, body: unknown): Json {
  return errorBody('messages', { status, message: upstreamMessage(status, body) })
}

function stream (ctx: TranslateCtx): StreamMapper {
  const ev = event
  let started = false
  let open: { index: number, kind: 'text' | 'tool' } | null = null
  let nextIndex = 0
  const toolBlocks = new Map<number, number>()
  let stopReason: string | null = null
  let usage: Usage | null = null
  let stopped = false
  const text: string[] = []

  const start = (): SseEvent[] => {
    if (started) return []
    started = true
    return [messageStart(ctx, null)]
  }
  const close = (): SseEvent[] => {
    if (open === null) return []
    const index = open.index
    open = null
    return [ev('content_block_stop', { index })]
  }
  const stop = (): SseEvent[] => {
    if (stopped || stopReason === null) return []
    stopped = true
    return [
      ...messageEnd(stopReason as string, usage)
    ]
  }

  return {
    push (frameIn: SseEvent): SseEvent[] {
      if (frameIn.data === '[DONE]') return [...start(), ...close(), ...stop()]
      const chunk = parseChunk(frameIn.data)
      if (chunk === null) return []
      if ('error' in chunk && chunk.error !== undefined) {
        const e = isObj(chunk.error) ? chunk.error : { message: String(chunk.error) }
        return [ev('error', { error: { type: 'api_error', message: typeof e.message === 'string' ? e.message : 'upstream error' } })]
      }
      const out = start()
      if (chunk.usage !== undefined && chunk.usage !== null) usage = usageFromOpenAI(chunk.usage)
      for (const c of objects(chunk.choices)) {
        const delta: Delta = isObj(c.delta) ? c.delta : {}
        if (typeof delta.content === 'string' && delta.content !== '') {
          if (open?.kind !== 'text') {
            out.push(...close())
            open = { index: nextIndex++, kind: 'text' }
            out.push(ev('content_block_start', { index: open.index, content_block: { type: 'text', text: '' } }))
          }
          text.push(delta.content)
          out.push(ev('content_block_delta', { index: open.index, delta: { type: 'text_delta', text: delta.content } }))
        }
        for (const tc of objects(delta.tool_calls)) {
          const fn: ChatCompletionChunk.Choice.Delta.ToolCall.Function = isObj(tc.function) ? tc.function : {}
          const key = typeof tc.index === 'number' ? tc.index : 0
          if (typeof tc.id === 'string' && tc.id !== '') {
            out.push(...close())
            open = { index: nextIndex++, kind: 'tool' }
            toolBlocks.set(key, open.index)
            out.push(ev('content_block_start', { index: open.index, content_block: { type: 'tool_use', id: tc.id, name: typeof fn.name === 'string' ? fn.name : '', input: {} } }))
          }
          const index = toolBlocks.get(key)
          if (index !== undefined && typeof fn.arguments === 'string' && fn.arguments !== '') {
            text.push(fn.arguments)
            out.push(ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: fn.arguments } }))
          }
        }
        if (c.finish_reason !== null && c.finish_reason !== undefined) {
          out.push(...close())
          stopReason = stopOf(c.finish_reason)
        }
      }
      // the usage chunk comes after finish_reason: message_delta waits for it
      if (stopReason !== null && usage !== null) out.push(...stop())
      return out
    },
    end: () => started && stopReason !== null ? [...close(), ...stop()] : [],
    usage: () => usage,
    relayedText: () => text.join(''),
    finished: () => stopped
  }
}

export const messagesToChat: TranslatorPair = { client: 'messages', upstream: 'openai', path: '/chat/completions', request, response, error, stream }
