// CPU per call of several builds side by side, in interleaved rounds, all plugins on (PLUGINS)
// and a fresh Idempotency-Key per call, beside the bare reply-from proxy: for finding which step
// of a history moved the figure. Each argument is a built checkout (npm run build in each):
//   node --import tsx bench/multi-ab.ts /path/a /path/b ...      (N calls per round: CALLS, default 15000)
// A checkout written `/path/a@passthrough` is loaded on the pass-through route
// (/passthrough/u/chat/completions) instead of /v1/chat/completions, to compare the two paths.
// CACHE=1 puts the response cache in the chain and asks for it on every call (all hits after the
// first), to compare the cost of a hit.
import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import autocannon from 'autocannon'
import { fromRoot } from '../paths.js'
import { mainThreadCpuUs, processCpuUs } from './proc-cpu.js'
import { startServer, stopServers } from './servers.js'
import { ALL_PLUGINS, BENCH_KEY, writeSmallConfig } from './small-config.js'

const N = Number(process.env.CALLS ?? 15000)
const ROUNDS = Number(process.env.ROUNDS ?? 3)
const PLUGINS = process.env.PLUGINS ?? (process.env.CACHE ? ALL_PLUGINS.replace('idempotency,', 'idempotency,cache,') : ALL_PLUGINS)
const roots = process.argv.slice(2)
const dir = mkdtempSync(join(tmpdir(), 'mab-'))
const up = await startServer([fromRoot('bench', 'upstream.mjs')])
const base = `http://127.0.0.1:${up.port}`
const cliOf = (root: string): string => existsSync(`${root}/dist/cli/index.js`) ? `${root}/dist/cli/index.js` : `${root}/dist/cli.js`
const targets: Array<{ name: string, path: string, port: number, pid: number, us: number[], main: number[], rps: number[], non2xx: number }> = []
const V1 = '/v1/chat/completions'
targets.push({ name: 'reply-from', path: V1, ...(await startServer([fromRoot('bench', 'bare-proxy.mjs')], { UPSTREAM: base, KIND: 'reply-from' })), us: [], main: [], rps: [], non2xx: 0 })
for (const [i, arg] of roots.entries()) {
  const passthrough = arg.endsWith('@passthrough')
  const root = passthrough ? arg.slice(0, -'@passthrough'.length) : arg
  const s = await startServer([cliOf(root), 'serve', '--config', writeSmallConfig(join(dir, `g${i}.json`), join(dir, `g${i}.db`), base, PLUGINS), '--workers', '1'], { LOG_LEVEL: 'error' })
  targets.push({ name: basename(root) + (passthrough ? ' pt' : ''), path: passthrough ? '/passthrough/u/chat/completions' : V1, ...s, us: [], main: [], rps: [], non2xx: 0 })
}
const body = JSON.stringify({ model: 'b/o', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
const headers = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_KEY}`, ...(process.env.CACHE ? { 'x-svc-cache': 'on' } : {}) }
let k = 0
for (let round = 0; round <= ROUNDS; round++) {
  for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
    const requests = [{ setupRequest: (req: autocannon.Request) => ({ ...req, headers: { ...headers, 'idempotency-key': `m-${process.pid}-${k++}` } }) }]
    const c0 = processCpuUs(t.pid)
    const m0 = mainThreadCpuUs(t.pid)
    const r = await autocannon({ url: `http://127.0.0.1:${t.port}${t.path}`, method: 'POST', connections: 32, amount: round === 0 ? Number(process.env.WARM ?? 10000) : N, body, headers, requests })
    if (round === 0) continue
    t.us.push((processCpuUs(t.pid) - c0) / N)
    t.main.push((mainThreadCpuUs(t.pid) - m0) / N)
    t.rps.push(r.requests.average)
    t.non2xx += r.non2xx
  }
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
for (const t of targets) console.log(`${t.name.padEnd(14)} ${median(t.us).toFixed(0).padStart(5)} µs/call (${t.us.map((x) => x.toFixed(0)).join(' ')})  main ${median(t.main).toFixed(0).padStart(4)}  ${Math.round(median(t.rps))} req/s  non2xx ${t.non2xx}`)
await stopServers()
