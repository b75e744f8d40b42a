import type { FastifyRequest } from 'fastify'
import type { Readable } from 'node:stream'
import { isGatewayError, NoCredentials, NoProvider, RequestTimeout, UnforwardableRequest, UpstreamClientError, UpstreamCredentialsRefused, UpstreamUnavailable, type GatewayError } from '../kernel/errors.js'
import type { Json, UpstreamProtocol } from '../translation/types.js'
import { maskCredentials } from './credentials.js'
import type { RoutingPolicy, Upstreams } from './index.js'
import type { AttemptOutcome, AttemptReport, AttemptSink, CallAbort, UpstreamClient, UpstreamResponse } from './types.js'

// Calling a model's providers in turn: the order comes from Upstreams (the model's routing
// policy, providers whose breaker is open left out), each
// attempt's path and body from the caller's plan (a translator pair, or a forwarding rule), and
// the outcome of each attempt decides whether to go on. An answer that started (2xx) or a client
// error (4xx, kept with its status and re-shaped by the plan) ends the walk; a 5xx, a reset, a
// refused connection or a timeout before the first byte moves to the next provider.

/** What to send to one provider. */
export interface Attempt {
  /** Default POST. */
  method?: string
  /** Below the provider's base_url; may carry a query string. */
  path: string
  /** A JSON body (serialized once per attempt), the body's text, or a stream sent as it comes (pass-through uploads); none for GET and the like. */
  body?: Json | string | Readable
  /** The protocol the body is in (for the upstream request hooks). */
  protocol: UpstreamProtocol
  /** Extra headers for the provider (a model call), or, with `forwarded`, the client's own headers to send as they are. */
  headers?: Record<string, string | string[]>
  forwarded?: boolean
  /**
   * A model call: the model's name on this provider and whether the client streams. The
   * provider's platform moves the call onto its own URL and body (platforms/); a pass-through
   * call has none and goes as it is.
   */
  target?: { model: string, stream: boolean }
  /**
   * The upstream's 4xx body → the client's error body. Without it every answer is the provider's
   * own, relayed as it is (pass-through): a 4xx or 5xx ends the walk like a 2xx, though a 5xx still
   * counts against the provider's breaker.
   */
  error?: (status: number, body: unknown) => Json
}

export interface DispatchOptions {
  request: FastifyRequest
  /** The model's providers, in the order the model lists them. */
  providers: readonly string[]
  /** How to order them (default: the order given). */
  policy?: RoutingPolicy
  /** The catalog model, for reports and errors. */
  model?: string
  /** Builds the attempt for a provider; called once per provider tried. */
  plan: (upstream: UpstreamClient) => Attempt
  /** Runs before each provider's attempt, with its number from 1; may change the body in place or replace it. */
  beforeAttempt?: (upstream: UpstreamClient, attempt: Attempt, n: number) => unknown
  /** Told of each attempt as it starts and ends; its abort cancels the one in flight. */
  call: AttemptSink
  /** Repeats of a failure that is safe to repeat, on the same provider; none by default. */
  retry?: RetryPolicy
  timeoutS: number
}

export interface RetryPolicy {
  /** Repeats per provider of a failure safe to repeat (a refused or reset connection). */
  attempts: number
  /** Pause before the first repeat; doubled for each next one. */
  backoffMs: number
  /** Repeats per provider of a 429 or a 5xx answer (upstream.retries); none by default. */
  httpAttempts?: number
  /** The longest pause a provider's Retry-After may ask for; a longer one moves on at once. */
  maxWaitMs?: number
  /** How a pause is waited (a test's fake clock); default a timer. */
  sleep?: (ms: number, abort: CallAbort) => Promise<void>
}

/** The pause a provider's Retry-After asks for, in ms (seconds, or an HTTP date); undefined when it names none. */
export function retryAfterMs (headers: UpstreamResponse['headers'], now = Date.now()): number | undefined {
  const v = headers['retry-after-ms'] ?? headers['retry-after']
  const text = Array.isArray(v) ? v[0] : v
  if (text === undefined || text === '') return undefined
  if (headers['retry-after-ms'] !== undefined) { const ms = Number(text); return Number.isFinite(ms) && ms >= 0 ? ms : undefined }
  if (/^\d+(\.\d+)?$/.test(text.trim())) return Number(text) * 1000
  const at = Date.parse(text)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
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

// Failures of the request itself, before or while it is sent: a header, path or body undici
// refuses (a client's `Expect`, an `Upgrade`), a body that ended short of its declared length.
const REQUEST_FAULTS = new Set(['UND_ERR_INVALID_ARG', 'UND_ERR_NOT_SUPPORTED', 'UND_ERR_REQ_CONTENT_LENGTH_MISMATCH'])

/**
 * The client's error for an attempt that failed for what the request is, not for what the
 * provider did: one of REQUEST_FAULTS, or a gateway error below 500 raised by the request's body
 * as it was sent (an upload past the body limit, or cut short by its client). Undefined when the
 * provider may be at fault. Such a failure never counts against the provider's health.
 */
export function requestFault (err: unknown): GatewayError | undefined {
  if (isGatewayError(err)) return err.statusCode < 500 ? err : undefined
  const code = (err as { code?: unknown } | null)?.code
  if (typeof code === 'string' && REQUEST_FAULTS.has(code)) return new UnforwardableRequest({ reason: String((err as Error).message) }, { cause: err })
  return undefined
}

export function pause (ms: number, abort: CallAbort): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => { clearTimeout(timer); abort.off('abort', done); resolve() }
    const timer = setTimeout(done, ms)
    abort.once('abort', done)
  })
}

const isStream = (body: Attempt['body']): body is Readable => typeof (body as Readable | undefined)?.pipe === 'function'

/** An attempt's body as it is sent: a JSON body serialized; one that cannot be (a value JSON has no form for) is refused. */
function serialized (body: Attempt['body']): string | Readable | undefined {
  if (body === undefined || typeof body === 'string' || isStream(body)) return body
  try {
    return JSON.stringify(body)
  } catch (err) {
    throw new UnforwardableRequest({ reason: 'its body cannot be serialized as JSON' }, { cause: err })
  }
}

/**
 * Sends the call to the model's providers until one answers. Throws UpstreamClientError (a
 * provider's 4xx, re-shaped), RequestTimeout (every provider timed out), UpstreamUnavailable,
 * NoCredentials (no provider of the model has credentials) or NoProvider (none usable now). A failure that is safe to repeat (see REPEATABLE) is repeated on
 * the same provider, `retry.attempts` times at most, after a pause that doubles each time, as
 * long as the pause ends within the request timeout and the body can be sent again; then the next
 * provider is tried.
 */
export async function dispatch (upstreams: Upstreams, opts: DispatchOptions): Promise<Answer> {
  const candidates = upstreams.candidates(opts.providers, opts.policy)
  if (candidates.length === 0) {
    if (!opts.providers.some((id) => upstreams.configured(id))) throw new NoCredentials({ model: opts.model ?? '', providers: opts.providers.join(', ') })
    throw new NoProvider({ model: opts.model ?? '' })
  }
  const { call } = opts
  const abort = call.abort
  const retry = opts.retry ?? { attempts: 0, backoffMs: 0 }
  const httpAttempts = retry.httpAttempts ?? 0
  const maxWaitMs = retry.maxWaitMs ?? 0
  const sleep = retry.sleep ?? pause
  const deadline = performance.now() + opts.timeoutS * 1000
  let lastError: unknown
  // the last provider's 429, shaped: the answer when every provider answered 429
  let limited: UpstreamClientError | undefined
  let only429 = true
  let timeouts = 0
  let tried = 0
  let sent = 0
  for (const upstream of candidates) {
    if (!upstreams.admit(upstream.id)) continue
    let attempt: Attempt
    let body: string | Readable | undefined
    try {
      attempt = opts.plan(upstream)
      tried++
      if (opts.beforeAttempt !== undefined) await opts.beforeAttempt(upstream, attempt, tried)
      attempt = onPlatform(upstream, attempt)
      body = serialized(attempt.body)
    } catch (err) {
      // nothing was sent: the provider's turn (a probe's, when its breaker is half open) passes on
      upstreams.health.release(upstream.id)
      throw err
    }
    call.attemptStarted(upstream.id)
    const relayAll = attempt.error === undefined
    let repeats = 0
    const report = (outcome: AttemptOutcome, start: number, status: number | null, error?: unknown): void => {
      const r: AttemptReport = { provider: upstream.id, model: opts.model ?? null, upstreamModel: attempt.target?.model ?? null, outcome, status, start, end: performance.now(), n: ++sent, retry: repeats > 0, failover: repeats === 0 && tried > 1, error }
      upstreams.report(r)
      call.attemptEnded(r)
    }
    let res: UpstreamResponse | undefined
    let renewed = false
    while (res === undefined) {
      const start = performance.now()
      try {
        res = await upstream.request({ method: attempt.method, path: attempt.path, headers: attempt.headers ?? {}, forwarded: attempt.forwarded, body, signal: abort })
        // the platform's credentials were refused: renewed once (a Vertex token), the call sent again
        if (res.statusCode === 401 && !renewed && upstream.platform.refresh !== undefined && !isStream(body)) {
          renewed = true
          res.body.resume()
          report('client_error', start, 401)
          repeats++
          res = undefined
          if (await upstream.platform.refresh()) continue
          // nothing new to try: the next provider may serve the call
          lastError = new UpstreamCredentialsRefused({ provider: upstream.id })
          break
        }
      } catch (err) {
        // the client left while we waited: nothing is written to a closed socket
        if (abort.aborted) { report('aborted', start, null, err); throw new UpstreamUnavailable({}, { cause: err }) }
        const fault = requestFault(err)
        if (fault !== undefined) { report('request_error', start, null, err); throw fault }
        report(isTimeout(err) ? 'timeout' : 'network_error', start, null, err)
        lastError = err
        only429 = false
        const wait = retry.backoffMs * 2 ** repeats
        if (repeats < Math.max(retry.attempts, httpAttempts) && isRepeatable(err) && !isStream(body) && performance.now() + wait < deadline && upstreams.admit(upstream.id)) {
          opts.request.log.warn({ provider: upstream.id, err, retry_in_ms: wait }, 'upstream failed before answering; trying it again')
          repeats++
          const t0 = performance.now()
          await sleep(wait, abort)
          call.waited(performance.now() - t0)
          if (abort.aborted) { upstreams.health.release(upstream.id); throw new UpstreamUnavailable({}, { cause: err }) }
          continue
        }
        if (isTimeout(err)) timeouts++
        opts.request.log.warn({ provider: upstream.id, err }, 'upstream failed before answering; trying the next provider')
        break
      }
      const status = res.statusCode
      if (status >= 500 || (status === 429 && !relayAll)) {
        report(status >= 500 ? 'server_error' : 'client_error', start, status)
        if (relayAll) return { upstream, attempt, res }
        const after = retryAfterMs(res.headers)
        if (status === 429) {
          // kept, shaped, for when every provider answers so
          const text = maskCredentials(await readText(res.body), upstream.secrets)
          const raw = parseJson(text) ?? { error: { message: text } }
          // a platform's own error body (Bedrock's, Vertex AI's) reshaped first, as any other 4xx is below
          const errorBody = upstream.platform.errorBody
          const shapedBody = errorBody === undefined ? raw : errorBody(429, res.headers, raw)
          limited = new UpstreamClientError(429, (attempt.error as NonNullable<Attempt['error']>)(429, shapedBody), `upstream ${upstream.id} answered 429`, raw)
          lastError = limited
        } else {
          res.body.resume()
          lastError = new Error(`upstream ${upstream.id} answered ${status}`)
          only429 = false
        }
        res = undefined
        // a repeat on the same provider: within its retries and the wait it asks for within max_wait_s
        // (each attempt has a request timeout of its own)
        const wait = Math.min(after ?? retry.backoffMs * 2 ** repeats, maxWaitMs)
        if (repeats < httpAttempts && (after === undefined || after <= maxWaitMs) && !isStream(body) && upstreams.admit(upstream.id)) {
          opts.request.log.warn({ provider: upstream.id, status, retry_in_ms: wait }, 'upstream answered %d; trying it again', status)
          repeats++
          const t0 = performance.now()
          await sleep(wait, abort)
          call.waited(performance.now() - t0)
          if (abort.aborted) { upstreams.health.release(upstream.id); throw new UpstreamUnavailable({}, { cause: lastError }) }
          continue
        }
        opts.request.log.warn({ provider: upstream.id, status }, 'upstream answered %d; trying the next provider', status)
        break
      }
      if (refusesCredentials(upstream, attempt, res.statusCode)) {
        // the gateway's own credentials, not the client's call: the next provider may serve it
        report('server_error', start, res.statusCode)
        res.body.resume()
        lastError = new UpstreamCredentialsRefused({ provider: upstream.id })
        opts.request.log.warn({ provider: upstream.id, status: res.statusCode }, 'upstream refused the gateway\'s credentials; trying the next provider')
        res = undefined
        break
      }
      report(status >= 400 ? 'client_error' : 'ok', start, status)
    }
    if (res === undefined) {
      // a stream sent once cannot go to the next provider
      if (isStream(body)) break
      continue
    }
    if (res.statusCode >= 400 && attempt.error !== undefined) {
      // a provider may echo its own key in an error: it never reaches the client
      const text = maskCredentials(await readText(res.body), upstream.secrets)
      const read = parseJson(text) ?? { error: { message: text } }
      const errorBody = upstream.platform.errorBody
      const shaped = attempt.error(res.statusCode, errorBody === undefined ? read : errorBody(res.statusCode, res.headers, read))
      throw new UpstreamClientError(res.statusCode, shaped, `upstream ${upstream.id} answered ${res.statusCode}`, read)
    }
    return { upstream, attempt, res }
  }
  if (tried === 0) throw new NoProvider({ model: opts.model ?? '' })
  // every provider (the last one at least) answered 429: the client hears it, as a rate limit
  if (limited !== undefined && only429) throw limited
  if (timeouts > 0 && timeouts === tried) throw new RequestTimeout({ seconds: opts.timeoutS }, { cause: lastError })
  if (isGatewayError(lastError)) throw lastError
  throw new UpstreamUnavailable({}, { cause: lastError })
}

/**
 * A model call moved onto its provider's platform (its URL, its body); a pass-through call, or one
 * on the vendor's API, as it is. A platform that serves no such call is a programming error: the
 * runner keeps to the providers that serve it (servedOn).
 */
function onPlatform (upstream: UpstreamClient, attempt: Attempt): Attempt {
  if (attempt.target === undefined || upstream.platform.name === 'vendor') return attempt
  if (isStream(attempt.body) || typeof attempt.body === 'string') return attempt
  const moved = upstream.platform.target({ path: attempt.path, body: attempt.body, protocol: attempt.protocol, model: attempt.target.model, stream: attempt.target.stream })
  if (moved === undefined) throw new UnforwardableRequest({ reason: `provider ${upstream.id} (${upstream.platform.name}) serves no such call` })
  return { ...attempt, path: moved.path, body: moved.body }
}

/** Whether a model call on the platform `upstream` can be made there: its path and model as the vendor's API takes them. */
export function servedOn (upstream: UpstreamClient, call: { path: string, protocol: UpstreamProtocol, model: string, stream: boolean }): boolean {
  return upstream.platform.name === 'vendor' || upstream.platform.target({ ...call, body: undefined }) !== undefined
}

/**
 * A cloud platform refused the gateway's own credentials (401, or 403: not allowed to call the
 * model): no fault of the client's call, answered 502 naming the provider when no other serves it.
 * A pass-through call relays the provider's answer as it is.
 */
function refusesCredentials (upstream: UpstreamClient, attempt: Attempt, status: number): boolean {
  return (status === 401 || status === 403) && attempt.error !== undefined && upstream.platform.name !== 'vendor'
}
