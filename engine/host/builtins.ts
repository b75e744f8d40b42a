import type { AnyGatewayPlugin } from '../../plugins/api/index.js'

// The built-in plugins: the only module that imports them, each when it is asked for, so that a
// config's chain loads its own plugins and no other (the listing of `modelgate plugins` loads
// them all). Order here is irrelevant; the config's `plugins:` list decides. `metrics` and
// `tracing` are switched on by config sections of their own (`metrics.enabled`,
// `tracing.otlp_endpoint`) rather than listed.

type Loader = () => Promise<{ default: AnyGatewayPlugin }>

const BUILTINS: Readonly<Record<string, Loader>> = {
  cors: async () => await import('../../plugins/cors.js'),
  'rate-limit': async () => await import('../../plugins/rate-limit.js'),
  auth: async () => await import('../../plugins/auth.js'),
  idempotency: async () => await import('../../plugins/idempotency.js'),
  quota: async () => await import('../../plugins/quota.js'),
  balance: async () => await import('../../plugins/balance.js'),
  usage: async () => await import('../../plugins/usage.js'),
  diagnostics: async () => await import('../../plugins/diagnostics.js'),
  guardrails: async () => await import('../../plugins/guardrails.js'),
  cache: async () => await import('../../plugins/cache.js'),
  metrics: async () => await import('../../plugins/metrics.js'),
  tracing: async () => await import('../../plugins/tracing.js')
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
