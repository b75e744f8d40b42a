import type { FastifyInstance } from 'fastify'
import type { Config } from '../../config/schema.js'
import { adminGuard } from './admin-token.js'
import { Metrics } from './metrics/index.js'
import type { HealthBook, HealthReport } from '../upstream/health.js'

// What an operator watches and steers, around one app: GET /metrics and the reload hook of the
// admin API. The metrics registry and the providers' health outlive a configuration (the Runtime
// of the process); the figures themselves come from plugins (the metrics plugin's, and any other
// plugin's series in the same registry).

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
  /** Every worker's view of the providers (serve --workers N); absent in a single process. */
  providerHealth?: () => Promise<HealthReport[]>
}

export function standaloneRuntime (): Runtime {
  const metrics = new Metrics()
  return { metrics, health: undefined, scrape: async () => await metrics.text() }
}

/** GET /metrics, as the config says (behind the admin token, or open). */
export function serveMetrics (app: FastifyInstance, config: Config, runtime: Runtime): void {
  if (!config.metrics.enabled) return
  const guard = config.metrics.auth === 'admin' ? adminGuard(config.admin) : null
  app.get('/metrics', { config: { auth: false } }, async (request, reply) => {
    guard?.(request)
    const text = await runtime.scrape()
    return reply.header('content-type', runtime.metrics.contentType).send(text)
  })
}
