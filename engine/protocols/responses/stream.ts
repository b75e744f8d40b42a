import type { ResponseFunctionCallArgumentsDoneEvent, ResponseOutputItem } from 'openai/resources/responses/responses'
import { isObj } from '../../kernel/json.js'
import { frame } from '../sse.js'
import { DONE, objects, parsed, pieces, str, type StreamEventLike } from '../stream-events.js'
import type { SseEvent, StreamMapper, TranslateCtx, Usage } from '../types.js'
import { withServerTools } from '../usage.js'
import { failureCode, responseObject, usageFromResponses, type ResponsesAnswer, type ResponsesStreamEvent, type UnnumberedEvent } from './writer.js'

// A Responses stream: events named by their `type`, numbered by `sequence_number`, output items
// by `output_index` and their parts by `content_index`, ending on response.completed,
// .incomplete or .failed, whose `response` is the whole answer. Watched as it passes (its usage
// read from the terminal event; a broken stream ended with response.failed, numbered after the
// last event relayed), folded into the whole response, replayed from one.

const DELTAS = new Set([
  'response.output_text.delta', 'response.function_call_arguments.delta', 'response.reasoning_summary_text.delta',
  'response.reasoning_text.delta', 'response.refusal.delta', 'response.custom_tool_call_input.delta'
])

export function watch (ctx: TranslateCtx): StreamMapper {
  let usage: Usage | null = null
  let finished = false
  let ended = false
  let next = 0
  let created: ResponsesAnswer | null = null
  const text: string[] = []
  return {
    push (ev: SseEvent): SseEvent[] {
      let raw: unknown
      try { raw = JSON.parse(ev.data) } catch { return [ev] }
      if (!isObj(raw)) return [ev]
      // an event as the SDK types it; an upstream's event is not trusted for all that, so each field read below is checked first
      const data = raw as object as ResponsesStreamEvent
      if (typeof data.sequence_number === 'number') next = Math.max(next, data.sequence_number + 1)
      const type = data.type
      if (type === 'response.created' && isObj(data.response)) created = data.response
      else if (DELTAS.has(String(type)) && 'delta' in data && typeof data.delta === 'string') text.push(data.delta)
      else if (type === 'response.completed' || type === 'response.incomplete' || type === 'response.failed') {
        const u = isObj(data.response) ? withServerTools(usageFromResponses(data.response.usage), responsesToolUses(data.response.output)) : null
        if (u !== null) usage = u
        ended = true
        finished = type !== 'response.failed'
      }
      return [ev]
    },
    end: () => [],
    usage: () => usage,
    relayedText: () => text.join(''),
    finished: () => finished,
    fail (e) {
      if (ended) return []
      ended = true
      const out: SseEvent[] = []
      const error = { code: failureCode(e), message: e.message }
      if (created === null) {
        created = responseObject(ctx, 'in_progress', [], null)
        out.push(frame({ type: 'response.created', sequence_number: next++, response: created }, 'response.created'))
      }
      const response: ResponsesAnswer = { ...created, status: 'failed', error }
      out.push(frame({ type: 'response.failed', sequence_number: next++, response }, 'response.failed'))
      return out
    }
  }
}

// the output items of the tools OpenAI runs itself, by the kind their price is named by
const TOOL_ITEMS = new Map([['web_search_call', 'web_search'], ['file_search_call', 'file_search'], ['code_interpreter_call', 'code_interpreter'], ['image_generation_call', 'image_generation'], ['mcp_call', 'mcp']])

/** The tools OpenAI ran for a response, counted from its output items; null when none. */
export function responsesToolUses (output: unknown): Record<string, number> | null {
  if (!Array.isArray(output)) return null
  let uses: Record<string, number> | null = null
  for (const item of output) {
    const kind = isObj(item) ? TOOL_ITEMS.get(String(item.type)) : undefined
    if (kind !== undefined) (uses ??= {})[kind] = (uses[kind] ?? 0) + 1
  }
  return uses
}

const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed'])

/**
 * A Responses stream folded into its response. Its items and its response are kept as they came
 * (the gateway's own, or an upstream's relayed), typed as the stream's once found to be objects.
 */
export function aggregate (events: Iterable<StreamEventLike>): ResponsesAnswer | null {
  let response: ResponsesAnswer | null = null
  const items: ResponseOutputItem[] = []
  for (const ev of events) {
    const data = parsed(ev)
    if (data === DONE || data === null) continue
    const type = typeof data.type === 'string' ? data.type : ev.event
    if (type === 'error') return null
    if (type === 'response.output_item.done' && isObj(data.item) && typeof data.output_index === 'number') items[data.output_index] = data.item as object as ResponseOutputItem
    if (type !== undefined && TERMINAL.has(type) && isObj(data.response)) response = data.response as object as ResponsesAnswer
  }
  if (response === null) return null
  // the terminal event carries the whole response; the items stand in where it left them out
  if (objects(response.output).length === 0 && items.length > 0) return { ...response, output: items.filter((i) => i !== undefined) }
  return response
}

// a replay's arguments.done has always gone without the call's name (which the SDK's stream helper takes from the item)
type Replayed = UnnumberedEvent | Omit<ResponseFunctionCallArgumentsDoneEvent, 'sequence_number' | 'name'>

/** A response replayed as its stream of events. */
export function replay (body: ResponsesAnswer): SseEvent[] {
  let n = 0
  const out: SseEvent[] = []
  // `type` first, then the number, as every frame has them
  const ev = (event: Replayed): void => { out.push(frame(Object.assign({ type: event.type, sequence_number: n++ }, event), event.type)) }
  const pending: ResponsesAnswer = { ...body, status: 'in_progress', output: [], usage: null, incomplete_details: null }
  ev({ type: 'response.created', response: pending })
  ev({ type: 'response.in_progress', response: pending })
  objects(body.output).forEach((item, outputIndex) => {
    const itemId = str(item.id)
    switch (item.type) {
      case 'message': {
        ev({ type: 'response.output_item.added', output_index: outputIndex, item: { ...item, status: 'in_progress', content: [] } })
        objects(item.content).forEach((part, contentIndex) => {
          const at = { item_id: itemId, output_index: outputIndex, content_index: contentIndex }
          if (part.type === 'output_text') {
            ev({ type: 'response.content_part.added', ...at, part: { ...part, text: '' } })
            for (const p of pieces(str(part.text))) ev({ type: 'response.output_text.delta', ...at, delta: p, logprobs: [] })
            ev({ type: 'response.output_text.done', ...at, text: str(part.text), logprobs: [] })
          } else if (part.type === 'refusal') {
            ev({ type: 'response.content_part.added', ...at, part: { ...part, refusal: '' } })
            ev({ type: 'response.refusal.delta', ...at, delta: str(part.refusal) })
            ev({ type: 'response.refusal.done', ...at, refusal: str(part.refusal) })
          } else {
            ev({ type: 'response.content_part.added', ...at, part })
          }
          ev({ type: 'response.content_part.done', ...at, part })
        })
        break
      }
      case 'function_call': {
        ev({ type: 'response.output_item.added', output_index: outputIndex, item: { ...item, status: 'in_progress', arguments: '' } })
        for (const p of pieces(str(item.arguments))) ev({ type: 'response.function_call_arguments.delta', item_id: itemId, output_index: outputIndex, delta: p })
        ev({ type: 'response.function_call_arguments.done', item_id: itemId, output_index: outputIndex, arguments: str(item.arguments) })
        break
      }
      case 'reasoning': {
        ev({ type: 'response.output_item.added', output_index: outputIndex, item: { ...item, summary: [] } })
        objects(item.summary).forEach((part, summaryIndex) => {
          const at = { item_id: itemId, output_index: outputIndex, summary_index: summaryIndex }
          ev({ type: 'response.reasoning_summary_part.added', ...at, part: { ...part, text: '' } })
          for (const p of pieces(str(part.text))) ev({ type: 'response.reasoning_summary_text.delta', ...at, delta: p })
          ev({ type: 'response.reasoning_summary_text.done', ...at, text: str(part.text) })
          ev({ type: 'response.reasoning_summary_part.done', ...at, part })
        })
        break
      }
      default:
        ev({ type: 'response.output_item.added', output_index: outputIndex, item })
    }
    ev({ type: 'response.output_item.done', output_index: outputIndex, item })
  })
  if (body.status === 'incomplete') ev({ type: 'response.incomplete', response: body })
  else if (body.status === 'failed') ev({ type: 'response.failed', response: body })
  else ev({ type: 'response.completed', response: body })
  return out
}
