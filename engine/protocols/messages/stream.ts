import type { ContentBlock, Message, RawContentBlockDelta, RawMessageStreamEvent, TextCitation, Usage as MessagesUsage } from '@anthropic-ai/sdk/resources/messages'
import type { ErrorResponse } from '@anthropic-ai/sdk/resources/shared'
import { errorBody, type ErrorBodyInput } from '../../kernel/errors.js'
import { isObj } from '../fields.js'
import { frame } from '../sse.js'
import { DONE, objects, parsed, PIECES, str, type Splitter, type StreamEventLike } from '../stream-events.js'
import type { SseEvent, StreamMapper, TranslateCtx } from '../types.js'
import { usageFromMessages } from './usage.js'

// A Messages stream: named events (message_start, content_block_start / _delta / _stop by
// block index, message_delta with the cumulative usage, message_stop; ping and error). Watched
// as it passes, folded into the whole message, replayed from one, and an error inside it.

/** An event as the SDK types it; an upstream's event is not trusted for all that, so each field read below is checked first. */
function parse (data: string): RawMessageStreamEvent | null {
  try {
    const v = JSON.parse(data) as unknown
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? v as RawMessageStreamEvent : null
  } catch {
    return null
  }
}

export function watch (): StreamMapper {
  // the counts as reported so far, each read when the usage is
  let raw: object = {}
  let seen = false
  let finished = false
  const text: string[] = []
  return {
    push (ev: SseEvent): SseEvent[] {
      const data = ev.value !== undefined ? ev.value as RawMessageStreamEvent : parse(ev.data)
      if (data === null) return [ev]
      switch (data.type) {
        case 'message_start': {
          const usage = isObj(data.message) ? data.message.usage : undefined
          raw = isObj(usage) ? { ...usage } : {}
          seen = true
          break
        }
        case 'message_delta':
          // counts in message_delta are cumulative: they replace what message_start said
          if (isObj(data.usage)) raw = { ...raw, ...data.usage }
          seen = true
          break
        case 'content_block_delta': {
          // the text of any delta that has one, a delta type newer than the SDK's included
          const d: object = isObj(data.delta) ? data.delta : {}
          if ('text' in d && typeof d.text === 'string') text.push(d.text)
          else if ('partial_json' in d && typeof d.partial_json === 'string') text.push(d.partial_json)
          break
        }
        case 'message_stop':
          finished = true
          break
      }
      return [ev]
    },
    end: () => [],
    usage: () => seen ? usageFromMessages(raw) : null,
    relayedText: () => text.join(''),
    finished: () => finished
  }
}

/** An error inside a stream: an `error` event with the Messages error shape. */
export const errorFrame = (e: ErrorBodyInput): SseEvent => frame(errorBody('messages', e), 'error')

/** An event of a Messages stream: the SDK's, ping and error included. */
type MessagesStreamEvent = RawMessageStreamEvent | ErrorResponse | { type: 'ping' }

/** An upstream's event as the SDK types it; each field read is checked first all the same. */
const eventOf = (ev: StreamEventLike): MessagesStreamEvent | typeof DONE | null => parsed(ev) as MessagesStreamEvent | typeof DONE | null

/** A block as its stream builds it: the start event's, with what its deltas add. */
type Building = ContentBlock & { text?: string, thinking?: string, signature?: string, citations?: TextCitation[] | null, input?: unknown }

// the blocks whose input comes in pieces of JSON
const JSON_BLOCKS: ReadonlySet<string> = new Set(['tool_use', 'server_tool_use', 'mcp_tool_use'])

/** A Messages stream folded into its message. */
export function aggregate (events: Iterable<StreamEventLike>): Message | null {
  let message: Message | null = null
  const blocks: Building[] = []
  const json = new Map<number, string[]>()
  let stopped = false
  for (const ev of events) {
    const data = eventOf(ev)
    if (data === DONE || data === null) continue
    switch (data.type) {
      case 'message_start':
        if (!isObj(data.message)) return null
        message = { ...data.message, content: [] }
        break
      case 'content_block_start': {
        const index = typeof data.index === 'number' ? data.index : blocks.length
        // a start without its block starts an empty one, which its deltas fill
        const block = (isObj(data.content_block) ? { ...data.content_block } : {}) as Building
        if (JSON_BLOCKS.has(block.type)) json.set(index, [])
        blocks[index] = block
        break
      }
      case 'content_block_delta': {
        const block = blocks[typeof data.index === 'number' ? data.index : -1]
        const d: RawContentBlockDelta | { type?: undefined } = isObj(data.delta) ? data.delta : {}
        if (block === undefined) return null
        switch (d.type) {
          case 'text_delta': block.text = str(block.text) + str(d.text); break
          case 'thinking_delta': block.thinking = str(block.thinking) + str(d.thinking); break
          case 'signature_delta': block.signature = d.signature; break
          case 'input_json_delta': json.get(data.index)?.push(str(d.partial_json)); break
          case 'citations_delta': block.citations = [...(Array.isArray(block.citations) ? block.citations : []), d.citation]; break
        }
        break
      }
      case 'content_block_stop': {
        const index = data.index
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
        if (isObj(data.usage)) message.usage = { ...(isObj(message.usage) ? message.usage : {}), ...data.usage } as MessagesUsage
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

/** A message replayed as its stream of events. */
export function replay (body: Message, ctx: Pick<TranslateCtx, 'id' | 'model'>, split: Splitter = PIECES): SseEvent[] {
  const usage: Partial<MessagesUsage> = isObj(body.usage) ? body.usage : {}
  const ev = <T extends { type: MessagesStreamEvent['type'] }>(data: T): SseEvent => frame(data, data.type)
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
    const delta = (d: RawContentBlockDelta): SseEvent => ev({ type: 'content_block_delta', index, delta: d })
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
