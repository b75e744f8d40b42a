// The CPU the metrics spend per call, measured alone: what the metrics plugin's end-of-call hook
// does (CallMetrics.call, the call's one attempt included) over a million calls spread over a few
// models, providers and organizations. A figure in µs that `npm run bench` sets beside
// the gateway's CPU per call; the on/off comparison of two gateways moves by more than 3% from
// round to round on a shared machine, this one does not.
//   node --import tsx bench/metrics-cost.ts
import { Registry } from 'prom-client'
import type { AttemptReport, CallOutcome } from '../plugins/api/index.js'
import { callMetrics } from '../engine/ops/metrics/calls.js'

const MODELS = ['bench/one', 'bench/two', 'bench/three']

function outcome (i: number): CallOutcome {
  return {
    traceId: `t${i}`,
    endpoint: i % 2 === 0 ? 'chat.completions' : 'messages',
    protocol: 'openai',
    model: MODELS[i % 3] as string,
    upstreamModel: 'up',
    provider: `p${i % 2}`,
    tags: [],
    stream: i % 3 === 0,
    status: 'ok',
    error: null,
    httpStatus: 200,
    principal: { keyId: 'k', org: `org${i % 5}`, project: 'p', models: ['*'], passthrough: [] },
    attempted: true,
    billed: true,
    usage: { prompt_tokens: 100 + (i % 50), cached_input_tokens: i % 4, completion_tokens: 30, cache_creation_input_tokens: 0 },
    estimated: false,
    costNano: 12_345,
    costDetail: { input: 12_345, cached_input: 0, cache_write: 0, output: 0, images: 0, per_request: 0, tool_call: 0, tier: null },
    cacheHit: false,
    savedNano: 0,
    startedAt: 1000,
    firstByteAt: 1010,
    endedAt: 1100,
    t0: 0,
    t1: 100,
    overheadMs: 0.31,
    upstreamMs: 90,
    attempts: [report(i)],
    dropped: [],
    content: null
  }
}

function report (i: number): AttemptReport {
  return { provider: `p${i % 2}`, model: MODELS[i % 3] as string, outcome: 'ok', status: 200, start: 0, end: 12, n: 1, retry: false, failover: false }
}

/** µs of CPU per call (its outcome and one attempt), the median of three rounds of `n` calls. */
export function metricsCostUs (n = 1_000_000): number {
  const m = callMetrics(new Registry())
  const outcomes = Array.from({ length: 1000 }, (_, i) => outcome(i))
  const rounds: number[] = []
  for (let r = 0; r < 3; r++) {
    const t0 = process.cpuUsage()
    for (let i = 0; i < n; i++) { const o = outcomes[i % 1000] as CallOutcome; m.call(o, o.model ?? 'other') }
    const d = process.cpuUsage(t0)
    rounds.push((d.user + d.system) / n)
  }
  return rounds.sort((a, b) => a - b)[1] as number
}

if (import.meta.url === `file://${process.argv[1] ?? ''}`) console.log(`metrics: ${metricsCostUs().toFixed(2)} µs of CPU per call`)
