import type { FastifyReply } from 'fastify'
import type { CatalogModel, ModelKind } from '../../plugins/gateway/catalog.js'
import type { BodyObjects } from '../../plugins/gateway/body-objects.js'
import { admit, grantedModel, objectProviders } from '../../plugins/gateway/gate.js'
import { answerFromPlugin, relayJson, send, translateCtx, type Pipe } from '../../plugins/gateway/pipeline.js'
import { then, type MaybePromise } from '../../plugins/kernel/maybe-promise.js'
import { upstreamPath, wholePairFor, type WholeKind } from '../../plugins/translation/index.js'
import type { Json, Protocol, TranslateCtx, WholePair } from '../../plugins/translation/types.js'

// The calls answered whole, never streamed: embeddings (OpenAI's POST /v1/embeddings, Google's
// embedContent and batchEmbedContents) and image generation (POST /v1/images/generations). The
// same pipeline as chat: admission, dispatch to the model's providers through the pair of each
// provider's protocol (providers whose protocol has no such call are skipped), the relay of the
// whole answer through the response hooks, the end of the call.

export interface WholeCall {
  kind: WholeKind
  /** The kind of model the route serves. */
  model: ModelKind
  client: Protocol
  /** The catalog id the body (or the path) names. */
  name: string
  /** The client body, checked. */
  body: Json
  /** A plugin may answer the call at admission (the cache: embeddings are; images are never cached). */
  answerable: boolean
  /** The model's default_parameters fill the fields the client left out (OpenAI's shapes, whose names they use). */
  defaults: boolean
  /** What the body names of the provider accounts, noted as it was checked (body-objects.ts). */
  objects: BodyObjects
}

interface Translated { pair: WholePair, body: Json, dropped: string[] }

/**
 * Admission of a call to a catalog model of one kind, as every spending route admits: the model
 * the key may call and of the route's kind, the providers that hold the objects the body names,
 * then the admission hooks (idempotency, quota, balance, guardrails, cache). The one place this
 * route decides what it lets through.
 */
function admitWhole (p: Pipe, w: WholeCall): MaybePromise<{ model: CatalogModel, body: Json, reachable: readonly string[] }> {
  const model = grantedModel(p.gateway, p.request.principal, w.name, w.model)
  p.call.resolved(model, false)
  return then(objectProviders(p, model.providers, w.objects), (reachable) => {
    const body = w.defaults ? withDefaults(w.body, model) : w.body
    return then(admit(p, model, body, w.answerable), (admitted) => ({ model, body: admitted, reachable }))
  })
}

export async function wholeCall (p: Pipe, w: WholeCall): Promise<FastifyReply> {
  const { model, body, reachable } = await admitWhole(p, w)
  // the pairs read what the client asked for (its encoding, a batch or a single embedding) in clientRequest
  const ctx: TranslateCtx = { ...translateCtx(p, model, body), clientRequest: body }
  const answered = p.call.pluginAnswer
  if (answered !== null) return await answerFromPlugin(p, answered, ctx, wholePairFor(w.kind, w.client, w.client))
  const { upstreams } = p.gateway
  const providers = reachable.filter((id) => {
    const up = upstreams.get(id)
    return up !== undefined && wholePairFor(w.kind, w.client, up.protocol) !== undefined
  })
  const translate = translator(w, body, ctx)
  const answer = await send(p, {
    providers,
    policy: model,
    model,
    plan: (upstream) => {
      const t = translate(upstream.protocol)
      return { path: upstreamPath(t.pair, ctx), body: t.body, protocol: upstream.protocol, error: t.pair.error }
    }
  })
  const { pair, dropped } = translate(answer.attempt.protocol)
  p.call.dropParams(dropped)
  return await relayJson(p, answer, { pair, ctx })
}

/** The upstream body for each upstream protocol, made once per protocol however many providers are tried. */
function translator (w: WholeCall, body: Json, ctx: TranslateCtx): (up: Protocol) => Translated {
  const byProtocol = new Map<Protocol, Translated>()
  return (up) => {
    let t = byProtocol.get(up)
    if (t === undefined) {
      const pair = wholePairFor(w.kind, w.client, up)
      if (pair === undefined) throw new Error(`no ${w.kind} pair from ${w.client} clients to ${up} upstreams`)
      const r = pair.request(body, ctx)
      t = { pair, body: r.body, dropped: r.dropped }
      byProtocol.set(up, t)
    }
    return t
  }
}

function withDefaults (body: Json, model: CatalogModel): Json {
  const defaults = model.config.default_parameters
  let out: Json | null = null
  for (const [name, value] of Object.entries(defaults)) {
    if (body[name] !== undefined) continue
    out ??= { ...body }
    out[name] = value
  }
  return out ?? body
}
