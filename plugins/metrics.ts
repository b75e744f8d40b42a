import { Type } from '@sinclair/typebox'
import { definePlugin } from './api/index.js'

// Gateway hook: onCallEnd. The Prometheus figures of every call (counts, tokens, durations, time
// to first byte, the gateway's overhead, cost) and of each of its attempts at a provider (outcome,
// time to first byte, retries, failovers), the providers' breakers and the store's write batches,
// in the process's registry (`gateway.metrics`), which GET /metrics serves. On when the config's
// `metrics.enabled` is (the default); it runs after the chain's own plugins.

export default definePlugin({
  name: 'metrics',
  description: 'Prometheus figures of every call and attempt, on GET /metrics (enabled by metrics.enabled)',
  options: Type.Object({}, { additionalProperties: false }),
  plugin: async (fastify) => {
    const { gateway } = fastify
    // loaded when the chain is mounted, not with the plugin's definition (`config check` reads its options alone)
    const { callMetrics } = await import('../engine/ops/metrics/calls.js')
    const m = callMetrics(gateway.metrics)
    m.watchHealth(gateway.upstreams.health)
    m.watchStore(gateway.store)
    // a model label is a catalog id, or `other`: never a string a client chose
    const label = (id: string | null): string => id !== null && gateway.catalog.get(id) !== undefined ? id : 'other'
    gateway.addHook('onCallEnd', (outcome) => { m.call(outcome, label(outcome.model), label) })
  }
})
