import type { FastifyRequest } from 'fastify'
import { NoProvider, RequestTimeout, UpstreamClientError, UpstreamUnavailable } from '../gateway/errors.js'
import type { Json, Protocol } from '../translation/types.js'
import type { AttemptOutcome, AttemptReport, RoutingPolicy, Upstreams } from './index.js'
import { CallAbort, type UpstreamClient, type UpstreamResponse } from './types.js'

// Calling a model's providers in turn: the order comes from Upstreams (the model's routing
// policy, providers whose breaker is open left out), each
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
  /** How to order them (default: the order given). */
  policy?: RoutingPolicy
  /** The catalog model, for reports. */
  model?: string
  /** Builds the attempt for a provider; called once per provider tried. */
  plan: (upstream: UpstreamClient) => Attempt
  /** Runs before each provider's attempt, with its number from 1; may change the body in place or replace it. */
  beforeAttempt?: (upstream: UpstreamClient, attempt: Attempt, n: number) => unknown
  /** Client headers to forward to Messages upstreams (anthropic-version, anthropic-beta). */
  forwardToMessages?: Record<string, string>
  /** Cancels the attempt in flight; pass one to cancel it when the client goes away. */
  abort?: CallAbort
  /** Told the provider of each attempt as it starts. */
  onAttempt?: (upstream: UpstreamClient) => void
  /** Told how each attempt went, and each pause before a retry (ms): the time spent waiting on providers. */
  onReport?: (report: AttemptReport) => void
  onWait?: (ms: number) => void
  /** Repeats of a failure that is safe to repeat, on the same provider; none by default. */
  retry?: RetryPolicy
  timeoutS: number
}

export interface RetryPolicy {
  /** Repeats per provider. */
  attempts: number
  /** Pause before the first repeat; doubled for each next one. */
  backoffMs: number
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

// Failures where the provider cannot have started on the request: nothing was sent, or the
// connection broke before any byte of an answer. Repeating them cannot run a call twice upstream
// in a way the client would pay for (a reset before the first byte bills nothing).
const REPEATABLE = new Set(['ECONNREFUSED', 'ECONNRESET', 'EPIPE', 'UND_ERR_SOCKET', 'UND_ERR_CONNECT_TIMEOUT'])

export function isRepeatable (err: unknown): boolean {
  for (let e = err as { code?: string, cause?: unknown } | null, depth = 0; e !== null && e !== undefined && depth < 4; e = e.cause as typeof e, depth++) {
    if (typeof e.code === 'string' && REPEATABLE.has(e.code)) return true
  }
  return false
}

function pause (ms: number, abort: CallAbort): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => { clearTimeout(timer); abort.off('abort', done); resolve() }
    const timer = setTimeout(done, ms)
    abort.once('abort', done)
  })
}

/**
 * Sends the call to the model's providers until one answers. Throws UpstreamClientError (a
 * provider's 4xx, re-shaped), RequestTimeout (every provider timed out), UpstreamUnavailable,
 * or NoProvider (none usable). A failure that is safe to repeat (see REPEATABLE) is repeated on
 * the same provider, `retry.attempts` times at most, after a pause that doubles each time, as
 * long as the pause ends within the request timeout; then the next provider is tried.
 */
export async function dispatch (upstreams: Upstreams, opts: DispatchOptions): Promise<Answer> {
  const candidates = upstreams.candidates(opts.providers, opts.policy)
  if (candidates.length === 0) throw new NoProvider({ model: opts.model ?? opts.request.call?.model?.id ?? '' })
  const abort = opts.abort ?? new CallAbort()
  const retry = opts.retry ?? { attempts: 0, backoffMs: 0 }
  const deadline = performance.now() + opts.timeoutS * 1000
  let lastError: unknown
  let timeouts = 0
  let tried = 0
  let sent = 0
  for (const upstream of candidates) {
    if (!upstreams.admit(upstream.id)) continue
    const attempt = opts.plan(upstream)
    tried++
    if (opts.beforeAttempt !== undefined) await opts.beforeAttempt(upstream, attempt, tried)
    opts.onAttempt?.(upstream)
    const body = JSON.stringify(attempt.body)
    const headers = upstream.protocol === 'messages' ? opts.forwardToMessages ?? {} : {}
    let repeats = 0
    const report = (outcome: AttemptOutcome, start: number, status: number | null, error?: unknown): void => {
      const r: AttemptReport = { provider: upstream.id, model: opts.model ?? null, outcome, status, start, end: performance.now(), n: ++sent, retry: repeats > 0, failover: repeats === 0 && tried > 1, error }
      upstreams.report(r)
      opts.onReport?.(r)
    }
    let res: UpstreamResponse | undefined
    while (res === undefined) {
      const start = performance.now()
      try {
        res = await upstream.request({ path: attempt.path, headers, body, signal: abort })
      } catch (err) {
        // the client left while we waited: nothing is written to a closed socket
        if (abort.aborted) { report('aborted', start, null, err); throw new UpstreamUnavailable({}, { cause: err }) }
        report(isTimeout(err) ? 'timeout' : 'network_error', start, null, err)
        lastError = err
        const wait = retry.backoffMs * 2 ** repeats
        if (repeats < retry.attempts && isRepeatable(err) && performance.now() + wait < deadline && upstreams.admit(upstream.id)) {
          opts.request.log.warn({ provider: upstream.id, err, retry_in_ms: wait }, 'upstream failed before answering; trying it again')
          repeats++
          const t0 = performance.now()
          await pause(wait, abort)
          opts.onWait?.(performance.now() - t0)
          if (abort.aborted) { upstreams.health.release(upstream.id); throw new UpstreamUnavailable({}, { cause: err }) }
          continue
        }
        if (isTimeout(err)) timeouts++
        opts.request.log.warn({ provider: upstream.id, err }, 'upstream failed before answering; trying the next provider')
        break
      }
      if (res.statusCode >= 500) {
        res.body.resume()
        report('server_error', start, res.statusCode)
        lastError = new Error(`upstream ${upstream.id} answered ${res.statusCode}`)
        opts.request.log.warn({ provider: upstream.id, status: res.statusCode }, 'upstream answered 5xx; trying the next provider')
        res = undefined
        break
      }
      report(res.statusCode >= 400 ? 'client_error' : 'ok', start, res.statusCode)
    }
    if (res === undefined) continue
    if (res.statusCode >= 400) {
      const text = await readText(res.body)
      const shaped = attempt.error(res.statusCode, parseJson(text) ?? { error: { message: text } })
      throw new UpstreamClientError(res.statusCode, shaped, `upstream ${upstream.id} answered ${res.statusCode}`)
    }
    return { upstream, attempt, res }
  }
  if (tried === 0) throw new NoProvider({ model: opts.model ?? opts.request.call?.model?.id ?? '' })
  if (timeouts > 0 && timeouts === tried) throw new RequestTimeout({ seconds: opts.timeoutS }, { cause: lastError })
  throw new UpstreamUnavailable({}, { cause: lastError })
}
