import type { FastifyRequest } from 'fastify'
import { NoProvider, RequestTimeout, UpstreamClientError, UpstreamUnavailable } from '../errors.js'
import type { Json, Protocol } from '../translation/types.js'
import type { Upstreams } from './index.js'
import { CallAbort, type UpstreamClient, type UpstreamResponse } from './types.js'

// Calling a model's providers in turn: the order comes from Upstreams (health first), each
// attempt's path and body from the caller's plan (a translator pair, or a forwarding rule), and
// the outcome of each attempt decides whether to go on. An answer that started (2xx) or a client
// error (4xx, kept with its status and re-shaped by the plan) ends the walk; a 5xx, a reset, a
// refused connection or a timeout before the first byte moves to the next provider.

/** What to send to one provider. */
export interface Attempt {
  path: string
  body: Json
  /** The protocol the body is in (for the upstream request hooks). */
  protocol: Protocol
  /** The upstream's 4xx body → the client's error body. */
  error: (status: number, body: unknown) => Json
}

export interface DispatchOptions {
  request: FastifyRequest
  /** The model's providers, in the order the model lists them. */
  providers: readonly string[]
  /** Builds the attempt for a provider; called once per provider tried. */
  plan: (upstream: UpstreamClient) => Attempt
  /** Runs before each attempt, with the attempt number from 1; may change the body in place or replace it. */
  beforeAttempt?: (upstream: UpstreamClient, attempt: Attempt, n: number) => unknown
  /** Client headers to forward to Messages upstreams (anthropic-version, anthropic-beta). */
  forwardToMessages?: Record<string, string>
  /** Cancels the attempt in flight; pass one to cancel it when the client goes away. */
  abort?: CallAbort
  /** Told the provider of each attempt as it starts, and whether it answered. */
  onAttempt?: (upstream: UpstreamClient) => void
  timeoutS: number
}

export interface Answer {
  upstream: UpstreamClient
  attempt: Attempt
  res: UpstreamResponse
}

/** Client headers a Messages upstream needs to see; nothing else of the client's is forwarded. */
export const FORWARDED_TO_MESSAGES = ['anthropic-version', 'anthropic-beta'] as const

export function messagesHeaders (request: FastifyRequest): Record<string, string> {
  const out: Record<string, string> = {}
  for (const name of FORWARDED_TO_MESSAGES) {
    const v = request.headers[name]
    if (typeof v === 'string') out[name] = v
  }
  return out
}

export function isTimeout (err: unknown): boolean {
  const code = (err as { code?: string } | null)?.code
  return code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT'
}

/** A whole body as UTF-8 text; rejects with the body's error (an upstream timeout, a reset). */
export function readText (body: NodeJS.ReadableStream): Promise<string> {
  // listened to directly: an async iterator costs a promise per chunk on the hottest path
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    body.on('data', (chunk: Buffer | string) => { chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk) })
    body.once('end', () => { resolve(chunks.length === 1 ? (chunks[0] as Buffer).toString('utf8') : Buffer.concat(chunks).toString('utf8')) })
    body.once('error', reject)
  })
}

export function parseJson (text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

/**
 * Sends the call to the model's providers until one answers. Throws UpstreamClientError (a
 * provider's 4xx, re-shaped), RequestTimeout (every provider timed out), UpstreamUnavailable,
 * or NoProvider (none usable).
 */
export async function dispatch (upstreams: Upstreams, opts: DispatchOptions): Promise<Answer> {
  const candidates = upstreams.candidates(opts.providers)
  if (candidates.length === 0) throw new NoProvider({ model: opts.request.call?.model?.id ?? '' })
  const abort = opts.abort ?? new CallAbort()
  let lastError: unknown
  let timeouts = 0
  let n = 0
  for (const upstream of candidates) {
    const attempt = opts.plan(upstream)
    n++
    if (opts.beforeAttempt !== undefined) await opts.beforeAttempt(upstream, attempt, n)
    opts.onAttempt?.(upstream)
    let res: UpstreamResponse
    try {
      res = await upstream.request({
        path: attempt.path,
        headers: upstream.protocol === 'messages' ? opts.forwardToMessages ?? {} : {},
        body: JSON.stringify(attempt.body),
        signal: abort
      })
    } catch (err) {
      // the client left while we waited: nothing is written to a closed socket
      if (abort.aborted) throw new UpstreamUnavailable({}, { cause: err })
      upstreams.failed(upstream.id)
      if (isTimeout(err)) timeouts++
      lastError = err
      opts.request.log.warn({ provider: upstream.id, err }, 'upstream failed before answering; trying the next provider')
      continue
    }
    if (res.statusCode >= 500) {
      res.body.resume()
      upstreams.failed(upstream.id)
      lastError = new Error(`upstream ${upstream.id} answered ${res.statusCode}`)
      opts.request.log.warn({ provider: upstream.id, status: res.statusCode }, 'upstream answered 5xx; trying the next provider')
      continue
    }
    upstreams.succeeded(upstream.id)
    if (res.statusCode >= 400) {
      const text = await readText(res.body)
      const shaped = attempt.error(res.statusCode, parseJson(text) ?? { error: { message: text } })
      throw new UpstreamClientError(res.statusCode, shaped, `upstream ${upstream.id} answered ${res.statusCode}`)
    }
    return { upstream, attempt, res }
  }
  if (timeouts > 0 && timeouts === candidates.length) throw new RequestTimeout({ seconds: opts.timeoutS }, { cause: lastError })
  throw new UpstreamUnavailable({}, { cause: lastError })
}
