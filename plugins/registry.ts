import type { FastifyInstance, FastifyPluginAsync } from 'fastify'
import fp from 'fastify-plugin'
import type { Static, TObject, TSchema } from '@sinclair/typebox'
import type { PluginEntry } from '../config/schema.js'
import auth from './auth.js'
import balance from './balance.js'
import cors from './cors.js'
import diagnostics from './diagnostics.js'
import idempotency from './idempotency.js'
import quota from './quota.js'
import rateLimit from './rate-limit.js'
import usage from './usage.js'

/**
 * A concern plugin of the request chain (STYLE.md "A concern plugin"): a name, a TypeBox schema
 * of its options (with defaults), the plugins it needs before it, and the Fastify plugin itself.
 * The app's services (config, store, catalog, clock) are on `fastify.gw`.
 */
export interface GatewayPlugin<S extends TObject = TObject> {
  name: string
  options: S
  dependencies?: string[]
  plugin: FastifyPluginAsync<Static<S>>
}

export function definePlugin<S extends TObject> (p: GatewayPlugin<S>): GatewayPlugin<S> {
  return p
}

// Every known plugin. Order here is irrelevant: the config's `plugins:` list decides the chain.
const KNOWN: GatewayPlugin[] = [
  cors,
  rateLimit,
  auth,
  idempotency,
  quota,
  balance,
  usage,
  diagnostics
] as unknown as GatewayPlugin[]

const byName = new Map(KNOWN.map((p) => [p.name, p]))

export function pluginSchemas (): Map<string, TSchema> {
  return new Map(KNOWN.map((p) => [p.name, p.options]))
}

/**
 * Registers the enabled plugins of the config's chain, in config order, into `scope` (the
 * encapsulated /v1 scope). Options were validated and defaulted by the config loader.
 */
export async function registerChain (scope: FastifyInstance, entries: PluginEntry[]): Promise<void> {
  const enabled = new Set(entries.filter((e) => e.enabled).map((e) => e.name))
  for (const entry of entries) {
    if (!entry.enabled) continue
    const def = byName.get(entry.name)
    if (def === undefined) throw new Error(`unknown plugin ${entry.name}`)
    const missing = (def.dependencies ?? []).filter((d) => !enabled.has(d))
    if (missing.length > 0) throw new Error(`plugin ${def.name} needs ${missing.join(', ')} enabled before it`)
    await scope.register(fp(def.plugin, { name: `modelgate-${def.name}`, fastify: '5.x', dependencies: (def.dependencies ?? []).map((d) => `modelgate-${d}`) }), entry.options ?? {})
  }
}
