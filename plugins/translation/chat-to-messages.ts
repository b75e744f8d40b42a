import { UnsupportedOnUpstream } from '../errors.js'
import { parseToolArguments, textOf } from './content.js'
import { upstreamMessage } from './passthrough.js'
import { DONE, frame } from './sse.js'
import { errorBody } from '../errors.js'
import type { Json, SseEvent, StreamMapper, TranslateCtx, TranslatedRequest, TranslatorPair, Usage } from './types.js'
import { toOpenAIUsage, usageFromMessages } from './usage.js'

// An OpenAI Chat Completions client in front of a Messages upstream (PROTOCOLS.md "Mapping,
// both directions" and the stream recipe "Messages upstream → OpenAI client").

export const FINISH_REASON: Record<string, string> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  pause_turn: 'stop',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  tool_use: 'tool_calls',
  refusal: 'content_filter'
}

const finishOf = (stop: unknown): string => FINISH_REASON[String(stop)] ?? 'stop'

function imageBlock (url: string): Json {
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(url)
  if (m !== null) return { type: 'image', source: { type: 'base64', media_type: m[1], data: m[2] } }
  return { type: 'image', source: { type: 'url', url } }
}

/** OpenAI content (string or parts) → Messages blocks; empty text is dropped (Anthropic refuses it). */
function blocks (content: unknown, ctx: TranslateCtx): Json[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }]
  if (!Array.isArray(content)) return []
  const out: Json[] = []
  for (const part of content as Json[]) {
    if (part === null || typeof part !== 'object') continue
    switch (part.type) {
      case 'text':
        if (typeof part.text === 'string' && part.text !== '') out.push({ type: 'text', text: part.text })
        break
      case 'image_url': {
        if (ctx.flatten) break // the spec's simplified mode drops images silently
        const url = typeof part.image_url === 'string' ? part.image_url : (part.image_url as Json | undefined)?.url
        if (typeof url === 'string') out.push(imageBlock(url))
        break
      }
      case 'video_url':
        throw new UnsupportedOnUpstream({ feature: 'Video input', model: ctx.model })
      case 'input_audio':
        throw new UnsupportedOnUpstream({ feature: 'Audio input', model: ctx.model })
      case 'file':
        throw new UnsupportedOnUpstream({ feature: 'File input', model: ctx.model })
    }
  }
  return ctx.flatten && out.length > 0 ? [{ type: 'text', text: out.map((b) => b.text as string).join('\n') }] : out
}

function toolChoice (choice: unknown, parallel: unknown): Json | undefined {
  let out: Json | undefined
  if (choice === 'auto') out = { type: 'auto' }
  else if (choice === 'none') out = { type: 'none' }
  else if (choice === 'required') out = { type: 'any' }
  else if (choice !== null && typeof choice === 'object') {
    const name = ((choice as Json).function as Json | undefined)?.name
    if (typeof name === 'string') out = { type: 'tool', name }
  }
  if (parallel === false) out = { ...(out ?? { type: 'auto' }), disable_parallel_tool_use: true }
  return out
}

function request (body: Json, ctx: TranslateCtx): TranslatedRequest {
  if (typeof body.n === 'number' && body.n > 1) throw new UnsupportedOnUpstream({ feature: 'n > 1', model: ctx.model })
  const system: string[] = []
  const turns: Array<{ role: 'user' | 'assistant', content: Json[] }> = []
  const push = (role: 'user' | 'assistant', content: Json[]): void => {
    if (content.length === 0) return
    const last = turns[turns.length - 1]
    if (last !== undefined && last.role === role) last.content.push(...content)
    else turns.push({ role, content: [...content] })
  }
  for (const m of body.messages as Json[]) {
    switch (m.role) {
      case 'system':
      case 'developer': {
        const text = textOf(m.content)
        if (text !== '') system.push(text)
        break
      }
      case 'user':
        push('user', blocks(m.content, ctx))
        break
      case 'assistant': {
        const content = blocks(m.content, ctx).filter((b) => b.type === 'text')
        for (const tc of (Array.isArray(m.tool_calls) ? m.tool_calls : []) as Json[]) {
          const fn = tc.function as Json | undefined
          content.push({ type: 'tool_use', id: tc.id, name: fn?.name, input: parseToolArguments(fn?.arguments) })
        }
        push('assistant', content)
        break
      }
      case 'tool': {
        const text = typeof m.content === 'string' ? m.content : textOf(m.content)
        push('user', [{ type: 'tool_result', tool_use_id: m.tool_call_id, content: text }])
        break
      }
    }
  }
  // tool results lead their user turn (Anthropic wants them before any text)
  for (const t of turns) {
    if (t.role === 'user' && t.content.some((b) => b.type === 'tool_result')) {
      t.content = [...t.content.filter((b) => b.type === 'tool_result'), ...t.content.filter((b) => b.type !== 'tool_result')]
    }
  }

  const out: Json = { model: ctx.upstreamModel, messages: turns }
  if (system.length > 0) out.system = system.join('\n\n')
  out.max_tokens = [body.max_completion_tokens, body.max_tokens].find((v) => typeof v === 'number') ?? ctx.defaultMaxTokens
  for (const key of ['temperature', 'top_p', 'top_k', 'stream', 'thinking', 'metadata']) if (body[key] !== undefined) out[key] = body[key]
  if (body.stop !== undefined && body.stop !== null) out.stop_sequences = Array.isArray(body.stop) ? body.stop : [body.stop]
  if (typeof body.user === 'string') out.metadata = { ...(out.metadata as Json | undefined), user_id: body.user }
  if (Array.isArray(body.tools)) {
    out.tools = (body.tools as Json[]).map((t) => {
      const fn = (t.function ?? {}) as Json
      const tool: Json = { name: fn.name, input_schema: fn.parameters ?? { type: 'object', properties: {} } }
      if (fn.description !== undefined) tool.description = fn.description
      return tool
    })
  }
  const choice = toolChoice(body.tool_choice, body.parallel_tool_calls)
  if (choice !== undefined) out.tool_choice = choice
  return { body: out, dropped: [] }
}

function response (body: Json, ctx: TranslateCtx) {
  const content = Array.isArray(body.content) ? body.content as Json[] : []
  const text = content.filter((b) => b.type === 'text').map((b) => b.text as string).join('')
  const toolCalls = content.filter((b) => b.type === 'tool_use').map((b) => ({ id: b.id, type: 'function', function: { name: b.name, arguments: JSON.stringify(b.input ?? {}) } }))
  const usage = usageFromMessages(body.usage)
  const message: Json = { role: 'assistant', content: text === '' && toolCalls.length > 0 ? null : text, refusal: null }
  if (toolCalls.length > 0) message.tool_calls = toolCalls
  const out: Json = {
    id: `chatcmpl-${ctx.id}`,
    object: 'chat.completion',
    created: ctx.created,
    model: ctx.model,
    choices: [{ index: 0, message, finish_reason: finishOf(body.stop_reason), logprobs: null }]
  }
  if (usage !== null) out.usage = toOpenAIUsage(usage)
  return { body: out, usage }
}

function error (status: number, body: unknown): Json {
  const type = ((body as { error?: Json } | null)?.error)?.type
  return errorBody('openai', { status, message: upstreamMessage(status, body), openaiType: typeof type === 'string' ? type : undefined })
}

function stream (ctx: TranslateCtx): StreamMapper {
  const id = `chatcmpl-${ctx.id}`
  const toolIndex = new Map<number, number>()
  let tools = 0
  let rawUsage: Json | null = null
  let finishReason: string | null = null
  let done = false
  const text: string[] = []

  const chunk = (delta: Json, finish: string | null = null): SseEvent => {
    const c: Json = { id, object: 'chat.completion.chunk', created: ctx.created, model: ctx.model, choices: [{ index: 0, delta, finish_reason: finish, logprobs: null }] }
    if (ctx.includeUsage) c.usage = null
    return frame(c)
  }
  const usage = (): Usage | null => rawUsage === null ? null : usageFromMessages(rawUsage)
  const finish = (): SseEvent[] => {
    if (done) return []
    done = true
    const out: SseEvent[] = []
    const u = usage()
    if (ctx.includeUsage && u !== null) out.push(frame({ id, object: 'chat.completion.chunk', created: ctx.created, model: ctx.model, choices: [], usage: toOpenAIUsage(u) }))
    out.push(DONE)
    return out
  }

  return {
    push (ev: SseEvent): SseEvent[] {
      let data: Json
      try { data = JSON.parse(ev.data) as Json } catch { return [] }
      switch (data.type ?? ev.event) {
        case 'message_start':
          rawUsage = { ...((data.message as Json | undefined)?.usage as Json | undefined) }
          return [chunk({ role: 'assistant', content: '' })]
        case 'content_block_start': {
          const block = data.content_block as Json | undefined
          if (block?.type === 'tool_use') {
            const i = tools++
            toolIndex.set(data.index as number, i)
            return [chunk({ tool_calls: [{ index: i, id: block.id, type: 'function', function: { name: block.name, arguments: '' } }] })]
          }
          if (block?.type === 'text' && typeof block.text === 'string' && block.text !== '') {
            text.push(block.text)
            return [chunk({ content: block.text })]
          }
          return []
        }
        case 'content_block_delta': {
          const d = data.delta as Json | undefined
          if (d?.type === 'text_delta' && typeof d.text === 'string') {
            text.push(d.text)
            return [chunk({ content: d.text })]
          }
          if (d?.type === 'input_json_delta' && typeof d.partial_json === 'string') {
            const i = toolIndex.get(data.index as number)
            if (i === undefined || d.partial_json === '') return []
            text.push(d.partial_json)
            return [chunk({ tool_calls: [{ index: i, function: { arguments: d.partial_json } }] })]
          }
          return []
        }
        case 'message_delta': {
          rawUsage = { ...rawUsage, ...(data.usage as Json | undefined) }
          const stop = (data.delta as Json | undefined)?.stop_reason
          if (stop === undefined || stop === null) return []
          finishReason = finishOf(stop)
          return [chunk({}, finishReason)]
        }
        case 'message_stop':
          if (finishReason === null) { finishReason = 'stop'; return [chunk({}, 'stop'), ...finish()] }
          return finish()
        case 'error': {
          const e = (data.error ?? {}) as Json
          return [frame({ error: { message: e.message ?? 'upstream error', type: e.type ?? 'api_error', param: null, code: null } })]
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

export const chatToMessages: TranslatorPair = { client: 'openai', upstream: 'messages', path: '/v1/messages', request, response, error, stream }
