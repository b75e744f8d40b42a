import { Readable, Transform, type TransformCallback } from 'node:stream'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { Gateway, PluginAnswer, ResponseBodyContext, StreamContext, UpstreamRequestContext } from '../../plugins/api/index.js'
import type { Call } from './call.js'
import type { CatalogModel } from './catalog.js'
import { RequestTimeout, StreamIdleTimeout, UpstreamStreamError, UpstreamUnavailable, type GatewayError } from '../kernel/errors.js'
import { runSeries, type HookRegistry } from './hooks.js'
import { then, type MaybePromise } from '../kernel/maybe-promise.js'
import { relay, StreamRelay, type RelayEnd } from '../translation/relay.js'
import { pairFor } from '../translation/index.js'
import { replayStream } from '../protocols/index.js'
import { serialize } from '../protocols/sse.js'
import type { Json, TranslateCtx, TranslatorPair } from '../translation/types.js'
import { dispatch, isTimeout, parseJson, readText, type Answer, type Attempt, type RetryPolicy } from '../upstream/dispatch.js'
import type { RoutingPolicy } from '../upstream/routing.js'
import type { UpstreamClient } from '../upstream/types.js'

// The steps every metered call goes through, whichever route it came in by (/v1/chat/completions,
// /v1/messages, /v1/responses, /passthrough/{provider}/*; an MCP tool call at /mcp takes the
// admission and the response hooks): the admission hooks, dispatch to the
// providers (attempts, retries, health and breaker reports), the relay of the answer through its
// translator pair's JSON or stream mapping and the response hooks, and the end of the call. The
// call runner (routes/v1/run-call.ts) composes them for every metered route; a route declares what
// is particular to it (how its body is read, which pair, what goes upstream).

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' }
const ARRAY_STREAM_HEADERS = { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' }

/** What the pipeline steps of one call share. */
export interface Pipe {
  gateway: Gateway
  hooks: HookRegistry
  request: FastifyRequest
  reply: FastifyReply
  call: Call
  /** The client reads a stream as one JSON array of its events, not as SSE (Google's streamGenerateContent without alt=sse). */
  arrayStream?: boolean
}

/**
 * Sends the answer a plugin gave at admission (a cache hit) in the client's protocol: whole, or
 * replayed as the protocol's own stream events when the client asked for a stream (`whole`: the
 * same-protocol pair of a call that is never streamed, such as embeddings). It goes
 * through the response hooks (a guardrail applies to it as to any answer) and the call ends (its
 * record written) before the last byte, as for any answer.
 */
export async function answerFromPlugin (p: Pipe, answer: PluginAnswer, ctx: TranslateCtx, whole?: Pick<TranslatorPair, 'response'>): Promise<FastifyReply> {
  const { reply, call } = p
  if (answer.headers !== undefined) reply.headers(answer.headers)
  // a call answered whole (embeddings) reads its answer with its own same-protocol pair
  const protocol = call.modelProtocol
  if (whole !== undefined || !call.stream) return await sendWhole(p, answer.body, JSON.stringify(answer.body), { pair: whole ?? pairFor(protocol, protocol), ctx })
  const same = pairFor(protocol, protocol)
  const frames = replayStream(protocol, answer.body, ctx)
  return relayEvents(p, Readable.from([frames.map((ev) => serialize(ev)).join('')]), 'cache', { pair: same, ctx })
}

/** What a translator pair needs to know of a call to a catalog model. */
export function translateCtx (p: Pipe, model: CatalogModel, body: Json): TranslateCtx {
  const { gateway, request, call } = p
  const protocol = call.protocol
  return {
    model: model.id,
    upstreamModel: model.upstreamModel,
    id: request.id.replace(/-/g, ''),
    created: Math.floor(call.startedAt / 1000),
    stream: call.stream,
    includeUsage: protocol === 'openai' && call.stream && (body.stream_options as Json | undefined)?.include_usage === true,
    flatten: gateway.config.translation.flatten,
    defaultMaxTokens: Math.min(gateway.config.translation.default_max_tokens, model.config.max_output_tokens ?? Infinity),
    supported: model.supportedParameters,
    // a Responses answer echoes the request's settings; a Gemini client may ask to see thoughts
    clientRequest: protocol === 'responses' || protocol === 'gemini' ? body : undefined
  }
}

/**
 * The repeats on one provider: `upstream.retry` repeats a refused or reset connection;
 * `upstream.retries`, when set, repeats a 429 or a 5xx too, and its attempts win over
 * retry.attempts (the pause still starts at retry.backoff_ms, or is the provider's Retry-After up to
 * max_wait_s).
 */
export function retryPolicy (gateway: Gateway): RetryPolicy {
  const { retry: r, retries } = gateway.config.upstream
  const clock = gateway.clock
  const sleep = clock.sleep
  return {
    attempts: retries?.attempts ?? r.attempts,
    backoffMs: r.backoff_ms,
    httpAttempts: retries?.attempts ?? 0,
    maxWaitMs: (retries?.max_wait_s ?? 0) * 1000,
    sleep: sleep === undefined ? undefined : (ms) => sleep.call(clock, ms)
  }
}

export interface Send {
  providers: readonly string[]
  policy?: RoutingPolicy
  /** The catalog model, when the call is for one (the upstream request hooks run only then). */
  model: CatalogModel | null
  /** The attempt for a provider; called once per provider tried. */
  plan: (upstream: UpstreamClient) => Attempt
}

/**
 * Sends the call to its providers (dispatch), the upstream request hooks before each attempt.
 * Resolves with the answer that ended the walk; the call is marked failed when none did.
 */
export async function send (p: Pipe, s: Send): Promise<Answer> {
  const { gateway, hooks, request, reply, call } = p
  const model = s.model
  const withHooks = hooks.onUpstreamRequest.length > 0 && model !== null
  try {
    return await dispatch(gateway.upstreams, {
      request,
      providers: s.providers,
      policy: s.policy,
      model: model?.id ?? undefined,
      call,
      retry: retryPolicy(gateway),
      timeoutS: gateway.config.server.request_timeout_s,
      plan: withHooks
        ? (upstream) => {
            // hooks may change the body of one attempt; the next provider gets a fresh one
            const a = s.plan(upstream)
            return { ...a, body: structuredClone(a.body) }
          }
        : s.plan,
      beforeAttempt: withHooks
        ? (upstream, attempt, number) => {
            const c: UpstreamRequestContext = { request, reply, call, model, provider: { id: upstream.id, protocol: attempt.protocol }, attempt: number, body: attempt.body as Json }
            return then(runSeries(hooks.onUpstreamRequest, c), () => { attempt.body = c.body })
          }
        : undefined
    })
  } catch (err) {
    call.failed(err instanceof RequestTimeout ? 'timeout' : 'upstream_error')
    throw err
  }
}

/**
 * Runs the response hooks on a whole answer a route has in hand (an MCP tool call's result);
 * resolves with the answer as they left it. A hook may refuse it by throwing.
 */
export function responseHooks (p: Pipe, body: Json): MaybePromise<Json> {
  if (p.hooks.onResponseBody.length === 0) return body
  const c: ResponseBodyContext = { request: p.request, reply: p.reply, call: p.call, body }
  return then(runSeries(p.hooks.onResponseBody, c), () => c.body)
}

export interface JsonRelay {
  pair: Pick<TranslatorPair, 'response'>
  ctx: TranslateCtx
  /** Headers of the answer (default: a JSON content type). */
  headers?: Record<string, string | string[]>
  /** The answer may be a JSON array (a Gemini stream read whole, passed through); the pair reads it as it is. */
  array?: boolean
}

/** The upstream's answer read whole, the wait counted; a failed read ends the call as a timeout or an upstream failure. */
export async function readWhole (p: Pipe, answer: Answer): Promise<string> {
  const t0 = performance.now()
  try {
    const text = await readText(answer.res.body)
    p.call.waited(performance.now() - t0)
    return text
  } catch (err) {
    const timedOut = isTimeout(err)
    p.call.failed(timedOut ? 'timeout' : 'upstream_error')
    throw timedOut ? new RequestTimeout({ seconds: p.gateway.config.server.request_timeout_s }, { cause: err }) : new UpstreamUnavailable({}, { cause: err })
  }
}

/**
 * Relays a whole answer: read, mapped by the pair (its body, or the provider's bytes as they are
 * when the pair leaves them unchanged), passed through the response hooks, then the call ends
 * (its record, charge and counts committed) before the answer is sent.
 */
export async function relayJson (p: Pipe, answer: Answer, r: JsonRelay): Promise<FastifyReply> {
  const { call } = p
  const text = await readWhole(p, answer)
  const json = parseJson(text)
  if (json === null || typeof json !== 'object' || (Array.isArray(json) && r.array !== true)) {
    call.failed('upstream_error')
    throw new UpstreamUnavailable({}, { cause: new Error(`upstream ${answer.upstream.id} sent a body that is not a JSON object`) })
  }
  return sendWhole(p, json as Json, text, r)
}

/** A whole answer, mapped by the pair and passed through the response hooks; sent once the call has ended. */
async function sendWhole (p: Pipe, json: Json, text: string, r: JsonRelay): Promise<FastifyReply> {
  const { hooks, request, reply, call } = p
  call.firstByte()
  const out = r.pair.response(json, r.ctx)
  let body: Json | string = out.body ?? text
  if (hooks.onResponseBody.length > 0) {
    const c: ResponseBodyContext = { request, reply, call, body: out.body ?? json }
    await runSeries(hooks.onResponseBody, c)
    body = c.body
  }
  if (call.keepsContent) call.answered(typeof body === 'string' ? body : JSON.stringify(body))
  call.answering()
  // the call is settled (recorded, charged, counted) before its answer goes out
  await call.end({ status: 'ok', usage: out.usage, complete: true })
  if (r.headers !== undefined) reply.headers(r.headers)
  else reply.header('content-type', 'application/json; charset=utf-8')
  return reply.send(body)
}

export interface StreamRelayOptions {
  pair: Pick<TranslatorPair, 'stream'>
  ctx: TranslateCtx
  /** Headers of the answer (default: the SSE headers). */
  headers?: Record<string, string | string[]>
}

/**
 * Relays a stream through the pair's stream mapper and the stream hooks; the call ends when the
 * upstream's answer is over, and the client's last bytes wait for it.
 */
export function relayStream (p: Pipe, answer: Answer, r: StreamRelayOptions): FastifyReply {
  return relayEvents(p, answer.res.body, answer.upstream.id, r)
}

function relayEvents (p: Pipe, source: Readable, from: string, r: StreamRelayOptions): FastifyReply {
  const { gateway, hooks, request, reply, call } = p
  const timeoutS = gateway.config.server.request_timeout_s
  const protocol = call.modelProtocol
  const sctx: StreamContext = { request, reply, call, protocol }
  const withHooks = hooks.onStreamEvent.length > 0 || hooks.onStreamEnd.length > 0
  const stream: StreamRelay = new StreamRelay({
    mapper: r.pair.stream(r.ctx),
    protocol,
    array: p.arrayStream === true,
    keepContent: call.keepsContent,
    hooks: withHooks
      ? { event: hooks.onStreamEvent.map((fn) => (ev) => fn(sctx, ev)), end: hooks.onStreamEnd.map((fn) => () => fn(sctx)) }
      : undefined,
    onFirstByte: () => { call.firstByte() },
    finish: (end: RelayEnd) => {
      if (end.status !== 'ok') request.log.warn({ provider: from, err: end.error }, end.status === 'timeout' ? 'upstream stream idle for too long' : 'upstream stream failed')
      call.answered(stream.content)
      return call.end({ status: end.status, usage: end.usage, complete: end.status === 'ok' })?.catch((err: unknown) => {
        request.log.error({ err }, 'end-of-call work failed')
      })
    },
    failure: (end: RelayEnd) => bodyOf(end.status === 'timeout' ? new StreamIdleTimeout({ seconds: timeoutS }) : new UpstreamStreamError())
  })
  call.relaying(stream)
  call.answering()
  reply.headers(r.headers ?? (p.arrayStream === true ? ARRAY_STREAM_HEADERS : SSE_HEADERS))
  return reply.send(relay(source, stream))
}

/**
 * Relays an answer the gateway does not read (a pass-through endpoint that reports no usage, or
 * an error answer) byte for byte; the call ends when the provider's body is over, and the last
 * chunk waits for it.
 */
export function relayBytes (p: Pipe, answer: Answer, headers: Record<string, string | string[]>): FastifyReply {
  const { reply, call } = p
  const status = answer.res.statusCode
  const tail = new LastChunkHeld(() => call.end({ status: status < 400 ? 'ok' : 'upstream_error', usage: null, complete: true }))
  answer.res.body.once('error', (err: Error) => { tail.destroy(err) })
  call.firstByte()
  call.answering()
  reply.status(status).headers(headers)
  return reply.send(answer.res.body.pipe(tail))
}

/**
 * Relays an answer the gateway does not read for usage but must see whole (a pass-through error,
 * which may echo the provider's credentials): read, changed by `map`, and sent once the call has
 * ended.
 */
export async function relayMapped (p: Pipe, answer: Answer, headers: Record<string, string | string[]>, map: (text: string) => string): Promise<FastifyReply> {
  const text = await readWhole(p, answer)
  return await sendRead(p, answer.res.statusCode, headers, map(text))
}

/**
 * Sends an answer the route read whole (readWhole) and did not meter: a pass-through answer it
 * read for the objects it names, changed or not. The call ends before it is sent.
 */
export async function sendRead (p: Pipe, status: number, headers: Record<string, string | string[]>, body: string): Promise<FastifyReply> {
  const { reply, call } = p
  call.firstByte()
  call.answering()
  await call.end({ status: status < 400 ? 'ok' : 'upstream_error', usage: null, complete: true })
  const { 'content-length': _length, ...rest } = headers
  return reply.status(status).headers(rest).send(body)
}

/** Passes chunks on one behind, so that the last one is still here when the source ends: it goes once `onEnd` has settled. */
/** What a relay of bytes it meters asks of the meter (a Bedrock event stream's usage, read as the bytes go by). */
export interface ByteMeter {
  push: (chunk: Buffer) => void
  usage: () => import('../translation/types.js').Usage | null
  finished: () => boolean
}

/**
 * Relays an answer byte for byte (a pass-through stream in a framing the client reads itself)
 * while `meter` reads its usage from the bytes; the call ends, with that usage, when the
 * provider's body is over, and the last chunk waits for it.
 */
export function relayMeteredBytes (p: Pipe, answer: Answer, headers: Record<string, string | string[]>, meter: ByteMeter): FastifyReply {
  const { reply, call } = p
  const tail = new LastChunkHeld(() => call.end({ status: meter.finished() ? 'ok' : 'upstream_error', usage: meter.usage(), complete: meter.finished() }), meter)
  answer.res.body.once('error', (err: Error) => { tail.destroy(err) })
  call.firstByte()
  call.answering()
  reply.status(answer.res.statusCode).headers(headers)
  return reply.send(answer.res.body.pipe(tail))
}

class LastChunkHeld extends Transform {
  private held: Buffer | null = null
  constructor (private readonly onEnd: () => Promise<void> | undefined, private readonly meter?: ByteMeter) { super() }
  override _transform (chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.meter?.push(chunk)
    const previous = this.held
    this.held = chunk
    cb(null, previous ?? undefined)
  }

  override _flush (cb: TransformCallback): void {
    const release = (): void => {
      if (this.held !== null) this.push(this.held)
      this.held = null
      cb()
    }
    let ended: Promise<void> | undefined
    try {
      ended = this.onEnd()
    } catch (err) {
      cb(err as Error)
      return
    }
    if (ended === undefined) release()
    else ended.then(release, (err: Error) => { cb(err) })
  }
}

const bodyOf = (err: GatewayError) => ({ status: err.statusCode, message: err.message, code: err.spec.code, openaiType: err.spec.openaiType, messagesType: err.spec.messagesType })
