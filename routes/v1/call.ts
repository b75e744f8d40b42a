import { Readable } from 'node:stream'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { clientAborted, type CallInfo } from '../../plugins/context.js'
import {
  ModelNotFound, NoProvider, UnsupportedOnUpstream, RequestTimeout, StreamIdleTimeout, UpstreamClientError, UpstreamStreamError,
  UpstreamUnavailable, type GatewayError
} from '../../plugins/errors.js'
import { errorEvent, serialize, SseParser } from '../../plugins/translation/sse.js'
import { pairFor } from '../../plugins/translation/index.js'
import type { Json, Protocol, StreamMapper, TranslateCtx, TranslatorPair } from '../../plugins/translation/types.js'
import { CallAbort, type UpstreamClient, type UpstreamResponse } from '../../plugins/upstream/index.js'
import { applyParameters, checkBody, checkMedia } from '../../plugins/validation.js'

// The handler shared by POST /v1/chat/completions (client protocol 'openai') and POST
// /v1/messages ('messages'): validate, pick the model's providers, translate the request for
// each upstream's protocol, call them in failover order, and relay the answer back through the
// translator pair, streaming or not. What it learns (provider, usage, timing, status) goes on
// request.call for the usage, ledger and diagnostics plugins.

const ENDPOINT: Record<Protocol, CallInfo['endpoint']> = { openai: 'chat.completions', messages: 'messages', responses: 'responses' }

// Client headers a Messages upstream needs to see (PRODUCT.md §6.9); nothing else is forwarded.
const FORWARDED_TO_MESSAGES = ['anthropic-version', 'anthropic-beta'] as const

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' }

function isTimeout (err: unknown): boolean {
  const code = (err as { code?: string }).code
  return code === 'UND_ERR_HEADERS_TIMEOUT' || code === 'UND_ERR_CONNECT_TIMEOUT' || code === 'UND_ERR_BODY_TIMEOUT'
}

/** A whole body as UTF-8 text; rejects with the body's error (an upstream timeout, a reset). */
export function readText (body: Readable): Promise<string> {
  // listened to directly: an async iterator costs a promise per chunk on the hottest path
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    body.on('data', (chunk: Buffer | string) => { chunks.push(typeof chunk === 'string' ? Buffer.from(chunk) : chunk) })
    body.once('end', () => { resolve(chunks.length === 1 ? (chunks[0] as Buffer).toString('utf8') : Buffer.concat(chunks).toString('utf8')) })
    body.once('error', reject)
  })
}

function parseJson (text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    return undefined
  }
}

export function callHandler (fastify: FastifyInstance, client: Protocol) {
  const { catalog, config, clock } = fastify.gw
  const upstreams = fastify.gw.upstreams
  const timeoutS = config.server.request_timeout_s

  return async function handle (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const body = checkBody(request.body, client)
    const model = catalog.find(body.model as string, request.principal?.models ?? null)
    if (model === undefined) throw new ModelNotFound({ model: body.model as string })
    const stream = body.stream === true
    const call: CallInfo = {
      endpoint: ENDPOINT[client],
      model: model.id,
      provider: null,
      stream,
      dropped: [],
      startedAt: clock.now(),
      firstByteAt: null,
      usage: null,
      status: null
    }
    request.call = call
    checkMedia(body, model, client)
    const { body: params, dropped } = applyParameters(body, model, client)
    call.dropped = dropped
    call.requestBody = params

    const ctx: TranslateCtx = {
      model: model.id,
      upstreamModel: model.upstreamModel,
      id: request.id.replace(/-/g, ''),
      created: Math.floor(call.startedAt / 1000),
      includeUsage: client === 'openai' && stream && (params.stream_options as Json | undefined)?.include_usage === true,
      flatten: config.translation.flatten,
      defaultMaxTokens: Math.min(config.translation.default_max_tokens, model.config.max_output_tokens ?? Infinity)
    }

    const candidates = upstreams.candidates(model.providers)
    if (candidates.length === 0) throw new NoProvider({ model: model.id })
    // checked on the client's body: `n` is dropped as unsupported before translation would see it
    if (client === 'openai' && typeof body.n === 'number' && body.n > 1 && candidates.some((u) => u.protocol === 'messages')) {
      throw new UnsupportedOnUpstream({ feature: 'n > 1', model: model.id })
    }

    const abort = new CallAbort()
    reply.raw.once('close', () => {
      if (clientAborted(reply)) {
        abort.abort()
        call.status = 'client_aborted'
      }
    })

    const forwarded: Record<string, string> = {}
    for (const name of FORWARDED_TO_MESSAGES) {
      const v = request.headers[name]
      if (typeof v === 'string') forwarded[name] = v
    }

    const payloads = new Map<Protocol, string>()
    let lastError: unknown
    let timeouts = 0
    for (const upstream of candidates) {
      const pair = pairFor(client, upstream.protocol)
      let payload = payloads.get(upstream.protocol)
      if (payload === undefined) {
        const translated = pair.request(params, ctx)
        payload = JSON.stringify(translated.body)
        payloads.set(upstream.protocol, payload)
      }
      let res: UpstreamResponse
      try {
        res = await upstream.request({ path: pair.path, headers: upstream.protocol === 'messages' ? forwarded : {}, body: payload, signal: abort })
      } catch (err) {
        // the client left while we waited: end the request; nothing is written to a closed socket
        if (abort.aborted) throw new UpstreamUnavailable({}, { cause: err })
        upstreams.failed(upstream.id)
        if (isTimeout(err)) timeouts++
        lastError = err
        request.log.warn({ provider: upstream.id, err }, 'upstream failed before answering; trying the next provider')
        continue
      }
      if (res.statusCode >= 500) {
        res.body.resume()
        upstreams.failed(upstream.id)
        lastError = new Error(`upstream ${upstream.id} answered ${res.statusCode}`)
        request.log.warn({ provider: upstream.id, status: res.statusCode }, 'upstream answered 5xx; trying the next provider')
        continue
      }
      upstreams.succeeded(upstream.id)
      call.provider = upstream.id
      if (res.statusCode >= 400) {
        call.firstByteAt = clock.now()
        const text = await readText(res.body)
        call.status = 'upstream_error'
        const shaped = pair.error(res.statusCode, parseJson(text) ?? { error: { message: text } })
        throw new UpstreamClientError(res.statusCode, shaped, `upstream ${upstream.id} answered ${res.statusCode}`)
      }
      return stream
        ? relayStream(request, reply, res, pair, ctx, upstream, abort)
        : await relayJson(reply, res, pair, ctx, call, upstream)
    }
    call.status = timeouts > 0 && timeouts === candidates.length ? 'timeout' : 'upstream_error'
    if (call.status === 'timeout') throw new RequestTimeout({ seconds: timeoutS }, { cause: lastError })
    throw new UpstreamUnavailable({}, { cause: lastError })
  }

  async function relayJson (reply: FastifyReply, res: UpstreamResponse, pair: TranslatorPair, ctx: TranslateCtx, call: CallInfo, upstream: UpstreamClient): Promise<FastifyReply> {
    let text: string
    try {
      text = await readText(res.body)
    } catch (err) {
      call.status = isTimeout(err) ? 'timeout' : 'upstream_error'
      throw call.status === 'timeout' ? new RequestTimeout({ seconds: timeoutS }, { cause: err }) : new UpstreamUnavailable({}, { cause: err })
    }
    call.firstByteAt = clock.now()
    const json = parseJson(text)
    if (json === null || typeof json !== 'object') {
      call.status = 'upstream_error'
      throw new UpstreamUnavailable({}, { cause: new Error(`upstream ${upstream.id} sent a body that is not JSON`) })
    }
    const out = pair.response(json as Json, ctx)
    call.usage = out.usage
    call.status = 'ok'
    call.responseText = text
    reply.header('content-type', 'application/json; charset=utf-8')
    return reply.send(out.body === null ? text : out.body)
  }

  function relayStream (request: FastifyRequest, reply: FastifyReply, res: UpstreamResponse, pair: TranslatorPair, ctx: TranslateCtx, upstream: UpstreamClient, abort: CallAbort): FastifyReply {
    const call = request.call as CallInfo
    const parser = new SseParser()
    const mapper: StreamMapper = pair.stream(ctx)
    const source = res.body
    let paused = false
    let done = false
    const out = new Readable({
      read () {
        if (paused) { paused = false; source.resume() }
      },
      destroy (err, cb) {
        if (!done) abort.abort()
        cb(err)
      }
    })

    const emit = (text: string): void => {
      if (text === '') return
      if (call.firstByteAt === null) call.firstByteAt = clock.now()
      if (!out.push(text)) { paused = true; source.pause() }
    }
    const settle = (status: NonNullable<CallInfo['status']>): void => {
      if (done) return
      done = true
      call.usage = mapper.usage()
      if (call.usage === null || status !== 'ok') call.relayedText = mapper.relayedText()
      if (call.status !== 'client_aborted') call.status = status
    }
    const fail = (err: GatewayError): void => {
      emit(serialize(errorEvent(pair.client, { status: err.statusCode, message: err.message, code: err.spec.code, openaiType: err.spec.openaiType, messagesType: err.spec.messagesType })))
    }

    // the client went away: what was relayed so far is what the call is billed for
    reply.raw.once('close', () => { if (clientAborted(reply)) settle('client_aborted') })

    source.on('data', (chunk: Buffer) => {
      let text = ''
      for (const frame of parser.push(chunk)) for (const ev of mapper.push(frame)) text += serialize(ev)
      emit(text)
    })
    source.on('end', () => {
      let text = ''
      for (const frame of parser.end()) for (const ev of mapper.push(frame)) text += serialize(ev)
      for (const ev of mapper.end()) text += serialize(ev)
      emit(text)
      const finished = mapper.finished()
      settle(finished ? 'ok' : 'upstream_error')
      if (!finished) fail(new UpstreamStreamError())
      out.push(null)
    })
    source.on('error', (err: Error) => {
      if (done || abort.aborted) {
        settle('client_aborted')
        out.destroy()
        return
      }
      const timedOut = isTimeout(err)
      request.log.warn({ provider: upstream.id, err }, timedOut ? 'upstream stream idle for too long' : 'upstream stream failed')
      for (const ev of mapper.end()) emit(serialize(ev))
      settle(timedOut ? 'timeout' : 'upstream_error')
      fail(timedOut ? new StreamIdleTimeout({ seconds: timeoutS }) : new UpstreamStreamError())
      out.push(null)
    })

    reply.headers(SSE_HEADERS)
    return reply.send(out)
  }
}
