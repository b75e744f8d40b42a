import type { CatalogModel, ModelKind } from '../../engine/gateway/catalog.js'
import type { BodyObjects } from '../../engine/gateway/body-objects.js'
import type { Pipe } from '../../engine/gateway/pipeline.js'
import { wholePairFor, type WholeKind } from '../../engine/translation/index.js'
import type { Json, Protocol } from '../../engine/translation/types.js'
import type { CallSpec } from './run-call.js'

// The calls answered whole, never streamed: embeddings (OpenAI's POST /v1/embeddings, Google's
// embedContent and batchEmbedContents) and image generation (POST /v1/images/generations),
// declared for the call runner (run-call.ts) as chat calls are: the pair of each provider's
// protocol (providers whose protocol has no such call are skipped), the pairs reading what the
// client asked for (its encoding, a batch or a single embedding) in the client's request.

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

/** A call answered whole as its route declares it to the runner. */
export function wholeCall (w: WholeCall): CallSpec {
  return {
    protocol: w.client,
    modelKind: w.model,
    name: w.name,
    body: w.body,
    objects: w.objects,
    pairFor: (up) => wholePairFor(w.kind, w.client, up),
    prepare: w.defaults ? (_p: Pipe, model: CatalogModel, body: Json) => withDefaults(body, model) : undefined,
    answerable: w.answerable,
    clientRequest: true
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
