import type { AnyGatewayPlugin } from '../api/index.js'
import auth from '../auth.js'
import balance from '../balance.js'
import cache from '../cache.js'
import cors from '../cors.js'
import diagnostics from '../diagnostics.js'
import guardrails from '../guardrails.js'
import idempotency from '../idempotency.js'
import metrics from '../metrics.js'
import quota from '../quota.js'
import rateLimit from '../rate-limit.js'
import tracing from '../tracing.js'
import usage from '../usage.js'

// The built-in plugins: the only module that imports them. Order here is irrelevant; the
// config's `plugins:` list decides. `metrics` and `tracing` are switched on by config sections
// of their own (`metrics.enabled`, `tracing.otlp_endpoint`) rather than listed.

const BUILTINS: readonly AnyGatewayPlugin[] = [cors, rateLimit, auth, idempotency, quota, balance, usage, diagnostics, guardrails, cache, metrics, tracing]
const byName = new Map(BUILTINS.map((p) => [p.name, p]))

export function builtinPlugins (): readonly AnyGatewayPlugin[] { return BUILTINS }
export function builtinPlugin (name: string): AnyGatewayPlugin | undefined { return byName.get(name) }

/** Built-ins that a config section switches on, and that may not be listed in `plugins:`. */
export const BY_SECTION: ReadonlySet<string> = new Set(['metrics', 'tracing'])
