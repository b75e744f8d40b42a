import { setMaxListeners } from 'node:events'
import type { Readable } from 'node:stream'
import { ReadableStream } from 'node:stream/web'
import { Agent, request, type Dispatcher } from 'undici'
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js'
import { isJSONRPCRequest, type JSONRPCMessage, type RequestId } from '@modelcontextprotocol/sdk/types.js'
import { oversizeAnswer } from './result-cap.js'

// The fetch the MCP SDK's Streamable HTTP client is given for the servers behind the gateway
// (its `fetch` option): undici's request on a keep-alive agent of the gateway's, as model calls
// use, which costs less per request than Node's fetch (that one sends each JSON-RPC message's
// body as a stream of its own). It keeps no answer past the byte cap (result-cap.ts): a JSON
// answer is read up to the cap; an event stream is handed over event by event, each event held
// until it is whole and only up to the cap. Past it the server's answer is dropped (its
// connection closed) and the SDK gets the cap's error for the request the POST carried.

const agent: Dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 64 })

// the SDK gives every request of a connection the same signal: as many listeners as calls in flight
const lifted = new WeakSet<AbortSignal>()

/** The id of the request a POST's body carries (the SDK sends one message a POST), if any. */
function requestId (body: string | undefined): RequestId | undefined {
  if (body === undefined) return undefined
  try {
    const message = JSON.parse(body) as JSONRPCMessage
    return isJSONRPCRequest(message) ? message.id : undefined
  } catch {
    return undefined
  }
}

/** A fetch for the MCP SDK whose answers keep at most `limitBytes` a message. */
export function boundedFetch (limitBytes: number): FetchLike {
  return async (input, init) => {
    const signal = init?.signal ?? undefined
    if (signal !== undefined && !lifted.has(signal)) {
      setMaxListeners(0, signal)
      lifted.add(signal)
    }
    const headers: Record<string, string> = {}
    new Headers(init?.headers).forEach((value, name) => { headers[name] = value })
    const body = typeof init?.body === 'string' ? init.body : undefined
    const res = await request(String(input), {
      method: (init?.method ?? 'GET') as Dispatcher.HttpMethod,
      headers,
      body,
      signal,
      dispatcher: agent
    })
    const out = new Headers()
    for (const [name, value] of Object.entries(res.headers)) {
      if (value !== undefined) out.set(name, Array.isArray(value) ? value.join(', ') : value)
    }
    const empty = res.statusCode === 202 || res.statusCode === 204 || init?.method === 'HEAD'
    if (empty) {
      await res.body.dump()
      return new Response(null, { status: res.statusCode, headers: out })
    }
    // what the cap's error answers, found only when one is needed
    const cut = (): JSONRPCMessage | null => {
      const id = requestId(body)
      return id === undefined ? null : oversizeAnswer(id, limitBytes)
    }
    if ((out.get('content-type') ?? '').startsWith('text/event-stream')) {
      return new Response(sseEvents(res.body, limitBytes, cut) as unknown as BodyInit, { status: res.statusCode, headers: out })
    }
    const whole = await readUpTo(res.body, limitBytes)
    if (whole !== null) return new Response(whole as unknown as BodyInit, { status: res.statusCode, headers: out })
    const answer = cut()
    if (answer === null) return new Response(null, { status: 202 })
    return new Response(JSON.stringify(answer), { status: 200, headers: { 'content-type': 'application/json' } })
  }
}

/** A body read whole, or null (and the body destroyed) when it is longer than `limit` bytes. */
async function readUpTo (body: Readable, limit: number): Promise<Buffer | null> {
  const parts: Buffer[] = []
  let size = 0
  for await (const chunk of body) {
    size += (chunk as Buffer).length
    if (size > limit) {
      body.destroy()
      return null
    }
    parts.push(chunk as Buffer)
  }
  return Buffer.concat(parts, size)
}

/**
 * The events of an event stream, byte by byte as they arrive: `push` gives back the bytes of the
 * events a chunk completes (up to the end of their blank line) and holds the rest, the start of
 * the next event; null once the event being held is longer than `limit` bytes. Lines end with
 * LF, CR or CR LF, as in the SSE format.
 */
export class EventFramer {
  private parts: Buffer[] = []
  private size = 0
  /** The bytes seen last ended a line (an empty line next is the end of an event). */
  private atLineStart = true
  /** The byte seen last was a CR (an LF next belongs to it). */
  private afterCR = false

  constructor (readonly limit: number) {}

  /** The bytes held: the event not yet ended. */
  get held (): number { return this.size }

  /** What is held, at the stream's end (an event its server did not end). */
  rest (): Buffer {
    const out = Buffer.concat(this.parts, this.size)
    this.parts = []
    this.size = 0
    return out
  }

  push (chunk: Buffer): Buffer | null {
    let end = -1
    let lf = -2
    let cr = -2
    for (let i = 0; i < chunk.length;) {
      if (lf !== -1 && lf < i) lf = chunk.indexOf(0x0a, i)
      if (cr !== -1 && cr < i) cr = chunk.indexOf(0x0d, i)
      const n = lf === -1 ? cr : cr === -1 ? lf : Math.min(lf, cr)
      if (n === -1) {
        this.atLineStart = false
        this.afterCR = false
        break
      }
      if (n > i) {
        this.atLineStart = false
        this.afterCR = false
      }
      if (chunk[n] === 0x0a && this.afterCR) {
        // the LF of a CR LF: the line ended at the CR
        this.afterCR = false
        if (end === n) end = n + 1
      } else {
        if (this.atLineStart) end = n + 1
        this.atLineStart = true
        this.afterCR = chunk[n] === 0x0d
      }
      i = n + 1
    }
    let out: Buffer = EMPTY
    if (end !== -1) {
      out = this.size === 0 ? chunk.subarray(0, end) : Buffer.concat([...this.parts, chunk.subarray(0, end)])
      this.parts = []
      this.size = 0
    }
    const rest = end === -1 ? chunk : chunk.subarray(end)
    if (rest.length > 0) {
      this.parts.push(rest)
      this.size += rest.length
    }
    if (this.size > this.limit) {
      this.parts = []
      this.size = 0
      return null
    }
    return out
  }
}

const EMPTY = Buffer.alloc(0)

/**
 * An event stream passed on whole events at a time, each only up to `limit` bytes: past that the
 * server's stream is closed and, when `cut` names one, the cap's error is its last event.
 */
function sseEvents (body: Readable, limit: number, cut: () => JSONRPCMessage | null): ReadableStream<Uint8Array> {
  const framer = new EventFramer(limit)
  const chunks = body[Symbol.asyncIterator]()
  return new ReadableStream<Uint8Array>({
    async pull (controller) {
      for (;;) {
        const next = await chunks.next().catch((err: unknown) => { controller.error(err); return null })
        if (next === null) return
        if (next.done === true) {
          const rest = framer.rest()
          if (rest.length > 0) controller.enqueue(rest)
          controller.close()
          return
        }
        const events = framer.push(next.value as Buffer)
        if (events === null) {
          body.destroy()
          const answer = cut()
          if (answer !== null) controller.enqueue(Buffer.from(`event: message\ndata: ${JSON.stringify(answer)}\n\n`))
          controller.close()
          return
        }
        if (events.length > 0) {
          controller.enqueue(events)
          return
        }
      }
    },
    cancel () { body.destroy() }
  })
}
