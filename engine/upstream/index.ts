import type { Config } from '../../config/schema.js'
import type { Protocol } from '../translation/types.js'
import type { Clock } from '../kernel/clock.js'
import { attemptError } from './attempt-error.js'
import { createDemoClient } from './demo.js'
import { HealthBook, type BreakerState, type HealthOptions } from './health.js'
import { createHttpClient } from './http.js'
import { platformFor, type Platform } from './platforms/index.js'
import { orderProviders, type RoutingPolicy } from './routing.js'
import type { AttemptReport, UpstreamClient } from './types.js'

export type { AttemptOutcome, AttemptReport, AttemptSink, UpstreamClient, UpstreamRequest, UpstreamResponse } from './types.js'
export { CallAbort } from './types.js'
export { attemptError } from './attempt-error.js'
export type { RoutingPolicy } from './routing.js'

export interface UpstreamsOptions {
  /** Breakers and latency averages; shared by the configurations of one process. */
  health?: HealthBook
  /** Random source of the weighted and latency policies (tests pass a seeded one). */
  random?: () => number
  /** The environment the platforms read their credentials from (AWS_*); default process.env. */
  env?: Readonly<Record<string, string | undefined>>
}

export interface ProviderStatus { state: BreakerState, failures: number, ttfb_ms: number | null, credentials: boolean, platform: string | null }

export function healthOptions (config: Config): HealthOptions {
  const u = config.upstream
  return { failures: u.breaker.failures, openMs: u.breaker.open_s * 1000, smoothing: u.latency.smoothing }
}

export class Upstreams {
  readonly health: HealthBook
  private readonly clients = new Map<string, UpstreamClient>()
  private readonly usable = new Set<string>()
  private readonly random: () => number
  private readonly explore: number
  private readonly observers: Array<(r: AttemptReport) => void> = []

  constructor (config: Config, clock: Clock, opts: UpstreamsOptions = {}) {
    const timeoutMs = config.server.request_timeout_s * 1000
    this.health = opts.health ?? new HealthBook(clock)
    this.health.options = healthOptions(config)
    this.random = opts.random ?? Math.random
    this.explore = config.upstream.latency.explore
    const deps = { now: () => clock.now(), env: opts.env ?? process.env }
    for (const p of config.providers) {
      // a converse provider is never built in (config checks)
      const platform: Platform | null = p.builtin === 'demo' ? null : platformFor(p, deps)
      this.clients.set(p.id, platform === null ? createDemoClient(p.id, p.protocol as Protocol) : createHttpClient(p, { timeoutMs, platform }))
      if (platform === null || platform.configured) this.usable.add(p.id)
    }
  }

  /** Whether the provider can be called: built in, or given credentials. */
  configured (id: string): boolean { return this.usable.has(id) }

  /** The client of a provider, usable or not. */
  get (id: string): UpstreamClient | undefined { return this.clients.get(id) }

  /** The configured providers' ids. */
  ids (): string[] { return [...this.clients.keys()] }

  /**
   * The model's providers to try, in the routing policy's order (config order by default).
   * Providers with no credentials, and those whose breaker is open, are left out.
   */
  candidates (providerIds: readonly string[], policy?: RoutingPolicy): UpstreamClient[] {
    const ids: string[] = []
    const weights: number[] = []
    providerIds.forEach((id, i) => {
      if (!this.clients.has(id) || !this.usable.has(id) || !this.health.usable(id)) return
      ids.push(id)
      weights.push(policy?.weights?.[i] ?? 1)
    })
    const order = orderProviders(ids, policy === undefined ? undefined : { routing: policy.routing, weights }, { health: this.health, random: this.random, explore: this.explore })
    return order.map((id) => this.clients.get(id) as UpstreamClient)
  }

  /** Whether an attempt may go to the provider now (its breaker may have opened meanwhile). */
  admit (id: string): boolean { return this.health.admit(id) }

  /** Hears every attempt's report. */
  observe (fn: (r: AttemptReport) => void): void { this.observers.push(fn) }

  /** An attempt ended: the breaker and the latency average learn from it. */
  report (r: AttemptReport): void {
    if (r.outcome === 'ok' || r.outcome === 'client_error') this.health.success(r.provider, r.end - r.start)
    // the client left, or its request could not be sent as it is: nothing learnt of the provider
    else if (r.outcome === 'aborted' || r.outcome === 'request_error') this.health.release(r.provider)
    else this.health.failure(r.provider, { status: r.status, error: attemptError(r) ?? r.outcome })
    for (const fn of this.observers) fn(r)
  }

  /** Each configured provider's breaker and latency average, and whether it has credentials (for /readyz). */
  status (): Record<string, ProviderStatus> {
    const out: Record<string, ProviderStatus> = {}
    for (const id of this.clients.keys()) {
      const h = this.health.of(id)
      const platform = (this.clients.get(id) as UpstreamClient).platform.name
      out[id] = { state: h.state, failures: h.failures, ttfb_ms: h.ttfbMs === null ? null : Math.round(h.ttfbMs * 100) / 100, credentials: this.usable.has(id), platform: platform === 'vendor' ? null : platform }
    }
    return out
  }

  async close (): Promise<void> {
    await Promise.all([...this.clients.values()].map(async (c) => await c.close()))
  }
}

export { credentialFields, hasCredentials, withoutCredentials } from './credential-fields.js'
