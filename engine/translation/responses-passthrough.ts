import { failureCode, responseObject, responsesError, usageFromResponses } from '../protocols/responses/writer.js'
import { frame } from '../protocols/sse.js'
import { withServerTools } from './usage.js'
import type { Json, SseEvent, StreamMapper, TranslateCtx, TranslatorPair, Usage } from './types.js'
import { isObj } from '../kernel/json.js'

// A Responses client in front of a provider that serves the Responses API itself: the body goes
// up with the upstream's model name and comes back byte for byte; the pair reads the usage (from
// the body, or from the stream's terminal event) and can end a broken stream with
// response.failed, numbered after the last event relayed.

const DELTAS = new Set([
  'response.output_text.delta', 'response.function_call_arguments.delta', 'response.reasoning_summary_text.delta',
  'response.reasoning_text.delta', 'response.refusal.delta', 'response.custom_tool_call_input.delta'
])

function stream (ctx: TranslateCtx): StreamMapper {
  let usage: Usage | null = null
  let finished = false
  let ended = false
  let next = 0
  let created: Json | null = null
  const text: string[] = []
  return {
    push (ev: SseEvent): SseEvent[] {
      let data: unknown
      try { data = JSON.parse(ev.data) } catch { return [ev] }
      if (!isObj(data)) return [ev]
      if (typeof data.sequence_number === 'number') next = Math.max(next, data.sequence_number + 1)
      const type = data.type
      if (type === 'response.created' && isObj(data.response)) created = data.response
      else if (DELTAS.has(String(type)) && typeof data.delta === 'string') text.push(data.delta)
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
      const response = { ...created, status: 'failed', error }
      out.push(frame({ type: 'response.failed', sequence_number: next++, response }, 'response.failed'))
      return out
    }
  }
}

// the output items of the tools OpenAI runs itself, by the kind their price is named by
const TOOL_ITEMS = new Map([['web_search_call', 'web_search'], ['file_search_call', 'file_search'], ['code_interpreter_call', 'code_interpreter'], ['image_generation_call', 'image_generation'], ['mcp_call', 'mcp']])

/** The tools OpenAI ran for a response, counted from its output items; null when none. */
function responsesToolUses (output: unknown): Record<string, number> | null {
  if (!Array.isArray(output)) return null
  let uses: Record<string, number> | null = null
  for (const item of output) {
    const kind = isObj(item) ? TOOL_ITEMS.get(String(item.type)) : undefined
    if (kind !== undefined) (uses ??= {})[kind] = (uses[kind] ?? 0) + 1
  }
  return uses
}

export const responsesPassthrough: TranslatorPair = {
  client: 'responses',
  upstream: 'responses',
  path: '/responses',
  request (body: Json, ctx: TranslateCtx) {
    return { body: { ...body, model: ctx.upstreamModel }, dropped: [] }
  },
  response (body: Json) {
    return { body: null, usage: withServerTools(usageFromResponses(body.usage), responsesToolUses(body.output)) }
  },
  error (status: number, body: unknown): Json {
    if (isObj((body as Json | null)?.error)) return body as Json
    return responsesError(status, body)
  },
  stream
}
