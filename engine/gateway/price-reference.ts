import { calcPrice, findProvider, type ModelPrice, type PriceCalculation, type Provider, type TieredPrices } from '@pydantic/genai-prices'
import { isAlias, type Config, type ModelConfig, type PriceTierConfig, type PricingConfig, type ProviderConfig } from '../../config/schema.js'
import { ratesFor } from './billing.js'
import { priceOf, type Rates } from './catalog.js'
import { nanoToUsd, pricePerToken, usdToNano } from '../kernel/money.js'
import { packageVersion } from '../../paths.js'

// The maintained price database the gateway ships (@pydantic/genai-prices, installed as a
// dependency; its bundled data only: nothing is fetched at run time): a catalog entry for a
// known model, and every catalog price that differs from it. Load this module lazily: the
// database is large, and only `modelgate models` and GET /admin/v1/prices/check read it.

export const DATABASE = '@pydantic/genai-prices'

/** The database's version as installed, or null when it cannot be read. */
export function databaseVersion (): string | null {
  return packageVersion(DATABASE)
}

/** The database's name for the provider a config provider is: its id, else its base URL, else its protocol's maker. */
const BY_PROTOCOL: Record<ProviderConfig['protocol'], string> = { openai: 'openai', messages: 'anthropic', gemini: 'google', converse: 'aws' }
/** A cloud platform's own price list, where the database has one (Vertex AI bills as its publisher does). */
const BY_PLATFORM: Record<string, string | undefined> = { azure: 'azure', bedrock: 'aws' }

export function databaseProvider (p: Pick<ProviderConfig, 'id' | 'protocol' | 'base_url' | 'builtin'> & { platform?: ProviderConfig['platform'] }): Provider | undefined {
  if (p.builtin !== undefined) return undefined
  const platform = p.platform === undefined ? undefined : BY_PLATFORM[p.platform]
  return findProvider({ providerId: p.id }) ??
    (platform === undefined ? undefined : findProvider({ providerId: platform })) ??
    (p.base_url === undefined ? undefined : findProvider({ providerApiUrl: p.base_url })) ??
    findProvider({ providerId: BY_PROTOCOL[p.protocol] })
}

/** The database's record of a model of a provider, with the prices in force at `at`; undefined when it does not know it. */
export function lookup (provider: Provider, model: string, at: Date): PriceCalculation | undefined {
  try {
    return calcPrice({ input_tokens: 0 }, model, { provider, timestamp: at }) ?? undefined
  } catch {
    // a record the library cannot price (a price without the prices it derives from): unknown here
    return undefined
  }
}

// The database's price keys the catalog bills, per million tokens.
const TOKEN_KEYS = { input_mtok: 'input', cache_read_mtok: 'cached_input', cache_write_mtok: 'cache_write', cache_write_1h_mtok: 'cache_write_1h', output_mtok: 'output', input_audio_mtok: 'input_audio', output_audio_mtok: 'output_audio' } as const
type TokenField = typeof TOKEN_KEYS[keyof typeof TOKEN_KEYS]
const TOKEN_FIELDS = Object.values(TOKEN_KEYS)

// The database's per-thousand prices of tools a provider runs, as the kinds of `pricing.server_tools`.
const SERVER_TOOL_KEYS = new Map([['web_searches_kcount', 'web_search'], ['storage_searches_kcount', 'file_search']])

const isTiered = (v: unknown): v is TieredPrices => typeof v === 'object' && v !== null && 'tiers' in v
const baseOf = (v: number | TieredPrices): number => isTiered(v) ? v.base : v
/** A tiered value's price for a prompt that exceeds `above` (the base below its first tier). */
function priceAbove (v: number | TieredPrices, above: number): number {
  if (!isTiered(v)) return v
  let price = v.base
  for (const t of v.tiers) if (above >= t.start) price = t.price
  return price
}

/** A rate the catalog can bill exactly (three decimals of USD per million tokens), rounded up so it never undercharges. */
export function billable (usdPerMillion: number): number {
  return Math.ceil(Math.round(usdPerMillion * 1e9) / 1e6) / 1000
}

export interface ReferencePrice {
  /** The database's price sheet as the catalog writes it (rates rounded up to what it bills exactly). */
  pricing: PricingConfig
  /** The database's exact value of each field of `pricing` (`tiers[0].input`, ...). */
  exact: Map<string, number>
  /** Prices of the database the catalog does not bill (web searches, cached audio tokens, ...). */
  ignored: string[]
}

/**
 * A database price sheet in the catalog's terms. Tiers are those below `contextLength` (a tier
 * no prompt can reach is left out); `requests_kcount` becomes per_request.
 */
export function referencePricing (mp: ModelPrice, contextLength: number): ReferencePrice {
  const exact = new Map<string, number>()
  const ignored: string[] = []
  const pricing: Partial<PricingConfig> = {}
  const starts = new Set<number>()
  const tokenPrices: Array<[TokenField, number | TieredPrices]> = []
  for (const [key, value] of Object.entries(mp)) {
    if (value === undefined) continue
    const field = (TOKEN_KEYS as Record<string, TokenField | undefined>)[key]
    if (field !== undefined) {
      tokenPrices.push([field, value])
      if (isTiered(value)) for (const t of value.tiers) if (t.start < contextLength) starts.add(t.start)
    } else if (key === 'requests_kcount' && typeof value === 'number') {
      pricing.per_request = value / 1000
      exact.set('per_request', value / 1000)
    } else if (SERVER_TOOL_KEYS.has(key) && typeof value === 'number') {
      // a tool the provider runs, priced per use: what lets a call ask for it
      const kind = SERVER_TOOL_KEYS.get(key) as string
      pricing.server_tools = { ...pricing.server_tools, [kind]: value / 1000 }
      exact.set(`server_tools.${kind}`, value / 1000)
    } else {
      ignored.push(`${key} ${isTiered(value) ? JSON.stringify(value) : String(value)}`)
    }
  }
  // in the catalog's order
  tokenPrices.sort((a, b) => TOKEN_FIELDS.indexOf(a[0]) - TOKEN_FIELDS.indexOf(b[0]))
  for (const [field, value] of tokenPrices) {
    pricing[field] = billable(baseOf(value))
    exact.set(field, baseOf(value))
  }
  const tiers: PriceTierConfig[] = [...starts].sort((a, b) => a - b).map((start, i) => {
    const tier: PriceTierConfig = { above_input_tokens: start, input: 0 }
    for (const [field, value] of tokenPrices) {
      tier[field] = billable(priceAbove(value, start))
      exact.set(`tiers[${i}].${field}`, priceAbove(value, start))
    }
    return tier
  })
  const { per_request: perRequest, server_tools: serverTools, ...rates } = pricing
  const out: PricingConfig = { input: 0, ...rates }
  if (tiers.length > 0) out.tiers = tiers
  if (perRequest !== undefined) out.per_request = perRequest
  if (serverTools !== undefined) out.server_tools = serverTools
  return { pricing: out, exact, ignored }
}

// ---------------------------------------------------------------------------------------------
// A catalog entry

/** The catalog's parameters a model of each protocol takes, as the shipped catalog lists them. */
const PARAMETERS: Record<ProviderConfig['protocol'], string[]> = {
  openai: ['temperature', 'top_p', 'max_tokens', 'max_completion_tokens', 'stop', 'frequency_penalty', 'presence_penalty', 'tools', 'tool_choice', 'parallel_tool_calls', 'response_format', 'seed', 'reasoning_effort', 'user'],
  messages: ['temperature', 'top_p', 'top_k', 'max_tokens', 'stop', 'stop_sequences', 'tools', 'tool_choice', 'parallel_tool_calls', 'thinking', 'metadata', 'user'],
  gemini: ['temperature', 'top_p', 'top_k', 'max_tokens', 'max_completion_tokens', 'stop', 'stop_sequences', 'presence_penalty', 'frequency_penalty', 'seed', 'tools', 'tool_choice', 'response_format', 'reasoning_effort', 'thinking'],
  // Bedrock's Converse: the fields its inferenceConfig and toolConfig carry
  converse: ['temperature', 'top_p', 'max_tokens', 'max_completion_tokens', 'stop', 'stop_sequences', 'tools', 'tool_choice']
}

/**
 * What a model takes and gives, from what the database prices and the model's name (the
 * database names no modalities): image, audio or video prices say so; the chat models of
 * Anthropic and Google, and OpenAI's since GPT-4o, read images.
 */
export function modalitiesOf (providerId: string, modelId: string, mp: ModelPrice): { input_modalities: string[], output_modalities: string[] } {
  const has = (prefix: string): boolean => Object.keys(mp).some((k) => k.startsWith(prefix))
  const id = modelId.toLowerCase()
  if (id.includes('embedding')) return { input_modalities: ['text'], output_modalities: ['embeddings'] }
  const imageOut = has('output_image') || /(^|-)image(-|$)/.test(id)
  const output = imageOut ? ['image'] : /(^|-)tts(-|$)/.test(id) ? ['audio'] : ['text']
  const input = new Set(['text'])
  const vision = providerId === 'anthropic'
    ? /^claude-(3|[a-z]+-?[4-9]|[4-9])/.test(id)
    : providerId === 'google'
      ? id.startsWith('gemini-')
      : providerId === 'openai'
        ? /^(gpt-4o|gpt-4\.1|gpt-4-turbo|gpt-[5-9]|o[1-9](?!-mini)|o4-mini|chatgpt-4o|gpt-image)/.test(id)
        : false
  if (vision || has('input_image') || imageOut) input.add('image')
  if (has('input_audio') || (providerId === 'google' && id.startsWith('gemini-'))) input.add('audio')
  if (has('input_video') || (providerId === 'google' && id.startsWith('gemini-'))) input.add('video')
  return { input_modalities: [...input], output_modalities: output }
}

export interface EntryResult {
  kind: 'entry'
  entry: Record<string, unknown>
  /** What the operator should know about the entry (prices rounded, left out, derived fields). */
  notes: string[]
  source: string
}

/**
 * A catalog entry for `upstreamModel` of config provider `provider`: context length, modalities
 * and every price, from the database; or why there is none: the database does not know the
 * model, has no context length for it, or prices it in no unit the gateway bills.
 */
export type CatalogEntry = EntryResult | { kind: 'unknown' } | { kind: 'no_context' } | { kind: 'unbillable', prices: string[] }

export function catalogEntry (provider: Pick<ProviderConfig, 'id' | 'protocol' | 'base_url' | 'builtin'>, upstreamModel: string, opts: { id?: string, contextLength?: number, maxOutputTokens?: number, at: Date }): CatalogEntry {
  const db = databaseProvider(provider)
  if (db === undefined) return { kind: 'unknown' }
  const found = lookup(db, upstreamModel, opts.at)
  if (found === undefined) return { kind: 'unknown' }
  const architecture = modalitiesOf(db.id, found.model.id, found.model_price)
  // priced only in units the gateway does not bill (audio hours), or not at all: no entry is better than a free one
  if (found.model_price.input_mtok === undefined || (found.model_price.output_mtok === undefined && architecture.output_modalities.includes('text'))) {
    return { kind: 'unbillable', prices: Object.keys(found.model_price) }
  }
  const contextLength = opts.contextLength ?? found.model.context_window
  if (contextLength === undefined) return { kind: 'no_context' }
  const ref = referencePricing(found.model_price, contextLength)
  const notes: string[] = []
  for (const [field, value] of ref.exact) {
    const written = fieldOf(ref.pricing, field)
    if (written !== undefined && written !== value) notes.push(`pricing.${field}: ${value} in the database, ${written} here (rounded up to what the gateway bills exactly: $0.001 per million tokens)`)
  }
  for (const key of ref.ignored) notes.push(`not billed by the gateway: ${key}`)
  const tiersAbove = Object.values(found.model_price).some((v) => isTiered(v) && v.tiers.some((t) => t.start >= contextLength))
  if (tiersAbove) notes.push(`tiers above the context length (${contextLength}) left out: no prompt reaches them`)
  notes.push('architecture: derived from the prices and the model\'s name (the database names no modalities); check it')
  const name = displayName(found.model.name, upstreamModel)
  if (found.model.name === undefined || !name.startsWith(found.model.name)) notes.push(`name: made from the model's id${found.model.name === undefined ? ' (the database names none)' : ` (the database's is "${found.model.name}")`}`)
  const entry: Record<string, unknown> = {
    id: opts.id ?? `${provider.id}/${upstreamModel}`,
    name,
    provider: provider.id,
    upstream_model: upstreamModel,
    context_length: contextLength
  }
  if (opts.maxOutputTokens !== undefined) entry.max_output_tokens = opts.maxOutputTokens
  else if (architecture.output_modalities.includes('text')) notes.push('max_output_tokens: the database names no output limit; give --max-output-tokens N (the most the model writes in one answer: a larger max_tokens is then lowered to it)')
  Object.assign(entry, {
    architecture,
    supported_parameters: architecture.output_modalities.includes('text') ? PARAMETERS[provider.protocol] : [],
    pricing: ref.pricing
  })
  if (found.model.deprecated === true) entry.status = 'deprecated'
  return { kind: 'entry', entry, notes, source: sourceOf(db, found) }
}

// how the makers write their models' names: a family, then its version
const FAMILIES: Record<string, { name: string, joiner: '-' | ' ' }> = {
  gpt: { name: 'GPT', joiner: '-' },
  chatgpt: { name: 'ChatGPT', joiner: '-' },
  claude: { name: 'Claude', joiner: ' ' },
  gemini: { name: 'Gemini', joiner: ' ' },
  gemma: { name: 'Gemma', joiner: ' ' },
  llama: { name: 'Llama', joiner: ' ' },
  mistral: { name: 'Mistral', joiner: ' ' },
  mixtral: { name: 'Mixtral', joiner: ' ' },
  grok: { name: 'Grok', joiner: ' ' },
  deepseek: { name: 'DeepSeek', joiner: ' ' },
  qwen: { name: 'Qwen', joiner: ' ' }
}

/**
 * A model's display name: the database's when someone wrote it (it has capitals) for this very
 * model ("Claude Sonnet 4.5" for claude-sonnet-4-5, not "o4 Mini High" for o4-mini); else one
 * made from the model's id as its maker writes it: "GPT-4.1 nano", "GPT-4o (2024-08-06)",
 * "Claude 3.5 Haiku", "Gemini 2.0 Flash", "Llama 3.1 70B"; an id of no family known here is its
 * own name ("o4-mini", "text-embedding-3-small", "gpt-oss-120b").
 */
export function displayName (databaseName: string | undefined, modelId: string): string {
  const dated = /-(\d{4})-?(\d{2})-?(\d{2})$/.exec(modelId)
  const base = dated === null ? modelId : modelId.slice(0, dated.index)
  const date = dated === null ? '' : ` (${dated[1] as string}-${dated[2] as string}-${dated[3] as string})`
  const plain = (s: string): string => s.toLowerCase().replace(/[^a-z0-9]/g, '')
  if (databaseName !== undefined && /[A-Z]/.test(databaseName) && plain(databaseName) === plain(base)) return databaseName + date
  const [first, ...rest] = base.split('-')
  const family = FAMILIES[first ?? '']
  if (family === undefined || rest.length === 0) return modelId
  // numbers in a row are one version ("claude-3-5-haiku": 3.5)
  const words: string[] = []
  for (const w of rest) {
    const last = words.at(-1)
    if (/^\d+$/.test(w) && last !== undefined && /^\d+(\.\d+)*$/.test(last)) words[words.length - 1] = `${last}.${w}`
    else words.push(w)
  }
  if (family.joiner === '-') {
    // GPT's version joins its name and its other words stay small ("GPT-4o mini")
    const [version, ...others] = words
    return version === undefined || !/^\d/.test(version) ? modelId : [`${family.name}-${version}`, ...others].join(' ') + date
  }
  // the others' words are capitalised, sizes in capitals ("70B")
  return [family.name, ...words.map((w) => /^\d+(\.\d+)?[bm]$/.test(w) ? w.toUpperCase() : w.charAt(0).toUpperCase() + w.slice(1))].join(' ') + date
}

function sourceOf (db: Provider, found: PriceCalculation): string {
  const version = databaseVersion()
  return `${DATABASE}${version === null ? '' : `@${version}`} ${db.id}/${found.model.id}`
}

/** A field of a pricing (`input`, `tiers[0].cache_write`). */
function fieldOf (p: PricingConfig, field: string): number | undefined {
  const m = /^tiers\[(\d+)\]\.(.+)$/.exec(field)
  if (m === null) return (p as Record<string, unknown>)[field] as number | undefined
  return (p.tiers?.[Number(m[1])] as Record<string, unknown> | undefined)?.[m[2] as string] as number | undefined
}

// ---------------------------------------------------------------------------------------------
// Differences

export interface PriceDifference {
  /** The catalog model id. */
  model: string
  /** `input`, `cache_write`, `per_request`, or a tier's: `tiers[above_input_tokens=200000].output`. */
  field: string
  /** The catalog's rate (USD per million tokens; USD for per_request), as it bills, defaults applied. */
  catalog: string
  /** The database's. */
  reference: string
  /** The database and its record: `@pydantic/genai-prices@0.1.8 anthropic/claude-sonnet-4-5`. */
  source: string
}

export interface PriceCheck {
  differences: PriceDifference[]
  /** Priced catalog models the database does not know (or whose provider it does not know). */
  unknown: string[]
  /** The models compared. */
  checked: number
}

const perMillion = (nanoPerToken: number): string => nanoToUsd(nanoPerToken * 1_000_000)
const usdText = (usd: number): string => String(+usd.toPrecision(12))

/**
 * Every price of the catalog that differs from the database's, at `at` (the prices then in
 * force): the token rates the database gives (the catalog's defaults applied: cached input and
 * cache writes at the input rate unless set), at the base and at each tier either side has below
 * the model's context length, and per_request. Models of the built-in demo provider, and models
 * with no pricing, are not checked.
 */
export function checkPrices (config: Pick<Config, 'models' | 'providers'>, at: Date): PriceCheck {
  const providers = new Map(config.providers.map((p) => [p.id, p]))
  const differences: PriceDifference[] = []
  const unknown: string[] = []
  let checked = 0
  for (const entry of config.models) {
    // an alias has no price of its own: its targets are checked
    if (entry.pricing === undefined || isAlias(entry)) continue
    const m = entry as ModelConfig
    const match = referenceOf(m, providers, at)
    if (match === 'demo') continue
    if (match === undefined) { unknown.push(m.id); continue }
    checked++
    differences.push(...compare(m, entry.pricing, match.found.model_price, sourceOf(match.db, match.found)))
  }
  return { differences, unknown, checked }
}

function referenceOf (m: ModelConfig, providers: Map<string, ProviderConfig>, at: Date): { db: Provider, found: PriceCalculation } | 'demo' | undefined {
  const refs = (Array.isArray(m.provider) ? m.provider : [m.provider]).map((r) => providers.get(typeof r === 'string' ? r : r.id)).filter((p) => p !== undefined)
  if (refs.length > 0 && refs.every((p) => p.builtin !== undefined)) return 'demo'
  for (const p of refs) {
    const db = databaseProvider(p)
    const found = db === undefined ? undefined : lookup(db, m.upstream_model ?? m.id, at)
    if (db !== undefined && found !== undefined) return { db, found }
  }
  return undefined
}

/** A rate sheet's rate for a database field, the catalog's default when it names none. */
function rateOf (r: Rates, field: TokenField): number {
  switch (field) {
    case 'cache_write': return r.cache_write ?? r.input
    case 'cache_write_1h': return r.cache_write_1h ?? r.cache_write ?? r.input
    case 'input_audio': return r.input_audio ?? r.input
    case 'output_audio': return r.output_audio ?? r.output
    default: return r[field]
  }
}

function compare (m: ModelConfig, pricing: PricingConfig, mp: ModelPrice, source: string): PriceDifference[] {
  const out: PriceDifference[] = []
  const price = priceOf(pricing)
  if (price === null) return out
  const values = new Map<TokenField, number | TieredPrices>()
  for (const [key, field] of Object.entries(TOKEN_KEYS)) {
    const v = mp[key]
    if (v !== undefined) values.set(field, v)
  }
  // the base (0), every tier threshold of the database's below the context length, and the catalog's own
  const thresholds = new Set<number>([0, ...(pricing.tiers ?? []).map((t) => t.above_input_tokens)])
  for (const v of values.values()) if (isTiered(v)) for (const t of v.tiers) if (t.start < m.context_length) thresholds.add(t.start)
  for (const above of [...thresholds].sort((a, b) => a - b)) {
    // the rates of a prompt just past the threshold
    const rates: Rates = ratesFor(price, above === 0 ? 0 : above + 1)
    for (const field of TOKEN_FIELDS) {
      const v = values.get(field)
      // a rate the database does not give: the provider bills no such tokens (no cache writes on OpenAI)
      if (v === undefined) continue
      const ref = above === 0 ? baseOf(v) : priceAbove(v, above)
      const catalog = rateOf(rates, field)
      if (catalog !== pricePerToken(billable(ref))) {
        out.push({ model: m.id, field: above === 0 ? field : `tiers[above_input_tokens=${above}].${field}`, catalog: perMillion(catalog), reference: usdText(ref), source })
      }
    }
  }
  const requests = typeof mp.requests_kcount === 'number' ? mp.requests_kcount / 1000 : 0
  if ((price.per_request ?? 0) !== usdToNano(requests)) out.push({ model: m.id, field: 'per_request', catalog: nanoToUsd(price.per_request ?? 0), reference: usdText(requests), source })
  // a web search price the catalog names (none: the model's calls cannot ask for one)
  const search = price.server_tools?.get('web_search')
  const searches = typeof mp.web_searches_kcount === 'number' ? mp.web_searches_kcount / 1000 : undefined
  if (search !== undefined && search !== usdToNano(searches ?? 0)) out.push({ model: m.id, field: 'server_tools.web_search', catalog: nanoToUsd(search), reference: searches === undefined ? 'none' : usdText(searches), source })
  return out
}
