import { errorBody } from '../errors.js'
import { parseToolArguments, textOf } from './content.js'
import { upstreamMessage } from './passthrough.js'
import { frame } from './sse.js'
import type { Json, SseEvent, StreamMapper, TranslateCtx, TranslatedRequest, TranslatorPair, Usage } from './types.js'
import { toMessagesUsage, usageFromOpenAI } from './usage.js'

// A Messages client in front of an OpenAI Chat Completions upstream (PROTOCOLS.md "Mapping,
// both directions" and the stream recipe "OpenAI upstream → Messages client").

export const STOP_REASON: Record<string, string> = {
  stop: 'end_turn',
  length: 'max_tokens',
  tool_calls: 'tool_use',
  function_call: 'tool_use',
  content_filter: 'refusal'
}

const stopOf = (finish: unknown): string => STOP_REASON[String(finish)] ?? 'end_turn'

/** A Messages user block → an OpenAI content part (null: no equivalent, dropped). */
function part (block: Json, ctx: TranslateCtx): Json | null {
  if (block.type === 'text') return typeof block.text === 'string' && block.text !== '' ? { type: 'text', text: block.text } : null
  if (block.type === 'image') {
    if (ctx.flatten) return block // the spec's simplified mode leaves image blocks unconverted
    const source = (block.source ?? {}) as Json
    if (source.type === 'base64') return { type: 'image_url', image_url: { url: `data:${String(source.media_type)};base64,${String(source.data)}` } }
    if (source.type === 'url') return { type: 'image_url', image_url: { url: source.url } }
  }
  return null
}

function request (body: Json, ctx: TranslateCtx): TranslatedRequest {
  const messages: Json[] = []
  const system = textOf(body.system)
  if (system !== '') messages.push({ role: 'system', content: system })
  for (const m of body.messages as Json[]) {
    if (m.role === 'system') {
      // the mid-conversation system entry stays a system message in its place
      messages.push({ role: 'system', content: textOf(m.content) })
      continue
    }
    const content = typeof m.content === 'string' ? [{ type: 'text', text: m.content }] : (Array.isArray(m.content) ? m.content as Json[] : [])
    if (m.role === 'assistant') {
      const text = content.filter((b) => b.type === 'text').map((b) => b.text as string).join('')
      const calls = content.filter((b) => b.type === 'tool_use').map((b) => ({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } }))
      const msg: Json = { role: 'assistant', content: text === '' && calls.length > 0 ? null : text }
      if (calls.length > 0) msg.tool_calls = calls
      messages.push(msg)
      continue
    }
    // a user turn: its tool results first, one tool message each, then what the user said
    for (const b of content) {
      if (b.type === 'tool_result') {
        const text = typeof b.content === 'string' ? b.content : textOf(b.content)
        messages.push({ role: 'tool', tool_call_id: b.tool_use_id, content: b.is_error === true && text === '' ? 'error' : text })
      }
    }
    const parts = content.filter((b) => b.type !== 'tool_result').map((b) => part(b, ctx)).filter((p): p is Json => p !== null)
    if (parts.length === 0) continue
    const onlyText = parts.every((p) => p.type === 'text')
    messages.push({ role: 'user', content: onlyText ? parts.map((p) => p.text as string).join('\n') : parts })
  }

  const out: Json = { model: ctx.upstreamModel, messages }
  for (const key of ['max_tokens', 'temperature', 'top_p', 'stream']) if (body[key] !== undefined) out[key] = body[key]
  if (body.stream === true) out.stream_options = { include_usage: true }
  if (Array.isArray(body.stop_sequences) && body.stop_sequences.length > 0) out.stop = body.stop_sequences
  const userId = (body.metadata as Json | undefined)?.user_id
  if (typeof userId === 'string') out.user = userId
  if (Array.isArray(body.tools)) {
    const tools = (body.tools as Json[]).filter((t) => t.input_schema !== undefined || t.type === undefined || t.type === 'custom')
    if (tools.length > 0) {
      out.tools = tools.map((t) => {
        const fn: Json = { name: t.name, parameters: t.input_schema ?? { type: 'object', properties: {} } }
        if (t.description !== undefined) fn.description = t.description
        return { type: 'function', function: fn }
      })
    }
  }
  const choice = body.tool_choice as Json | undefined
  if (choice !== undefined && choice !== null) {
    if (choice.type === 'auto') out.tool_choice = 'auto'
    else if (choice.type === 'any') out.tool_choice = 'required'
    else if (choice.type === 'none') out.tool_choice = 'none'
    else if (choice.type === 'tool') out.tool_choice = { type: 'function', function: { name: choice.name } }
    if (choice.disable_parallel_tool_use === true) out.parallel_tool_calls = false
  }
  return { body: out, dropped: [] }
}

function response (body: Json, ctx: TranslateCtx) {
  const choice = ((body.choices as Json[] | undefined) ?? [])[0] ?? {}
  const message = (choice.message ?? {}) as Json
  const content: Json[] = []
  const text = typeof message.content === 'string' ? message.content : textOf(message.content)
  if (text !== '') content.push({ type: 'text', text })
  for (const tc of (Array.isArray(message.tool_calls) ? message.tool_calls : []) as Json[]) {
    const fn = (tc.function ?? {}) as Json
    content.push({ type: 'tool_use', id: tc.id, name: fn.name, input: parseToolArguments(fn.arguments) })
  }
  const usage = usageFromOpenAI(body.usage)
  return {
    body: {
      id: `msg_${ctx.id}`,
      type: 'message',
      role: 'assistant',
      model: ctx.model,
      content,
      stop_reason: stopOf(choice.finish_reason),
      stop_sequence: null,
      usage: toMessagesUsage(usage ?? { prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, cache_creation_input_tokens: 0 })
    },
    usage
  }
}

function error (status: number, body: unknown): Json {
  return errorBody('messages', { status, message: upstreamMessage(status, body) })
}

function stream (ctx: TranslateCtx): StreamMapper {
  const ev = (type: string, data: Json): SseEvent => frame({ type, ...data }, type)
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
    return [ev('message_start', {
      message: {
        id: `msg_${ctx.id}`, type: 'message', role: 'assistant', model: ctx.model, content: [], stop_reason: null, stop_sequence: null,
        usage: { input_tokens: 0, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 0 }
      }
    })]
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
    const u = toMessagesUsage(usage ?? { prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, cache_creation_input_tokens: 0 })
    return [
      ev('message_delta', { delta: { stop_reason: stopReason, stop_sequence: null }, usage: { input_tokens: u.input_tokens, cache_creation_input_tokens: 0, cache_read_input_tokens: u.cache_read_input_tokens, output_tokens: u.output_tokens } }),
      ev('message_stop', {})
    ]
  }

  return {
    push (frameIn: SseEvent): SseEvent[] {
      if (frameIn.data === '[DONE]') return [...start(), ...close(), ...stop()]
      let chunk: Json
      try { chunk = JSON.parse(frameIn.data) as Json } catch { return [] }
      if (chunk.error !== undefined) {
        const e = (typeof chunk.error === 'object' && chunk.error !== null ? chunk.error : { message: String(chunk.error) }) as Json
        return [ev('error', { error: { type: 'api_error', message: String(e.message ?? 'upstream error') } })]
      }
      const out = start()
      if (chunk.usage !== undefined && chunk.usage !== null) usage = usageFromOpenAI(chunk.usage)
      for (const c of (Array.isArray(chunk.choices) ? chunk.choices : []) as Json[]) {
        const delta = (c.delta ?? {}) as Json
        if (typeof delta.content === 'string' && delta.content !== '') {
          if (open?.kind !== 'text') {
            out.push(...close())
            open = { index: nextIndex++, kind: 'text' }
            out.push(ev('content_block_start', { index: open.index, content_block: { type: 'text', text: '' } }))
          }
          text.push(delta.content)
          out.push(ev('content_block_delta', { index: open.index, delta: { type: 'text_delta', text: delta.content } }))
        }
        for (const tc of (Array.isArray(delta.tool_calls) ? delta.tool_calls : []) as Json[]) {
          const fn = (tc.function ?? {}) as Json
          const key = typeof tc.index === 'number' ? tc.index : 0
          if (typeof tc.id === 'string' && tc.id !== '') {
            out.push(...close())
            open = { index: nextIndex++, kind: 'tool' }
            toolBlocks.set(key, open.index)
            out.push(ev('content_block_start', { index: open.index, content_block: { type: 'tool_use', id: tc.id, name: fn.name, input: {} } }))
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
