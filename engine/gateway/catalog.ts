import { isAlias, type FallbackClass, type ModelConfig, type ModelEntry, type PriceTierConfig, type PricingConfig, type Routing } from '../../config/schema.js'
import { pricePerToken, usdToNano } from '../kernel/money.js'

/** Token rates in nano-dollars per token. */
export interface Rates {
  input: number
  /** Cache reads. */
  cached_input: number
  output: number
  /** 5-minute cache writes; the input rate when absent. */
  cache_write?: number
  /** 1-hour cache writes; the cache_write rate when absent. */
  cache_write_1h?: number
  /** Audio input tokens not read from a cache; the input rate when absent. */
  input_audio?: number
  /** Audio output tokens; the output rate when absent. */
  output_audio?: number
}

/** The rates of a call whose prompt_tokens exceed `above`. */
export interface PriceTier extends Rates { above: number }

/** A model's price sheet: token rates in nano-dollars per token, per_request and per_image in nano-dollars. */
export interface Price extends Rates {
  /** Long-context tiers, in increasing order of `above`. */
  tiers?: readonly PriceTier[]
  /** Flat, per billed call. */
  per_request?: number
  /** Per image generated: the price for a request's `size` (`default` for any other size). */
  per_image?: ReadonlyMap<string, number>
  /** Per use of a tool the provider runs (web_search, code_execution...), by its kind. */
  server_tools?: ReadonlyMap<string, number>
}

/** A rate sheet's rates in nano-dollars per token, each default applied (the billing rule, docs/api.md). */
function ratesOf (p: PricingConfig | PriceTierConfig): Rates {
  const input = pricePerToken(p.input)
  const cacheWrite = pricePerToken(p.cache_write ?? p.input)
  const output = p.output === undefined ? 0 : pricePerToken(p.output)
  return {
    input,
    // no cached rate configured: cached input bills at the input rate
    cached_input: pricePerToken(p.cached_input ?? p.input),
    output,
    cache_write: cacheWrite,
    cache_write_1h: p.cache_write_1h === undefined ? cacheWrite : pricePerToken(p.cache_write_1h),
    input_audio: p.input_audio === undefined ? input : pricePerToken(p.input_audio),
    output_audio: p.output_audio === undefined ? output : pricePerToken(p.output_audio)
  }
}

/** A model's pricing as the charge reads it (null: no public price). */
export function priceOf (pricing: PricingConfig | undefined): Price | null {
  if (pricing === undefined) return null
  const price: Price = ratesOf(pricing)
  if (pricing.tiers !== undefined) price.tiers = pricing.tiers.map((t) => ({ ...ratesOf(t), above: t.above_input_tokens }))
  if (pricing.per_request !== undefined) price.per_request = usdToNano(pricing.per_request)
  if (pricing.per_image !== undefined) {
    price.per_image = new Map(typeof pricing.per_image === 'number'
      ? [['default', usdToNano(pricing.per_image)]]
      : Object.entries(pricing.per_image).map(([size, usd]) => [size, usdToNano(usd)]))
  }
  if (pricing.server_tools !== undefined) price.server_tools = new Map(Object.entries(pricing.server_tools).map(([kind, usd]) => [kind, usdToNano(usd)]))
  return price
}

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

/**
 * What a model makes, from its `architecture.output_modalities`: an embedding model (`[embeddings]`),
 * an image model (`[image]`), or a chat model (anything with `text`). A route serves one kind.
 */
export type ModelKind = 'chat' | 'embeddings' | 'image'

export function kindOf (outputModalities: readonly string[]): ModelKind {
  if (outputModalities.includes('text')) return 'chat'
  if (outputModalities.includes('embeddings')) return 'embeddings'
  if (outputModalities.includes('image')) return 'image'
  return 'chat'
}

/** Other models a call moves on to when this one cannot answer for one of `on`. */
export interface FallbackRule {
  models: readonly string[]
  on: ReadonlySet<FallbackClass>
}

export interface CatalogModel {
  id: string
  kind: ModelKind
  /** The model's entry; an alias's is its first target's (its context, limits and parameters). */
  config: ModelConfig
  /** An alias: the models it stands for, in the order they are tried; null for a model. */
  aliasOf: readonly string[] | null
  /** The model's fallbacks (none for an alias: its targets have their own). */
  fallbacks: readonly FallbackRule[]
  /** Provider ids, in config order. */
  providers: string[]
  /** Each provider's weight (routing: weighted), in the order of `providers`; 1 when not given. */
  weights: number[]
  routing: Routing
  /** The model's name upstream (`upstream_model`, else its id). */
  upstreamModel: string
  /** Its name on each provider, in the order of `providers`: the entry's own upstream_model, else upstreamModel. */
  upstreamModels: string[]
  active: boolean
  price: Price | null
  inputModalities: ReadonlySet<string>
  supportedParameters: ReadonlySet<string>
  public: PublicModel
}

function toCatalogModel (m: ModelConfig): CatalogModel {
  const refs = Array.isArray(m.provider) ? m.provider : [m.provider]
  const price = priceOf(m.pricing)
  const upstreamModel = m.upstream_model ?? m.id
  return {
    id: m.id,
    config: m,
    aliasOf: null,
    fallbacks: (m.fallbacks ?? []).map((r) => ({ models: r.models, on: new Set(r.on) })),
    providers: refs.map((r) => typeof r === 'string' ? r : r.id),
    weights: refs.map((r) => typeof r === 'string' ? 1 : r.weight ?? 1),
    kind: kindOf(m.architecture.output_modalities),
    routing: m.routing,
    upstreamModel,
    upstreamModels: refs.map((r) => typeof r === 'string' ? upstreamModel : r.upstream_model ?? upstreamModel),
    active: m.status === 'active',
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

/** The model's name on a provider of its list (the model's upstream name for any other). */
export function upstreamModelOn (model: Pick<CatalogModel, 'providers' | 'upstreamModels' | 'upstreamModel'>, provider: string | null): string {
  const i = provider === null ? -1 : model.providers.indexOf(provider)
  return i === -1 ? model.upstreamModel : model.upstreamModels[i] as string
}

/**
 * `anthropic/*` → a matcher; `*` spans slashes, since model ids contain them. An empty list
 * grants nothing (a key whose list was emptied may call no model, never every model).
 */
export function globMatcher (globs: readonly string[]): (id: string) => boolean {
  if (globs.length === 0) return () => false
  if (globs.includes('*')) return () => true
  const source = globs.map((g) => '^' + g.split('*').map((part) => part.replace(/[.+?^${}()|[\]\\]/g, '\\$&')).join('.*') + '$').join('|')
  const re = new RegExp(source)
  return (id) => re.test(id)
}

export class Catalog {
  private readonly byId = new Map<string, CatalogModel>()
  private readonly matchers = new Map<string, (id: string) => boolean>()
  private readonly served: CatalogModel[]
  private readonly kinds = new Set<ModelKind>()

  /**
   * `usable`: whether a provider can be called at all (upstream/ knows: a built-in one, or one
   * given credentials). A model none of whose providers is usable is listed nowhere; a call to it
   * still reaches dispatch, which says what is missing.
   */
  constructor (models: readonly ModelEntry[], usable: (provider: string) => boolean = () => true) {
    for (const m of models) {
      if (isAlias(m)) continue
      const model = toCatalogModel(m as ModelConfig)
      this.byId.set(m.id, model)
      if (model.active) this.kinds.add(model.kind)
    }
    // an alias shows its first target's fields under its own id and name (config checks: its targets are models of one kind)
    for (const m of models) {
      if (!isAlias(m)) continue
      const first = this.byId.get(m.alias_of[0] as string)
      if (first === undefined) continue
      const name = m.name ?? m.id
      this.byId.set(m.id, {
        ...first,
        id: m.id,
        aliasOf: m.alias_of,
        fallbacks: [],
        active: m.status === 'active',
        public: { ...first.public, id: m.id, name }
      })
    }
    this.served = this.all().filter((m) => m.active && m.providers.some(usable))
  }

  /** Some active model of the catalog is of this kind (whatever a key may see). */
  serves (kind: ModelKind): boolean { return this.kinds.has(kind) }

  all (): CatalogModel[] { return [...this.byId.values()] }

  /**
   * The active model a provider's own API call names (pass-through), if these globs may see it:
   * the model of that provider whose upstream name is `name`, or, when `name` is a dated or
   * versioned snapshot of an upstream name (`gpt-4o-2024-08-06`, `claude-sonnet-4-5-20250929`,
   * `gemini-2.0-flash-001`), the model of that name.
   */
  forUpstream (provider: string, name: string, globs: readonly string[] | null): CatalogModel | undefined {
    const base = snapshotBase(name)
    let bySnapshot: CatalogModel | undefined
    for (const m of this.byId.values()) {
      // an alias is no provider's model: its targets are
      if (!m.active || m.aliasOf !== null || !m.providers.includes(provider)) continue
      const there = upstreamModelOn(m, provider)
      if (there === name) return this.granted(m, globs)
      if (base !== null && there === base) bySnapshot ??= m
    }
    return bySnapshot === undefined ? undefined : this.granted(bySnapshot, globs)
  }

  private granted (m: CatalogModel, globs: readonly string[] | null): CatalogModel | undefined {
    return globs === null || this.matcher(globs)(m.id) ? m : undefined
  }

  /**
   * Every model a call to `model` may be answered by, in the order they would be tried: an
   * alias's targets (granted through it), each model's fallbacks for every class, and theirs on,
   * once each; a fallback these globs do not grant is left out, an inactive model too. The first
   * is the model itself (an alias: its first target). For the holds taken before the first is sent.
   */
  reach (model: CatalogModel, globs: readonly string[] | null): CatalogModel[] {
    const out: CatalogModel[] = []
    const seen = new Set<string>()
    const granted = globs === null ? () => true : this.matcher(globs)
    const visit = (m: CatalogModel, viaAlias: boolean): void => {
      if (seen.has(m.id)) return
      seen.add(m.id)
      if (m.aliasOf !== null) {
        for (const id of m.aliasOf) {
          const t = this.byId.get(id)
          if (t !== undefined && t.active) visit(t, true)
        }
        return
      }
      if (!viaAlias && out.length > 0 && !granted(m.id)) return
      out.push(m)
      for (const rule of m.fallbacks) {
        for (const id of rule.models) {
          const f = this.byId.get(id)
          if (f !== undefined && f.active && granted(id)) visit(f, false)
        }
      }
    }
    visit(model, true)
    return out
  }

  /** Whether these globs grant the model `id` (null: no key restriction). */
  grants (id: string, globs: readonly string[] | null): boolean {
    return globs === null || this.matcher(globs)(id)
  }

  /** Any model by id, whatever its status (billing a call that started before a change). */
  get (id: string): CatalogModel | undefined { return this.byId.get(id) }
  /** The models that are listed: active, with a provider that can be called. */
  available (): CatalogModel[] { return this.served }
  /** The active models that are not listed: none of their providers can be called. */
  unserved (): CatalogModel[] { return this.all().filter((m) => m.active && !this.served.includes(m)) }

  private matcher (globs: readonly string[]): (id: string) => boolean {
    const cacheKey = globs.join('\n')
    let m = this.matchers.get(cacheKey)
    if (m === undefined) {
      m = globMatcher(globs)
      this.matchers.set(cacheKey, m)
    }
    return m
  }

  /** The active model to call if these globs may see it (null globs: no key restriction). */
  find (id: string, globs: readonly string[] | null): CatalogModel | undefined {
    const m = this.byId.get(id)
    if (m === undefined || !m.active) return undefined
    return this.granted(m, globs)
  }

  /** The model to show (GET /v1/models/{id}) if these globs may see it: as find, and listed. */
  shown (id: string, globs: readonly string[] | null): CatalogModel | undefined {
    const m = this.find(id, globs)
    return m !== undefined && this.served.includes(m) ? m : undefined
  }

  /** The listed models these globs may see. */
  visible (globs: readonly string[] | null): CatalogModel[] {
    if (globs === null) return this.served
    const match = this.matcher(globs)
    return this.served.filter((m) => match(m.id))
  }
}

// A snapshot's suffix: a date (`-2024-08-06`, `-20250929`, Vertex's `@20240620`), a version
// number (`-001`, `-v2`, `-v1.5`) or the `-latest` alias.
const SNAPSHOT = /(?:-\d{4}-\d{2}-\d{2}|-\d{8}|@\d{8}|-\d{3}|-v\d+(?:\.\d+)*|-latest)$/

/** The upstream name a snapshot name stands for, or null when `name` is no snapshot's. */
export function snapshotBase (name: string): string | null {
  const m = SNAPSHOT.exec(name)
  return m === null || m.index === 0 ? null : name.slice(0, m.index)
}
