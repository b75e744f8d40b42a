import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, isAbsolute, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import type { Config, PluginEntry } from '../../config/schema.js'
import type { GatewayPlugin } from '../api/index.js'
import { resolveOwnApi } from './own-api.js'
import auth from '../auth.js'
import balance from '../balance.js'
import cache from '../cache.js'
import cors from '../cors.js'
import diagnostics from '../diagnostics.js'
import guardrails from '../guardrails.js'
import idempotency from '../idempotency.js'
import quota from '../quota.js'
import rateLimit from '../rate-limit.js'
import usage from '../usage.js'
import metrics from '../metrics.js'
import tracing from '../tracing.js'

// The built-in plugins, plugins loaded from outside the project, and the chain: the only module
// that imports the built-ins. Order here is irrelevant; the config's `plugins:` list decides.

const BUILTINS: GatewayPlugin[] = [cors, rateLimit, auth, idempotency, quota, balance, usage, diagnostics, guardrails, cache, metrics, tracing] as unknown as GatewayPlugin[]
const byName = new Map(BUILTINS.map((p) => [p.name, p]))

export function builtinPlugins (): readonly GatewayPlugin[] { return BUILTINS }
export function builtinPlugin (name: string): GatewayPlugin | undefined { return byName.get(name) }

/** Plugins loaded from modules, by their resolved specifier. */
const loaded = new Map<string, GatewayPlugin>()

const looksLikePath = (spec: string): boolean => spec.startsWith('.') || isAbsolute(spec) || spec.startsWith('file:')

/**
 * Where a config's `module` points: a file path relative to the config's folder, or an npm
 * package installed where the config is (or where modelgate is). Throws with a reason.
 */
export function resolveModule (spec: string, baseDir: string): string {
  if (spec.startsWith('file:')) return spec
  if (looksLikePath(spec)) {
    const file = resolve(baseDir, spec)
    if (!existsSync(file)) throw new Error(`no file ${file}`)
    return pathToFileURL(file).href
  }
  for (const from of [join(baseDir, 'package.json'), import.meta.url]) {
    try {
      return pathToFileURL(createRequire(from).resolve(spec)).href
    } catch {}
    const entry = esmEntry(spec, from.startsWith('file:') ? dirname(new URL(from).pathname) : baseDir)
    if (entry !== undefined) return pathToFileURL(entry).href
  }
  throw new Error(`cannot find the package ${spec} (install it beside the config, or give a file path)`)
}

// A package that only exports an `import` entry, which require.resolve cannot see.
function esmEntry (name: string, from: string): string | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    const pkgDir = join(dir, 'node_modules', name)
    const pkgFile = join(pkgDir, 'package.json')
    if (existsSync(pkgFile)) {
      const pkg = JSON.parse(readFileSync(pkgFile, 'utf8')) as { exports?: unknown, module?: string, main?: string }
      let target: unknown = pkg.exports
      if (typeof target === 'object' && target !== null && '.' in target) target = (target as Record<string, unknown>)['.']
      while (typeof target === 'object' && target !== null) {
        const t = target as Record<string, unknown>
        target = t.import ?? t.node ?? t.default
      }
      const rel = typeof target === 'string' ? target : pkg.module ?? pkg.main ?? 'index.js'
      return join(pkgDir, rel)
    }
    if (dirname(dir) === dir) return undefined
  }
}

/** A module's plugin object, or why it has none. */
export function pluginOf (exported: unknown): GatewayPlugin | string {
  const m = exported as { default?: unknown } | null
  const p = (m?.default ?? m) as Partial<GatewayPlugin> | null
  if (p === null || typeof p !== 'object') return 'exports no plugin: its default export must be { name, options?, plugin }'
  if (typeof p.plugin !== 'function') return 'exports no plugin: its default export has no `plugin` function'
  if (typeof p.name !== 'string' || p.name === '') return 'exports a plugin without a `name`'
  if (p.options !== undefined && (p.options === null || typeof p.options !== 'object')) return 'exports a plugin whose `options` is not a JSON Schema object'
  if (p.scope !== undefined && p.scope !== 'api' && p.scope !== 'app') return "exports a plugin whose `scope` is neither 'api' nor 'app'"
  return p as GatewayPlugin
}

/** Imports the plugin at a resolved specifier (cached); throws with a reason. */
export async function loadPlugin (resolved: string): Promise<GatewayPlugin> {
  const cached = loaded.get(resolved)
  if (cached !== undefined) return cached
  resolveOwnApi()
  const p = pluginOf(await import(resolved))
  if (typeof p === 'string') throw new Error(p)
  loaded.set(resolved, p)
  return p
}

/** The definition behind a config entry: a built-in by name, or a loaded module. */
export function definitionOf (entry: PluginEntry): GatewayPlugin | undefined {
  return entry.module === undefined ? byName.get(entry.name) : loaded.get(entry.module)
}

/** Plugins switched on by a config section of their own rather than listed in `plugins:`. */
const BY_SECTION = new Set(['metrics', 'tracing'])

/**
 * The chain a config makes: its `plugins:` entries, then the metrics plugin (when
 * `metrics.enabled`) and the tracing plugin (when `tracing.otlp_endpoint` is set), configured by
 * their sections.
 */
export function chainOf (config: Config): PluginEntry[] {
  const chain = config.plugins.slice()
  if (config.metrics.enabled) chain.push({ name: 'metrics', enabled: true, options: {} })
  if (config.tracing.otlp_endpoint !== '') chain.push({ name: 'tracing', enabled: true, options: { ...config.tracing } })
  return chain
}

/** Whether a built-in is switched on by its own config section (and may not be listed in `plugins:`). */
export function bySection (name: string): boolean { return BY_SECTION.has(name) }

/**
 * Registers the enabled plugins of the config's chain, in config order: those whose scope is
 * 'app' on `app` (every route), the others into `api` (the encapsulated /v1 scope). Options were
 * validated and defaulted, and modules loaded, by the config loader.
 */
export async function registerChain (app: FastifyInstance, api: FastifyInstance, entries: PluginEntry[], scope: 'app' | 'api'): Promise<void> {
  const enabled = new Set(entries.filter((e) => e.enabled).map((e) => e.name))
  for (const entry of entries) {
    if (!entry.enabled) continue
    const def = entry.module === undefined ? byName.get(entry.name) : await loadPlugin(entry.module)
    if (def === undefined) throw new Error(`unknown plugin ${entry.name}`)
    if ((def.scope ?? 'api') !== scope) continue
    const missing = (def.dependencies ?? []).filter((d) => !enabled.has(d))
    if (missing.length > 0) throw new Error(`plugin ${entry.name} needs ${missing.join(', ')} enabled before it`)
    const wrapped = fp(def.plugin, { name: `modelgate-${entry.name}`, fastify: '5.x', dependencies: (def.dependencies ?? []).map((d) => `modelgate-${d}`) })
    await (scope === 'app' ? app : api).register(wrapped, entry.options ?? {})
  }
}
