import type { AnyGatewayPlugin } from '../api/index.js'

// The built-in plugins: the only module that imports them, each when it is asked for, so that a
// config's chain loads its own plugins and no other (the listing of `modelgate plugins` loads
// them all). Order here is irrelevant; the config's `plugins:` list decides. `metrics` and
// `tracing` are switched on by config sections of their own (`metrics.enabled`,
// `tracing.otlp_endpoint`) rather than listed.

type Loader = () => Promise<{ default: AnyGatewayPlugin }>

const BUILTINS: Readonly<Record<string, Loader>> = {
  cors: async () => await import('../cors.js'),
  'rate-limit': async () => await import('../rate-limit.js'),
  auth: async () => await import('../auth.js'),
  idempotency: async () => await import('../idempotency.js'),
  quota: async () => await import('../quota.js'),
  balance: async () => await import('../balance.js'),
  usage: async () => await import('../usage.js'),
  diagnostics: async () => await import('../diagnostics.js'),
  guardrails: async () => await import('../guardrails.js'),
  cache: async () => await import('../cache.js'),
  metrics: async () => await import('../metrics.js'),
  tracing: async () => await import('../tracing.js')
}

/** The built-in plugins' names. */
export const BUILTIN_NAMES: readonly string[] = Object.keys(BUILTINS)

/** The built-in plugin of that name, loaded; undefined for a name that is none. */
export async function builtinPlugin (name: string): Promise<AnyGatewayPlugin | undefined> {
  const load = Object.hasOwn(BUILTINS, name) ? BUILTINS[name] : undefined
  return load === undefined ? undefined : (await load()).default
}

/** Every built-in plugin, loaded. */
export async function builtinPlugins (): Promise<readonly AnyGatewayPlugin[]> {
  return await Promise.all(Object.values(BUILTINS).map(async (load) => (await load()).default))
}

/** Built-ins that a config section switches on, and that may not be listed in `plugins:`. */
export const BY_SECTION: ReadonlySet<string> = new Set(['metrics', 'tracing'])
