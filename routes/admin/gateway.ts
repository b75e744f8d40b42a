import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { chainOf } from '../../plugins/gateway/registry.js'
import { maskSecrets, maskUrl } from './mask.js'

// What the gateway is made of and how its providers fare: the configured providers with their
// breaker, latency average and last failures, and the plugin chain in the order it applies, its
// options with their secrets masked (./mask.ts).
//
// A provider's health lives in each worker's memory (plugins/upstream/health.ts): with several
// workers, /providers answers what the worker that took the request has seen (`pid` says which).

const iso = (t: number): string => new Date(t).toISOString()

const gateway: FastifyPluginAsyncTypebox<{ generation?: number }> = async (fastify, opts) => {
  const { config, upstreams } = fastify.gateway

  fastify.get('/providers', async () => {
    const status = upstreams.status()
    return {
      object: 'list',
      pid: process.pid,
      data: config.providers.map((p) => {
        const s = status[p.id]
        const configured = upstreams.configured(p.id)
        const breaker = s?.state ?? 'closed'
        return {
          id: p.id,
          protocol: p.protocol,
          base_url: p.base_url === undefined ? null : maskUrl(p.base_url),
          configured,
          breaker,
          healthy: configured && breaker === 'closed',
          avg_latency_ms: s?.ttfb_ms ?? null,
          recent_failures: upstreams.health.recentFailures(p.id).map((f) => ({ at: iso(f.at), status: f.status, error: f.error }))
        }
      })
    }
  })

  // The chain as it applies: the `plugins:` entries that are enabled, in config order, then the
  // metrics and tracing plugins when their sections switch them on (shown with their section).
  fastify.get('/plugins', async () => ({
    object: 'list',
    generation: opts.generation ?? null,
    data: chainOf(config).filter((e) => e.enabled).map((e) => ({
      name: e.name,
      module: e.module ?? null,
      enabled: true,
      options: maskSecrets(e.module === undefined && e.name === 'metrics' ? { ...config.metrics } : e.options ?? {})
    }))
  }))
}

export default gateway
