import type { ModelConfig, Routing } from '../../config/schema.js'
import { pricePerToken } from './money.js'

/**
 * What a model does, from its `architecture.output_modalities`: any model that writes text is a
 * chat model; one that only gives embeddings, or only images, is served by the embeddings or the
 * image generation route and refused by the others.
 */
export type ModelKind = 'chat' | 'embeddings' | 'image'

export function modelKind (outputModalities: readonly string[]): ModelKind {
  if (outputModalities.includes('text')) return 'chat'
  if (outputModalities.includes('embeddings')) return 'embeddings'
  if (outputModalities.includes('image')) return 'image'
  return 'chat'
}

/** Prices in nano-dollars per token. */
export interface Price { input: number, cached_input: number, output: number }

/** The spec's model object: what GET /v1/models returns. No price, ever. */
export interface PublicModel {
  id: string
  object: 'model'
  name: string
  context_length: number
  architecture: { input_modalities: string[], output_modalities: string[] }
  supported_parameters: string[]
  default_parameters: Record<string, unknown>
}

export interface CatalogModel {
  id: string
  config: ModelConfig
  /** Provider ids, in config order. */
  providers: string[]
  /** Each provider's weight (routing: weighted), in the order of `providers`; 1 when not given. */
  weights: number[]
  routing: Routing
  upstreamModel: string
  active: boolean
  kind: ModelKind
  price: Price | null
  inputModalities: ReadonlySet<string>
  supportedParameters: ReadonlySet<string>
  public: PublicModel
}

function toCatalogModel (m: ModelConfig): CatalogModel {
  const refs = Array.isArray(m.provider) ? m.provider : [m.provider]
  const price = m.pricing === undefined
    ? null
    : {
        input: pricePerToken(m.pricing.input),
        // no cached rate configured: cached input bills at the input rate (the billing rule, docs/api.md)
        cached_input: pricePerToken(m.pricing.cached_input ?? m.pricing.input),
        output: pricePerToken(m.pricing.output)
      }
  return {
    id: m.id,
    config: m,
    providers: refs.map((r) => typeof r === 'string' ? r : r.id),
    weights: refs.map((r) => typeof r === 'string' ? 1 : r.weight),
    routing: m.routing,
    upstreamModel: m.upstream_model ?? m.id,
    active: m.status === 'active',
    kind: modelKind(m.architecture.output_modalities),
    price,
    inputModalities: new Set(m.architecture.input_modalities),
    supportedParameters: new Set(m.supported_parameters),
    public: {
      id: m.id,
      object: 'model',
      name: m.name,
      context_length: m.context_length,
      architecture: { input_modalities: m.architecture.input_modalities, output_modalities: m.architecture.output_modalities },
      supported_parameters: m.supported_parameters,
      default_parameters: m.default_parameters
    }
  }
}

/** `anthropic/*` → a matcher; `*` spans slashes, since model ids contain them. */
export function globMatcher (globs: readonly string[]): (id: string) => boolean {
  if (globs.includes('*')) return () => true
  const source = globs.map((g) => '^' + g.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*') + '$').join('|')
  const re = new RegExp(source)
  return (id) => re.test(id)
}

export class Catalog {
  private readonly byId = new Map<string, CatalogModel>()
  private readonly matchers = new Map<string, (id: string) => boolean>()
  private readonly kinds = new Set<ModelKind>()

  constructor (models: ModelConfig[]) {
    for (const m of models) {
      const model = toCatalogModel(m)
      this.byId.set(m.id, model)
      if (model.active) this.kinds.add(model.kind)
    }
  }

  /** Some active model of the catalog is of this kind (whatever a key may see). */
  serves (kind: ModelKind): boolean { return this.kinds.has(kind) }

  all (): CatalogModel[] { return [...this.byId.values()] }

  /**
   * The model a provider's own API call names (pass-through): the one of that provider whose
   * upstream model name is `name`, else the one whose id is `name`.
   */
  forUpstream (provider: string, name: string): CatalogModel | undefined {
    let found: CatalogModel | undefined
    for (const m of this.byId.values()) {
      if (!m.providers.includes(provider)) continue
      if (m.upstreamModel === name) return m
      if (m.id === name) found = m
    }
    return found
  }
  /** Any model by id, whatever its status (billing a call that started before a change). */
  get (id: string): CatalogModel | undefined { return this.byId.get(id) }
  active (): CatalogModel[] { return this.all().filter((m) => m.active) }

  private matcher (globs: readonly string[]): (id: string) => boolean {
    const cacheKey = globs.join('\n')
    let m = this.matchers.get(cacheKey)
    if (m === undefined) {
      m = globMatcher(globs)
      this.matchers.set(cacheKey, m)
    }
    return m
  }

  /** The active model if these globs may see it (null globs: no key restriction). */
  find (id: string, globs: readonly string[] | null): CatalogModel | undefined {
    const m = this.byId.get(id)
    if (m === undefined || !m.active) return undefined
    if (globs !== null && !this.matcher(globs)(id)) return undefined
    return m
  }

  visible (globs: readonly string[] | null): CatalogModel[] {
    if (globs === null) return this.active()
    const match = this.matcher(globs)
    return this.active().filter((m) => match(m.id))
  }
}
