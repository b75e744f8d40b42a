import { isObj } from '../protocols/fields.js'
import { SseParser } from '../protocols/sse.js'
import type { Json, Protocol, Usage } from './types.js'
import { toOpenAIUsage } from './usage.js'

// A streamed answer folded back into the whole answer of its protocol, the inverse of
// replay.ts: what a client that had asked for no stream would have been sent (a chat completion,
// a Messages message, a Responses object, a GenerateContentResponse). For keeping a stream's
// answer (a cache) and for reading one whole. Pure: no I/O, no clock.

/** One event of a stream: its SSE event name and its data, as text or parsed. */
export interface StreamEventLike {
  event?: string
  data: string | Json
}

export interface AggregateOptions {
  /**
   * The call's usage, in the gateway's normalised form, for a stream that did not carry it
   * (a chat stream whose client did not ask for the usage chunk).
   */
  usage?: Usage | null
}

const DONE = Symbol('done')

function parsed (ev: StreamEventLike): Json | typeof DONE | null {
  if (typeof ev.data !== 'string') return isObj(ev.data) ? ev.data : null
  if (ev.data === '[DONE]') return DONE
  if (ev.data === '' || ev.data[0] !== '{') return null
  try {
    const v = JSON.parse(ev.data) as unknown
    return isObj(v) ? v : null
  } catch {
    return null
  }
}

function eventsOf (stream: string | Iterable<StreamEventLike>): Iterable<StreamEventLike> {
  if (typeof stream !== 'string') return stream
  const parser = new SseParser()
  return [...parser.push(stream), ...parser.end()]
}

const objects = (v: unknown): Json[] => Array.isArray(v) ? v.filter(isObj) : []
const str = (v: unknown): string => typeof v === 'string' ? v : ''

/**
 * The whole answer a stream in `protocol` stands for; null when the stream is not a complete
 * answer (it stopped before its last event, or carried an error).
 */
export function aggregateStream (protocol: Protocol, stream: string | Iterable<StreamEventLike>, opts: AggregateOptions = {}): Json | null {
  const events = eventsOf(stream)
  switch (protocol) {
    case 'openai': return chatAnswer(events, opts.usage ?? null)
    case 'messages': return messagesAnswer(events)
    case 'responses': return responsesAnswer(events)
    case 'gemini': return geminiAnswer(events)
    default: return null
  }
}

interface ChatChoice {
  role: string
  content: string[]
  reasoning: string[] | null
  refusal: string | null
  tools: Map<number, { id?: unknown, type: string, name: string, args: string[] }>
  finish: unknown
}

function chatAnswer (events: Iterable<StreamEventLike>, fallback: Usage | null): Json | null {
  let base: Json | null = null
  let usage: unknown
  const choices = new Map<number, ChatChoice>()
  for (const ev of events) {
    const data = parsed(ev)
    if (data === DONE || data === null) continue
    if (data.error !== undefined) return null
    if (base === null) {
      base = { id: data.id, object: 'chat.completion', created: data.created, model: data.model }
      for (const k of ['system_fingerprint', 'service_tier']) if (data[k] !== undefined && data[k] !== null) base[k] = data[k]
    }
    if (isObj(data.usage)) usage = data.usage
    for (const c of objects(data.choices)) {
      const index = typeof c.index === 'number' ? c.index : 0
      let acc = choices.get(index)
      if (acc === undefined) {
        acc = { role: 'assistant', content: [], reasoning: null, refusal: null, tools: new Map(), finish: null }
        choices.set(index, acc)
      }
      const d = isObj(c.delta) ? c.delta : {}
      if (typeof d.role === 'string') acc.role = d.role
      if (typeof d.content === 'string') acc.content.push(d.content)
      if (typeof d.reasoning_content === 'string') (acc.reasoning ??= []).push(d.reasoning_content)
      if (typeof d.refusal === 'string') acc.refusal = (acc.refusal ?? '') + d.refusal
      for (const tc of objects(d.tool_calls)) {
        const i = typeof tc.index === 'number' ? tc.index : 0
        let t = acc.tools.get(i)
        if (t === undefined) {
          t = { type: 'function', name: '', args: [] }
          acc.tools.set(i, t)
        }
        if (tc.id !== undefined && tc.id !== null) t.id = tc.id
        if (typeof tc.type === 'string') t.type = tc.type
        const fn = isObj(tc.function) ? tc.function : {}
        if (typeof fn.name === 'string' && fn.name !== '') t.name = fn.name
        if (typeof fn.arguments === 'string') t.args.push(fn.arguments)
      }
      if (c.finish_reason !== null && c.finish_reason !== undefined) acc.finish = c.finish_reason
    }
  }
  if (base === null || choices.size === 0 || [...choices.values()].some((c) => c.finish === null)) return null
  const body: Json = {
    ...base,
    choices: [...choices.entries()].sort(([a], [b]) => a - b).map(([index, c]) => {
      const text = c.content.join('')
      const message: Json = { role: c.role, content: text === '' && c.tools.size > 0 ? null : text, refusal: c.refusal }
      if (c.reasoning !== null) message.reasoning_content = c.reasoning.join('')
      if (c.tools.size > 0) {
        message.tool_calls = [...c.tools.entries()].sort(([a], [b]) => a - b)
          .map(([, t]) => ({ id: t.id, type: t.type, function: { name: t.name, arguments: t.args.join('') } }))
      }
      return { index, message, logprobs: null, finish_reason: c.finish }
    })
  }
  if (usage !== undefined) body.usage = usage
  else if (fallback !== null) body.usage = toOpenAIUsage(fallback)
  return body
}

function messagesAnswer (events: Iterable<StreamEventLike>): Json | null {
  let message: Json | null = null
  const blocks: Json[] = []
  const json = new Map<number, string[]>()
  let stopped = false
  for (const ev of events) {
    const data = parsed(ev)
    if (data === DONE || data === null) continue
    switch (data.type) {
      case 'message_start':
        if (!isObj(data.message)) return null
        message = { ...data.message, content: [] }
        break
      case 'content_block_start': {
        const index = typeof data.index === 'number' ? data.index : blocks.length
        const block = isObj(data.content_block) ? { ...data.content_block } : {}
        if (block.type === 'tool_use' || block.type === 'server_tool_use' || block.type === 'mcp_tool_use') json.set(index, [])
        blocks[index] = block
        break
      }
      case 'content_block_delta': {
        const block = blocks[typeof data.index === 'number' ? data.index : -1]
        const d = isObj(data.delta) ? data.delta : {}
        if (block === undefined) return null
        switch (d.type) {
          case 'text_delta': block.text = str(block.text) + str(d.text); break
          case 'thinking_delta': block.thinking = str(block.thinking) + str(d.thinking); break
          case 'signature_delta': block.signature = d.signature; break
          case 'input_json_delta': json.get(data.index as number)?.push(str(d.partial_json)); break
          case 'citations_delta': block.citations = [...(Array.isArray(block.citations) ? block.citations : []), d.citation]; break
        }
        break
      }
      case 'content_block_stop': {
        const index = data.index as number
        const parts = json.get(index)
        const block = blocks[index]
        if (parts === undefined || block === undefined) break
        const text = parts.join('')
        if (text !== '') {
          try {
            block.input = JSON.parse(text) as unknown
          } catch {
            return null
          }
        }
        json.delete(index)
        break
      }
      case 'message_delta':
        if (message === null) return null
        if (isObj(data.delta)) Object.assign(message, data.delta)
        // counts in message_delta are cumulative: they replace what message_start said
        if (isObj(data.usage)) message.usage = { ...(isObj(message.usage) ? message.usage : {}), ...data.usage }
        break
      case 'message_stop':
        stopped = true
        break
      case 'error':
        return null
    }
  }
  if (message === null || !stopped) return null
  return { ...message, content: blocks.filter((b) => b !== undefined) }
}

const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed'])

function responsesAnswer (events: Iterable<StreamEventLike>): Json | null {
  let response: Json | null = null
  const items: Json[] = []
  for (const ev of events) {
    const data = parsed(ev)
    if (data === DONE || data === null) continue
    const type = typeof data.type === 'string' ? data.type : ev.event
    if (type === 'error') return null
    if (type === 'response.output_item.done' && isObj(data.item) && typeof data.output_index === 'number') items[data.output_index] = data.item
    if (type !== undefined && TERMINAL.has(type) && isObj(data.response)) response = data.response
  }
  if (response === null) return null
  // the terminal event carries the whole response; the items stand in where it left them out
  if (objects(response.output).length === 0 && items.length > 0) return { ...response, output: items.filter((i) => i !== undefined) }
  return response
}

const GEMINI_TOP = ['promptFeedback', 'usageMetadata', 'modelVersion', 'responseId', 'createTime']

function geminiAnswer (events: Iterable<StreamEventLike>): Json | null {
  const candidates = new Map<number, { role: string, parts: Json[], rest: Json }>()
  const top: Json = {}
  let finished = false
  for (const ev of events) {
    const data = parsed(ev)
    if (data === DONE || data === null) continue
    if (data.error !== undefined) return null
    objects(data.candidates).forEach((c, i) => {
      const index = typeof c.index === 'number' ? c.index : i
      let acc = candidates.get(index)
      if (acc === undefined) {
        acc = { role: 'model', parts: [], rest: {} }
        candidates.set(index, acc)
      }
      const content = isObj(c.content) ? c.content : {}
      if (typeof content.role === 'string') acc.role = content.role
      for (const part of objects(content.parts)) {
        const last = acc.parts[acc.parts.length - 1]
        // a piece of text continues the text part before it (a thought continues a thought)
        const piece = typeof part.text === 'string' && Object.keys(part).every((k) => k === 'text' || k === 'thought')
        if (piece && last !== undefined && typeof last.text === 'string' && (last.thought === true) === (part.thought === true)) last.text += part.text as string
        else acc.parts.push({ ...part })
      }
      for (const [k, v] of Object.entries(c)) if (k !== 'content' && k !== 'index') acc.rest[k] = v
      if (c.finishReason !== undefined) finished = true
    })
    for (const k of GEMINI_TOP) if (data[k] !== undefined) top[k] = data[k]
  }
  if (!finished) return null
  return {
    candidates: [...candidates.entries()].sort(([a], [b]) => a - b).map(([index, c]) => ({ content: { role: c.role, parts: c.parts }, ...c.rest, index })),
    ...top
  }
}
