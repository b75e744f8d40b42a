import { dirname, resolve } from 'node:path'
import type { FastifyInstance, FastifyPluginAsync, RouteOptions } from 'fastify'
import { checkConfig, ConfigError, readConfigFile, resolvePaths } from '../../config/load.js'
import type { Config, PluginEntry } from '../../config/schema.js'
import type { AnyGatewayPlugin } from '../../plugins/api/index.js'
import { checkSchema } from '../kernel/schema-check.js'
import { BUILTIN_NAMES, BY_SECTION, builtinPlugin } from './builtins.js'
import { loadPlugin, resolveModule } from './modules.js'

export { BUILTIN_NAMES, builtinPlugin, builtinPlugins } from './builtins.js'

// The plugin host: the one owner of the plugin lifecycle, used the same way by a serving gateway
// (buildApp), `modelgate config check`, `modelgate plugins` and `modelgate/testing`:
//
//   resolve   a chain entry to its plugin: a built-in by name, or a module (a file, or a package
//             installed beside the config or beside modelgate)
//   load      the module's default export, checked to be a plugin
//   validate  its options against its own schema, defaults filled in (the kernel's one validator
//             and one wording of problems), then its own checks
//   order     config order; what a plugin depends on enabled before it
//   scope     'app' plugins on the whole app (every route), 'api' plugins in the API's scope
//   register  each wrapped by fastify-plugin, so its Fastify hooks cover its whole scope; a
//             plugin's own routes go under /v1
//
// The config loader (config/load.ts) parses and validates the file and knows no plugin.

/** One plugin of a chain, ready to register. */
export interface Link {
  name: string
  /** Its entry's place in the config's `plugins:` (null: switched on by a config section). */
  index: number | null
  /** Where it was loaded from (a file: URL), for a plugin from outside the project. */
  module?: string
  plugin: AnyGatewayPlugin
  /** Validated, with the schema's defaults. */
  options: Record<string, unknown>
  scope: 'app' | 'api'
}

/** A chain entry and where it stands in the config (null: switched on by its section). */
export interface ChainEntry { entry: PluginEntry, index: number | null }

/**
 * The chain a config makes: its `plugins:` entries, then the metrics plugin (when
 * `metrics.enabled`) and the tracing plugin (when `tracing.otlp_endpoint` is set), configured by
 * their sections.
 */
export function chainOf (config: Config): ChainEntry[] {
  const chain: ChainEntry[] = config.plugins.map((entry, index) => ({ entry, index }))
  if (config.metrics.enabled) chain.push({ entry: { name: 'metrics', enabled: true, options: {} }, index: null })
  if (config.tracing.otlp_endpoint !== '') chain.push({ entry: { name: 'tracing', enabled: true, options: { ...config.tracing } }, index: null })
  return chain
}

/** Where a problem of an entry is said: `plugins[N]`, or the section that switched it on. */
const placeOf = (c: ChainEntry): string => c.index === null ? c.entry.name : `plugins[${c.index}]`

/** How a plugin's options are checked against its schema: defaults filled in, nothing coerced. */
export const OPTIONS_CHECK = { defaults: true, coerce: false } as const

/**
 * Checks a plugin's options (a copy, with its schema's defaults) and its own checks; returns the
 * options and the problems, each under `at` (`plugins[3].options.tag: is required`).
 */
export function validateOptions (plugin: AnyGatewayPlugin, given: Record<string, unknown> | undefined, at: string): { options: Record<string, unknown>, problems: string[] } {
  const options = { ...(given ?? {}) }
  const problems = plugin.options === undefined ? [] : checkSchema(plugin.options, options, `${at}.options`, { ...OPTIONS_CHECK, noun: 'option' })
  if (problems.length === 0 && plugin.validate !== undefined) {
    try {
      for (const p of plugin.validate(options as never)) problems.push(`${at}.options.${p}`)
    } catch (err) {
      problems.push(`${at}.options: ${(err as Error).message}`)
    }
  }
  return { options, problems }
}

/** The problem of a plugin whose dependencies are not enabled before it, or null. */
export function missingDependencies (plugin: AnyGatewayPlugin, name: string, enabledBefore: ReadonlySet<string>, at: string): string | null {
  const missing = (plugin.dependencies ?? []).filter((d) => !enabledBefore.has(d))
  return missing.length === 0 ? null : `${at}: ${name} needs ${missing.join(', ')} enabled before it`
}

/**
 * Resolves, loads and validates the plugins of a config's chain, in order. Modules are looked for
 * from `baseDir` (the config file's folder); an entry's `module` becomes the file: URL it was
 * loaded from, and its `options` the validated ones, so the config says what runs. Returns the
 * enabled links and every problem, each with its path in the file.
 */
export async function checkChain (config: Config, baseDir: string = process.cwd()): Promise<{ links: Link[], problems: string[] }> {
  const problems: string[] = []
  const links: Link[] = []
  const known = BUILTIN_NAMES.filter((n) => !BY_SECTION.has(n)).join(', ')
  const enabled = new Set<string>()
  for (const c of chainOf(config)) {
    const { entry } = c
    if (entry === null || typeof entry !== 'object' || typeof entry.name !== 'string') continue
    const at = placeOf(c)
    let plugin: AnyGatewayPlugin | undefined
    if (entry.module === undefined) {
      if (c.index !== null && BY_SECTION.has(entry.name)) {
        problems.push(`${at}.name: ${entry.name} is switched on by the config's own \`${entry.name}:\` section, not listed here`)
        continue
      }
      plugin = await builtinPlugin(entry.name)
      if (plugin === undefined) {
        problems.push(`${at}.name: unknown plugin ${JSON.stringify(entry.name)} (built-in: ${known}; a plugin from outside the project needs \`module\`)`)
        continue
      }
    } else {
      if (BUILTIN_NAMES.includes(entry.name)) {
        problems.push(`${at}.name: ${entry.name} is a built-in plugin; give the plugin from ${entry.module} another name`)
        continue
      }
      const spec = entry.module
      try {
        entry.module = resolveModule(spec, baseDir)
        plugin = await loadPlugin(entry.module)
      } catch (err) {
        entry.module = spec
        problems.push(`${at}.module: cannot load ${spec}: ${(err as Error).message}`)
        continue
      }
    }
    const checked = validateOptions(plugin, entry.options, at)
    problems.push(...checked.problems)
    entry.options = checked.options
    if (!entry.enabled) continue
    const missing = missingDependencies(plugin, entry.name, enabled, at)
    if (missing !== null) problems.push(missing)
    enabled.add(entry.name)
    links.push({ name: entry.name, index: c.index, module: entry.module, plugin, options: checked.options, scope: plugin.scope ?? 'api' })
  }
  return { links, problems }
}

/** How a chain is mounted on an app: the prefixes of the API's own route groups, and what to tell of each API route. */
export interface MountOptions {
  /** Route prefixes of the API's own groups (`/v1`, `/v1beta`, `/passthrough`); a route under none of them is a plugin's, moved under /v1. */
  corePrefixes: readonly string[]
  /** Hears every route of the API scope as it is added (after a plugin's route is moved under /v1). */
  onRoute?: (route: RouteOptions) => void
}

/** Registers one plugin as the chain does: wrapped by fastify-plugin with its name and dependencies. */
async function register (scope: FastifyInstance, link: Link): Promise<void> {
  // link.options were checked against the plugin's own schema (validateOptions): they are its Static<S>
  const plugin = link.plugin.plugin as FastifyPluginAsync<Record<string, unknown>>
  const { default: fp } = await import('fastify-plugin')
  const wrapped = fp(plugin, { name: `modelgate-${link.name}`, fastify: '5.x', dependencies: (link.plugin.dependencies ?? []).map((d) => `modelgate-${d}`) })
  await scope.register(wrapped, link.options)
}

/** A config's chain, checked and ready to be registered on an app. */
export class PluginHost {
  private constructor (readonly links: readonly Link[]) {}

  /** The host of a config's chain; a ConfigError lists every problem of it. */
  static async of (config: Config, baseDir?: string): Promise<PluginHost> {
    const { links, problems } = await checkChain(config, baseDir)
    if (problems.length > 0) throw new ConfigError('(plugins)', problems)
    return new PluginHost(links)
  }

  /** A host of plugins given one by one (`modelgate/testing`), each checked as a chain entry is. */
  static empty (): PluginHost { return new PluginHost([]) }

  /** Adds a plugin at the end of the chain, validated and its dependencies checked as the config's entries are. */
  add (plugin: AnyGatewayPlugin, options: Record<string, unknown> = {}): void {
    const at = `plugin ${plugin.name}`
    const checked = validateOptions(plugin, options, at)
    const missing = missingDependencies(plugin, plugin.name, new Set(this.links.map((l) => l.name)), at)
    const problems = missing === null ? checked.problems : [...checked.problems, missing]
    if (problems.length > 0) throw new ConfigError('(plugins)', problems)
    ;(this.links as Link[]).push({ name: plugin.name, index: null, plugin, options: checked.options, scope: plugin.scope ?? 'api' })
  }

  /**
   * Registers the chain on `app`: the 'app' plugins on the whole app (so that they cover every
   * route, /admin and /console included), then one encapsulated API scope with the 'api'
   * plugins in chain order and the API's routes (`routes`). A plugin's own routes go under /v1.
   */
  async mount (app: FastifyInstance, routes: (api: FastifyInstance) => Promise<void>, opts: MountOptions): Promise<void> {
    for (const link of this.links) if (link.scope === 'app') await register(app, link)
    const core = (prefix: string): boolean => opts.corePrefixes.some((p) => prefix === p || prefix.startsWith(`${p}/`))
    await app.register(async (api) => {
      api.addHook('onRoute', (route) => {
        if (!core(route.prefix)) route.url = route.path = `/v1${route.url}`
        opts.onRoute?.(route)
      })
      for (const link of this.links) if (link.scope === 'api') await register(api, link)
      await routes(api)
    })
  }
}

type Env = Record<string, string | undefined>

/**
 * A config object as a serving gateway takes it: validated, its paths relative to `baseDir`, its
 * chain resolved, loaded and validated, every problem of both at once in one ConfigError.
 */
export async function resolveGatewayConfig (raw: unknown, opts: { env?: Env, baseDir?: string, source?: string } = {}): Promise<Config> {
  const baseDir = opts.baseDir ?? process.cwd()
  const { config, problems } = checkConfig(raw, opts.env ?? process.env)
  const chainable = config !== null && typeof config === 'object' && Array.isArray(config.plugins) && config.metrics !== undefined && config.tracing !== undefined
  const resolved = chainable && problems.length === 0 ? resolvePaths(config, baseDir) : config
  if (chainable) problems.push(...(await checkChain(resolved, baseDir)).problems)
  if (problems.length > 0) throw new ConfigError(opts.source ?? '(inline)', problems)
  return resolved
}

/** A config file as a serving gateway takes it (see resolveGatewayConfig), relative to its folder. */
export async function loadGatewayConfig (file: string, env: Env = process.env): Promise<Config> {
  return await resolveGatewayConfig(readConfigFile(file), { env, baseDir: dirname(resolve(file)), source: file })
}

/** The options a schema declares, with their defaults, for listings (`modelgate plugins`). */
export function describeOptions (schema: object | undefined): Array<{ name: string, type: string, default?: unknown, required: boolean, description?: string }> {
  const s = schema as { properties?: Record<string, Record<string, unknown>>, required?: string[] } | undefined
  if (s?.properties === undefined) return []
  return Object.entries(s.properties).filter(([, p]) => p.deprecated !== true).map(([name, p]) => ({
    name,
    type: typeof p.type === 'string' ? p.type : Array.isArray(p.anyOf) ? 'one of several' : 'any',
    ...(p.default !== undefined ? { default: p.default } : {}),
    required: s.required?.includes(name) === true && p.default === undefined,
    ...(typeof p.description === 'string' ? { description: p.description } : {})
  }))
}
