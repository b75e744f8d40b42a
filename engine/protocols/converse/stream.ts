import type { RawMessageStreamEvent, RedactedThinkingBlock, TextBlock, ThinkingBlock, ToolUseBlock } from '@anthropic-ai/sdk/resources/messages'
import { EventStreamCodec, type Message as EventMessage } from '@smithy/eventstream-codec'
import { fromUtf8, toUtf8 } from '@smithy/util-utf8'
import { UpstreamStreamError } from '../../kernel/errors.js'
import { isObj } from '../../kernel/json.js'
import { frame, ValueFrame } from '../sse.js'
import type { SseEvent, TranslateCtx, Usage } from '../../translation/types.js'
import { messagesError, messagesUsage, readTokenUsage, stopReasonOf, usageOf } from './answer.js'
import type { ConverseStreamEvents, TokenUsage } from './types.js'

// Converse's stream: AWS event-stream messages (binary frames with CRCs, read and checked by
// @smithy/eventstream-codec), each one event whose name is its `:event-type` header and whose
// payload is JSON; an `exception` message ends the stream with an error. Read here into
// {event, data} frames as the SSE parser makes them, then mapped onto Messages stream events so
// that every client protocol's pair from Messages relays them.

const codec = new EventStreamCodec(toUtf8, fromUtf8)
const EMPTY = Buffer.alloc(0)
const decoder = new TextDecoder()

const header = (m: EventMessage, name: string): string | undefined => {
  const h = m.headers[name]
  return h?.type === 'string' ? h.value : undefined
}

/** An event-stream message → zero or more frames; an exception message is the frame `exception` holding `{type, message}`. */
export type FrameOf = (m: EventMessage) => SseEvent[]

/** One event-stream message as a Converse frame: `{event: <:event-type>, data: <payload>}`. */
export const converseFrame: FrameOf = (m) => {
  const kind = header(m, ':message-type')
  const data = decoder.decode(m.body)
  if (kind === 'event') return [{ event: header(m, ':event-type') ?? 'unknown', data }]
  return [exceptionFrame(m, kind, data)]
}

function exceptionFrame (m: EventMessage, kind: string | undefined, data: string): SseEvent {
  // `exception`: a modelled error with its JSON body; `error`: the service's own, in headers only
  const type = kind === 'exception' ? header(m, ':exception-type') : header(m, ':error-code')
  let message = header(m, ':error-message') ?? ''
  if (message === '') {
    try {
      const body = JSON.parse(data) as unknown
      if (isObj(body) && typeof body.message === 'string') message = body.message
    } catch { /* not JSON: no message */ }
  }
  return { event: 'exception', data: JSON.stringify({ type: type ?? 'InternalServerException', message }) }
}

/**
 * Bytes of an event stream → frames. Chunks split anywhere; a message is handed to the codec
 * once all of it (its length is in its first four bytes) has come, and the codec checks both CRCs.
 */
export class EventStreamParser {
  private buffer: Buffer = EMPTY

  constructor (private readonly frameOf: FrameOf = converseFrame) {}

  push (chunk: Buffer | Uint8Array | string): SseEvent[] {
    const bytes = typeof chunk === 'string' ? Buffer.from(chunk) : Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength)
    this.buffer = this.buffer.length === 0 ? bytes : Buffer.concat([this.buffer, bytes])
    const out: SseEvent[] = []
    let at = 0
    while (this.buffer.length - at >= 12) {
      const total = this.buffer.readUInt32BE(at)
      if (total < 16) throw new UpstreamStreamError({}, { cause: new Error(`event-stream message of ${total} bytes`) })
      if (this.buffer.length - at < total) break
      for (const f of this.frameOf(codec.decode(this.buffer.subarray(at, at + total)))) out.push(f)
      at += total
    }
    this.buffer = at === this.buffer.length ? EMPTY : this.buffer.subarray(at)
    return out
  }

  end (): SseEvent[] {
    if (this.buffer.length > 0) throw new UpstreamStreamError({}, { cause: new Error('event stream ended inside a message') })
    return []
  }
}

type Block = 'text' | 'tool_use' | 'thinking' | 'redacted_thinking'

// written as text only if the client reads Messages (a pair to another protocol reads the values)
const event = (e: RawMessageStreamEvent): SseEvent => new ValueFrame(e, e.type)

/** A block as a Converse delta opens it: Converse says neither a text's citations nor a tool call's id and name there. */
type Opening = Pick<TextBlock, 'type' | 'text'> | Pick<ToolUseBlock, 'type' | 'id' | 'name' | 'input'> | ThinkingBlock | RedactedThinkingBlock

/**
 * An event's payload as its name says Converse sends it. An upstream's event is not trusted for
 * all that: each field read is checked first.
 */
const payload = <K extends keyof ConverseStreamEvents>(data: object, _name: K): ConverseStreamEvents[K] => data as ConverseStreamEvents[K]

/**
 * Converse stream frames → Messages stream frames. Messages says the stop reason and the usage
 * together (message_delta), Converse in two events (messageStop, then metadata): the stop reason
 * waits for the usage. Converse opens a block only for a tool call; a text or reasoning block is
 * opened by its first delta.
 */
export class ConverseToMessages {
  private readonly open = new Map<number, { index: number, kind: Block }>()
  private blocks = 0
  private stop: string | null = null
  private tokens: TokenUsage | null = null
  private ended = false
  /** An exception ended the stream; its error event was written. */
  excepted = false

  constructor (private readonly ctx: Pick<TranslateCtx, 'id' | 'model'>) {}

  usage (): Usage | null { return this.tokens === null ? null : usageOf(this.tokens) }
  finished (): boolean { return this.ended }

  push (ev: SseEvent): SseEvent[] {
    let raw: unknown
    try { raw = JSON.parse(ev.data) } catch { throw new UpstreamStreamError({}, { cause: new Error(`Converse event ${ev.event ?? ''} is not JSON`) }) }
    if (!isObj(raw)) return []
    switch (ev.event) {
      case 'messageStart':
        return [event({
          type: 'message_start',
          message: { id: `msg_${this.ctx.id}`, type: 'message', role: 'assistant', model: this.ctx.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 0, output_tokens: 0 } } as unknown as Extract<RawMessageStreamEvent, { type: 'message_start' }>['message']
        })]
      case 'contentBlockStart': {
        const data = payload(raw, 'contentBlockStart')
        const start = isObj(data.start) ? data.start.toolUse : undefined
        if (!isObj(start)) return []
        const index = this.blocks++
        this.open.set(Number(data.contentBlockIndex), { index, kind: 'tool_use' })
        return [event({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: String(start.toolUseId ?? ''), name: String(start.name ?? ''), input: {} } as never })]
      }
      case 'contentBlockDelta': {
        const data = payload(raw, 'contentBlockDelta')
        return isObj(data.delta) ? this.delta(Number(data.contentBlockIndex), data.delta) : []
      }
      case 'contentBlockStop': {
        const at = Number(payload(raw, 'contentBlockStop').contentBlockIndex)
        const block = this.open.get(at)
        if (block === undefined) return []
        this.open.delete(at)
        return [event({ type: 'content_block_stop', index: block.index })]
      }
      case 'messageStop': {
        const stop = payload(raw, 'messageStop').stopReason
        this.stop = typeof stop === 'string' ? stop : 'end_turn'
        return []
      }
      case 'metadata':
        this.tokens = readTokenUsage(payload(raw, 'metadata').usage)
        return this.finish()
      case 'exception': {
        // the frame exceptionFrame wrote: {type, message}
        this.excepted = true
        const name = typeof raw.type === 'string' ? raw.type : undefined
        const e = messagesError(500, { message: raw.message }, name)
        return [new ValueFrame(e, 'error')]
      }
      default:
        return [] // events added later
    }
  }

  /** The stream is over: a stop reason without usage still ends the message (the call's usage is then estimated). */
  end (): SseEvent[] {
    return this.stop !== null && !this.ended && !this.excepted ? this.finish() : []
  }

  private finish (): SseEvent[] {
    if (this.ended) return []
    this.ended = true
    const out: SseEvent[] = []
    for (const block of this.open.values()) out.push(event({ type: 'content_block_stop', index: block.index }))
    this.open.clear()
    const usage = this.tokens === null ? { output_tokens: 0 } : messagesUsage(this.tokens)
    out.push(new ValueFrame({ type: 'message_delta', delta: { stop_reason: stopReasonOf(this.stop), stop_sequence: null }, usage }, 'message_delta'))
    out.push(event({ type: 'message_stop' }))
    return out
  }

  private delta (at: number, d: NonNullable<ConverseStreamEvents['contentBlockDelta']['delta']>): SseEvent[] {
    const out: SseEvent[] = []
    const opened = (kind: Block, start: Opening): number => {
      const block = this.open.get(at)
      if (block !== undefined) return block.index
      const index = this.blocks++
      this.open.set(at, { index, kind })
      out.push(new ValueFrame({ type: 'content_block_start', index, content_block: start }, 'content_block_start'))
      return index
    }
    if (typeof d.text === 'string') {
      const index = opened('text', { type: 'text', text: '' })
      out.push(event({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: d.text } }))
    } else if (isObj(d.toolUse) && typeof d.toolUse.input === 'string') {
      const index = opened('tool_use', { type: 'tool_use', id: '', name: '', input: {} })
      out.push(event({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: d.toolUse.input } }))
    } else if (isObj(d.reasoningContent)) {
      const r = d.reasoningContent
      if (typeof r.redactedContent === 'string') {
        opened('redacted_thinking', { type: 'redacted_thinking', data: r.redactedContent })
      } else {
        const index = opened('thinking', { type: 'thinking', thinking: '', signature: '' })
        if (typeof r.text === 'string') out.push(event({ type: 'content_block_delta', index, delta: { type: 'thinking_delta', thinking: r.text } }))
        if (typeof r.signature === 'string') out.push(event({ type: 'content_block_delta', index, delta: { type: 'signature_delta', signature: r.signature } }))
      }
    }
    return out
  }
}

/**
 * One InvokeModel stream message (`chunk`, its payload `{"bytes": base64 of one Messages stream
 * event}`) as the Messages frame it carries; Bedrock's invocation metrics on message_stop are
 * its own bookkeeping and left out.
 */
export const invokeFrame: FrameOf = (m) => {
  const kind = header(m, ':message-type')
  const data = decoder.decode(m.body)
  if (kind !== 'event') return [invokeException(exceptionFrame(m, kind, data))]
  if (header(m, ':event-type') !== 'chunk') return []
  const payload = JSON.parse(data) as unknown
  if (!isObj(payload) || typeof payload.bytes !== 'string') throw new UpstreamStreamError({}, { cause: new Error('InvokeModel chunk without bytes') })
  let inner = Buffer.from(payload.bytes, 'base64').toString('utf8')
  const parsed = JSON.parse(inner) as unknown
  if (!isObj(parsed) || typeof parsed.type !== 'string') throw new UpstreamStreamError({}, { cause: new Error('InvokeModel chunk is not a Messages event') })
  if (parsed['amazon-bedrock-invocationMetrics'] !== undefined) {
    delete parsed['amazon-bedrock-invocationMetrics']
    inner = JSON.stringify(parsed)
  }
  return [{ event: parsed.type, data: inner }]
}

/** An InvokeModel stream's exception frame → the Messages `error` event a Messages upstream would have sent. */
function invokeException (ev: SseEvent): SseEvent {
  const data = JSON.parse(ev.data) as { type?: string, message?: string }
  return frame(messagesError(500, { message: data.message }, data.type), 'error')
}
