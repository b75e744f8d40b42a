import type {
  ChatCompletion, ChatCompletionChunk, ChatCompletionContentPart, ChatCompletionContentPartImage, ChatCompletionFunctionTool,
  ChatCompletionMessage, ChatCompletionMessageFunctionToolCall, ChatCompletionMessageParam
} from 'openai/resources/chat/completions'
import type { FunctionDefinition, ResponseFormatJSONSchema } from 'openai/resources/shared'
import { readChatCompletion, type ChatRequest } from '../protocols/chat/request.js'
import { textOf } from '../protocols/content.js'
import { buildResponse, failureCode, ResponseWriter, responsesError, usageFromChat, type IncompleteReason, type OutputPart } from '../protocols/responses/writer.js'
import { allows, dropToward, normalise, type Part } from '../protocols/responses/request.js'
import type { Json, SseEvent, StreamMapper, TranslateCtx, TranslatedRequest, TranslatorPair, Usage } from './types.js'
import { isObj } from '../kernel/json.js'

// A Responses client in front of an OpenAI Chat Completions upstream.

const INCOMPLETE: Record<string, IncompleteReason> = { length: 'max_output_tokens', content_filter: 'content_filter' }

/**
 * The Chat Completions request a Responses client's is sent as: its verbosity and reasoning effort
 * as the client wrote them (a name the upstream does not take is for it to refuse).
 */
interface ChatBody extends Omit<ChatRequest, 'verbosity' | 'reasoning_effort'> {
  verbosity?: string
  reasoning_effort?: string
}

function chatPart (p: Part): ChatCompletionContentPart {
  if (p.type === 'text') return { type: 'text', text: p.text }
  // the detail as the client wrote it: `original` too, which Chat Completions has no name for
  if (p.type === 'image') return { type: 'image_url', image_url: p.detail === undefined ? { url: p.url } : { url: p.url, detail: p.detail as ChatCompletionContentPartImage.ImageURL['detail'] } }
  return { type: 'input_audio', input_audio: { data: p.data, format: p.format } }
}

function request (body: Json, ctx: TranslateCtx): TranslatedRequest {
  const r = normalise(body, ctx)
  const dropped = r.dropped
  const messages: ChatCompletionMessageParam[] = []
  if (r.instructions !== null) messages.push({ role: 'system', content: r.instructions })
  for (const turn of r.turns) {
    switch (turn.role) {
      case 'system':
        messages.push({ role: 'system', content: turn.text })
        break
      case 'user': {
        const only = turn.parts[0]
        messages.push({ role: 'user', content: turn.parts.length === 1 && only?.type === 'text' ? only.text : turn.parts.map(chatPart) })
        break
      }
      case 'assistant':
        messages.push({ role: 'assistant', content: turn.text })
        break
      case 'call': {
        const call: ChatCompletionMessageFunctionToolCall = { id: turn.id, type: 'function', function: { name: turn.name, arguments: turn.arguments === '' ? '{}' : turn.arguments } }
        // calls made together are one assistant message, after the text the model said with them
        const last = messages[messages.length - 1]
        if (last?.role === 'assistant') last.tool_calls = [...(last.tool_calls ?? []), call]
        else messages.push({ role: 'assistant', content: null, tool_calls: [call] })
        break
      }
      case 'result': {
        // a tool message holds text only
        const image = 'input.function_call_output.input_image'
        if (typeof turn.output !== 'string' && turn.output.some((p) => p.type !== 'text') && !dropped.includes(image)) dropped.push(image)
        const content = typeof turn.output === 'string' ? turn.output : turn.output.flatMap((p) => p.type === 'text' ? [p.text] : []).join('\n')
        messages.push({ role: 'tool', tool_call_id: turn.id, content })
        break
      }
    }
  }

  const out: ChatBody = { model: ctx.upstreamModel, messages }
  if (r.maxOutputTokens !== undefined) {
    // max_tokens is the older name, refused by OpenAI's reasoning models; a catalog may ask for it
    const legacy = ctx.supported?.has('max_tokens') === true && !ctx.supported.has('max_completion_tokens')
    if (legacy) out.max_tokens = r.maxOutputTokens
    else out.max_completion_tokens = r.maxOutputTokens
  }
  if (r.temperature !== undefined) out.temperature = r.temperature
  if (r.topP !== undefined) out.top_p = r.topP
  if (r.stop !== undefined) out.stop = r.stop
  if (r.stream !== undefined) out.stream = r.stream
  if (r.stream === true) out.stream_options = { include_usage: true }
  if (r.tools.length > 0) {
    out.tools = r.tools.map((t): ChatCompletionFunctionTool => {
      const fn: FunctionDefinition = { name: t.name }
      if (t.description !== undefined) fn.description = t.description
      if (t.parameters !== undefined) fn.parameters = t.parameters
      if (t.strict !== undefined) fn.strict = t.strict
      return { type: 'function', function: fn }
    })
    // both are refused upstream without tools
    if (r.toolChoice !== undefined) out.tool_choice = r.toolChoice.mode === 'tool' ? { type: 'function', function: { name: r.toolChoice.name } } : r.toolChoice.mode
    if (r.parallelToolCalls !== undefined) out.parallel_tool_calls = r.parallelToolCalls
  }
  if (r.format?.type === 'json_object') out.response_format = { type: 'json_object' }
  else if (r.format?.type === 'json_schema') {
    const schema: ResponseFormatJSONSchema.JSONSchema = { name: r.format.name ?? 'response', schema: r.format.schema ?? {} }
    if (r.format.strict !== undefined) schema.strict = r.format.strict
    if (r.format.description !== undefined) schema.description = r.format.description
    out.response_format = { type: 'json_schema', json_schema: schema }
  }
  // refused by the models that do not reason, or have no verbosity setting
  if (r.verbosity !== undefined) {
    if (allows(ctx, 'verbosity')) out.verbosity = r.verbosity
    else dropped.push('text.verbosity')
  }
  if (r.effort !== undefined) {
    if (allows(ctx, 'reasoning_effort', 'reasoning')) out.reasoning_effort = r.effort
    else dropped.push('reasoning.effort')
  }
  if (r.user !== undefined) out.user = r.user
  if (r.safetyIdentifier !== undefined) out.safety_identifier = r.safetyIdentifier
  if (r.metadata !== undefined) {
    if (ctx.supported?.has('metadata') === true) out.metadata = r.metadata
    else dropped.push('metadata')
  }
  if (r.promptCacheKey !== undefined) {
    if (ctx.supported?.has('prompt_cache_key') === true) out.prompt_cache_key = r.promptCacheKey
    else dropped.push('prompt_cache_key')
  }
  // none today: every field Chat Completions lacks is dropped by the reader or above, as the model allows
  dropToward(r, 'openai')
  return { body: { ...r.extra, ...out }, dropped }
}

function response (body: Json, ctx: TranslateCtx) {
  const answer = readChatCompletion(body)
  const choice: Partial<ChatCompletion.Choice> = (Array.isArray(answer.choices) ? answer.choices : [])[0] ?? {}
  const message: Partial<ChatCompletionMessage> = isObj(choice.message) ? choice.message : {}
  const parts: OutputPart[] = []
  const text = typeof message.content === 'string' ? message.content : textOf(message.content)
  if (text !== '') parts.push({ kind: 'text', text })
  for (const tc of Array.isArray(message.tool_calls) ? message.tool_calls : []) {
    const fn: Partial<ChatCompletionMessageFunctionToolCall.Function> = isObj(tc) && 'function' in tc && isObj(tc.function) ? tc.function : {}
    parts.push({ kind: 'call', id: String(tc.id ?? ''), name: String(fn.name ?? ''), arguments: typeof fn.arguments === 'string' ? fn.arguments : '' })
  }
  const usage = usageFromChat(answer.usage)
  return { body: buildResponse(ctx, parts, INCOMPLETE[String(choice.finish_reason)] ?? null, usage), usage }
}

function stream (ctx: TranslateCtx): StreamMapper {
  const w = new ResponseWriter(ctx)
  const calls = new Map<number, number>()
  let text: number | null = null
  // undefined until finish_reason; the usage chunk that follows it decides when the answer ends
  let incomplete: IncompleteReason | null | undefined
  let usage: Usage | null = null

  return {
    push (ev: SseEvent): SseEvent[] {
      if (ev.data === '[DONE]') {
        if (incomplete !== undefined) w.finish(incomplete, usage)
        return w.take()
      }
      // the upstream's chunk as the SDK types it (or an error in its place), each field read checked first
      let chunk: ChatCompletionChunk & { error?: unknown }
      try { chunk = JSON.parse(ev.data) as typeof chunk } catch { return [] }
      if (chunk.error !== undefined && chunk.error !== null) {
        const e = isObj(chunk.error) ? chunk.error : { message: String(chunk.error) }
        w.fail({ code: failureCode(e), message: String(e.message ?? 'The upstream provider failed.') }, usage)
        return w.take()
      }
      w.start()
      if (chunk.usage !== undefined && chunk.usage !== null) usage = usageFromChat(chunk.usage)
      for (const c of Array.isArray(chunk.choices) ? chunk.choices : []) {
        const delta: Partial<ChatCompletionChunk.Choice.Delta> = isObj(c.delta) ? c.delta : {}
        if (typeof delta.content === 'string' && delta.content !== '') {
          text ??= w.message()
          w.append(text, delta.content)
        }
        for (const tc of Array.isArray(delta.tool_calls) ? delta.tool_calls : []) {
          const fn: ChatCompletionChunk.Choice.Delta.ToolCall.Function = isObj(tc.function) ? tc.function : {}
          const key = typeof tc.index === 'number' ? tc.index : 0
          if (typeof tc.id === 'string' && tc.id !== '' && !calls.has(key)) {
            if (text !== null) { w.close(text); text = null }
            calls.set(key, w.call(tc.id, String(fn.name ?? '')))
          }
          const index = calls.get(key)
          if (index !== undefined && typeof fn.arguments === 'string') w.append(index, fn.arguments)
        }
        if (c.finish_reason !== null && c.finish_reason !== undefined) incomplete = INCOMPLETE[String(c.finish_reason)] ?? null
      }
      if (incomplete !== undefined && usage !== null) w.finish(incomplete, usage)
      return w.take()
    },
    end () {
      if (incomplete !== undefined) w.finish(incomplete, usage)
      return w.take()
    },
    usage: () => usage,
    relayedText: () => w.relayedText(),
    finished: () => w.finished(),
    fail (e) {
      w.fail({ code: failureCode(e), message: e.message }, usage)
      return w.take()
    }
  }
}

export const responsesToChat: TranslatorPair = { client: 'responses', upstream: 'openai', path: '/chat/completions', request, response, error: responsesError, stream }
