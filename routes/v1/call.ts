import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Gateway } from '../../plugins/api/index.js'
import type { CatalogModel } from '../../plugins/gateway/catalog.js'
import { callOf, hooksOf } from '../../plugins/gateway/core.js'
import { UnsupportedOnUpstream } from '../../plugins/kernel/errors.js'
import { BodyObjects, topLevelObjects } from '../../plugins/gateway/body-objects.js'
import { admit, grantedModel, objectProviders } from '../../plugins/gateway/gate.js'
import { answerFromPlugin, relayJson, relayStream, send, translateCtx, type Pipe } from '../../plugins/gateway/pipeline.js'
import { GeminiBody } from '../../plugins/gateway/request-schemas.js'
import { applyParameters, checkMedia, checkMediaHostsByDns, validBody } from '../../plugins/gateway/validation.js'
import { refuseStateful } from '../../plugins/translation/responses-request.js'
import { then, type MaybePromise } from '../../plugins/kernel/maybe-promise.js'
import { pairFor, upstreamPath } from '../../plugins/translation/index.js'
import type { Json, Protocol, TranslateCtx, TranslatorPair } from '../../plugins/translation/types.js'
import { messagesHeaders } from '../../plugins/upstream/dispatch.js'
import type { UpstreamClient } from '../../plugins/upstream/types.js'

// The handler of the model call routes: POST /v1/chat/completions ('openai' clients),
// /v1/messages ('messages'), /v1/responses ('responses') and Gemini's generateContent
// ('gemini'). Check the body and resolve the model, keep to the providers that hold the objects
// the body names (if it names any), then the pipeline: admission hooks, dispatch to those
// providers through the translator pair of each provider's protocol, the relay of the answer,
// the end of the call.

interface Translated { pair: TranslatorPair, body: Json, dropped: string[] }

/** What a route's URL says of a call, where its body does not (Gemini: the model, and whether and how to stream). */
export interface CallTarget {
  model: string
  stream: boolean
  /** A stream goes out as one JSON array of chunks rather than as SSE. */
  arrayStream?: boolean
}

export function callHandler (fastify: FastifyInstance, protocol: Protocol) {
  const gateway = fastify.gateway
  const hooks = hooksOf(gateway)

  return async function handle (request: FastifyRequest, reply: FastifyReply, target?: CallTarget): Promise<FastifyReply> {
    const p: Pipe = { gateway, hooks, request, reply, call: callOf(request), arrayStream: target?.arrayStream }
    const { model, valid } = resolve(p, protocol, target)
    const objects = new BodyObjects(protocol)
    const { body, providers } = await then(checked(p, model, valid, objects), (b) =>
      then(objectProviders(p, model.providers, objects), (reachable) => then(admit(p, model, b, true), (admitted) => ({ body: admitted, providers: reachable }))))
    const ctx = translateCtx(p, model, body)
    const answered = p.call.pluginAnswer
    if (answered !== null) return await answerFromPlugin(p, answered, ctx)
    const translate = translator(body, ctx, protocol)
    refuseUnmappable(gateway, request, model, protocol)
    const answer = await send(p, {
      providers,
      policy: model,
      model,
      plan: (upstream) => {
        const up = upstreamProtocol(protocol, upstream)
        const t = translate(up)
        return { path: upstreamPath(t.pair, ctx), body: t.body, protocol: up, headers: up === 'messages' ? messagesHeaders(request) : undefined, error: t.pair.error }
      }
    })
    const { pair, dropped } = translate(answer.attempt.protocol)
    p.call.dropParams(dropped)
    return p.call.stream ? relayStream(p, answer, { pair, ctx }) : await relayJson(p, answer, { pair, ctx })
  }
}

/** The body (its shape checked by its route's schema; Gemini's here), and the catalog model it (or the URL) names among those the key may use. */
function resolve (p: Pipe, protocol: Protocol, target: CallTarget | undefined): { model: CatalogModel, valid: Json } {
  const valid = protocol === 'gemini' ? validBody(GeminiBody, p.request.body) : p.request.body as Json
  if (protocol === 'responses') refuseStateful(valid)
  const name = target?.model ?? valid.model as string
  const model = grantedModel(p.gateway, p.request.principal, name, 'chat')
  p.call.resolved(model, target?.stream ?? valid.stream === true)
  return { model, valid }
}

/**
 * Media checked against the model and the URL rules; fields the model does not take dropped, its
 * defaults filled in; what the body sent names of the provider accounts noted in `objects`.
 */
function checked (p: Pipe, model: CatalogModel, valid: Json, objects: BodyObjects): MaybePromise<Json> {
  const protocol = p.call.modelProtocol
  const hosts = checkMedia(valid, model, protocol, objects)
  const { body, dropped } = applyParameters(valid, model, protocol)
  topLevelObjects(body, objects)
  p.call.dropParams(dropped)
  // the operator's choice: media hosts resolved and checked too (a DNS lookup per call)
  const resolved = p.gateway.config.server.media_urls.resolve_hosts && hosts.length > 0 ? checkMediaHostsByDns(hosts) : undefined
  return then(resolved, () => body)
}

/** The upstream body for each upstream protocol, made once per protocol however many providers are tried. */
function translator (body: Json, ctx: TranslateCtx, client: Protocol): (up: Protocol) => Translated {
  const byProtocol = new Map<Protocol, Translated>()
  return (up) => {
    let t = byProtocol.get(up)
    if (t === undefined) {
      const pair = pairFor(client, up)
      const r = pair.request(body, ctx)
      t = { pair, body: r.body, dropped: r.dropped }
      byProtocol.set(up, t)
    }
    return t
  }
}

/** The protocol a provider is spoken to in for a client: native Responses where the provider serves it. */
function upstreamProtocol (client: Protocol, upstream: UpstreamClient): Protocol {
  return client === 'responses' && upstream.responses ? 'responses' : upstream.protocol
}

// `n` may have been dropped as unsupported; towards a Messages upstream it is refused anyway
function refuseUnmappable (gateway: Gateway, request: FastifyRequest, model: CatalogModel, client: Protocol): void {
  const n = (request.body as Json).n
  if (client === 'openai' && typeof n === 'number' && n > 1 && gateway.upstreams.candidates(model.providers, model).some((u) => u.protocol === 'messages')) {
    throw new UnsupportedOnUpstream({ feature: 'n > 1', model: model.id })
  }
}
