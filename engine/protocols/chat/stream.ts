import type { ChatCompletion, ChatCompletionChunk, ChatCompletionMessageFunctionToolCall } from 'openai/resources/chat/completions'
import type { CompletionUsage } from 'openai/resources/completions'
import { errorBody, type ErrorBodyInput } from '../../kernel/errors.js'
import { isObj } from '../fields.js'
import { frame } from '../sse.js'
import { DONE, objects, parsed, PIECES, str, type Splitter, type StreamEventLike } from '../stream-events.js'
import type { SseEvent, StreamMapper, TranslateCtx, Usage } from '../types.js'
import type { CompletionMessage } from './request.js'
import { toOpenAIUsage, usageFromOpenAI } from './usage.js'

// A Chat Completions stream: `data:` chunks of `chat.completion.chunk`, choices' deltas by
// index, tool calls' arguments in pieces by tool index, the usage chunk (no choices) when the
// client asked for it, then `data: [DONE]`. Watched as it passes, folded into the whole
// completion, replayed from one, and an error inside it.

/** A delta as DeepSeek, vLLM and other OpenAI-compatible servers stream it: the SDK's, with the reasoning text beside the answer's. */
export type Delta = ChatCompletionChunk.Choice.Delta & { reasoning_content?: string | null }

/** A chunk as the SDK types it; an upstream's chunk is not trusted for all that, so each field read is checked first. */
export function parseChunk (data: string): ChatCompletionChunk | null {
  try {
    const v = JSON.parse(data) as unknown
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? v as ChatCompletionChunk : null
  } catch {
    return null
  }
}

/** The stream passes unchanged but for the usage-only chunk the client did not ask for (the pair asks the upstream for it always). */
export function watch (ctx: TranslateCtx): StreamMapper {
  let usage: Usage | null = null
  let finished = false
  const text: string[] = []
  return {
    push (ev: SseEvent): SseEvent[] {
      if (ev.data === '[DONE]') { finished = true; return [ev] }
      const chunk = parseChunk(ev.data)
      if (chunk === null) return [ev]
      if (chunk.usage !== undefined && chunk.usage !== null) usage = usageFromOpenAI(chunk.usage)
      const choices = chunk.choices
      if (Array.isArray(choices)) {
        if (choices.length === 0 && usage !== null && !ctx.includeUsage) return []
        for (const c of choices.filter(isObj)) {
          if (c.finish_reason !== null && c.finish_reason !== undefined) finished = true
          const delta: Delta = isObj(c.delta) ? c.delta : {}
          if (typeof delta.content === 'string') text.push(delta.content)
          for (const tc of Array.isArray(delta.tool_calls) ? delta.tool_calls.filter(isObj) : []) {
            const args = isObj(tc.function) ? tc.function.arguments : undefined
            if (typeof args === 'string') text.push(args)
          }
        }
      }
      return [ev]
    },
    end: () => [],
    usage: () => usage,
    relayedText: () => text.join(''),
    finished: () => finished
  }
}

/** An error inside a stream: a data frame with the numeric-code shape's `error`. */
export function errorFrame (e: ErrorBodyInput): SseEvent {
  const body = errorBody('openai', e) as { error: Record<string, unknown> }
  return frame({ error: { ...body.error, param: null } })
}

interface ChatChoice {
  role: string
  content: string[]
  reasoning: string[] | null
  refusal: string | null
  tools: Map<number, { id?: string, type: string, name: string, args: string[] }>
  finish: ChatCompletionChunk.Choice['finish_reason']
}

/** A chunk of an upstream's stream as the SDK types it; each field read is checked first all the same. */
const chunkOf = (ev: StreamEventLike): ChatCompletionChunk | typeof DONE | null => parsed(ev) as ChatCompletionChunk | typeof DONE | null

/** A chat stream folded into its completion; `fallback` is the call's usage for a stream that did not carry it. */
export function aggregate (events: Iterable<StreamEventLike>, fallback: Usage | null): ChatCompletion | null {
  let base: Omit<ChatCompletion, 'choices'> | null = null
  let usage: CompletionUsage | undefined
  const choices = new Map<number, ChatChoice>()
  for (const ev of events) {
    const data = chunkOf(ev)
    if (data === DONE || data === null) continue
    if ('error' in data && data.error !== undefined) return null
    if (base === null) {
      base = { id: data.id, object: 'chat.completion', created: data.created, model: data.model }
      if (data.system_fingerprint !== undefined && data.system_fingerprint !== null) base.system_fingerprint = data.system_fingerprint
      if (data.service_tier !== undefined && data.service_tier !== null) base.service_tier = data.service_tier
    }
    if (isObj(data.usage)) usage = data.usage
    for (const c of objects(data.choices)) {
      const index = typeof c.index === 'number' ? c.index : 0
      let acc = choices.get(index)
      if (acc === undefined) {
        acc = { role: 'assistant', content: [], reasoning: null, refusal: null, tools: new Map(), finish: null }
        choices.set(index, acc)
      }
      const d: Delta = isObj(c.delta) ? c.delta : {}
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
        const fn: ChatCompletionChunk.Choice.Delta.ToolCall.Function = isObj(tc.function) ? tc.function : {}
        if (typeof fn.name === 'string' && fn.name !== '') t.name = fn.name
        if (typeof fn.arguments === 'string') t.args.push(fn.arguments)
      }
      if (c.finish_reason !== null && c.finish_reason !== undefined) acc.finish = c.finish_reason
    }
  }
  if (base === null || choices.size === 0 || [...choices.values()].some((c) => c.finish === null)) return null
  const body: ChatCompletion = {
    ...base,
    choices: [...choices.entries()].sort(([a], [b]) => a - b).map(([index, c]) => {
      const text = c.content.join('')
      // the role, the tool calls' ids and types as the stream gave them (the SDK's deltas leave each optional)
      const message = { role: c.role, content: text === '' && c.tools.size > 0 ? null : text, refusal: c.refusal } as CompletionMessage
      if (c.reasoning !== null) message.reasoning_content = c.reasoning.join('')
      if (c.tools.size > 0) {
        message.tool_calls = [...c.tools.entries()].sort(([a], [b]) => a - b)
          .map(([, t]) => ({ id: t.id, type: t.type, function: { name: t.name, arguments: t.args.join('') } }) as ChatCompletionMessageFunctionToolCall)
      }
      return { index, message, logprobs: null, finish_reason: c.finish as ChatCompletion.Choice['finish_reason'] }
    })
  }
  if (usage !== undefined) body.usage = usage
  else if (fallback !== null) body.usage = toOpenAIUsage(fallback)
  return body
}

/** A completion replayed as its stream of chunks. */
export function replay (body: ChatCompletion, ctx: Pick<TranslateCtx, 'id' | 'created' | 'model'>, split: Splitter = PIECES): SseEvent[] {
  const base = { id: str(body.id) || `chatcmpl-${ctx.id}`, object: 'chat.completion.chunk' as const, created: typeof body.created === 'number' ? body.created : ctx.created, model: str(body.model) || ctx.model }
  // the fingerprint is copied as the upstream wrote it, whatever its type
  const extra: { system_fingerprint?: unknown } = {}
  if (body.system_fingerprint !== undefined) extra.system_fingerprint = body.system_fingerprint
  // OpenAI's chunks carry a usage field (null but in the last) only when the usage was asked for
  const counted = isObj(body.usage)
  const chunk = (choices: ChatCompletionChunk.Choice[], usage: unknown = null): SseEvent => frame(counted ? { ...base, ...extra, choices, usage } : { ...base, ...extra, choices })
  const out: SseEvent[] = []
  const choices: Array<Pick<ChatCompletion.Choice, 'index' | 'finish_reason'> & { message: Partial<CompletionMessage> }> = objects(body.choices)
  for (const c of choices.length > 0 ? choices : [{ index: 0, message: { role: 'assistant' as const, content: '' }, finish_reason: 'stop' as const }]) {
    const index = typeof c.index === 'number' ? c.index : 0
    const m: Partial<CompletionMessage> = isObj(c.message) ? c.message : {}
    const delta = (d: Delta): SseEvent => chunk([{ index, delta: d, logprobs: null, finish_reason: null }])
    out.push(delta({ role: 'assistant', content: '' }))
    const reasoning = str(m.reasoning_content)
    for (const p of split(reasoning, 'text')) out.push(delta({ reasoning_content: p }))
    for (const p of split(str(m.content), 'text')) out.push(delta({ content: p }))
    if (typeof m.refusal === 'string') out.push(delta({ refusal: m.refusal }))
    objects(m.tool_calls).forEach((tc, i) => {
      const fn: Partial<ChatCompletionMessageFunctionToolCall.Function> = 'function' in tc && isObj(tc.function) ? tc.function : {}
      out.push(delta({ tool_calls: [{ index: i, id: typeof tc.id === 'string' ? tc.id : undefined, type: 'function', function: { name: str(fn.name), arguments: '' } }] }))
      for (const p of split(str(fn.arguments), 'arguments')) if (p !== '') out.push(delta({ tool_calls: [{ index: i, function: { arguments: p } }] }))
    })
    // the stored answer's reason replayed as it is, a reason the SDK does not list included
    out.push(chunk([{ index, delta: {}, logprobs: null, finish_reason: (c.finish_reason ?? 'stop') as ChatCompletionChunk.Choice['finish_reason'] }]))
  }
  if (counted) out.push(chunk([], body.usage))
  out.push({ data: '[DONE]' })
  return out
}
