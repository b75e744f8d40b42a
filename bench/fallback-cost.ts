// The gateway's CPU per call for a call answered by its model, and for one whose model's provider
// answers 503 at once and whose fallback then answers, in one process (app.inject, every plugin
// on), the upstream (upstream.mjs) in a process of its own: the difference is what a fallback
// costs the gateway, its failed attempt included (an upper bound of what the fallback adds
// besides it). CPU time, not wall time: on a shared machine it moves far less.
//   node --import tsx bench/fallback-cost.ts [N]
import { buildApp } from '../app.js'
import { parseConfig } from '../config/load.js'
import { fromRoot } from '../paths.js'
import { startServer, stopServers } from './servers.js'

const N = Number(process.argv[2] ?? 3000)
const ROUNDS = Number(process.env.ROUNDS ?? 6)
const KEY = 'mg-bench-key-0123456789abcdef'

const up = await startServer([fromRoot('bench', 'upstream.mjs')])
const model = (id: string, provider: string, upstream: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  id, name: id, provider, upstream_model: upstream, context_length: 128000, max_output_tokens: 4096, supported_parameters: ['max_tokens'], pricing: { input: 1, output: 2 }, ...extra
})
const config = parseConfig({
  server: { request_timeout_s: 30 },
  store: { sqlite: ':memory:' },
  plugins: ['cors', 'auth', 'idempotency', 'quota', 'balance', 'usage', 'diagnostics'].map((name) => ({ name })),
  providers: [
    { id: 'up', protocol: 'openai', base_url: `http://127.0.0.1:${up.port}/v1`, api_key: 'x' },
    { id: 'up-down', protocol: 'openai', base_url: `http://127.0.0.1:${up.port}/v1`, api_key: 'x' }
  ],
  models: [model('bench/openai', 'up', 'bench'), model('bench/down', 'up-down', 'bench-down', { fallbacks: [{ models: ['bench/openai'] }] })],
  upstream: { breaker: { failures: 1_000_000_000 } },
  metrics: { enabled: false },
  tenants: [{ org: 'bench', balance_usd: 1_000_000, projects: [{ id: 'p', keys: [{ key: KEY }] }] }]
}, {})
const app = await buildApp(config, { logger: false })
let n = 0
const call = async (m: string): Promise<void> => {
  const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { authorization: `Bearer ${KEY}`, 'content-type': 'application/json', 'idempotency-key': `k-${n++}` }, payload: { model: m, messages: [{ role: 'user', content: 'Say twenty words.' }] } })
  if (res.statusCode !== 200) throw new Error(`${m}: ${res.statusCode} ${res.body}`)
}
const cpuPerCall = async (m: string): Promise<number> => {
  const c0 = process.cpuUsage()
  for (let i = 0; i < N; i++) await call(m)
  const c = process.cpuUsage(c0)
  return (c.user + c.system) / N
}
// warm-up: the JIT and the pools
for (let i = 0; i < 3000; i++) await call(i % 2 === 0 ? 'bench/openai' : 'bench/down')
const direct: number[] = []
const fallback: number[] = []
for (let r = 0; r < ROUNDS; r++) {
  if (r % 2 === 0) { direct.push(await cpuPerCall('bench/openai')); fallback.push(await cpuPerCall('bench/down')) } else { fallback.push(await cpuPerCall('bench/down')); direct.push(await cpuPerCall('bench/openai')) }
}
const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] as number }
const diffs = direct.map((d, i) => (fallback[i] as number) - d)
console.log(`CPU per call, µs (${ROUNDS} rounds of ${N} calls each, medians): answered by its model ${median(direct).toFixed(0)}, after a 503 and one fallback ${median(fallback).toFixed(0)}; the fallback with its failed attempt: +${median(diffs).toFixed(0)} µs (rounds: ${diffs.map((d) => d.toFixed(0)).join(' ')})`)
await app.close()
await stopServers()
