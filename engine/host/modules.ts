import { existsSync, readFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { dirname, isAbsolute, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import type { AnyGatewayPlugin } from '../../plugins/api/index.js'
import { resolveOwnApi } from './own-api.js'

// Plugins from outside the project: where a config's `module` points (a file, or an npm package
// installed beside the config or beside modelgate), and the plugin object its default export is.

/** Plugins loaded from modules, by their resolved specifier. */
const loaded = new Map<string, AnyGatewayPlugin>()

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
export function pluginOf (exported: unknown): AnyGatewayPlugin | string {
  const m = exported as { default?: unknown } | null
  const p = (m?.default ?? m) as Partial<AnyGatewayPlugin> | null
  if (p === null || typeof p !== 'object') return 'exports no plugin: its default export must be { name, options?, plugin }'
  if (typeof p.plugin !== 'function') return 'exports no plugin: its default export has no `plugin` function'
  if (typeof p.name !== 'string' || p.name === '') return 'exports a plugin without a `name`'
  if (p.options !== undefined && (p.options === null || typeof p.options !== 'object')) return 'exports a plugin whose `options` is not a JSON Schema object'
  if (p.scope !== undefined && p.scope !== 'api' && p.scope !== 'app') return "exports a plugin whose `scope` is neither 'api' nor 'app'"
  return p as AnyGatewayPlugin
}

/** Imports the plugin at a resolved specifier (cached); throws with a reason. */
export async function loadPlugin (resolved: string): Promise<AnyGatewayPlugin> {
  const cached = loaded.get(resolved)
  if (cached !== undefined) return cached
  resolveOwnApi()
  const p = pluginOf(await import(resolved))
  if (typeof p === 'string') throw new Error(p)
  loaded.set(resolved, p)
  return p
}
