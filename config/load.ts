import { existsSync, readFileSync } from 'node:fs'
import { dirname, extname, isAbsolute, resolve } from 'node:path'
import { Value } from '@sinclair/typebox/value'
import type { TSchema } from '@sinclair/typebox'
import YAML from 'yaml'
import { ConfigSchema, isoTimeMs, type Config, type PluginEntry } from './schema.js'
import type { GatewayPlugin } from '../plugins/api/index.js'
import { checkOptions } from '../plugins/gateway/plugin-options.js'
import { builtinPlugin, builtinPlugins, bySection, loadPlugin, resolveModule } from '../plugins/gateway/registry.js'

// Reads a config file (YAML or JSON), substitutes ${VAR} / ${VAR:-default} in its string values,
// applies defaults, validates it, loads the plugins it names from outside the project, validates
// the options of every plugin entry against that plugin's own schema, and reports every problem
// at once, each with its path: `models[3].pricing.input: must be >= 0`. The relative paths in a
// file (the SQLite file, plugin modules) are relative to the file's folder.

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

function describe (error: { message: string, schema: TSchema, type: number }): string {
  const s = error.schema as Record<string, unknown>
  const m = error.message
  if (m.startsWith('Expected required property')) return 'is required'
  if (m.startsWith('Unexpected property')) return 'is not a known key'
  if (typeof s.minimum === 'number' && m.includes('greater or equal')) return `must be >= ${s.minimum}`
  if (typeof s.exclusiveMinimum === 'number' && m.includes('greater')) return `must be > ${s.exclusiveMinimum}`
  if (typeof s.maximum === 'number' && m.includes('less or equal')) return `must be <= ${s.maximum}`
  if (Array.isArray(s.anyOf) && s.anyOf.every((x: { const?: unknown }) => x.const !== undefined)) {
    return 'must be one of ' + s.anyOf.map((x: { const?: unknown }) => JSON.stringify(x.const)).join(', ')
  }
  return m.charAt(0).toLowerCase() + m.slice(1)
}

function check (schema: TSchema, value: unknown, basePath: string, problems: string[]): void {
  const seen = new Set<string>()
  for (const error of Value.Errors(schema, value)) {
    const path = displayPath(basePath + error.path)
    const line = `${path}: ${describe(error)}`
    // a union reports each branch too; one line per path is what a person wants to read
    if (seen.has(path)) continue
    seen.add(path)
    problems.push(line)
  }
}

function prepare<T> (schema: TSchema, value: unknown): T {
  const withDefaults = Value.Default(schema, Value.Clone(value))
  return Value.Convert(schema, withDefaults) as T
}

function duplicates (values: string[]): string[] {
  const seen = new Set<string>()
  const dup = new Set<string>()
  for (const v of values) (seen.has(v) ? dup : seen).add(v)
  return [...dup]
}

function semanticChecks (config: Config, problems: string[]): void {
  const server = config.server
  if (server.headers_timeout_s > server.client_timeout_s) problems.push('server.headers_timeout_s: must be <= server.client_timeout_s (the headers are part of the request)')
  if (server.idle_timeout_s !== undefined && server.idle_timeout_s <= server.request_timeout_s) problems.push('server.idle_timeout_s: must be > server.request_timeout_s (or the gateway\'s own timeout errors could not be sent)')
  if ((config.store.postgres === undefined) !== (config.store.redis === undefined)) {
    problems.push('store: postgres and redis go together (PostgreSQL keeps the tenants, the ledger and the usage records; Redis the counters, idempotency keys and revocations)')
  }
  const providerIds = new Set(config.providers.map((p) => p.id))
  for (const id of duplicates(config.providers.map((p) => p.id))) problems.push(`providers: the id ${id} is used twice`)
  config.providers.forEach((p, i) => {
    if (p.builtin === undefined && p.base_url === undefined) problems.push(`providers[${i}].base_url: is required (or set builtin: demo)`)
    if (p.passthrough && p.base_url === undefined) problems.push(`providers[${i}].passthrough: needs a base_url (a built-in provider has no API of its own to pass through to)`)
  })
  const passable = new Set(config.providers.filter((p) => p.passthrough && p.base_url !== undefined).map((p) => p.id))
  for (const id of duplicates(config.models.map((m) => m.id))) problems.push(`models: the id ${id} is used twice`)
  config.models.forEach((m, i) => {
    const refs = Array.isArray(m.provider) ? m.provider.map((p) => typeof p === 'string' ? p : p.id) : [m.provider]
    refs.forEach((ref, j) => {
      const path = `models[${i}].provider${Array.isArray(m.provider) ? `[${j}]${typeof m.provider[j] === 'string' ? '' : '.id'}` : ''}`
      if (!providerIds.has(ref)) problems.push(`${path}: no provider has the id ${ref}`)
    })
    for (const id of duplicates(refs)) problems.push(`models[${i}].provider: ${id} is listed twice`)
    if (m.routing === 'weighted' && Array.isArray(m.provider) && m.provider.every((p) => typeof p !== 'string' && p.weight === 0)) {
      problems.push(`models[${i}].provider: routing weighted needs a weight above 0`)
    }
    if (m.pricing !== undefined) {
      for (const [field, price] of Object.entries(m.pricing)) {
        if (typeof price === 'number' && Math.abs(Math.round(price * 1000) - price * 1000) > 1e-6) {
          problems.push(`models[${i}].pricing.${field}: at most three decimals (USD per million tokens)`)
        }
      }
    }
  })
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
}

// the fields each MCP transport takes, and those it needs
const MCP_FIELDS = { http: { needs: ['url'], takes: ['url', 'headers'] }, stdio: { needs: ['command'], takes: ['command', 'args', 'env', 'cwd'] } } as const

function mcpChecks (config: Config, problems: string[]): void {
  const servers = config.mcp.servers
  for (const id of duplicates(servers.map((s) => s.id))) problems.push(`mcp.servers: the id ${id} is used twice`)
  servers.forEach((s, i) => {
    // {server}__{tool} is cut at the first double underscore
    if (s.id.includes('__')) problems.push(`mcp.servers[${i}].id: must not contain "__" (it separates the server from the tool in tool names)`)
    const fields = MCP_FIELDS[s.transport]
    for (const f of fields.needs) if (s[f] === undefined) problems.push(`mcp.servers[${i}].${f}: is required for transport ${s.transport}`)
    const other = s.transport === 'http' ? MCP_FIELDS.stdio : MCP_FIELDS.http
    for (const f of other.takes) if (s[f] !== undefined) problems.push(`mcp.servers[${i}].${f}: is for transport ${s.transport === 'http' ? 'stdio' : 'http'} only`)
    if (s.pricing !== undefined && Math.abs(Math.round(s.pricing.per_call * 1e9) - s.pricing.per_call * 1e9) > 1e-3) problems.push(`mcp.servers[${i}].pricing.per_call: at most nine decimals (nano-dollars)`)
  })
}

/** What loading the modules of a config's external plugins gave: the plugin, or why not. */
export type LoadedModules = Map<number, { resolved: string, plugin: GatewayPlugin } | { error: string }>

function checkPlugins (entries: PluginEntry[], loaded: LoadedModules, problems: string[]): void {
  const known = builtinPlugins().map((p) => p.name).filter((n) => !bySection(n)).join(', ')
  entries.forEach((entry, i) => {
    if (entry === null || typeof entry !== 'object' || typeof entry.name !== 'string') return
    let def: GatewayPlugin | undefined
    if (entry.module === undefined && bySection(entry.name)) {
      problems.push(`plugins[${i}].name: ${entry.name} is switched on by the config's own \`${entry.name}:\` section, not listed here`)
      return
    }
    if (entry.module === undefined) {
      def = builtinPlugin(entry.name)
      if (def === undefined) {
        problems.push(`plugins[${i}].name: unknown plugin ${JSON.stringify(entry.name)} (built-in: ${known}; a plugin from outside the project needs \`module\`)`)
        return
      }
    } else {
      if (builtinPlugin(entry.name) !== undefined) {
        problems.push(`plugins[${i}].name: ${entry.name} is a built-in plugin; give the plugin from ${entry.module} another name`)
        return
      }
      const l = loaded.get(i)
      if (l === undefined) { problems.push(`plugins[${i}].module: not loaded (load the config with loadConfig or resolveConfig)`); return }
      if ('error' in l) { problems.push(`plugins[${i}].module: ${l.error}`); return }
      entry.module = l.resolved
      def = l.plugin
    }
    entry.options = { ...(entry.options ?? {}) }
    const found = def.options === undefined ? [] : checkOptions(def.options, entry.options, `plugins[${i}].options`)
    problems.push(...found)
    if (found.length === 0 && def.validate !== undefined) {
      try {
        for (const p of def.validate(entry.options)) problems.push(`plugins[${i}].options.${p}`)
      } catch (err) {
        problems.push(`plugins[${i}].options: ${(err as Error).message}`)
      }
    }
  })
  for (const name of duplicates(entries.map((p) => p.name))) problems.push(`plugins: ${name} is listed twice`)
  const enabled = new Set<string>()
  entries.forEach((entry, i) => {
    if (entry?.enabled !== true) return
    // an entry already refused for its name says nothing of what it needs
    if (entry.module !== undefined && builtinPlugin(entry.name) !== undefined) return
    const def = entry.module === undefined ? builtinPlugin(entry.name) : (loaded.get(i) as { plugin?: GatewayPlugin } | undefined)?.plugin
    for (const d of def?.dependencies ?? []) if (!enabled.has(d)) problems.push(`plugins[${i}]: ${entry.name} needs ${d} enabled before it`)
    enabled.add(entry.name)
  })
}

/** Loads the module of every plugin entry that has one, relative to `baseDir`. */
export async function loadPluginModules (raw: unknown, baseDir: string, env: Env = process.env): Promise<LoadedModules> {
  const out: LoadedModules = new Map()
  const plugins = (raw as { plugins?: unknown } | null)?.plugins
  if (!Array.isArray(plugins)) return out
  for (const [i, entry] of plugins.entries()) {
    const spec = (entry as { module?: unknown } | null)?.module
    if (typeof spec !== 'string' || spec === '') continue
    const text = substitute(spec, '', env, [])
    try {
      const resolved = resolveModule(text as string, baseDir)
      out.set(i, { resolved, plugin: await loadPlugin(resolved) })
    } catch (err) {
      out.set(i, { error: `cannot load ${String(text)}: ${(err as Error).message}` })
    }
  }
  return out
}

/**
 * Validates a parsed config object. `source` names it in the error message. Plugins from outside
 * the project must be loaded first (`loaded`, from loadPluginModules); resolveConfig does both.
 */
export function parseConfig (raw: unknown, env: Env = process.env, source = '(inline)', loaded: LoadedModules = new Map()): Config {
  const problems: string[] = []
  const substituted = substitute(raw ?? {}, '', env, problems)
  if (substituted === null || typeof substituted !== 'object' || Array.isArray(substituted)) {
    throw new ConfigError(source, ['(root): must be a mapping'])
  }
  const config = prepare<Config>(ConfigSchema, substituted)
  check(ConfigSchema, config, '', problems)

  if (Array.isArray(config.plugins)) checkPlugins(config.plugins, loaded, problems)
  if (problems.length === 0) semanticChecks(config, problems)
  if (problems.length > 0) throw new ConfigError(source, problems)
  return config
}

/**
 * The SQLite file relative to `baseDir` unless it is absolute or ':memory:'; the folder each stdio
 * MCP server runs in, `baseDir` itself by default.
 */
function resolvePaths (config: Config, baseDir: string): Config {
  const sqlite = config.store.sqlite
  const servers = config.mcp.servers.map((s) => s.transport === 'stdio' ? { ...s, cwd: resolve(baseDir, s.cwd ?? '.') } : s)
  const mcp = { ...config.mcp, servers }
  if (sqlite === ':memory:' || isAbsolute(sqlite)) return { ...config, mcp }
  return { ...config, mcp, store: { ...config.store, sqlite: resolve(baseDir, sqlite) } }
}

/**
 * Loads the plugin modules a config names, then validates it. The paths it names (plugin modules,
 * the SQLite file) are relative to `baseDir`: the config file's folder, or the current one.
 */
export async function resolveConfig (raw: unknown, opts: { env?: Env, baseDir?: string, source?: string } = {}): Promise<Config> {
  const env = opts.env ?? process.env
  const baseDir = opts.baseDir ?? process.cwd()
  const loaded = await loadPluginModules(raw, baseDir, env)
  return resolvePaths(parseConfig(raw, env, opts.source, loaded), baseDir)
}

export async function loadConfig (file: string, env: Env = process.env): Promise<Config> {
  let text: string
  try {
    text = readFileSync(file, 'utf8')
  } catch (err) {
    throw new ConfigError(file, [`(file): cannot read: ${(err as Error).message}`])
  }
  let raw: unknown
  try {
    raw = extname(file) === '.json' ? JSON.parse(text) : YAML.parse(text)
  } catch (err) {
    throw new ConfigError(file, [`(file): not valid ${extname(file) === '.json' ? 'JSON' : 'YAML'}: ${(err as Error).message}`])
  }
  return await resolveConfig(raw, { env, baseDir: dirname(resolve(file)), source: file })
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
