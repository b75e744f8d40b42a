import type { FastifyInstance } from 'fastify'
import type { Config } from '../../config/schema.js'
import { adminGuard } from './admin-token.js'
import type { GatewayCore } from '../gateway/core.js'
import { Metrics } from './metrics/index.js'
import type { Store } from '../store/types.js'
import { createTracer, type CallTracer } from './tracing/index.js'
import type { HealthBook } from '../upstream/health.js'

// What an operator watches and steers, around one app: the metrics subscription to every call's
// outcome and every upstream attempt, GET /metrics, the trace of each call, and the reload hook
// of the admin API. The metrics registry and the providers' health outlive a configuration (the
// Runtime of the process); a trace exporter belongs to the configuration that names it.

/** How a reload went: what changed, or every problem of the file (the running configuration is kept). */
export type ReloadResult =
  | { ok: true, changes: string[], generation: number, workers?: number }
  | { ok: false, problems: string[] }

/** What outlives one configuration in a process. */
export interface Runtime {
  metrics: Metrics
  health: HealthBook | undefined
  /** The text of a scrape: this process's figures, or every worker's. */
  scrape: () => Promise<string>
  /** Re-reads the configuration file; absent when the app was built on its own (tests). */
  reload?: () => Promise<ReloadResult>
}

export function standaloneRuntime (): Runtime {
  const metrics = new Metrics()
  return { metrics, health: undefined, scrape: async () => await metrics.text() }
}

/**
 * Subscribes the runtime's metrics and this configuration's tracer to the app's calls and
 * attempts, and serves GET /metrics as the config says. Returns the tracer (closed with the app).
 */
export async function installOperations (app: FastifyInstance, core: GatewayCore, config: Config, store: Store, runtime: Runtime): Promise<CallTracer | null> {
  const { gateway, hooks } = core
  const { metrics } = runtime
  if (config.metrics.enabled) {
    metrics.watchStore(store)
    metrics.watchHealth(gateway.upstreams.health)
    hooks.add('onCallEnd', (outcome) => { metrics.call(outcome) })
    gateway.upstreams.observe((r) => { metrics.attempt(r) })
    const guard = config.metrics.auth === 'admin' ? adminGuard(config.admin.token) : null
    app.get('/metrics', { config: { auth: false } }, async (request, reply) => {
      guard?.(request)
      const text = await runtime.scrape()
      return reply.header('content-type', metrics.contentType).send(text)
    })
  }
  const tracer = await createTracer(config.tracing, gateway.log)
  if (tracer !== null) {
    hooks.add('onCallEnd', (outcome) => { tracer.call(outcome) })
    app.addHook('onClose', async () => { await tracer.shutdown() })
  }
  return tracer
}
