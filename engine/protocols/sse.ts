import type { SseEvent } from './types.js'

// SSE framing only (bytes ↔ {event, data}), which every protocol's stream shares; what the
// frames say is each codec's business (<protocol>/stream.ts). The parser is fed
// chunks split anywhere, multi-byte characters included, and keeps each frame's exact text in
// `raw` so an unchanged frame is relayed byte for byte.

export class SseParser {
  private readonly decoder = new TextDecoder('utf-8')
  private buffer = ''

  push (chunk: Buffer | Uint8Array | string): SseEvent[] {
    this.buffer += typeof chunk === 'string' ? chunk : this.decoder.decode(chunk, { stream: true })
    return this.drain(false)
  }

  end (): SseEvent[] {
    this.buffer += this.decoder.decode()
    return this.drain(true)
  }

  private drain (final: boolean): SseEvent[] {
    const out: SseEvent[] = []
    let start = 0
    for (;;) {
      const boundary = findBoundary(this.buffer, start)
      if (boundary === null) break
      const ev = parseFrame(this.buffer.slice(start, boundary.end), this.buffer.slice(start, boundary.end + boundary.length))
      if (ev !== null) out.push(ev)
      start = boundary.end + boundary.length
    }
    this.buffer = this.buffer.slice(start)
    if (final && this.buffer.trim() !== '') {
      const ev = parseFrame(this.buffer, this.buffer + '\n\n')
      if (ev !== null) out.push(ev)
      this.buffer = ''
    }
    return out
  }
}

function findBoundary (text: string, from: number): { end: number, length: number } | null {
  const lf = text.indexOf('\n\n', from)
  const crlf = text.indexOf('\r\n\r\n', from)
  if (lf === -1 && crlf === -1) {
    const cr = text.indexOf('\r\r', from)
    return cr === -1 ? null : { end: cr, length: 2 }
  }
  if (crlf !== -1 && (lf === -1 || crlf < lf)) return { end: crlf, length: 4 }
  return { end: lf as number, length: 2 }
}

function parseFrame (text: string, raw: string): SseEvent | null {
  let event: string | undefined
  let data: string | null = null
  for (const line of text.split(/\r\n|\r|\n/)) {
    if (line === '' || line.startsWith(':')) continue
    const colon = line.indexOf(':')
    const field = colon === -1 ? line : line.slice(0, colon)
    let value = colon === -1 ? '' : line.slice(colon + 1)
    if (value.startsWith(' ')) value = value.slice(1)
    if (field === 'data') data = data === null ? value : data + '\n' + value
    else if (field === 'event') event = value
  }
  if (data === null && event === undefined) return null
  const ev: SseEvent = { data: data ?? '', raw }
  if (event !== undefined) ev.event = event
  return ev
}

export function serialize (ev: SseEvent): string {
  if (ev.raw !== undefined) return ev.raw
  const data = ev.data.includes('\n') ? ev.data.split('\n').map((l) => `data: ${l}`).join('\n') : `data: ${ev.data}`
  return ev.event === undefined ? `${data}\n\n` : `event: ${ev.event}\n${data}\n\n`
}

/** A JSON frame: `data: {...}` (OpenAI, Gemini) or `event: <type>` + `data: {...}` (Messages). */
export function frame (data: unknown, event?: string): SseEvent {
  const ev: SseEvent = { data: JSON.stringify(data) }
  if (event !== undefined) ev.event = event
  return ev
}

/**
 * A JSON frame whose text is written only when something reads `data`: a composed pair's inner
 * frames go to its outer mapper, which takes `value` as it is, so they are neither written nor
 * parsed back (a Converse stream's Messages frames on their way to a chat client).
 */
export class ValueFrame implements SseEvent {
  private text: string | undefined = undefined
  constructor (readonly value: unknown, readonly event: string) {}
  get data (): string {
    if (this.text === undefined) this.text = JSON.stringify(this.value)
    return this.text
  }
}

export const DONE: SseEvent = { data: '[DONE]', raw: 'data: [DONE]\n\n' }
