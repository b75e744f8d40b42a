import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { Link } from '../../engine/host/index.js'
import { RECENT_FAILURES, type BreakerState, type FailureNote, type HealthReport } from '../../engine/upstream/health.js'
import { Answers } from './answers.js'
import { providerBaseUrl } from '../../engine/upstream/platforms/index.js'
import { maskSecrets, maskUrl } from './mask.js'

// What the gateway is made of and how its providers fare: the configured providers with their
// breaker, latency average and last failures, the MCP servers behind /mcp with their status and
// tools, and the plugin chain in the order it applies, its options with their secrets masked
// (./mask.ts).
//
// A provider's health lives in each worker's memory (engine/upstream/health.ts): with several
// workers, /providers asks every worker for its view (through the primary) and merges them: the
// worst breaker, the mean of the latency averages, the latest failures of all, each with the pid
// of the worker that saw it; `workers` has each worker's own breaker and latency.

const iso = (t: number): string => new Date(t).toISOString()

/** Worst first: a breaker open in one worker is open for some of the calls. */
const SEVERITY: Record<BreakerState, number> = { open: 2, half_open: 1, closed: 0 }

const round2 = (ms: number): number => Math.round(ms * 100) / 100

type McpStatus = 'ready' | 'starting' | 'down'
const MCP_SEVERITY: Record<McpStatus, number> = { down: 2, starting: 1, ready: 0 }

/** One provider's health across the workers' reports. */
function merged (id: string, reports: HealthReport[]): { breaker: BreakerState, avgLatencyMs: number | null, failures: Array<FailureNote & { pid: number }>, workers: Array<{ pid: number, breaker: BreakerState, avg_latency_ms: number | null }> } {
  let breaker: BreakerState = 'closed'
  const latencies: number[] = []
  const failures: Array<FailureNote & { pid: number }> = []
  const workers: Array<{ pid: number, breaker: BreakerState, avg_latency_ms: number | null }> = []
  for (const r of reports) {
    const v = r.providers[id]
    const state = v?.state ?? 'closed'
    if (SEVERITY[state] > SEVERITY[breaker]) breaker = state
    const ttfb = v?.ttfbMs ?? null
    if (ttfb !== null) latencies.push(ttfb)
    for (const f of v?.failures ?? []) failures.push({ ...f, pid: r.pid })
    workers.push({ pid: r.pid, breaker: state, avg_latency_ms: ttfb === null ? null : round2(ttfb) })
  }
  failures.sort((a, b) => b.at - a.at)
  const avgLatencyMs = latencies.length === 0 ? null : round2(latencies.reduce((a, b) => a + b, 0) / latencies.length)
  return { breaker, avgLatencyMs, failures: failures.slice(0, RECENT_FAILURES), workers }
}

const gateway: FastifyPluginAsyncTypebox<{ generation?: number, providerHealth?: () => Promise<HealthReport[]>, plugins?: readonly Link[] }> = async (fastify, opts) => {
  const { config, upstreams } = fastify.gateway
  const own = (): HealthReport[] => [{ pid: process.pid, providers: upstreams.health.snapshot() }]
  const providerHealth = opts.providerHealth

  fastify.get('/providers', { schema: { response: { 200: Answers.providers } } }, async () => {
    // every worker's view; this process's own when it is alone (or the primary could not be asked)
    let reports = providerHealth === undefined ? own() : await providerHealth().catch(own)
    if (reports.length === 0) reports = own()
    return {
      object: 'list' as const,
      pid: process.pid,
      workers: reports.length,
      data: config.providers.map((p) => {
        const configured = upstreams.configured(p.id)
        const m = merged(p.id, reports)
        return {
          id: p.id,
          protocol: p.protocol,
          platform: p.platform ?? null,
          // a platform's default endpoint (its region's, its location's) when the config names none
          base_url: p.builtin !== undefined ? null : maskUrl(providerBaseUrl(p)),
          configured,
          breaker: m.breaker,
          healthy: configured && m.breaker === 'closed',
          avg_latency_ms: m.avgLatencyMs,
          recent_failures: m.failures.map((f) => ({ at: iso(f.at), status: f.status, error: f.error, pid: f.pid })),
          workers: m.workers
        }
      })
    }
  })

  // The MCP servers behind /mcp. Each worker has its own connections (and its own stdio
  // processes): with several, the worst status of any worker, every tool any lists, and the
  // error of one that is not ready; `workers` has each worker's own status.
  fastify.get('/mcp/servers', { schema: { response: { 200: Answers.mcpServers } } }, async () => {
    const mine = fastify.mcpServers?.views() ?? []
    const own = (): HealthReport[] => [{ pid: process.pid, providers: {}, mcp: mine }]
    let reports = providerHealth === undefined ? own() : await providerHealth().catch(own)
    if (!reports.some((r) => r.mcp !== undefined)) reports = own()
    return {
      object: 'list' as const,
      pid: process.pid,
      workers: reports.length,
      data: config.mcp.servers.map((s) => {
        let status: McpStatus = 'ready'
        let lastError: string | null = null
        const tools: string[] = []
        const workers: Array<{ pid: number, status: McpStatus }> = []
        for (const r of reports) {
          const v = r.mcp?.find((m) => m.id === s.id)
          if (v === undefined) continue
          if (MCP_SEVERITY[v.status] > MCP_SEVERITY[status]) status = v.status
          lastError ??= v.last_error
          for (const t of v.tools) if (!tools.includes(t)) tools.push(t)
          workers.push({ pid: r.pid, status: v.status })
        }
        return { id: s.id, transport: s.transport, status: workers.length === 0 ? 'starting' : status, tools, last_error: lastError, workers }
      })
    }
  })

  // The chain as it applies: the `plugins:` entries that are enabled, in config order, then the
  // metrics and tracing plugins when their sections switch them on (shown with their section).
  fastify.get('/plugins', { schema: { response: { 200: Answers.plugins } } }, async () => ({
    object: 'list' as const,
    generation: opts.generation ?? null,
    data: (opts.plugins ?? []).map((l) => ({
      name: l.name,
      module: l.module ?? null,
      enabled: true,
      options: maskSecrets(l.index === null && l.name === 'metrics' ? { ...config.metrics } : l.options)
    }))
  }))
}

export default gateway
