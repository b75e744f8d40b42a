import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { CatalogModel } from '../../engine/gateway/catalog.js'
import type { BodyObjects } from '../../engine/gateway/body-objects.js'
import type { Pipe } from '../../engine/gateway/pipeline.js'
import { GeminiBody } from '../../engine/gateway/request-schemas.js'
import { applyParameters, checkMedia, checkMediaHostsByDns, validBody } from '../../engine/gateway/validation.js'
import { UnsupportedOnUpstream } from '../../engine/kernel/errors.js'
import { then, type MaybePromise } from '../../engine/kernel/maybe-promise.js'
import { pairOf } from '../../engine/translation/index.js'
import { refuseStateful } from '../../engine/protocols/responses/request.js'
import type { Json, Protocol } from '../../engine/translation/types.js'
import { callRunner, type CallSpec } from './run-call.js'

// The model call routes: POST /v1/chat/completions ('openai' clients), /v1/messages
// ('messages'), /v1/responses ('responses') and Gemini's generateContent ('gemini'), declared
// for the call runner (run-call.ts): the body as the route's schema checked it, the model it (or
// the URL) names, its media checked and the parameters the model does not take dropped, then
// the pair of each provider's protocol.

/** What a route's URL says of a call, where its body does not (Gemini: the model, and whether and how to stream). */
export interface CallTarget {
  model: string
  stream: boolean
  /** A stream goes out as one JSON array of chunks rather than as SSE. */
  arrayStream?: boolean
}

export function callHandler (fastify: FastifyInstance, protocol: Protocol) {
  const run = callRunner(fastify)
  return async function handle (request: FastifyRequest, reply: FastifyReply, target?: CallTarget): Promise<FastifyReply | Json> {
    return await run(request, reply, modelCall(request, protocol, target))
  }
}

/** A model call as its route declares it to the runner. */
function modelCall (request: FastifyRequest, protocol: Protocol, target: CallTarget | undefined): CallSpec {
  const body = protocol === 'gemini' ? validBody(GeminiBody, request.body) : request.body as Json
  if (protocol === 'responses') refuseStateful(body)
  return {
    protocol,
    modelKind: 'chat',
    name: target?.model ?? body.model as string,
    body,
    stream: target?.stream ?? body.stream === true,
    arrayStream: target?.arrayStream,
    pairFor: (up) => pairOf(protocol, up),
    prepare: checked,
    answerable: true,
    refuse: protocol === 'openai' ? refuseUnmappable : undefined
  }
}

/**
 * Media checked against the model and the URL rules; fields the model does not take dropped, its
 * defaults filled in; what the media name of the provider accounts noted in `objects`.
 */
function checked (p: Pipe, model: CatalogModel, valid: Json, objects: BodyObjects): MaybePromise<Json> {
  const protocol = p.call.modelProtocol
  const hosts = checkMedia(valid, model, protocol, objects)
  const { body, dropped } = applyParameters(valid, model, protocol)
  p.call.dropParams(dropped)
  // the operator's choice: media hosts resolved and checked too (a DNS lookup per call)
  const resolved = p.gateway.config.server.media_urls.resolve_hosts && hosts.length > 0 ? checkMediaHostsByDns(hosts) : undefined
  return then(resolved, () => body)
}

// `n` may have been dropped as unsupported; towards a Messages upstream it is refused anyway
function refuseUnmappable (p: Pipe, model: CatalogModel): void {
  const n = (p.request.body as Json).n
  if (typeof n === 'number' && n > 1 && p.gateway.upstreams.candidates(model.providers, model).some((u) => u.protocol === 'messages')) {
    throw new UnsupportedOnUpstream({ feature: 'n > 1', model: model.id })
  }
}
