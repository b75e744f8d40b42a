import { setMaxListeners } from 'node:events'
import { Readable } from 'node:stream'
import type { ReadableStream as WebReadableStream } from 'node:stream/web'
import { Agent, request, type Dispatcher } from 'undici'
import type { FetchLike } from '@modelcontextprotocol/sdk/shared/transport.js'

// The fetch the MCP SDK's Streamable HTTP client is given for the servers behind the gateway
// (its `fetch` option): undici's request on a keep-alive agent of the gateway's, as model calls
// use, which costs less per request than Node's fetch (that one sends each JSON-RPC message's
// body as a stream of its own). A JSON answer is read whole; an event stream is handed over as it
// comes.

const agent: Dispatcher = new Agent({ keepAliveTimeout: 30_000, connections: 64 })

// the SDK gives every request of a connection the same signal: as many listeners as calls in flight
const lifted = new WeakSet<AbortSignal>()

export const undiciFetch: FetchLike = async (input, init) => {
  const signal = init?.signal ?? undefined
  if (signal !== undefined && !lifted.has(signal)) {
    setMaxListeners(0, signal)
    lifted.add(signal)
  }
  const headers: Record<string, string> = {}
  new Headers(init?.headers).forEach((value, name) => { headers[name] = value })
  const res = await request(String(input), {
    method: (init?.method ?? 'GET') as Dispatcher.HttpMethod,
    headers,
    body: typeof init?.body === 'string' ? init.body : undefined,
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
  const stream = (out.get('content-type') ?? '').startsWith('text/event-stream')
  const body = stream ? Readable.toWeb(res.body) as WebReadableStream<Uint8Array> : await res.body.arrayBuffer()
  return new Response(body as BodyInit, { status: res.statusCode, headers: out })
}
