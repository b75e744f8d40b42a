import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { AdmissionContext, Gateway, ResponseBodyContext, StreamContext, UpstreamRequestContext } from '../../plugins/api/index.js'
import type { CatalogModel } from '../../plugins/gateway/catalog.js'
import type { CallRecord } from '../../plugins/gateway/call.js'
import {
  ModelNotFound, RequestTimeout, StreamIdleTimeout, UnsupportedOnUpstream, UpstreamStreamError, UpstreamUnavailable, type GatewayError
} from '../../plugins/gateway/errors.js'
import { hooksOf } from '../../plugins/gateway/core.js'
import type { HookRegistry } from '../../plugins/gateway/hooks.js'
import { runSeries } from '../../plugins/gateway/hooks.js'
import { then, type MaybePromise } from '../../plugins/store/types.js'
import { pairFor } from '../../plugins/translation/index.js'
import { relay, StreamRelay, type RelayEnd } from '../../plugins/translation/relay.js'
import type { Json, Protocol, TranslateCtx, TranslatorPair } from '../../plugins/translation/types.js'
import { dispatch, isTimeout, messagesHeaders, parseJson, readText, type Answer, type RetryPolicy } from '../../plugins/upstream/dispatch.js'
import { CallAbort, type UpstreamClient } from '../../plugins/upstream/types.js'
import { applyParameters, checkBody, checkMedia, checkMediaHostsByDns } from '../../plugins/gateway/validation.js'

// The handler of every metered call route: POST /v1/chat/completions ('openai' clients),
// /v1/messages ('messages') and /v1/responses ('responses'). Admit the call, send it to the
// model's providers, relay the answer. The call record (request.call) is the pipeline's alone;
// plugins act through the gateway hooks at each step.

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', 'x-accel-buffering': 'no' }

interface Admitted { model: CatalogModel, body: Json }

interface Translated { pair: TranslatorPair, body: Json, dropped: string[] }

export function callHandler (fastify: FastifyInstance, protocol: Protocol) {
  const gateway = fastify.gateway
  const hooks = hooksOf(gateway)

  return async function handle (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
    const call = request.call as CallRecord
    const { model, body } = await admit(gateway, hooks, request, reply, call, protocol)
    const ctx = translateCtx(gateway, request, call, model, body, protocol)
    const { answer, translated } = await callUpstream(gateway, hooks, request, reply, call, model, body, ctx)
    call.dropped.push(...translated.dropped)
    return call.stream
      ? relayStream(gateway, hooks, request, reply, call, answer, translated.pair, ctx)
      : await relayJson(gateway, hooks, request, reply, call, answer, translated.pair, ctx)
  }
}

/** Validates the body, resolves the model, and runs the admission hooks (which may refuse). */
function admit (gateway: Gateway, hooks: HookRegistry, request: FastifyRequest, reply: FastifyReply, call: CallRecord, protocol: Protocol): MaybePromise<Admitted> {
  const valid = checkBody(request.body, protocol)
  const model = gateway.catalog.find(valid.model as string, request.principal?.models ?? null)
  if (model === undefined) throw new ModelNotFound({ model: valid.model as string })
  call.model = model
  call.stream = valid.stream === true
  const hosts = checkMedia(valid, model, protocol)
  const { body, dropped } = applyParameters(valid, model, protocol)
  call.dropped = dropped
  call.requestBody = body
  const ctx: AdmissionContext = { request, reply, call, principal: request.principal, model, body, keepContent: () => { call.keepContent = true } }
  // the operator's choice: media hosts resolved and checked too (a DNS lookup per call)
  const resolved = gateway.config.server.media_urls.resolve_hosts && hosts.length > 0 ? checkMediaHostsByDns(hosts) : undefined
  return then(then(resolved, () => runSeries(hooks.onAdmission, ctx)), () => {
    call.requestBody = ctx.body
    return { model, body: ctx.body }
  })
}

function translateCtx (gateway: Gateway, request: FastifyRequest, call: CallRecord, model: CatalogModel, body: Json, protocol: Protocol): TranslateCtx {
  return {
    model: model.id,
    upstreamModel: model.upstreamModel,
    id: request.id.replace(/-/g, ''),
    created: Math.floor(call.startedAt / 1000),
    includeUsage: protocol === 'openai' && call.stream && (body.stream_options as Json | undefined)?.include_usage === true,
    flatten: gateway.config.translation.flatten,
    defaultMaxTokens: Math.min(gateway.config.translation.default_max_tokens, model.config.max_output_tokens ?? Infinity),
    supported: model.supportedParameters,
    // a Responses answer echoes the request's settings
    clientRequest: protocol === 'responses' ? body : undefined
  }
}

/** The protocol a provider is spoken to in for a client: native Responses where the provider serves it. */
function upstreamProtocol (client: Protocol, upstream: UpstreamClient): Protocol {
  return client === 'responses' && upstream.responses ? 'responses' : upstream.protocol
}

export function retryPolicy (gateway: Gateway): RetryPolicy {
  const r = gateway.config.upstream.retry
  return { attempts: r.attempts, backoffMs: r.backoff_ms }
}

async function callUpstream (gateway: Gateway, hooks: HookRegistry, request: FastifyRequest, reply: FastifyReply, call: CallRecord, model: CatalogModel, body: Json, ctx: TranslateCtx): Promise<{ answer: Answer, translated: Translated }> {
  const client = call.protocol
  // `n` may have been dropped as unsupported; towards a Messages upstream it is refused anyway
  const n = (request.body as Json).n
  if (client === 'openai' && typeof n === 'number' && n > 1 && gateway.upstreams.candidates(model.providers, model).some((u) => u.protocol === 'messages')) {
    throw new UnsupportedOnUpstream({ feature: 'n > 1', model: model.id })
  }
  const byProtocol = new Map<Protocol, Translated>()
  const translate = (up: Protocol): Translated => {
    let t = byProtocol.get(up)
    if (t === undefined) {
      const pair = pairFor(client, up)
      const r = pair.request(body, ctx)
      t = { pair, body: r.body, dropped: r.dropped }
      byProtocol.set(up, t)
    }
    return t
  }
  const withHooks = hooks.onUpstreamRequest.length > 0
  call.abort = new CallAbort()
  try {
    const answer = await dispatch(gateway.upstreams, {
      request,
      providers: model.providers,
      policy: model,
      model: model.id,
      retry: retryPolicy(gateway),
      onReport: (r) => { call.attemptEnded(r) },
      onWait: (ms) => { call.waited(ms) },
      timeoutS: gateway.config.server.request_timeout_s,
      abort: call.abort,
      forwardToMessages: messagesHeaders(request),
      plan: (upstream) => {
        const up = upstreamProtocol(client, upstream)
        const t = translate(up)
        // hooks may change the body of one attempt; the next provider gets a fresh one
        return { path: t.pair.path, body: withHooks ? structuredClone(t.body) : t.body, protocol: up, error: t.pair.error }
      },
      beforeAttempt: withHooks
        ? (upstream, attempt, number) => {
            const c: UpstreamRequestContext = { request, reply, call, model, provider: { id: upstream.id, protocol: attempt.protocol }, attempt: number, body: attempt.body }
            return then(runSeries(hooks.onUpstreamRequest, c), () => { attempt.body = c.body })
          }
        : undefined,
      onAttempt: (upstream) => { call.attempted = true; call.provider = upstream.id }
    })
    return { answer, translated: translate(answer.attempt.protocol) }
  } catch (err) {
    call.failure = err instanceof RequestTimeout ? 'timeout' : 'upstream_error'
    throw err
  }
}

async function relayJson (gateway: Gateway, hooks: HookRegistry, request: FastifyRequest, reply: FastifyReply, call: CallRecord, answer: Answer, pair: TranslatorPair, ctx: TranslateCtx): Promise<FastifyReply> {
  let text: string
  const t0 = performance.now()
  try {
    text = await readText(answer.res.body)
    call.waited(performance.now() - t0)
  } catch (err) {
    call.failure = isTimeout(err) ? 'timeout' : 'upstream_error'
    throw call.failure === 'timeout' ? new RequestTimeout({ seconds: gateway.config.server.request_timeout_s }, { cause: err }) : new UpstreamUnavailable({}, { cause: err })
  }
  const json = parseJson(text)
  if (json === null || typeof json !== 'object' || Array.isArray(json)) {
    call.failure = 'upstream_error'
    throw new UpstreamUnavailable({}, { cause: new Error(`upstream ${answer.upstream.id} sent a body that is not a JSON object`) })
  }
  call.firstByte()
  const out = pair.response(json as Json, ctx)
  let body: Json | string = out.body ?? text
  if (hooks.onResponseBody.length > 0) {
    const c: ResponseBodyContext = { request, reply, call, body: out.body ?? json as Json }
    await runSeries(hooks.onResponseBody, c)
    body = c.body
  }
  if (call.keepContent) call.responseContent = typeof body === 'string' ? body : JSON.stringify(body)
  call.answering()
  // the call is settled (recorded, charged, counted) before its answer goes out
  await call.end({ status: 'ok', usage: out.usage, complete: true })
  reply.header('content-type', 'application/json; charset=utf-8')
  return reply.send(body)
}

function relayStream (gateway: Gateway, hooks: HookRegistry, request: FastifyRequest, reply: FastifyReply, call: CallRecord, answer: Answer, pair: TranslatorPair, ctx: TranslateCtx): FastifyReply {
  const timeoutS = gateway.config.server.request_timeout_s
  const sctx: StreamContext = { request, reply, call, protocol: call.protocol }
  const withHooks = hooks.onStreamEvent.length > 0 || hooks.onStreamEnd.length > 0
  const relayStream: StreamRelay = new StreamRelay({
    mapper: pair.stream(ctx),
    protocol: call.protocol,
    keepContent: call.keepContent,
    hooks: withHooks
      ? { event: hooks.onStreamEvent.map((fn) => (ev) => fn(sctx, ev)), end: hooks.onStreamEnd.map((fn) => () => fn(sctx)) }
      : undefined,
    onFirstByte: () => { call.firstByte() },
    finish: (end: RelayEnd) => {
      if (end.status !== 'ok') request.log.warn({ provider: answer.upstream.id, err: end.error }, end.status === 'timeout' ? 'upstream stream idle for too long' : 'upstream stream failed')
      call.responseContent = relayStream.content
      return call.end({ status: end.status, usage: end.usage, complete: end.status === 'ok' })?.catch((err: unknown) => {
        request.log.error({ err }, 'end-of-call work failed')
      })
    },
    failure: (end: RelayEnd) => bodyOf(end.status === 'timeout' ? new StreamIdleTimeout({ seconds: timeoutS }) : new UpstreamStreamError())
  })
  call.progress = relayStream
  call.answering()
  reply.headers(SSE_HEADERS)
  return reply.send(relay(answer.res.body, relayStream))
}

const bodyOf = (err: GatewayError) => ({ status: err.statusCode, message: err.message, code: err.spec.code, openaiType: err.spec.openaiType, messagesType: err.spec.messagesType })
