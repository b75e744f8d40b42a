import { frame } from './sse.js'
import type { Json, Protocol, SseEvent, TranslateCtx } from './types.js'
import { isObj } from '../kernel/json.js'

// A whole answer replayed as its protocol's stream: the events a provider would have sent for
// it, text and tool arguments in several deltas, tool calls, thinking and usage included, so that
// the official SDKs' stream helpers rebuild the same answer. For answers the gateway has whole
// (a cache hit) and a client that asked for a stream. Pure: no I/O, no clock.

const PIECE = 48

const objects = (v: unknown): Json[] => Array.isArray(v) ? v.filter(isObj) : []
const str = (v: unknown): string => typeof v === 'string' ? v : ''

/** `text` in pieces of about PIECE characters, cut after a space where there is one. */
export function pieces (text: string): string[] {
  const out: string[] = []
  let at = 0
  while (at < text.length) {
    let end = Math.min(text.length, at + PIECE)
    if (end < text.length) {
      const space = text.lastIndexOf(' ', end)
      if (space > at) end = space + 1
    }
    // never split a surrogate pair
    if (end < text.length && /[\uD800-\uDBFF]/.test(text[end - 1] ?? '')) end++
    out.push(text.slice(at, end))
    at = end
  }
  return out
}

/** How a text is cut into its deltas: `text` (an answer's or a thought's), `arguments` (a tool call's JSON). */
export type Splitter = (text: string, kind: 'text' | 'arguments') => string[]

const PIECES: Splitter = (text) => pieces(text)

/**
 * The stream events of `body`, a whole answer in `protocol`; `split` cuts its texts into deltas
 * (pieces of about PIECE characters unless a caller cuts them its own way: the demo provider
 * streams word by word).
 */
export function replayStream (protocol: Protocol, body: Json, ctx: Pick<TranslateCtx, 'id' | 'created' | 'model'>, split: Splitter = PIECES): SseEvent[] {
  switch (protocol) {
    case 'openai': return chatStream(body, ctx, split)
    case 'messages': return messagesStream(body, ctx, split)
    case 'responses': return responsesStream(body)
    case 'gemini': return geminiStream(body)
    default: throw new Error(`no stream replay for ${protocol} answers`)
  }
}

/**
 * A GenerateContentResponse as Gemini streams it: a chunk per piece of text (a part's other
 * fields, its signature, on the first), other parts whole, then a chunk with every candidate's
 * finishReason and the usage.
 */
function geminiStream (body: Json): SseEvent[] {
  const ids: Json = {}
  if (body.modelVersion !== undefined) ids.modelVersion = body.modelVersion
  if (body.responseId !== undefined) ids.responseId = body.responseId
  const out: SseEvent[] = []
  const candidates = objects(body.candidates)
  candidates.forEach((c, i) => {
    const index = typeof c.index === 'number' ? c.index : i
    const content = isObj(c.content) ? c.content : {}
    for (const part of objects(content.parts)) {
      const split = typeof part.text === 'string' && part.text !== ''
        ? pieces(part.text).map((text, k) => k === 0 ? { ...part, text } : part.thought === true ? { text, thought: true } : { text })
        : [part]
      for (const p of split) out.push(frame({ candidates: [{ content: { role: 'model', parts: [p] }, index }], ...ids }))
    }
  })
  const last: Json = {
    candidates: candidates.map((c, i) => {
      const { content: _content, ...rest } = c
      return { content: { role: 'model', parts: [] }, ...rest, index: typeof c.index === 'number' ? c.index : i }
    })
  }
  for (const key of ['promptFeedback', 'usageMetadata']) if (body[key] !== undefined) last[key] = body[key]
  out.push(frame({ ...last, ...ids }))
  return out
}

function chatStream (body: Json, ctx: Pick<TranslateCtx, 'id' | 'created' | 'model'>, split: Splitter): SseEvent[] {
  const base = { id: str(body.id) || `chatcmpl-${ctx.id}`, object: 'chat.completion.chunk', created: typeof body.created === 'number' ? body.created : ctx.created, model: str(body.model) || ctx.model }
  const extra: Json = {}
  if (body.system_fingerprint !== undefined) extra.system_fingerprint = body.system_fingerprint
  // OpenAI's chunks carry a usage field (null but in the last) only when the usage was asked for
  const counted = isObj(body.usage)
  const chunk = (choices: Json[], usage: unknown = null): SseEvent => frame(counted ? { ...base, ...extra, choices, usage } : { ...base, ...extra, choices })
  const out: SseEvent[] = []
  const choices = objects(body.choices)
  for (const c of choices.length > 0 ? choices : [{ index: 0, message: { role: 'assistant', content: '' }, finish_reason: 'stop' }]) {
    const index = typeof c.index === 'number' ? c.index : 0
    const m = isObj(c.message) ? c.message : {}
    const delta = (d: Json): SseEvent => chunk([{ index, delta: d, logprobs: null, finish_reason: null }])
    out.push(delta({ role: 'assistant', content: '' }))
    const reasoning = str(m.reasoning_content)
    for (const p of split(reasoning, 'text')) out.push(delta({ reasoning_content: p }))
    for (const p of split(str(m.content), 'text')) out.push(delta({ content: p }))
    if (typeof m.refusal === 'string') out.push(delta({ refusal: m.refusal }))
    objects(m.tool_calls).forEach((tc, i) => {
      const fn = isObj(tc.function) ? tc.function : {}
      out.push(delta({ tool_calls: [{ index: i, id: tc.id, type: 'function', function: { name: str(fn.name), arguments: '' } }] }))
      for (const p of split(str(fn.arguments), 'arguments')) if (p !== '') out.push(delta({ tool_calls: [{ index: i, function: { arguments: p } }] }))
    })
    out.push(chunk([{ index, delta: {}, logprobs: null, finish_reason: c.finish_reason ?? 'stop' }]))
  }
  if (counted) out.push(chunk([], body.usage))
  out.push({ data: '[DONE]' })
  return out
}

function messagesStream (body: Json, ctx: Pick<TranslateCtx, 'id' | 'model'>, split: Splitter): SseEvent[] {
  const usage = isObj(body.usage) ? body.usage : {}
  const ev = (data: Json): SseEvent => frame(data, data.type as string)
  const out: SseEvent[] = [ev({
    type: 'message_start',
    message: {
      id: str(body.id) || `msg_${ctx.id}`,
      type: 'message',
      role: 'assistant',
      model: str(body.model) || ctx.model,
      content: [],
      stop_reason: null,
      stop_sequence: null,
      // every field of the usage, as Anthropic's message_start has them; the output counted in message_delta
      usage: { ...usage, input_tokens: usage.input_tokens ?? 0, cache_creation_input_tokens: usage.cache_creation_input_tokens ?? 0, cache_read_input_tokens: usage.cache_read_input_tokens ?? 0, output_tokens: 1 }
    }
  })]
  const content = objects(body.content)
  // Anthropic pings once the first block has started (at once when there is none)
  const ping = (): void => { out.push(ev({ type: 'ping' })) }
  if (content.length === 0) ping()
  content.forEach((block, index) => {
    const delta = (d: Json): SseEvent => ev({ type: 'content_block_delta', index, delta: d })
    switch (block.type) {
      case 'text':
        out.push(ev({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } }))
        if (index === 0) ping()
        for (const p of split(str(block.text), 'text')) out.push(delta({ type: 'text_delta', text: p }))
        break
      case 'thinking':
        out.push(ev({ type: 'content_block_start', index, content_block: { type: 'thinking', thinking: '', signature: '' } }))
        if (index === 0) ping()
        for (const p of split(str(block.thinking), 'text')) out.push(delta({ type: 'thinking_delta', thinking: p }))
        if (typeof block.signature === 'string' && block.signature !== '') out.push(delta({ type: 'signature_delta', signature: block.signature }))
        break
      case 'tool_use':
      case 'server_tool_use':
        out.push(ev({ type: 'content_block_start', index, content_block: { ...block, input: {} } }))
        if (index === 0) ping()
        for (const p of split(JSON.stringify(block.input ?? {}), 'arguments')) out.push(delta({ type: 'input_json_delta', partial_json: p }))
        break
      default:
        // a block with nothing to stream (redacted thinking, a tool's result) starts whole
        out.push(ev({ type: 'content_block_start', index, content_block: block }))
        if (index === 0) ping()
    }
    out.push(ev({ type: 'content_block_stop', index }))
  })
  out.push(ev({ type: 'message_delta', delta: { stop_reason: body.stop_reason ?? 'end_turn', stop_sequence: body.stop_sequence ?? null }, usage: { ...usage, output_tokens: usage.output_tokens ?? 0 } }))
  out.push(ev({ type: 'message_stop' }))
  return out
}

function responsesStream (body: Json): SseEvent[] {
  let n = 0
  const out: SseEvent[] = []
  const ev = (type: string, data: Json): void => { out.push(frame({ type, sequence_number: n++, ...data }, type)) }
  const pending = { ...body, status: 'in_progress', output: [], usage: null, incomplete_details: null }
  ev('response.created', { response: pending })
  ev('response.in_progress', { response: pending })
  objects(body.output).forEach((item, outputIndex) => {
    const itemId = str(item.id)
    switch (item.type) {
      case 'message': {
        ev('response.output_item.added', { output_index: outputIndex, item: { ...item, status: 'in_progress', content: [] } })
        objects(item.content).forEach((part, contentIndex) => {
          const at = { item_id: itemId, output_index: outputIndex, content_index: contentIndex }
          if (part.type === 'output_text') {
            ev('response.content_part.added', { ...at, part: { ...part, text: '' } })
            for (const p of pieces(str(part.text))) ev('response.output_text.delta', { ...at, delta: p, logprobs: [] })
            ev('response.output_text.done', { ...at, text: str(part.text), logprobs: [] })
          } else if (part.type === 'refusal') {
            ev('response.content_part.added', { ...at, part: { ...part, refusal: '' } })
            ev('response.refusal.delta', { ...at, delta: str(part.refusal) })
            ev('response.refusal.done', { ...at, refusal: str(part.refusal) })
          } else {
            ev('response.content_part.added', { ...at, part })
          }
          ev('response.content_part.done', { ...at, part })
        })
        break
      }
      case 'function_call': {
        ev('response.output_item.added', { output_index: outputIndex, item: { ...item, status: 'in_progress', arguments: '' } })
        for (const p of pieces(str(item.arguments))) ev('response.function_call_arguments.delta', { item_id: itemId, output_index: outputIndex, delta: p })
        ev('response.function_call_arguments.done', { item_id: itemId, output_index: outputIndex, arguments: str(item.arguments) })
        break
      }
      case 'reasoning': {
        ev('response.output_item.added', { output_index: outputIndex, item: { ...item, summary: [] } })
        objects(item.summary).forEach((part, summaryIndex) => {
          const at = { item_id: itemId, output_index: outputIndex, summary_index: summaryIndex }
          ev('response.reasoning_summary_part.added', { ...at, part: { ...part, text: '' } })
          for (const p of pieces(str(part.text))) ev('response.reasoning_summary_text.delta', { ...at, delta: p })
          ev('response.reasoning_summary_text.done', { ...at, text: str(part.text) })
          ev('response.reasoning_summary_part.done', { ...at, part })
        })
        break
      }
      default:
        ev('response.output_item.added', { output_index: outputIndex, item })
    }
    ev('response.output_item.done', { output_index: outputIndex, item })
  })
  const terminal = body.status === 'incomplete' ? 'response.incomplete' : body.status === 'failed' ? 'response.failed' : 'response.completed'
  ev(terminal, { response: body })
  return out
}
