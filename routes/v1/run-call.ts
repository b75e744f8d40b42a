import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { CallProtocol, Endpoint, Gateway } from '../../plugins/api/index.js'
import { upstreamModelOn, type CatalogModel, type ModelKind } from '../../engine/gateway/catalog.js'
import { BodyObjects, topLevelObjects } from '../../engine/gateway/body-objects.js'
import { callOf, hooksOf, startCall } from '../../engine/gateway/core.js'
import { admit, globsOf, grantedModel, objectProviders } from '../../engine/gateway/gate.js'
import { Chain, fallbackClass, promptCount } from '../../engine/gateway/fallbacks.js'
import type { FallbackClass } from '../../config/schema.js'
import type { HookRegistry } from '../../engine/gateway/hooks.js'
import { answerFromPlugin, relayJson, relayStream, responseHooks, send, translateCtx, type Pipe } from '../../engine/gateway/pipeline.js'
import { Internal, isGatewayError, refusalCode, type GatewayError } from '../../engine/kernel/errors.js'
import { isObj } from '../../engine/kernel/json.js'
import { then, type MaybePromise } from '../../engine/kernel/maybe-promise.js'
import { upstreamPath } from '../../engine/translation/index.js'
import type { Json, Protocol, TranslateCtx, TranslatorPair, UpstreamProtocol, WholePair } from '../../engine/translation/types.js'
import { messagesHeaders, servedOn, type Answer, type Attempt } from '../../engine/upstream/dispatch.js'
import type { AttemptOutcome, AttemptReport, UpstreamClient } from '../../engine/upstream/types.js'

// The one way a metered route runs a call: resolve what it calls and what that costs, admit
// (the plugins' admission hooks, which may answer it), build the translation context, send,
// relay the answer (whole or streamed) through the response hooks, end the call. Three kinds of
// call, one order:
//   a model call (/v1, /v1beta): a catalog model the key may call, its body checked against it,
//     the providers that hold the objects the body names, each spoken to through the pair of its
//     protocol;
//   a provider call (/passthrough/{provider}/*): one provider addressed by the path, a catalog
//     model only where the request names one, the request forwarded as the route makes it, the
//     answer read by a same-protocol pair where the endpoint reports usage;
//   a tool call (an MCP tools/call): a tool the key may call, priced per call, its one attempt
//     the route's own transport instead of dispatch.
// A route declares only what differs: what it names and how that is found, what goes upstream,
// and the answers of its own (an error masked, a list filtered, a JSON-RPC error).

/** A pair the runner sends through: every call has a request, answer and error; a streamed one a stream too. */
export type CallPair = WholePair | TranslatorPair

/** What a route declares of one call. */
export type CallSpec = ModelCallSpec | ProviderCallSpec | ToolCallSpec

/** A call to a catalog model. */
export interface ModelCallSpec {
  target?: 'model'
  /** The client's protocol. */
  protocol: Protocol
  /** The call's kind, where the route's own endpoint does not say it (Gemini's path names the method). */
  kind?: Endpoint
  /** The kind of catalog model the route serves. */
  modelKind: ModelKind
  /** The catalog id the body or the path names. */
  name: string
  /** The body, its shape checked by the route's schema. */
  body: Json
  stream?: boolean
  /** A stream goes out as one JSON array of chunks rather than as SSE (Gemini without alt=sse). */
  arrayStream?: boolean
  /** What the body names of the provider accounts, when the route noted it as it checked the body; else its top level is read here (after `prepare`, which may note parts). */
  objects?: BodyObjects
  /** The pair from the client's protocol to an upstream protocol; undefined where that upstream has no such call (its providers are skipped). */
  pairFor: (upstream: UpstreamProtocol) => CallPair | undefined
  /** The body made ready for admission with the model in hand: media checked, parameters the model lacks dropped, defaults filled in. */
  prepare?: (p: Pipe, model: CatalogModel, body: Json, objects: BodyObjects) => MaybePromise<Json>
  /** A plugin may answer the call at admission (the response cache). */
  answerable: boolean
  /** The model's routing policy orders its providers (a count is sent to them in the config's order). */
  routed?: boolean
  /** The whole answer made here when no provider of the call's protocols is available (a local token count). */
  local?: (body: Json) => Promise<Json>
  /** A refusal that depends on the model's providers, before anything is sent. */
  refuse?: (p: Pipe, model: CatalogModel) => void
  /** The pairs read the client's request in ctx.clientRequest (whole calls: its encoding, a batch or one). */
  clientRequest?: boolean
}

/**
 * A call to one provider the route addresses (pass-through): no catalog model unless the request
 * names one. The route reads the request in two steps, so that a refusal at each is recorded
 * with what the call was known to be by then: the provider, then the protocol its answers are
 * read in.
 */
export interface ProviderCallSpec {
  target: 'provider'
  /** The provider's id: the call is its from the start, a refusal included. */
  provider: string
  /** The provider's protocol (the attempt's, for the upstream request hooks). */
  protocol: UpstreamProtocol
  /** The request read and checked: the pair that reads the answers of an endpoint that reports usage, or null. */
  read: () => Promise<TranslatorPair | null>
  /** What the request names and what the call costs, found once it was read. */
  resolve: () => Promise<ProviderTarget>
  /** The request as it goes to the provider, its body as admission left it. */
  attempt: (body: Json, ctx: TranslateCtx) => Omit<Attempt, 'protocol'>
  /** An answer the route relays itself (an error, objects, bytes it does not read); null: read by the reader pair. */
  relay: (p: Pipe, answer: Answer, ctx: TranslateCtx) => Promise<FastifyReply> | FastifyReply | null
  /** The provider's answer headers as the client gets them. */
  headers: (answer: Answer) => Record<string, string | string[]>
}

export interface ProviderTarget {
  /** The catalog model the request names, which the key may call; null when it names none. */
  model: CatalogModel | null
  /** The model's name as the client gave it, sent on as it is (a snapshot's). */
  upstreamModel: string
  stream: boolean
  /** `free` (no charge), `unmetered` (spends at the provider without saying what), or `metered`. */
  cost: 'metered' | 'free' | 'unmetered'
  /** The request's JSON body, or null when it has none the gateway read. */
  body: Json | null
  /** The answer comes as one JSON array (a Gemini stream asked for without alt=sse). */
  array: boolean
}

/**
 * A tool call (MCP's tools/call), priced per call: its own call within the HTTP request, which
 * may carry other JSON-RPC messages. Its refusals and failures are answers in the route's own
 * protocol rather than HTTP errors.
 */
export interface ToolCallSpec {
  target: 'tool'
  endpoint: Endpoint
  protocol: CallProtocol
  /** The name asked for, which the call carries until the tool is found. */
  asked: string
  /** The tool among those the key may call; a refusal is a refused call. */
  resolve: () => Promise<ToolTarget>
  /** The call to the tool's server: the call's one attempt. */
  invoke: (body: Json, during: DuringCall) => Promise<Json>
  /** What a failed invocation was, and what the client gets for it. */
  failed: (err: unknown) => ToolFailure
  /** A gateway error (a refusal, or an error at the end of the call) as the route answers it. */
  refusal: (err: GatewayError) => Error
}

export interface ToolTarget {
  /** The server the tool is on (the call's provider). */
  provider: string
  /** `{server}/{tool}` (the call's model). */
  model: string
  priceNano: number
  /** The body the admission hooks see. */
  body: Json
}

/** What an invocation is given while it runs. */
export interface DuringCall {
  signal: AbortSignal
  /**
   * A message of the server's before its answer (a progress notification): through the
   * response hooks when `hooked`, in order, then `deliver`ed; a hook's refusal cancels the call.
   */
  message: (body: Json, deliver: (out: Json) => void, hooked: boolean) => void
}

export interface ToolFailure {
  outcome: AttemptOutcome
  /** The attempt's error, for the metrics and traces. */
  error?: unknown
  status: 'timeout' | 'upstream_error'
  /** A result the client gets (an `isError` result), or the server's own error, passed through the response hooks and raised by `raise`. */
  answer: Json
  raise?: (answer: Json) => Error
}

/** How a route runs its calls: a model call resolves with the reply or a whole answer made here, a provider call with the reply, a tool call with its result. */
export interface Runner {
  (request: FastifyRequest, reply: FastifyReply, spec: ModelCallSpec): Promise<FastifyReply | Json>
  (request: FastifyRequest, reply: FastifyReply, spec: ProviderCallSpec): Promise<FastifyReply>
  (request: FastifyRequest, reply: FastifyReply, spec: ToolCallSpec): Promise<Json>
  (request: FastifyRequest, reply: FastifyReply, spec: CallSpec): Promise<FastifyReply | Json>
}

interface Translated { pair: CallPair, body: Json, dropped: string[] }

/** The runner of a route's calls: each request's call run as the route declares it. */
export function callRunner (fastify: FastifyInstance): Runner {
  const gateway = fastify.gateway
  const hooks = hooksOf(gateway)
  // each run is async (it cannot throw here): its promise is the route's, with no async layer of its own around it
  return ((request: FastifyRequest, reply: FastifyReply, spec: CallSpec) => {
    if (spec.target === 'tool') return runToolCall(gateway, hooks, request, reply, spec)
    const p: Pipe = { gateway, hooks, request, reply, call: callOf(request), arrayStream: spec.target === 'provider' ? undefined : spec.arrayStream }
    return spec.target === 'provider' ? runProviderCall(p, spec) : runCall(p, spec)
  }) as Runner
}

/** Runs one call as `spec` declares it; resolves with the reply sent (or being streamed), or a whole answer made here. */
async function runCall (p: Pipe, spec: ModelCallSpec): Promise<FastifyReply | Json> {
  if (spec.kind !== undefined) p.call.kind(spec.kind)
  const requested = grantedModel(p.gateway, p.request.principal, spec.name, spec.modelKind)
  // an alias, or a model with fallbacks: the call may be answered by another model (fallbacks.ts)
  const chain = requested.aliasOf !== null || requested.fallbacks.length > 0 ? new Chain(p.gateway.catalog, requested, globsOf(p.request.principal)) : null
  const model = chain?.first ?? requested
  p.call.resolved(model, spec.stream ?? false)
  if (chain !== null) p.call.chain(requested, p.gateway.catalog.reach(requested, globsOf(p.request.principal)))
  // a route that checked the body noted what it names as it went; otherwise its top level is read here
  const objects = spec.objects ?? new BodyObjects(spec.protocol)
  const { body, reachable } = await then(spec.prepare === undefined ? spec.body : spec.prepare(p, model, spec.body, objects), (prepared) => {
    if (spec.objects === undefined) topLevelObjects(prepared, objects)
    return then(objectProviders(p, model.providers, objects), (reachable) =>
      then(admit(p, model, prepared, spec.answerable), (admitted) => ({ body: admitted, reachable })))
  })
  const answered = p.call.pluginAnswer
  if (answered !== null) {
    const base = translateCtx(p, model, body)
    const ctx: TranslateCtx = spec.clientRequest === true ? { ...base, clientRequest: body } : base
    return await answerFromPlugin(p, answered, ctx, p.call.stream ? undefined : spec.pairFor(spec.protocol))
  }
  if (chain === null) return await sendTo(p, spec, model, body, reachable, true)
  return await walk(p, spec, chain, body, reachable)
}

/**
 * The call sent down its chain of models: each that cannot answer for a class its fallbacks (or
 * its alias) name moves the call on to the next, before the client has a byte; the last error
 * seen is the answer when none answers. A prompt the gateway counts past a model's context goes
 * on at once, when the chain has a model for it, without that model being called.
 */
async function walk (p: Pipe, spec: ModelCallSpec, chain: Chain, admitted: Json, reachable: readonly string[]): Promise<FastifyReply | Json> {
  let model = chain.first
  let body = admitted
  let providers = reachable
  let lastError: unknown
  let first = true
  for (;;) {
    let why: FallbackClass | null = null
    if (promptCount(body) > model.config.context_length && chain.hasNext(model, 'context_length')) {
      why = 'context_length'
    } else {
      try {
        return await sendTo(p, spec, model, body, providers, first)
      } catch (err) {
        why = fallbackClass(err)
        if (why === null || p.call.abort.aborted) throw err
        lastError = err
      }
    }
    first = false
    // the next model the class leads to, ready for it (its parameters, its providers); one that cannot take this body is passed over
    let next = chain.next(model, why)
    for (;;) {
      if (next === undefined) {
        if (lastError !== undefined) throw lastError
        // only the count said no, and no model is left for it: the last one is asked after all
        return await sendTo(p, spec, model, body, providers, false)
      }
      try {
        const ready = await readyFor(p, spec, next, admitted)
        body = ready.body
        providers = ready.reachable
        break
      } catch (err) {
        p.request.log.info({ model: next.id, err }, 'a fallback model cannot take this call; passed over')
        next = chain.next(next, why) ?? chain.next(model, why)
      }
    }
    p.request.log.warn({ from: model.id, to: next.id, why }, 'model could not answer; trying the next')
    p.call.fellBack(why, next)
    model = next
  }
}

/** The admitted body made ready for another model of the chain: its parameters and defaults, its media checked, the providers that hold what it names. */
async function readyFor (p: Pipe, spec: ModelCallSpec, model: CatalogModel, admitted: Json): Promise<{ body: Json, reachable: readonly string[] }> {
  const objects = new BodyObjects(spec.protocol)
  const body = spec.prepare === undefined ? admitted : await spec.prepare(p, model, structuredClone(admitted), objects)
  topLevelObjects(body, objects)
  const reachable = await objectProviders(p, model.providers, objects)
  spec.refuse?.(p, model)
  return { body, reachable }
}

/** One model's turn: sent to its providers, its answer relayed (a whole one read before the client has a byte); `local`: a count may be made here when no provider can take it. */
async function sendTo (p: Pipe, spec: ModelCallSpec, model: CatalogModel, body: Json, reachable: readonly string[], local: boolean): Promise<FastifyReply | Json> {
  const base = translateCtx(p, model, body)
  const ctx: TranslateCtx = spec.clientRequest === true ? { ...base, clientRequest: body } : base
  const { upstreams } = p.gateway
  const upstreamProtocol = (u: UpstreamClient): UpstreamProtocol => spec.protocol === 'responses' && u.responses ? 'responses' : u.protocol
  // each provider of the model names it its own way (the same model on several platforms)
  const ctxOn = (u: UpstreamClient): TranslateCtx => {
    const name = upstreamModelOn(model, u.id)
    return name === ctx.upstreamModel ? ctx : { ...ctx, upstreamModel: name }
  }
  const providers = reachable.filter((id) => {
    const u = upstreams.get(id)
    if (u === undefined) return false
    const up = upstreamProtocol(u)
    const pair = spec.pairFor(up)
    if (pair === undefined) return false
    const c = ctxOn(u)
    return servedOn(u, { path: upstreamPath(pair, c), protocol: up, model: c.upstreamModel, stream: c.stream })
  })
  if (local && spec.local !== undefined && (providers.length === 0 || upstreams.candidates(providers).length === 0)) {
    const counted = await spec.local(body)
    p.call.answering()
    await p.call.end({ status: 'ok', usage: null, complete: true })
    return counted
  }
  spec.refuse?.(p, model)
  const translate = translator(spec, body)
  const answer = await send(p, {
    providers,
    policy: spec.routed === false ? undefined : model,
    model,
    plan: (upstream) => {
      const up = upstreamProtocol(upstream)
      const c = ctxOn(upstream)
      const t = translate(up, c)
      return { path: upstreamPath(t.pair, c), body: t.body, protocol: up, headers: up === 'messages' ? messagesHeaders(p.request) : undefined, error: t.pair.error, target: { model: c.upstreamModel, stream: c.stream } }
    }
  })
  const onAnswering = ctxOn(answer.upstream)
  const { pair, dropped } = translate(answer.attempt.protocol, onAnswering)
  p.call.dropParams(dropped)
  if (!p.call.stream) return await relayJson(p, answer, { pair, ctx: onAnswering })
  if (!('stream' in pair)) throw new Error(`the ${spec.protocol} → ${answer.attempt.protocol} pair of this call has no stream`)
  return relayStream(p, answer, { pair, ctx: onAnswering })
}

/** The upstream body for each upstream protocol and upstream name, made once however many providers are tried. */
function translator (spec: ModelCallSpec, body: Json): (up: UpstreamProtocol, ctx: TranslateCtx) => Translated {
  const made = new Map<string, Translated>()
  return (up, ctx) => {
    const key = `${up}\n${ctx.upstreamModel}`
    let t = made.get(key)
    if (t === undefined) {
      const pair = spec.pairFor(up)
      if (pair === undefined) throw new Error(`no pair from ${spec.protocol} clients to ${up} upstreams for this call`)
      const r = pair.request(body, ctx)
      t = { pair, body: r.body, dropped: r.dropped }
      made.set(key, t)
    }
    return t
  }
}

// ---------------------------------------------------------------------------------------------
// A provider call (pass-through)

/** Runs a call to the provider a route addresses, as `spec` declares it. */
async function runProviderCall (p: Pipe, spec: ProviderCallSpec): Promise<FastifyReply> {
  const { call } = p
  call.routedTo(spec.provider)
  const reader = await spec.read()
  if (reader !== null) call.speaks(reader.client)
  const t = await spec.resolve()
  call.resolved(t.model, t.stream, t.model?.upstreamModel)
  if (t.cost === 'free') call.free()
  else if (t.cost === 'unmetered') call.spendsUnread()
  const body = await admit(p, t.model, t.body ?? {})
  const ctx = providerCtx(p, t, body)
  const answer = await send(p, {
    providers: [spec.provider],
    model: t.model,
    plan: () => ({ ...spec.attempt(body, ctx), protocol: spec.protocol })
  })
  // every answer of the provider comes back with its status
  p.reply.status(answer.res.statusCode)
  const own = spec.relay(p, answer, ctx)
  if (own !== null) return await own
  if (reader === null) throw new Error(`the call to ${spec.provider} has no reader for its answer`)
  const headers = spec.headers(answer)
  // a Gemini stream asked for without alt=sse comes as one JSON array of chunks
  const sse = String(answer.res.headers['content-type'] ?? '').includes('text/event-stream')
  return sse ? relayStream(p, answer, { pair: reader, ctx, headers }) : await relayJson(p, answer, { pair: reader, ctx, headers, array: t.array })
}

/** What a same-protocol pair needs to know of a provider call: the names as the client gave them. */
function providerCtx (p: Pipe, t: ProviderTarget, body: Json): TranslateCtx {
  const { gateway, request, call } = p
  return {
    model: t.model?.id ?? '',
    upstreamModel: t.upstreamModel,
    id: request.id.replace(/-/g, ''),
    created: Math.floor(call.startedAt / 1000),
    stream: call.stream,
    includeUsage: isObj(body.stream_options) && body.stream_options.include_usage === true,
    flatten: false,
    defaultMaxTokens: gateway.config.translation.default_max_tokens
  }
}

// ---------------------------------------------------------------------------------------------
// A tool call (MCP)

/** Runs a tool call as `spec` declares it; resolves with the result the client gets, or throws the route's error for it. */
async function runToolCall (gateway: Gateway, hooks: HookRegistry, request: FastifyRequest, reply: FastifyReply, spec: ToolCallSpec): Promise<Json> {
  // the call starts before the grant check, so that a tool the key may not call is a refused call of its own
  const call = startCall(gateway, request, reply, spec.endpoint, spec.protocol, hooks)
  const p: Pipe = { gateway, hooks, request, reply, call }
  call.resolved(null, false, spec.asked)
  let tool: ToolTarget
  let body: Json
  try {
    tool = await spec.resolve()
    call.resolved(null, false, tool.model)
    call.routedTo(tool.provider)
    call.pricedPerCall(tool.priceNano)
    body = await admit(p, null, tool.body)
  } catch (err) {
    throw await refused(p, spec, err)
  }
  const abort = new AbortController()
  call.abort.once('abort', () => { abort.abort() })
  const report = (outcome: AttemptOutcome, start: number, error?: unknown): AttemptReport =>
    ({ provider: tool.provider, model: tool.model, outcome, status: null, start, end: performance.now(), n: 1, retry: false, failover: false, error })
  // the server's messages pass the hooks one after the other; a refusal of one cancels the call
  let relayed: Promise<void> = Promise.resolve()
  let blocked: unknown = null
  const during: DuringCall = {
    signal: abort.signal,
    message: (message, deliver, hooked) => {
      relayed = relayed.then(async () => {
        if (blocked !== null) return
        if (!hooked) { deliver(message); return }
        try {
          deliver(await responseHooks(p, message))
        } catch (err) {
          blocked = err
          abort.abort()
        }
      })
    }
  }
  const start = performance.now()
  call.attemptStarted(tool.provider)
  let result: Json
  try {
    result = await spec.invoke(body, during)
  } catch (err) {
    if (blocked !== null) {
      call.attemptEnded(report('aborted', start))
      throw await refused(p, spec, blocked)
    }
    if (abort.signal.aborted) {
      // the client left: the call ends as a client abort (Call.closed)
      call.attemptEnded(report('aborted', start))
      throw err
    }
    const f = spec.failed(err)
    call.attemptEnded(report(f.outcome, start, f.error))
    if (f.raise === undefined) return await ended(p, f.status, f.answer)
    // the server's own error, relayed as it is but for what the hooks change
    await relayed
    const answer = await filtered(p, spec, f.answer)
    throw await ended(p, f.status, f.raise(answer))
  }
  await relayed
  if (blocked !== null) {
    call.attemptEnded(report('ok', start))
    throw await refused(p, spec, blocked)
  }
  call.attemptEnded(report('ok', start))
  call.firstByte()
  const out = await filtered(p, spec, result)
  if (call.keepsContent) call.answered(JSON.stringify(out))
  return await ended(p, 'ok', out)
}

/** A call refused (at admission, or its answer by a hook): it ends, and the refusal is the route's error. */
async function refused (p: Pipe, spec: ToolCallSpec, err: unknown): Promise<Error> {
  const known = isGatewayError(err) ? err : new Internal({ trace_id: p.request.id })
  if (!isGatewayError(err)) p.request.log.error({ err }, 'unhandled error')
  p.call.answering()
  try {
    await p.call.endOnError(known.statusCode, refusalCode(known))
  } catch (endErr) {
    p.request.log.error({ err: endErr }, 'end-of-call work failed')
  }
  return spec.refusal(known)
}

/** Ends a call with its answer: the usage record, the charge and the counts are in before it goes out. */
async function ended<T> (p: Pipe, status: 'ok' | 'upstream_error' | 'timeout', out: T): Promise<T> {
  p.call.answering()
  try {
    await p.call.end({ status, usage: null, complete: true, httpStatus: 200 })
  } catch (err) {
    p.request.log.error({ err }, 'end-of-call work failed')
  }
  return out
}

/** What the response hooks left of an answer; a hook's refusal ends the call and is thrown as the route's error. */
async function filtered (p: Pipe, spec: ToolCallSpec, body: Json): Promise<Json> {
  try {
    return await responseHooks(p, body)
  } catch (err) {
    throw await refused(p, spec, err)
  }
}
