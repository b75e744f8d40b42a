import { Type, type Static } from '@sinclair/typebox'

// The config file's schema (docs/configuration.md). Every object is closed: an unknown key is a mistake
// the operator wants to hear about. Plugin options are validated separately, against each
// plugin's own schema by the plugin host (engine/host/), so that a plugin owns its options.

const Closed = { additionalProperties: false } as const

export const QuotaPer = Type.Union([Type.Literal('minute'), Type.Literal('hour'), Type.Literal('day'), Type.Literal('month')])

export const QuotaSchema = Type.Union([
  Type.Object({ tokens: Type.Integer({ minimum: 1 }), per: QuotaPer }, Closed),
  Type.Object({ usd: Type.Number({ exclusiveMinimum: 0 }), per: QuotaPer }, Closed)
])

// USD per million tokens. Charges are integers of nano-dollars per token, so a price may have
// at most three decimals ($0.001 per million tokens is one nano-dollar per token); load.ts checks it.
const Price = Type.Number({ minimum: 0 })
// USD per call or per image: at most nine decimals (nano-dollars); load.ts checks it.
const UnitPrice = Type.Number({ minimum: 0 })

// The token rates of a long-context tier: a call whose prompt_tokens exceed above_input_tokens
// bills wholly at the highest such tier. A tier names every rate the base names (load.ts).
export const PriceTierSchema = Type.Object({
  above_input_tokens: Type.Integer({ minimum: 0 }),
  input: Price,
  cached_input: Type.Optional(Price),
  cache_write: Type.Optional(Price),
  cache_write_1h: Type.Optional(Price),
  output: Type.Optional(Price),
  input_audio: Type.Optional(Price),
  output_audio: Type.Optional(Price)
}, Closed)

// A model's price sheet: token rates in USD per million tokens, per_request and per_image in USD.
export const PricingSchema = Type.Object({
  input: Price,
  // cache reads; default: input
  cached_input: Type.Optional(Price),
  // cache writes (a Messages upstream's cache_creation_input_tokens, 5-minute); default: input
  cache_write: Type.Optional(Price),
  // 1-hour cache writes (usage.cache_creation.ephemeral_1h_input_tokens); default: cache_write
  cache_write_1h: Type.Optional(Price),
  // required for a model that outputs text (load.ts); an embedding model has none
  output: Type.Optional(Price),
  // audio input tokens (OpenAI's prompt_tokens_details.audio_tokens, Gemini's AUDIO prompt
  // tokens), uncached; default: input
  input_audio: Type.Optional(Price),
  // audio output tokens (completion_tokens_details.audio_tokens, AUDIO candidate tokens); default: output
  output_audio: Type.Optional(Price),
  tiers: Type.Optional(Type.Array(PriceTierSchema, { minItems: 1 })),
  per_request: Type.Optional(UnitPrice),
  // per image generated: one price, or a price by the request's `size` with a `default`
  per_image: Type.Optional(Type.Union([UnitPrice, Type.Record(Type.String({ minLength: 1 }), UnitPrice)], { description: 'a price in USD, or prices in USD by size with a default' })),
  // per use of a tool the provider runs itself (web_search, web_fetch, code_execution, url_context,
  // file_search...), in USD: a call asking for a server tool the sheet does not name is refused
  server_tools: Type.Optional(Type.Record(Type.String({ pattern: '^[a-z][a-z0-9_]{0,63}$' }), UnitPrice, { additionalProperties: false, description: 'USD per use of each server tool the model may run, by its kind (web_search, code_execution...)' }))
}, Closed)

export const ServerSchema = Type.Object({
  host: Type.String({ default: '127.0.0.1', minLength: 1 }),
  port: Type.Integer({ default: 8080, minimum: 0, maximum: 65535 }),
  body_limit_mb: Type.Number({ default: 64, exclusiveMinimum: 0 }),
  request_timeout_s: Type.Number({ default: 120, exclusiveMinimum: 0 }),
  header_prefix: Type.String({ default: 'X-SVC-', pattern: '^[A-Za-z0-9-]*$' }),
  trust_proxy: Type.Boolean({ default: false }),
  shutdown_timeout_s: Type.Number({ default: 30, minimum: 0 }),
  // Slow clients (engine/ops/server-limits.ts): headers, then the whole request, must arrive in time;
  // idle keep-alive and silent connections are closed. None of them limits a response's length.
  headers_timeout_s: Type.Number({ default: 30, exclusiveMinimum: 0 }),
  client_timeout_s: Type.Number({ default: 120, exclusiveMinimum: 0 }),
  keep_alive_timeout_s: Type.Number({ default: 72, exclusiveMinimum: 0 }),
  idle_timeout_s: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
  // Media URLs in requests are checked by their text (engine/gateway/media-url.ts); resolve_hosts also
  // looks their host names up and refuses names that resolve to a non-public address.
  media_urls: Type.Object({
    resolve_hosts: Type.Boolean({ default: false })
  }, { ...Closed, default: {} })
}, { ...Closed, default: {} })

export const StoreSchema = Type.Object({
  sqlite: Type.String({ default: 'data/modelgate.db', minLength: 1 }),
  // several instances share these instead of a SQLite file (both together)
  postgres: Type.Optional(Type.String({ pattern: '^postgres(ql)?://' })),
  redis: Type.Optional(Type.String({ pattern: '^rediss?://' })),
  // the prefix of every Redis key and channel: gateways with different prefixes share one Redis apart
  redis_prefix: Type.String({ default: 'mg:', pattern: '^[A-Za-z0-9:_.-]{1,64}$' }),
  // how long the balance holds of a process that stopped (killed, crashed) may stay before the
  // live processes release them; each process beats a heartbeat three times in this span
  stale_hold_s: Type.Number({ default: 30, exclusiveMinimum: 0 })
}, { ...Closed, default: {} })

// What an operator may do on the admin API and the consoles: everything (admin), read without key
// secrets or changes (viewer), or manage one organization (org_admin, with its org).
export const RoleName = Type.Union([Type.Literal('admin'), Type.Literal('viewer'), Type.Literal('org_admin')])

export const AdminTokenSchema = Type.Object({
  token: Type.String({ minLength: 16 }),
  role: RoleName,
  // org_admin only: the organization the token manages
  org: Type.Optional(Type.String({ minLength: 1, pattern: '^[A-Za-z0-9_.-]+$' })),
  // who the audit log says made a change with it
  name: Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.@-]+$' })
}, Closed)

export const AdminSchema = Type.Object({
  // the single admin token: role admin, named `admin` in the audit log
  token: Type.String({ default: '' }),
  tokens: Type.Array(AdminTokenSchema, { default: [] })
}, { ...Closed, default: {} })

// A group of the identity provider and the role its members get; the first match wins.
export const SsoRoleSchema = Type.Object({
  group: Type.String({ minLength: 1 }),
  role: RoleName,
  org: Type.Optional(Type.String({ minLength: 1, pattern: '^[A-Za-z0-9_.-]+$' }))
}, Closed)

// OpenID Connect sign-in for both consoles (docs/configuration.md); omitted: admin tokens only.
export const SsoSchema = Type.Object({
  issuer: Type.String({ pattern: '^https?://' }),
  client_id: Type.String({ minLength: 1 }),
  client_secret: Type.String({ default: '' }),
  // how the client authenticates at the token endpoint, as the client is registered there (none: a public client, PKCE alone)
  token_endpoint_auth_method: Type.Union([Type.Literal('client_secret_basic'), Type.Literal('client_secret_post'), Type.Literal('none')], { default: 'client_secret_basic' }),
  // where the identity provider sends the browser back: this gateway's /console/auth/callback as users reach it
  redirect_url: Type.String({ pattern: '^https?://' }),
  // where the identity provider sends the browser after signing it out there too (registered with it as a post-logout redirect URI)
  post_logout_redirect_url: Type.Optional(Type.String({ pattern: '^https?://' })),
  scopes: Type.Array(Type.String({ minLength: 1, pattern: '^[!#-\\[\\]-~]+$' }), { default: ['openid', 'email', 'profile'] }),
  groups_claim: Type.String({ default: 'groups', minLength: 1 }),
  roles: Type.Array(SsoRoleSchema, { minItems: 1 }),
  session_hours: Type.Number({ default: 8, exclusiveMinimum: 0, maximum: 720 }),
  // how long the identity provider may take to answer (discovery, the code exchange, its keys)
  timeout_s: Type.Number({ default: 10, exclusiveMinimum: 0 })
}, Closed)

export const PluginEntrySchema = Type.Object({
  name: Type.String({ minLength: 1, pattern: '^[A-Za-z0-9_.@/-]+$' }),
  // a plugin from outside the project: a file path (relative to the config file) or a package name
  module: Type.Optional(Type.String({ minLength: 1 })),
  enabled: Type.Boolean({ default: true }),
  options: Type.Optional(Type.Record(Type.String(), Type.Unknown()))
}, Closed)

// A cloud platform that serves a vendor's models under its own URLs and authentication
// (engine/upstream/platforms/): Azure OpenAI, AWS Bedrock, Google Vertex AI.
export const PlatformName = Type.Union([Type.Literal('azure'), Type.Literal('bedrock'), Type.Literal('vertex')])

// Static AWS credentials of a bedrock provider (else the environment's AWS_* variables).
export const AwsCredentialsSchema = Type.Object({
  access_key_id: Type.String({ minLength: 1 }),
  secret_access_key: Type.String({ minLength: 1 }),
  session_token: Type.Optional(Type.String())
}, Closed)

export const ProviderSchema = Type.Object({
  id: Type.String({ minLength: 1, pattern: '^[A-Za-z0-9_.-]+$' }),
  // the wire format of the bodies; `converse` is AWS Bedrock's own (platform: bedrock only)
  protocol: Type.Union([Type.Literal('openai'), Type.Literal('messages'), Type.Literal('gemini'), Type.Literal('converse')]),
  // omitted: the vendor's own API
  platform: Type.Optional(PlatformName),
  base_url: Type.Optional(Type.String({ pattern: '^https?://' })),
  api_key: Type.String({ default: '' }),
  // azure: the api-version query parameter of every call
  api_version: Type.Optional(Type.String({ minLength: 1, pattern: '^[A-Za-z0-9._-]+$' })),
  // bedrock: the AWS region (signing and the default base_url)
  region: Type.Optional(Type.String({ minLength: 1, pattern: '^[a-z0-9-]+$' })),
  aws: Type.Optional(AwsCredentialsSchema),
  // vertex: the Google Cloud project and location (a region, or global)
  project: Type.Optional(Type.String({ minLength: 1, pattern: '^[A-Za-z0-9._:-]+$' })),
  location: Type.Optional(Type.String({ minLength: 1, pattern: '^[a-z0-9-]+$' })),
  // vertex: a service-account JSON key file (relative to the config file), or an access token sent as it is
  credentials_file: Type.Optional(Type.String()),
  access_token: Type.Optional(Type.String()),
  // `builtin: demo` answers in-process (the demo catalog); no base_url then.
  builtin: Type.Optional(Type.Literal('demo')),
  connections: Type.Integer({ default: 128, minimum: 1 }),
  headers: Type.Optional(Type.Record(Type.String(), Type.String())),
  // an OpenAI-protocol provider that serves POST /responses itself: Responses calls go through as they are
  responses: Type.Boolean({ default: false }),
  // /passthrough/{id}/* reaches this provider's own API (for keys granted it)
  passthrough: Type.Boolean({ default: false }),
  // every key granted the pass-through reaches every object of the provider's account (files,
  // batches...), whoever made it; by default a key reaches only its organization's
  passthrough_shared: Type.Boolean({ default: false })
}, Closed)

// A provider of a model: its id, or its id with a weight (for `routing: weighted`, default 1) and the name
// the model has there (default: the model's upstream_model): the same model on several platforms
// has a name on each.
export const ModelProviderSchema = Type.Union([
  Type.String({ minLength: 1 }),
  Type.Object({ id: Type.String({ minLength: 1 }), upstream_model: Type.Optional(Type.String({ minLength: 1 })), weight: Type.Optional(Type.Number({ minimum: 0 })) }, Closed)
])

export const RoutingSchema = Type.Union([Type.Literal('failover'), Type.Literal('weighted'), Type.Literal('latency')], { default: 'failover' })

// Why a call moves on from one model to the next (docs/configuration.md, "Aliases and fallbacks").
export const FALLBACK_CLASSES = ['rate_limited', 'unavailable', 'timeout', 'context_length', 'content_filtered'] as const
export const FallbackClassSchema = Type.Union(FALLBACK_CLASSES.map((c) => Type.Literal(c)))
/** The classes a fallback rule without `on` takes: all but context_length (a bigger model is a choice of its own). */
export const DEFAULT_FALLBACK_ON = ['rate_limited', 'unavailable', 'timeout', 'content_filtered'] as const

// Other models tried, in order, when this one cannot answer for one of the classes in `on`.
export const FallbackSchema = Type.Object({
  models: Type.Array(Type.String({ minLength: 1 }), { minItems: 1 }),
  on: Type.Array(FallbackClassSchema, { minItems: 1, default: [...DEFAULT_FALLBACK_ON] })
}, Closed)

// A model, or an alias (`alias_of`): a catalog id of its own answered by the first of its targets
// that answers. An alias names no provider, context or price of its own (load.ts checks which
// fields each takes); `provider` and `context_length` are required of a model there.
export const ModelSchema = Type.Object({
  id: Type.String({ minLength: 1 }),
  name: Type.Optional(Type.String({ minLength: 1 })),
  alias_of: Type.Optional(Type.Array(Type.String({ minLength: 1 }), { minItems: 1 })),
  fallbacks: Type.Optional(Type.Array(FallbackSchema, { minItems: 1 })),
  provider: Type.Optional(Type.Union([Type.String({ minLength: 1 }), Type.Array(ModelProviderSchema, { minItems: 1 })])),
  // how a call picks among the providers: in order, by weight, or by recent time to first byte
  routing: RoutingSchema,
  upstream_model: Type.Optional(Type.String({ minLength: 1 })),
  context_length: Type.Optional(Type.Integer({ minimum: 1 })),
  max_output_tokens: Type.Optional(Type.Integer({ minimum: 1 })),
  architecture: Type.Object({
    input_modalities: Type.Array(Type.String(), { minItems: 1, default: ['text'] }),
    output_modalities: Type.Array(Type.String(), { minItems: 1, default: ['text'] })
  }, { ...Closed, default: {} }),
  supported_parameters: Type.Array(Type.String(), { default: [] }),
  default_parameters: Type.Record(Type.String(), Type.Unknown(), { default: {} }),
  pricing: Type.Optional(PricingSchema),
  status: Type.Union([Type.Literal('active'), Type.Literal('deprecated'), Type.Literal('offline')], { default: 'active' })
}, Closed)

/** An ISO 8601 date (`2026-01-15`) or date and time (`2026-01-15T12:00:00Z`). */
export const ISO_TIME_PATTERN = '^\\d{4}-\\d{2}-\\d{2}(T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,9})?)?(Z|[+-]\\d{2}:?\\d{2})?)?$'
const IsoTime = Type.String({ pattern: ISO_TIME_PATTERN })

/** Milliseconds since the epoch of an ISO_TIME_PATTERN text; undefined for a date or time that does not exist (`2026-02-30`, `24:00`). */
export function isoTimeMs (text: string): number | undefined {
  const m = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2}))?/.exec(text)
  if (m === null) return undefined
  const [year, month, day, hour, minute] = m.slice(1).map((v) => v === undefined ? 0 : Number(v)) as [number, number, number, number, number]
  if (month < 1 || month > 12 || day < 1 || day > new Date(Date.UTC(year, month, 0)).getUTCDate() || hour > 23 || minute > 59) return undefined
  const t = Date.parse(text)
  return Number.isNaN(t) ? undefined : t
}

// A key's own limits per minute, and its own spending limit per UTC window.
export const KeyLimitsSchema = Type.Object({
  rpm: Type.Optional(Type.Integer({ minimum: 1 })),
  tpm: Type.Optional(Type.Integer({ minimum: 1 }))
}, Closed)

export const KeyBudgetSchema = Type.Object({ usd: Type.Number({ exclusiveMinimum: 0 }), per: QuotaPer }, Closed)

export const KeyEntrySchema = Type.Object({
  key: Type.String({ minLength: 16 }),
  name: Type.String({ default: '' }),
  // at least one glob: an empty list would be a key that may call nothing, most likely a mistake
  models: Type.Array(Type.String({ minLength: 1 }), { default: ['*'], minItems: 1 }),
  passthrough: Type.Array(Type.String({ minLength: 1 }), { default: [] }),
  expires_at: Type.Optional(IsoTime),
  limits: Type.Optional(KeyLimitsSchema),
  budget: Type.Optional(KeyBudgetSchema),
  // globs over "{server}/{tool}": the MCP tools this key may list and call (none by default)
  mcp: Type.Array(Type.String({ minLength: 1 }), { default: [] })
}, Closed)

export const ProjectSchema = Type.Object({
  id: Type.String({ minLength: 1, pattern: '^[A-Za-z0-9_.-]+$' }),
  quota: Type.Optional(QuotaSchema),
  keys: Type.Array(KeyEntrySchema, { default: [] })
}, Closed)

export const TenantSchema = Type.Object({
  org: Type.String({ minLength: 1, pattern: '^[A-Za-z0-9_.-]+$' }),
  balance_usd: Type.Number({ default: 0, minimum: 0 }),
  quota: Type.Optional(QuotaSchema),
  projects: Type.Array(ProjectSchema, { default: [] })
}, Closed)

// How calls go to providers, for every model: the circuit breaker, retries of a failure that is
// safe to repeat, and the latency policy's averaging and exploration.
export const UpstreamSchema = Type.Object({
  breaker: Type.Object({
    failures: Type.Integer({ default: 5, minimum: 1 }),
    open_s: Type.Number({ default: 30, exclusiveMinimum: 0 })
  }, { ...Closed, default: {} }),
  retry: Type.Object({
    attempts: Type.Integer({ default: 1, minimum: 0, maximum: 10 }),
    backoff_ms: Type.Number({ default: 50, minimum: 0 })
  }, { ...Closed, default: {} }),
  // repeats per provider of a 429 or a 5xx before the first byte (and of a refused or reset
  // connection: its attempts win over retry.attempts when set), after a pause that doubles from
  // retry.backoff_ms, or the provider's Retry-After when it names one up to max_wait_s
  retries: Type.Optional(Type.Object({
    attempts: Type.Integer({ default: 2, minimum: 0, maximum: 10 }),
    max_wait_s: Type.Number({ default: 5, minimum: 0, maximum: 600 })
  }, Closed)),
  latency: Type.Object({
    // weight of the newest time to first byte in the moving average
    smoothing: Type.Number({ default: 0.3, exclusiveMinimum: 0, maximum: 1 }),
    // share of calls sent to another provider than the fastest, to keep its figure fresh
    explore: Type.Number({ default: 0.05, minimum: 0, maximum: 1 })
  }, { ...Closed, default: {} })
}, { ...Closed, default: {} })

// An MCP server whose tools the gateway serves at /mcp: over Streamable HTTP (`url`, `headers`), or
// spawned and spoken to over stdio (`command`, `args`, `env`, `cwd`). Its id names its tools
// (`{id}__{tool}`), its usage records and /mcp/{id}. One object for both transports, so that a
// missing field is reported by its name (load.ts checks which fields each transport needs).
export const McpServerSchema = Type.Object({
  id: Type.String({ minLength: 1, maxLength: 32, pattern: '^[A-Za-z0-9_-]+$' }),
  transport: Type.Union([Type.Literal('http'), Type.Literal('stdio')]),
  url: Type.Optional(Type.String({ pattern: '^https?://' })),
  headers: Type.Optional(Type.Record(Type.String(), Type.String())),
  command: Type.Optional(Type.String({ minLength: 1 })),
  args: Type.Optional(Type.Array(Type.String())),
  env: Type.Optional(Type.Record(Type.String(), Type.String())),
  // the folder the command runs in; default: the config file's folder (relative paths in command and args start there)
  cwd: Type.Optional(Type.String({ minLength: 1 })),
  // USD per tools/call
  pricing: Type.Optional(Type.Object({ per_call: Type.Number({ minimum: 0 }) }, Closed)),
  // how long a call (and a connection) may take; default: server.request_timeout_s
  timeout_s: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
  // one session (http) or process (stdio) for every organization's calls; by default each
  // organization gets its own, so that what a tool keeps for one is not another's to read
  shared: Type.Boolean({ default: false })
}, Closed)

export const McpSchema = Type.Object({
  servers: Type.Array(McpServerSchema, { default: [] }),
  // the largest answer a server may give a call (its JSON-RPC message); past it the call gets an error result
  max_result_mb: Type.Number({ default: 8, exclusiveMinimum: 0, maximum: 1024 }),
  // the organizations' own sessions and processes open at once (each worker), all servers together
  max_sessions: Type.Integer({ default: 32, minimum: 1 }),
  // an organization's session or process unused this long is closed
  session_idle_s: Type.Number({ default: 300, minimum: 1 })
}, { ...Closed, default: {} })

export const MetricsSchema = Type.Object({
  enabled: Type.Boolean({ default: true }),
  auth: Type.Union([Type.Literal('admin'), Type.Literal('open')], { default: 'admin' })
}, { ...Closed, default: {} })

export const TracingSchema = Type.Object({
  otlp_endpoint: Type.String({ default: '', pattern: '^(https?://.*)?$' }),
  service_name: Type.String({ default: 'modelgate', minLength: 1 }),
  headers: Type.Record(Type.String(), Type.String(), { default: {} }),
  timeout_s: Type.Number({ default: 5, exclusiveMinimum: 0 })
}, { ...Closed, default: {} })

export const ALERT_EVENTS = ['budget.threshold', 'quota.threshold', 'balance.low', 'key.expiring', 'provider.down', 'provider.up'] as const

export const WebhookSchema = Type.Object({
  url: Type.String({ pattern: '^https?://' }),
  // "whsec_" and the key in base64, as the Standard Webhooks specification has it
  secret: Type.String({ pattern: '^whsec_[A-Za-z0-9+/]+={0,2}$' }),
  events: Type.Array(Type.Union(ALERT_EVENTS.map((e) => Type.Literal(e))), { default: [...ALERT_EVENTS], minItems: 1 })
}, Closed)

export const AlertsSchema = Type.Object({
  // fractions of a budget or a quota whose crossing raises an event, once per window
  thresholds: Type.Array(Type.Number({ exclusiveMinimum: 0, maximum: 1 }), { default: [0.5, 0.8, 1.0] }),
  // an organization's balance under this raises balance.low (omit: never)
  balance_low_usd: Type.Optional(Type.Number({ minimum: 0 })),
  webhooks: Type.Array(WebhookSchema, { default: [] })
}, { ...Closed, default: {} })

export const ConfigSchema = Type.Object({
  server: ServerSchema,
  store: StoreSchema,
  admin: AdminSchema,
  sso: Type.Optional(SsoSchema),
  plugins: Type.Array(PluginEntrySchema, { default: [] }),
  providers: Type.Array(ProviderSchema, { default: [] }),
  models: Type.Array(ModelSchema, { default: [] }),
  translation: Type.Object({
    flatten: Type.Boolean({ default: false }),
    default_max_tokens: Type.Integer({ default: 4096, minimum: 1 })
  }, { ...Closed, default: {} }),
  tenants: Type.Array(TenantSchema, { default: [] }),
  upstream: UpstreamSchema,
  mcp: McpSchema,
  metrics: MetricsSchema,
  tracing: TracingSchema,
  alerts: AlertsSchema
}, Closed)

export type Config = Static<typeof ConfigSchema>
export type ServerConfig = Static<typeof ServerSchema>
export type ProviderConfig = Static<typeof ProviderSchema>
export type PlatformConfigName = Static<typeof PlatformName>
/** A `models` entry as the file writes it: a model or an alias. */
export type ModelEntry = Static<typeof ModelSchema>
/** A model (no alias) as the checks leave it: a name, its providers and its context. */
export type ModelConfig = ModelEntry & { name: string, provider: NonNullable<ModelEntry['provider']>, context_length: number }
export type AliasConfig = ModelEntry & { alias_of: string[] }
export type FallbackClass = typeof FALLBACK_CLASSES[number]
export const isAlias = (m: ModelEntry): m is AliasConfig => m.alias_of !== undefined
export type PricingConfig = Static<typeof PricingSchema>
export type PriceTierConfig = Static<typeof PriceTierSchema>
export type QuotaConfig = Static<typeof QuotaSchema>
export type PluginEntry = Static<typeof PluginEntrySchema>
export type Routing = Static<typeof RoutingSchema>
export type McpServerConfig = Static<typeof McpServerSchema>
export type SsoConfig = Static<typeof SsoSchema>
export type AlertsConfig = Static<typeof AlertsSchema>
export type AlertEvent = typeof ALERT_EVENTS[number]
export type RoleConfig = Static<typeof RoleName>
