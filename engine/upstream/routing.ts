import type { Routing } from '../../config/schema.js'
import type { HealthBook } from './health.js'

// The order in which a call tries a model's providers (those whose breaker lets calls through):
//
//   failover  the order of the config
//   weighted  a random order drawn by weight: the first provider is each one with probability
//             weight / sum of weights, and so on down the rest (a weight of 0 comes last)
//   latency   the lowest moving average of the time to first byte first; providers never
//             measured come first, and a share `explore` of calls puts another provider first
//             at random, so that a slow provider that got faster is noticed

export interface RoutingPolicy {
  routing: Routing
  /** Weights in the order of the ids (weighted). */
  weights?: readonly number[]
}

export interface OrderOptions {
  health: HealthBook
  random: () => number
  explore: number
}

export function orderProviders (ids: readonly string[], policy: RoutingPolicy | undefined, opts: OrderOptions): string[] {
  if (policy === undefined || policy.routing === 'failover' || ids.length < 2) return [...ids]
  if (policy.routing === 'weighted') return weightedOrder(ids, policy.weights ?? [], opts.random)
  return latencyOrder(ids, opts)
}

// Efraimidis–Spirakis: each item's key is u^(1/w); sorting by key descending draws the items one
// after the other with probability proportional to their weight.
function weightedOrder (ids: readonly string[], weights: readonly number[], random: () => number): string[] {
  const keyed = ids.map((id, i) => {
    const w = weights[i] ?? 1
    return { id, key: w > 0 ? Math.pow(random(), 1 / w) : -1 }
  })
  keyed.sort((a, b) => b.key - a.key)
  return keyed.map((k) => k.id)
}

function latencyOrder (ids: readonly string[], opts: OrderOptions): string[] {
  const ranked = ids.map((id, i) => ({ id, i, ms: opts.health.of(id).ttfbMs ?? -1 }))
  ranked.sort((a, b) => a.ms - b.ms || a.i - b.i)
  const out = ranked.map((r) => r.id)
  if (opts.explore > 0 && opts.random() < opts.explore) {
    const j = 1 + Math.floor(opts.random() * (out.length - 1))
    const [picked] = out.splice(j, 1)
    out.unshift(picked as string)
  }
  return out
}
