import { Transform, type Readable, type TransformCallback } from 'node:stream'
import type { ClientEvent, StreamEventResult } from '../../plugins/api/index.js'
import type { ErrorBodyInput } from '../kernel/errors.js'
import { errorEvent } from '../protocols/index.js'
import { frame, serialize, SseParser } from '../protocols/sse.js'
import type { Json, Protocol, SseEvent, StreamMapper, Usage } from './types.js'

// The stream relay: upstream bytes in, the client's stream out, as a Transform between the
// upstream body and the client's response (see relay() at the end for how it is wired). Each
// chunk is framed (SSE), mapped by the
// pair's stream mapper, passed through the stream hooks, and written out (as SSE, or as the
// elements of one JSON array for a Gemini client that asked for no SSE). Once the upstream has
// finished its answer, what follows is held until the call is settled, so the client's last byte
// leaves only after the call's usage is stored. An upstream failure mid-stream (a reset, an idle
// timeout) ends the client's stream with an error in its own protocol.

export interface StreamHooks {
  event: ReadonlyArray<(event: ClientEvent) => StreamEventResult>
  end: ReadonlyArray<() => ClientEvent[] | undefined>
}

export interface RelayEnd {
  /** 'ok': the upstream finished its answer; otherwise why the stream stopped early. */
  status: 'ok' | 'upstream_error' | 'timeout'
  usage: Usage | null
  /** The failure, when the stream stopped early. */
  error?: unknown
}

export interface RelayOptions {
  mapper: StreamMapper
  /** The client's protocol, for error frames. */
  protocol: Protocol
  /** Write the events' data as one JSON array (a Gemini stream asked for without alt=sse), not as SSE frames. */
  array?: boolean
  hooks?: StreamHooks
  /** Keep what the client is sent (readable with `content`). */
  keepContent?: boolean
  onFirstByte: () => void
  /**
   * The upstream's answer is over: settle the call. The frames still owed to the client are
   * written once what this returns has settled.
   */
  finish: (end: RelayEnd) => Promise<unknown> | unknown
  /** The error to show the client for a stream that stopped early. */
  failure: (end: RelayEnd) => ErrorBodyInput
}

/** An upstream body error, written to the relay as a value so it can end the client's stream cleanly. */
class UpstreamFailure {
  readonly error: unknown
  constructor (cause: unknown) { this.error = cause }
}

export class StreamRelay extends Transform {
  private readonly parser = new SseParser()
  private holding = false
  private held = ''
  private failed: UpstreamFailure | null = null
  private sent: string[] | null
  /** The JSON array of an array stream was opened. */
  private opened = false
  /** Responses events are numbered; hooks that add or drop events make the mapper's numbers wrong. */
  private sequence: number | null

  constructor (private readonly opts: RelayOptions) {
    super({ writableObjectMode: true })
    this.sent = opts.keepContent === true ? [] : null
    this.sequence = opts.protocol === 'responses' && opts.hooks !== undefined ? 0 : null
  }

  /** Usage as far as the upstream reported it. */
  usage (): Usage | null { return this.opts.mapper.usage() }
  /** Output text relayed so far. */
  relayedText (): string { return this.opts.mapper.relayedText() }
  /** What the client was sent, when content is kept. */
  get content (): string | null { return this.sent === null ? null : this.sent.join('') }

  override _transform (chunk: Buffer | UpstreamFailure, _enc: BufferEncoding, cb: TransformCallback): void {
    if (chunk instanceof UpstreamFailure) {
      this.failed = chunk
      cb()
      return
    }
    try {
      const frames: SseEvent[] = []
      for (const f of this.parser.push(chunk)) for (const ev of this.opts.mapper.push(f)) frames.push(ev)
      // the answer is complete: its last frames wait for the settlement
      if (this.opts.mapper.finished()) this.holding = true
      this.write_(this.hooked(frames))
    } catch (err) {
      this.failed = new UpstreamFailure(err)
    }
    cb()
  }

  override _flush (cb: TransformCallback): void {
    let tail: SseEvent[] = []
    let end: RelayEnd
    try {
      if (this.failed === null) for (const f of this.parser.end()) for (const ev of this.opts.mapper.push(f)) tail.push(ev)
      for (const ev of this.opts.mapper.end()) tail.push(ev)
      tail = this.hooked(tail)
      for (const fn of this.opts.hooks?.end ?? []) for (const ev of fn() ?? []) tail.push(toFrame(ev))
      end = this.failed === null && this.opts.mapper.finished()
        ? { status: 'ok', usage: this.opts.mapper.usage() }
        : { status: isTimeout(this.failed?.error) ? 'timeout' : 'upstream_error', usage: this.opts.mapper.usage(), error: this.failed?.error }
    } catch (err) {
      end = { status: 'upstream_error', usage: this.opts.mapper.usage(), error: err }
    }
    if (end.status !== 'ok') {
      const e = this.opts.failure(end)
      tail.push(...(this.opts.mapper.fail?.({ status: e.status, message: e.message, code: e.code, type: e.openaiType }) ?? [errorEvent(this.opts.protocol, e)]))
    }
    this.holding = true
    this.write_(tail)
    if (this.opts.array === true) this.emit_(this.opened ? ']' : '[]')
    const done = (): void => {
      if (this.held !== '') this.push(this.held)
      this.held = ''
      cb()
    }
    let settling: unknown
    try {
      settling = this.opts.finish(end)
    } catch {
      settling = undefined // the caller logs its own failures; the client still gets its stream's end
    }
    if (settling instanceof Promise) settling.then(done, done)
    else done()
  }

  private write_ (frames: SseEvent[]): void {
    if (frames.length === 0) return
    let text = ''
    if (this.opts.array === true) {
      for (const ev of frames) {
        text += (this.opened ? ',\r\n' : '[') + ev.data
        this.opened = true
      }
    } else {
      for (const ev of frames) text += serialize(this.sequence === null ? ev : this.numbered(ev))
    }
    if (text === '') return
    this.opts.onFirstByte()
    this.emit_(text)
  }

  private emit_ (text: string): void {
    this.sent?.push(text)
    if (this.holding) this.held += text
    else this.push(text)
  }

  private numbered (ev: SseEvent): SseEvent {
    const data = parseData(ev.data)
    if (data === null || typeof data.sequence_number !== 'number') return ev
    data.sequence_number = (this.sequence as number)
    this.sequence = (this.sequence as number) + 1
    return frame(data, ev.event)
  }

  /** Frames through the stream hooks (none: as they are, byte for byte). */
  private hooked (frames: SseEvent[]): SseEvent[] {
    const fns = this.opts.hooks?.event
    if (fns === undefined || fns.length === 0 || frames.length === 0) return frames
    const out: SseEvent[] = []
    for (const f of frames) {
      const data = parseData(f.data)
      if (data === null) { out.push(f); continue } // [DONE] and the like pass as they are
      let events: ClientEvent[] = [f.event === undefined ? { data } : { event: f.event, data }]
      for (const fn of fns) {
        const next: ClientEvent[] = []
        for (const ev of events) {
          const r = fn(ev)
          if (r === undefined) next.push(ev)
          else if (r === null) continue
          else if (Array.isArray(r)) next.push(...r)
          else next.push(r)
        }
        events = next
      }
      for (const ev of events) out.push(toFrame(ev))
    }
    return out
  }
}

function toFrame (ev: ClientEvent): SseEvent {
  return frame(ev.data, ev.event)
}

function parseData (data: string): Json | null {
  if (data === '' || data[0] !== '{') return null
  try {
    return JSON.parse(data) as Json
  } catch {
    return null
  }
}

function isTimeout (err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code
  return code === 'UND_ERR_BODY_TIMEOUT' || code === 'UND_ERR_HEADERS_TIMEOUT'
}

/**
 * Relays `source` (an upstream body) through `relayStream`; returns the stream to send the client.
 * Piped by hand rather than with pipeline(): pipeline tears the whole chain down on the source's
 * error, where the client is owed an error event in its protocol, and reading the source through
 * an async generator to catch that cost about 40% more CPU per stream (measured). Backpressure is
 * the pipe's; when the client goes away the response destroys the relay, which destroys the
 * source and so cancels the upstream request.
 */
export function relay (source: Readable, relayStream: StreamRelay): StreamRelay {
  source.pipe(relayStream)
  source.once('error', (err) => {
    source.unpipe(relayStream)
    relayStream.end(new UpstreamFailure(err))
  })
  relayStream.once('close', () => { if (!source.destroyed) source.destroy() })
  return relayStream
}
