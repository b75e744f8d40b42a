import type { Config, ProviderConfig } from '../../config/schema.js'
import type { Clock } from '../api.js'
import { createDemoClient } from './demo.js'
import { createHttpClient } from './http.js'
import type { UpstreamClient } from './types.js'

export type { UpstreamClient, UpstreamRequest, UpstreamResponse } from './types.js'
export { CallAbort } from './types.js'

// After this many consecutive failures (5xx, reset, refused, timeout) a provider is marked
// unhealthy for COOLDOWN_MS and is tried only when no healthy provider of the model is left.
const FAILURES_BEFORE_UNHEALTHY = 3
const COOLDOWN_MS = 30_000

interface Health { failures: number, unhealthyUntil: number }

export class Upstreams {
  private readonly clients = new Map<string, UpstreamClient>()
  private readonly usable = new Set<string>()
  private readonly health = new Map<string, Health>()

  constructor (config: Config, private readonly clock: Clock) {
    const timeoutMs = config.server.request_timeout_s * 1000
    for (const p of config.providers) {
      this.clients.set(p.id, p.builtin === 'demo' ? createDemoClient(p.id, p.protocol) : createHttpClient(p, { timeoutMs }))
      if (isUsable(p)) this.usable.add(p.id)
      this.health.set(p.id, { failures: 0, unhealthyUntil: 0 })
    }
  }

  /** The client of a provider, usable or not. */
  get (id: string): UpstreamClient | undefined { return this.clients.get(id) }

  /**
   * The model's providers to try, in config order: healthy ones first, then unhealthy ones as
   * a last resort. Providers with no credentials are not usable and never tried.
   */
  candidates (providerIds: readonly string[]): UpstreamClient[] {
    const now = this.clock.now()
    const healthy: UpstreamClient[] = []
    const resting: UpstreamClient[] = []
    for (const id of providerIds) {
      const client = this.clients.get(id)
      if (client === undefined || !this.usable.has(id)) continue
      const h = this.health.get(id) as Health
      ;(h.unhealthyUntil > now ? resting : healthy).push(client)
    }
    return healthy.concat(resting)
  }

  succeeded (id: string): void {
    const h = this.health.get(id)
    if (h !== undefined && h.failures !== 0) { h.failures = 0; h.unhealthyUntil = 0 }
  }

  failed (id: string): void {
    const h = this.health.get(id)
    if (h === undefined) return
    h.failures++
    if (h.failures >= FAILURES_BEFORE_UNHEALTHY) h.unhealthyUntil = this.clock.now() + COOLDOWN_MS
  }

  async close (): Promise<void> {
    await Promise.all([...this.clients.values()].map(async (c) => await c.close()))
  }
}

// An HTTP provider without an API key cannot be called: the shipped catalog's real providers
// answer 503 until OPENAI_API_KEY / ANTHROPIC_API_KEY are set. (A local server that needs no
// key takes any placeholder.)
function isUsable (p: ProviderConfig): boolean {
  return p.builtin !== undefined || p.api_key !== ''
}
