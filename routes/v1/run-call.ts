import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Endpoint } from '../../plugins/api/index.js'
import { upstreamModelOn, type CatalogModel, type ModelKind } from '../../engine/gateway/catalog.js'
import { BodyObjects, topLevelObjects } from '../../engine/gateway/body-objects.js'
import { callOf, hooksOf } from '../../engine/gateway/core.js'
import { admit, globsOf, grantedModel, objectProviders } from '../../engine/gateway/gate.js'
import { Chain, fallbackClass, promptCount } from '../../engine/gateway/fallbacks.js'
import type { FallbackClass } from '../../config/schema.js'
import { answerFromPlugin, relayJson, relayStream, send, translateCtx, type Pipe } from '../../engine/gateway/pipeline.js'
import { then, type MaybePromise } from '../../engine/kernel/maybe-promise.js'
import { upstreamPath } from '../../engine/translation/index.js'
import type { Json, Protocol, TranslateCtx, TranslatorPair, UpstreamProtocol, WholePair } from '../../engine/translation/types.js'
import { messagesHeaders, servedOn } from '../../engine/upstream/dispatch.js'
import type { UpstreamClient } from '../../engine/upstream/types.js'

// The one way a metered /v1 route runs a call to a catalog model: resolve the model the key may
// call, check the body against it, keep to the providers that hold the objects the body names,
// admit (the plugins' admission hooks, which may answer it), build the translation context, send
// to the providers through the pair of each provider's protocol, relay the answer (whole or
// streamed), end the call. A route declares only what differs: its client protocol, the kind of
// model and of call, its pairs, and what it checks or fills in beyond the shared steps.

/** A pair the runner sends through: every call has a request, answer and error; a streamed one a stream too. */
export type CallPair = WholePair | TranslatorPair

/** What a route declares of one call. */
export interface CallSpec {
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

interface Translated { pair: CallPair, body: Json, dropped: string[] }

/** The runner of a route's calls: each request's call run as the route declares it. */
export function callRunner (fastify: FastifyInstance): (request: FastifyRequest, reply: FastifyReply, spec: CallSpec) => Promise<FastifyReply | Json> {
  const gateway = fastify.gateway
  const hooks = hooksOf(gateway)
  // runCall is async (it cannot throw here): its promise is the route's, with no async layer of its own around it
  return (request, reply, spec) => runCall({ gateway, hooks, request, reply, call: callOf(request), arrayStream: spec.arrayStream }, spec)
}

/** Runs one call as `spec` declares it; resolves with the reply sent (or being streamed), or a whole answer made here. */
async function runCall (p: Pipe, spec: CallSpec): Promise<FastifyReply | Json> {
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
async function walk (p: Pipe, spec: CallSpec, chain: Chain, admitted: Json, reachable: readonly string[]): Promise<FastifyReply | Json> {
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
async function readyFor (p: Pipe, spec: CallSpec, model: CatalogModel, admitted: Json): Promise<{ body: Json, reachable: readonly string[] }> {
  const objects = new BodyObjects(spec.protocol)
  const body = spec.prepare === undefined ? admitted : await spec.prepare(p, model, structuredClone(admitted), objects)
  topLevelObjects(body, objects)
  const reachable = await objectProviders(p, model.providers, objects)
  spec.refuse?.(p, model)
  return { body, reachable }
}

/** One model's turn: sent to its providers, its answer relayed (a whole one read before the client has a byte); `local`: a count may be made here when no provider can take it. */
async function sendTo (p: Pipe, spec: CallSpec, model: CatalogModel, body: Json, reachable: readonly string[], local: boolean): Promise<FastifyReply | Json> {
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
function translator (spec: CallSpec, body: Json): (up: UpstreamProtocol, ctx: TranslateCtx) => Translated {
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
