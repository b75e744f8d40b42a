import { existsSync, readFileSync } from 'node:fs'
import { dirname, extname, isAbsolute, resolve } from 'node:path'
import { loadAll } from 'js-yaml'
import { fromRoot } from '../paths.js'
import { ConfigSchema, isAlias, isoTimeMs, type Config, type ModelConfig, type ModelEntry } from './schema.js'
import { checkSchema, useCompiledAhead } from '../engine/kernel/schema-check.js'
import { kindOf } from '../engine/gateway/catalog.js'
import { webhookUrlProblem } from '../engine/alerts/webhook-url.js'

// Reads a config file (YAML or JSON), substitutes ${VAR} / ${VAR:-default} in its string values,
// applies defaults, validates it against its schema and across its sections, and reports every
// problem at once, each with its path: `models[3].pricing.input: must be >= 0`. The relative
// paths in a file (the SQLite file, plugin modules) are relative to the file's folder. What the
// plugins of its chain are, and whether their options are right, is the plugin host's business
// (engine/host/): this module knows no plugin.

// the validators the build compiled (the config's schema, the built-in plugins' options)
useCompiledAhead(fromRoot('dist', 'validators.cjs'))

/** How the config is checked against its schema: defaults filled in, values of ${VAR}s taken for numbers and booleans. */
export const CONFIG_CHECK = { defaults: true, coerce: true } as const

export class ConfigError extends Error {
  readonly problems: string[]
  constructor (source: string, problems: string[]) {
    super(`invalid config ${source}:\n` + problems.map((p) => '  - ' + p).join('\n'))
    this.name = 'ConfigError'
    this.problems = problems
  }
}

type Env = Record<string, string | undefined>

const VAR = /\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}/g

/** `/models/3/pricing/input` → `models[3].pricing.input` */
export function displayPath (pointer: string): string {
  if (pointer === '' || pointer === '/') return '(root)'
  let out = ''
  for (const raw of pointer.split('/').slice(1)) {
    const part = raw.replace(/~1/g, '/').replace(/~0/g, '~')
    out += /^\d+$/.test(part) ? `[${part}]` : (out === '' ? part : '.' + part)
  }
  return out
}

function substitute (node: unknown, path: string, env: Env, problems: string[]): unknown {
  if (typeof node === 'string') {
    return node.replace(VAR, (_whole, name: string, fallback: string | undefined) => {
      const value = env[name]
      if (value !== undefined && value !== '') return value
      if (fallback !== undefined) return fallback
      if (value === '') return ''
      problems.push(`${displayPath(path)}: environment variable ${name} is not set (use \${${name}:-default} for a default)`)
      return ''
    })
  }
  if (Array.isArray(node)) return node.map((v, i) => substitute(v, `${path}/${i}`, env, problems))
  if (node !== null && typeof node === 'object') {
    const out: Record<string, unknown> = {}
    for (const [k, v] of Object.entries(node)) out[k] = substitute(v, `${path}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`, env, problems)
    return out
  }
  return node
}

function duplicates (values: string[]): string[] {
  const seen = new Set<string>()
  const dup = new Set<string>()
  for (const v of values) (seen.has(v) ? dup : seen).add(v)
  return [...dup]
}

const TOKEN_RATES = ['input', 'cached_input', 'cache_write', 'cache_write_1h', 'output', 'input_audio', 'output_audio'] as const

/** `value` has at most `decimals` decimals (within floating-point noise). */
const fits = (value: number, decimals: number): boolean => {
  const scaled = value * 10 ** decimals
  return Math.abs(Math.round(scaled) - scaled) <= 1e-9 * Math.max(1, Math.abs(scaled))
}

// What a price sheet's schema cannot say: the units' decimals, a text model's output rate, the
// default image price, server tools' prices, and tiers in order that name every rate the base names.
function pricingProblems (m: ModelConfig, path: string, problems: string[]): void {
  const p = m.pricing
  if (p === undefined) return
  const rates = (o: Partial<Record<typeof TOKEN_RATES[number], number>>, at: string): void => {
    for (const field of TOKEN_RATES) {
      const v = o[field]
      if (v !== undefined && !fits(v, 3)) problems.push(`${at}.${field}: at most three decimals (USD per million tokens)`)
    }
  }
  rates(p, path)
  if (p.output === undefined && m.architecture.output_modalities.includes('text')) problems.push(`${path}.output: is required for a model that outputs text`)
  if (p.per_request !== undefined && !fits(p.per_request, 9)) problems.push(`${path}.per_request: at most nine decimals (USD)`)
  if (typeof p.per_image === 'number') {
    if (!fits(p.per_image, 9)) problems.push(`${path}.per_image: at most nine decimals (USD)`)
  } else if (p.per_image !== undefined) {
    for (const [size, v] of Object.entries(p.per_image)) if (!fits(v, 9)) problems.push(`${path}.per_image.${size}: at most nine decimals (USD)`)
    if (p.per_image.default === undefined) problems.push(`${path}.per_image.default: is required (the price of an image of a size not listed)`)
  }
  for (const [kind, v] of Object.entries(p.server_tools ?? {})) if (!fits(v, 9)) problems.push(`${path}.server_tools.${kind}: at most nine decimals (USD per use)`)
  let above = -1
  p.tiers?.forEach((tier, j) => {
    const at = `${path}.tiers[${j}]`
    rates(tier, at)
    if (tier.above_input_tokens <= above) problems.push(`${at}.above_input_tokens: must be above the previous tier's (tiers go in increasing order)`)
    else if (tier.above_input_tokens >= m.context_length) problems.push(`${at}.above_input_tokens: must be below context_length (${m.context_length}): no call would reach it`)
    above = Math.max(above, tier.above_input_tokens)
    for (const field of TOKEN_RATES) {
      if (p[field] !== undefined && tier[field] === undefined) problems.push(`${at}.${field}: is required, as pricing.${field} is set (a tier names every rate the base names)`)
    }
  })
}

function semanticChecks (config: Config, problems: string[]): void {
  const server = config.server
  if (server.headers_timeout_s > server.client_timeout_s) problems.push('server.headers_timeout_s: must be <= server.client_timeout_s (the headers are part of the request)')
  if (server.idle_timeout_s !== undefined && server.idle_timeout_s <= server.request_timeout_s) problems.push('server.idle_timeout_s: must be > server.request_timeout_s (or the gateway\'s own timeout errors could not be sent)')
  if ((config.store.postgres === undefined) !== (config.store.redis === undefined)) {
    problems.push('store: postgres and redis go together (PostgreSQL keeps the tenants, the ledger and the usage records; Redis the counters, idempotency keys and revocations)')
  }
  config.alerts.webhooks.forEach((w, i) => {
    const problem = webhookUrlProblem(w.url)
    if (problem !== undefined) problems.push(`alerts.webhooks[${i}].url: ${problem}`)
    if (Buffer.from(w.secret.slice('whsec_'.length), 'base64').length < 16) problems.push(`alerts.webhooks[${i}].secret: must hold at least 16 bytes (24 base64 characters) after whsec_`)
  })
  const providerIds = new Set(config.providers.map((p) => p.id))
  for (const id of duplicates(config.providers.map((p) => p.id))) problems.push(`providers: the id ${id} is used twice`)
  config.providers.forEach((p, i) => {
    // Bedrock and Vertex have a default base_url (its region's or location's); the others need one
    const located = p.platform === 'bedrock' || p.platform === 'vertex'
    if (p.builtin === undefined && p.base_url === undefined && !located) problems.push(`providers[${i}].base_url: is required (or set builtin: demo)`)
    if (p.passthrough && p.builtin !== undefined) problems.push(`providers[${i}].passthrough: needs a base_url (a built-in provider has no API of its own to pass through to)`)
    if (p.passthrough_shared && !p.passthrough) problems.push(`providers[${i}].passthrough_shared: needs passthrough: true`)
    platformProblems(p, `providers[${i}]`, problems)
  })
  const passable = new Set(config.providers.filter((p) => p.passthrough && p.builtin === undefined).map((p) => p.id))
  for (const id of duplicates(config.models.map((m) => m.id))) problems.push(`models: the id ${id} is used twice`)
  const protocolOf = new Map(config.providers.map((p) => [p.id, p.protocol]))
  const platformOf = new Map(config.providers.map((p) => [p.id, p.platform]))
  config.models.forEach((entry, i) => {
    if (isAlias(entry)) return
    if (missingFields(entry, i, problems) > 0) return
    const m = entry as ModelConfig
    const refs = Array.isArray(m.provider) ? m.provider.map((p) => typeof p === 'string' ? p : p.id) : [m.provider]
    const kind = kindOf(m.architecture.output_modalities)
    refs.forEach((ref, j) => {
      const path = `models[${i}].provider${Array.isArray(m.provider) ? `[${j}]${typeof m.provider[j] === 'string' ? '' : '.id'}` : ''}`
      if (!providerIds.has(ref)) problems.push(`${path}: no provider has the id ${ref}`)
      // embeddings and image generation are calls of the OpenAI and Gemini protocols only
      else if (kind !== 'chat' && (platformOf.get(ref) === 'bedrock' || platformOf.get(ref) === 'vertex')) problems.push(`${path}: ${ref} is on ${platformOf.get(ref) === 'bedrock' ? 'AWS Bedrock' : 'Google Vertex AI'}, where the gateway serves chat models only (${kind === 'image' ? 'image' : 'embedding'} models: the vendor's own API or azure)`)
      else if (kind !== 'chat' && protocolOf.get(ref) === 'messages') problems.push(`${path}: ${ref} speaks the Messages protocol, which has no ${kind === 'image' ? 'image generation' : 'embeddings'} (use an openai or gemini provider)`)
    })
    for (const id of duplicates(refs)) problems.push(`models[${i}].provider: ${id} is listed twice`)
    if (m.routing === 'weighted' && Array.isArray(m.provider) && m.provider.every((p) => typeof p !== 'string' && p.weight === 0)) {
      problems.push(`models[${i}].provider: routing weighted needs a weight above 0`)
    }
    if (m.pricing !== undefined) pricingProblems(m, `models[${i}].pricing`, problems)
  })
  chainChecks(config, problems)
  for (const org of duplicates(config.tenants.map((t) => t.org))) problems.push(`tenants: the org ${org} is listed twice`)
  const keys: string[] = []
  config.tenants.forEach((t, i) => {
    for (const p of duplicates(t.projects.map((p) => p.id))) problems.push(`tenants[${i}].projects: the project ${p} is listed twice`)
    t.projects.forEach((p, j) => p.keys.forEach((k, n) => {
      keys.push(k.key)
      const path = `tenants[${i}].projects[${j}].keys[${n}]`
      if (k.expires_at !== undefined && isoTimeMs(k.expires_at) === undefined) problems.push(`${path}.expires_at: not a date that exists`)
      if (k.budget !== undefined && Math.abs(Math.round(k.budget.usd * 1e9) - k.budget.usd * 1e9) > 1e-3) problems.push(`${path}.budget.usd: at most nine decimals (nano-dollars)`)
      for (const id of k.passthrough) {
        if (!passable.has(id)) problems.push(`tenants[${i}].projects[${j}].keys[${n}].passthrough: ${id} is not a provider with passthrough: true`)
      }
    }))
  })
  if (duplicates(keys).length > 0) problems.push('tenants: the same API key is listed twice')
  mcpChecks(config, problems)
  accessChecks(config, problems)
}

// What an alias may carry besides its targets: its id, name and status; anything else is a model's.
const ALIAS_FIELDS = new Set(['id', 'name', 'alias_of', 'status'])

/**
 * Aliases and fallbacks: every target a model of the catalog; an alias's targets models (not
 * aliases) of one kind; a fallback to a model of the same kind, never to itself and never round
 * in a cycle (a call could then walk the same models for ever).
 */
function chainChecks (config: Config, problems: string[]): void {
  const byId = new Map(config.models.map((m) => [m.id, m]))
  const kindOfEntry = (id: string): string | undefined => {
    const m = byId.get(id)
    if (m === undefined) return undefined
    const target = isAlias(m) ? byId.get(m.alias_of[0] as string) : m
    return target === undefined || isAlias(target) ? undefined : kindOf(target.architecture.output_modalities)
  }
  config.models.forEach((m, i) => {
    if (isAlias(m)) {
      for (const field of Object.keys(m)) {
        // the schema fills in defaults of a model's fields; only what the file wrote matters, and those defaults are equal to an empty one
        if (ALIAS_FIELDS.has(field) || isDefault(field, (m as Record<string, unknown>)[field])) continue
        problems.push(`models[${i}].${field}: an alias (alias_of) takes no ${field}: its targets have their own`)
      }
      const kinds = new Set<string>()
      m.alias_of.forEach((id, j) => {
        const path = `models[${i}].alias_of[${j}]`
        const target = byId.get(id)
        if (target === undefined) problems.push(`${path}: no model has the id ${id}`)
        else if (isAlias(target)) problems.push(`${path}: ${id} is an alias itself (an alias names models)`)
        else kinds.add(kindOf(target.architecture.output_modalities))
      })
      if (kinds.size > 1) problems.push(`models[${i}].alias_of: its models are of different kinds (${[...kinds].join(', ')}): one alias, one kind`)
      for (const id of duplicates(m.alias_of)) problems.push(`models[${i}].alias_of: ${id} is listed twice`)
      return
    }
    const own = kindOfEntry(m.id)
    m.fallbacks?.forEach((rule, j) => rule.models.forEach((id, n) => {
      const path = `models[${i}].fallbacks[${j}].models[${n}]`
      if (id === m.id) problems.push(`${path}: a model does not fall back to itself`)
      else if (!byId.has(id)) problems.push(`${path}: no model has the id ${id}`)
      else if (kindOfEntry(id) !== own) problems.push(`${path}: ${id} is a model of another kind (${kindOfEntry(id) ?? 'unknown'}, this one is ${own ?? 'unknown'})`)
    }))
  })
  // a cycle through fallbacks (an alias stands for its targets)
  const next = (id: string): string[] => {
    const m = byId.get(id)
    if (m === undefined) return []
    if (isAlias(m)) return m.alias_of
    return (m.fallbacks ?? []).flatMap((r) => r.models)
  }
  const state = new Map<string, 'open' | 'done'>()
  const visit = (id: string, trail: string[]): string[] | null => {
    const s = state.get(id)
    if (s === 'done') return null
    if (s === 'open') return [...trail.slice(trail.indexOf(id)), id]
    state.set(id, 'open')
    for (const n of next(id)) {
      const cycle = visit(n, [...trail, id])
      if (cycle !== null) return cycle
    }
    state.set(id, 'done')
    return null
  }
  for (const [i, m] of config.models.entries()) {
    if (isAlias(m) || m.fallbacks === undefined) continue
    const cycle = visit(m.id, [])
    if (cycle !== null) { problems.push(`models[${i}].fallbacks: a cycle: ${cycle.join(' → ')}`); return }
  }
}

/** A model field as the schema's default leaves it (an alias entry gets them too). */
function isDefault (field: string, value: unknown): boolean {
  if (field === 'routing') return value === 'failover'
  if (field === 'architecture') {
    const a = value as { input_modalities?: string[], output_modalities?: string[] }
    return a.input_modalities?.join() === 'text' && a.output_modalities?.join() === 'text'
  }
  if (field === 'supported_parameters') return Array.isArray(value) && value.length === 0
  if (field === 'default_parameters') return value !== null && typeof value === 'object' && Object.keys(value).length === 0
  return false
}

// What each platform takes: the protocols it serves, the fields it needs and those it alone takes.
const PLATFORMS = {
  azure: { protocols: ['openai'], needs: ['base_url', 'api_version'], takes: ['api_version'] },
  bedrock: { protocols: ['converse', 'messages'], needs: ['region'], takes: ['region', 'aws'] },
  vertex: { protocols: ['gemini', 'messages'], needs: ['project', 'location'], takes: ['project', 'location', 'credentials_file', 'access_token'] }
} as const
const PLATFORM_FIELDS = ['api_version', 'region', 'aws', 'project', 'location', 'credentials_file', 'access_token'] as const

/** A provider's platform fields: the protocol the platform serves, the fields it needs, none of another platform's. */
function platformProblems (p: Config['providers'][number], path: string, problems: string[]): void {
  if (p.platform === undefined) {
    if (p.protocol === 'converse') problems.push(`${path}.protocol: converse is AWS Bedrock's API: it needs platform: bedrock`)
    for (const f of PLATFORM_FIELDS) if (p[f] !== undefined) problems.push(`${path}.${f}: is for a cloud platform's provider only (set platform)`)
    return
  }
  const rule = PLATFORMS[p.platform]
  if (p.builtin !== undefined) problems.push(`${path}.platform: a built-in provider has no platform`)
  if (!(rule.protocols as readonly string[]).includes(p.protocol)) problems.push(`${path}.protocol: platform ${p.platform} serves ${rule.protocols.join(' or ')}, not ${p.protocol}`)
  for (const f of rule.needs) if (p[f] === undefined) problems.push(`${path}.${f}: is required for platform ${p.platform}`)
  for (const f of PLATFORM_FIELDS) if (p[f] !== undefined && !(rule.takes as readonly string[]).includes(f)) problems.push(`${path}.${f}: is not a field of platform ${p.platform}`)
  if (p.platform === 'vertex' && p.credentials_file !== undefined && p.access_token !== undefined) problems.push(`${path}.access_token: set credentials_file or access_token, not both`)
  if (p.platform === 'vertex' && p.api_key !== '') problems.push(`${path}.api_key: Vertex AI takes credentials_file or access_token, not an API key`)
}

/** A URL on a loopback host (127.0.0.0/8, ::1, localhost), where plain HTTP never leaves the machine. */
export function isLoopbackUrl (url: string): boolean {
  let host: string
  try { host = new URL(url).hostname } catch { return false }
  return host === 'localhost' || host === '[::1]' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(host)
}

/** A role's org: named for org_admin, and only there. */
function roleOrgProblem (r: { role: string, org?: string }, path: string): string | undefined {
  if (r.role === 'org_admin' && r.org === undefined) return `${path}.org: is required for role org_admin (the organization it manages)`
  if (r.role !== 'org_admin' && r.org !== undefined) return `${path}.org: is for role org_admin only (role ${r.role} reaches every organization)`
  return undefined
}

// Admin tokens and single sign-on: roles with their organizations, tokens and names that tell
// callers apart, and an identity provider reached over HTTPS unless on this machine.
function accessChecks (config: Config, problems: string[]): void {
  const tokens = config.admin.tokens
  tokens.forEach((t, i) => {
    const p = roleOrgProblem(t, `admin.tokens[${i}]`)
    if (p !== undefined) problems.push(p)
    if (t.token === config.admin.token) problems.push(`admin.tokens[${i}].token: is admin.token itself (each token has one role)`)
    if (t.name === 'admin') problems.push(`admin.tokens[${i}].name: "admin" names admin.token in the audit log; choose another`)
  })
  for (const name of duplicates(tokens.map((t) => t.name))) problems.push(`admin.tokens: the name ${name} is used twice`)
  if (duplicates(tokens.map((t) => t.token)).length > 0) problems.push('admin.tokens: the same token is listed twice')
  const sso = config.sso
  if (sso === undefined) return
  sso.roles.forEach((r, i) => {
    const p = roleOrgProblem(r, `sso.roles[${i}]`)
    if (p !== undefined) problems.push(p)
  })
  if (!sso.scopes.includes('openid')) problems.push('sso.scopes: must include openid')
  if ((sso.client_secret === '') !== (sso.token_endpoint_auth_method === 'none')) {
    problems.push(sso.client_secret === '' ? 'sso.client_secret: is required unless token_endpoint_auth_method is none' : 'sso.client_secret: a public client (token_endpoint_auth_method: none) has no secret')
  }
  if (!sso.issuer.startsWith('https://') && !isLoopbackUrl(sso.issuer)) problems.push('sso.issuer: must be https:// (plain http only on a loopback address)')
  // the session cookie is Secure unless the console is plain HTTP on this machine: a browser would not keep it over plain HTTP elsewhere
  if (!sso.redirect_url.startsWith('https://') && !isLoopbackUrl(sso.redirect_url)) problems.push('sso.redirect_url: must be https:// (plain http only on a loopback address)')
  let path = ''
  try { path = new URL(sso.redirect_url).pathname } catch { path = '' }
  if (!path.endsWith('/console/auth/callback')) problems.push('sso.redirect_url: must end with /console/auth/callback (the gateway\'s callback as the browser reaches it)')
  const after = sso.post_logout_redirect_url
  if (after !== undefined && !URL.canParse(after)) problems.push('sso.post_logout_redirect_url: is not a URL')
  else if (after !== undefined && !after.startsWith('https://') && !isLoopbackUrl(after)) problems.push('sso.post_logout_redirect_url: must be https:// (plain http only on a loopback address)')
}

// the fields each MCP transport takes, and those it needs
const MCP_FIELDS = { http: { needs: ['url'], takes: ['url', 'headers'] }, stdio: { needs: ['command'], takes: ['command', 'args', 'env', 'cwd'] } } as const

function mcpChecks (config: Config, problems: string[]): void {
  const servers = config.mcp.servers
  for (const id of duplicates(servers.map((s) => s.id))) problems.push(`mcp.servers: the id ${id} is used twice`)
  servers.forEach((s, i) => {
    // {server}__{tool} is cut at the first double underscore; an id ending in _ would move that cut
    if (s.id.includes('__')) problems.push(`mcp.servers[${i}].id: must not contain "__" (it separates the server from the tool in tool names)`)
    else if (s.id.endsWith('_')) problems.push(`mcp.servers[${i}].id: must not end with "_" (a tool name would read two ways: ${s.id}__echo is also server ${s.id.slice(0, -1)}'s tool _echo)`)
    const fields = MCP_FIELDS[s.transport]
    for (const f of fields.needs) if (s[f] === undefined) problems.push(`mcp.servers[${i}].${f}: is required for transport ${s.transport}`)
    const other = s.transport === 'http' ? MCP_FIELDS.stdio : MCP_FIELDS.http
    for (const f of other.takes) if (s[f] !== undefined) problems.push(`mcp.servers[${i}].${f}: is for transport ${s.transport === 'http' ? 'stdio' : 'http'} only`)
    if (s.pricing !== undefined && Math.abs(Math.round(s.pricing.per_call * 1e9) - s.pricing.per_call * 1e9) > 1e-3) problems.push(`mcp.servers[${i}].pricing.per_call: at most nine decimals (nano-dollars)`)
  })
}

/**
 * A parsed config object with ${VAR}s substituted, defaults filled in and values coerced, and
 * every problem of it (none when it is valid). The plugin host adds its own problems to these.
 */
export function checkConfig (raw: unknown, env: Env = process.env): { config: Config, problems: string[] } {
  const problems: string[] = []
  const substituted = substitute(raw ?? {}, '', env, problems)
  if (substituted === null || typeof substituted !== 'object' || Array.isArray(substituted)) {
    return { config: substituted as Config, problems: ['(root): must be a mapping'] }
  }
  const config = substituted as Config
  const found = checkSchema(ConfigSchema, config, '', CONFIG_CHECK)
  problems.push(...found)
  if (Array.isArray(config.plugins)) {
    for (const name of duplicates(config.plugins.map((p) => (p as { name?: string } | null)?.name).filter((n): n is string => typeof n === 'string'))) problems.push(`plugins: ${name} is listed twice`)
  }
  if (found.length === 0) semanticChecks(config, problems)
  // a model's missing fields are no schema error (an alias has none of them): listed with the schema's problems too
  else if (Array.isArray(config.models)) config.models.forEach((entry, i) => { if (entry !== null && typeof entry === 'object' && !isAlias(entry)) missingFields(entry, i, problems) })
  return { config, problems }
}

/** The fields a model that is no alias must have, each missing one a problem; how many are missing. */
function missingFields (entry: ModelEntry, i: number, problems: string[]): number {
  const missing = (['name', 'provider', 'context_length'] as const).filter((f) => entry[f] === undefined)
  for (const f of missing) problems.push(`models[${i}].${f}: is required (or alias_of, for an alias)`)
  return missing.length
}

/** Validates a parsed config object; `source` names it in the error. */
export function parseConfig (raw: unknown, env: Env = process.env, source = '(inline)'): Config {
  const { config, problems } = checkConfig(raw, env)
  if (problems.length > 0) throw new ConfigError(source, problems)
  return config
}

/**
 * The SQLite file relative to `baseDir` unless it is absolute or ':memory:'; the folder each stdio
 * MCP server runs in, `baseDir` itself by default. (Plugin modules are resolved from the same
 * folder by the plugin host, which loads them.)
 */
export function resolvePaths (config: Config, baseDir: string): Config {
  const sqlite = config.store.sqlite
  const servers = config.mcp.servers.map((s) => s.transport === 'stdio' ? { ...s, cwd: resolve(baseDir, s.cwd ?? '.') } : s)
  const mcp = { ...config.mcp, servers }
  // a service-account file is found from the config file's folder, as the SQLite file is
  const providers = config.providers.map((p) => p.credentials_file !== undefined && p.credentials_file !== '' ? { ...p, credentials_file: resolve(baseDir, p.credentials_file) } : p)
  if (sqlite === ':memory:' || isAbsolute(sqlite)) return { ...config, mcp, providers }
  return { ...config, mcp, providers, store: { ...config.store, sqlite: resolve(baseDir, sqlite) } }
}

/**
 * A config file's YAML: YAML 1.2's core schema (no dates, no merge keys), duplicate keys refused,
 * one document (none, or only comments, is an empty config). Read with js-yaml, which parses a
 * config several times faster than the `yaml` package that writes them (init, models add).
 */
function parseYaml (text: string): unknown {
  const docs = loadAll(text)
  if (docs.length > 1) throw new Error(`a config is one YAML document; this file holds ${docs.length} (separated by ---)`)
  return docs[0] ?? null
}

/** A config file's text, parsed (YAML, or JSON by its extension). */
export function readConfigFile (file: string): unknown {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    throw new ConfigError(file, [`(file): cannot read: ${(err as Error).message}`])
  }
  try {
    return extname(file) === '.json' ? JSON.parse(text) : parseYaml(text)
  } catch (err) {
    throw new ConfigError(file, [`(file): not valid ${extname(file) === '.json' ? 'JSON' : 'YAML'}: ${(err as Error).message}`])
  }
}

/**
 * A config file, validated, its paths relative to its folder. Its plugins are not looked at:
 * commands that serve or list them load it through the plugin host (`loadGatewayConfig`).
 */
export async function loadConfig (file: string, env: Env = process.env): Promise<Config> {
  return resolvePaths(parseConfig(readConfigFile(file), env, file), dirname(resolve(file)))
}

/**
 * The environment variables the text at `path` in a config file names (`${OPENAI_API_KEY:-}` at
 * ['providers', 0, 'api_key'] gives ['OPENAI_API_KEY']); none when it names none or cannot be read.
 */
export function variablesAt (file: string, path: Array<string | number>): string[] {
  try {
    const text = readFileSync(file, 'utf8')
    let node: unknown = extname(file) === '.json' ? JSON.parse(text) : parseYaml(text)
    for (const step of path) node = (node as Record<string | number, unknown> | null)?.[step]
    return typeof node === 'string' ? [...node.matchAll(VAR)].map((m) => m[1] as string) : []
  } catch {
    return []
  }
}

/**
 * Which config a command reads: --config FILE, else $MODELGATE_CONFIG, else config/gateway.yaml
 * (a checkout of the project), else gateway.yaml (a folder made by `modelgate init`), both in
 * the current folder.
 */
export function configPath (argv: { config?: string }, env: Env = process.env, exists: (file: string) => boolean = existsSync): string {
  if (argv.config !== undefined) return argv.config
  if (env.MODELGATE_CONFIG !== undefined && env.MODELGATE_CONFIG !== '') return env.MODELGATE_CONFIG
  return exists('config/gateway.yaml') || !exists('gateway.yaml') ? 'config/gateway.yaml' : 'gateway.yaml'
}
