// CPU per call of this build against another checkout's build, in interleaved rounds, with no
// plugins and with PLUGINS (default: all eight), beside the bare reply-from proxy. For judging
// a change to the hot path: build both (npm run build in each), then
//   BASELINE=/path/to/other/checkout node --import tsx bench/ab.ts [N]
// STREAM=1 measures streamed calls instead; ROUNDS (default 4) rounds after a warm-up.
// CONNECTIONS=1: calls one after another (bench/single.ts) for SECONDS (default 5) a round instead
// of N calls at 32 connections; p50 and p99 are printed too, each with what it adds over the bare
// proxy (the median over rounds of the difference in the same round). STORE=postgres: the two gateways with
// plugins on PostgreSQL + Redis (a database and a key prefix each, removed at the end).
// SIGNALS=1: the key has limits out of reach (rpm and tpm: the rate-limit headers on every
// answer) and every call carries two tags in X-SVC-Tags (kept on its usage record).
import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import { fromRoot } from '../paths.js'
import { mainThreadCpuUs, processCpuUs } from './proc-cpu.js'
import { startServer, stopServers } from './servers.js'
import { onPostgres, scratchPostgres, sequential, warm } from './single.js'
import { BENCH_KEY, writeSmallConfig } from './small-config.js'

const N = Number(process.argv[2] ?? 20000)
const PLUGINS = process.env.PLUGINS ?? 'cors,rate-limit,auth,idempotency,quota,balance,usage,diagnostics'
const BASELINE = process.env.BASELINE
if (BASELINE === undefined) throw new Error('BASELINE=/path/to/another/checkout (built) is needed')
const dir = mkdtempSync(join(tmpdir(), 'ab-'))
const up = await startServer([fromRoot('bench', 'upstream.mjs')])
const base = `http://127.0.0.1:${up.port}`
// the command's place in the build: dist/cli/index.js, or dist/cli.js in a checkout from before cli/
const cliOf = (root: string): string => existsSync(`${root}/dist/cli/index.js`) ? `${root}/dist/cli/index.js` : `${root}/dist/cli.js`
const drops: Array<() => Promise<void>> = []
const SIGNALS = process.env.SIGNALS === '1'
const gw = async (root: string, name: string, list: string) => {
  let config = writeSmallConfig(join(dir, `${name}.json`), join(dir, `${name}.db`), base, list, SIGNALS ? { limits: { rpm: 1e9, tpm: 1e12 } } : {})
  if (process.env.STORE === 'postgres' && list !== '') {
    const scratch = await scratchPostgres()
    if (typeof scratch === 'string') throw new Error(scratch)
    drops.push(scratch.drop)
    config = onPostgres(config, scratch)
  }
  return await startServer([cliOf(root), 'serve', '--config', config, '--workers', '1'], { LOG_LEVEL: 'error' })
}
const cases: Array<[string, () => Promise<{ port: number, pid: number }>]> = [
  ['reply-from', () => startServer([fromRoot('bench', 'bare-proxy.mjs')], { UPSTREAM: base, KIND: 'reply-from' })],
  ['baseline, no plugins', () => gw(BASELINE, 'old0', '')],
  ['this, no plugins', () => gw(fromRoot(), 'new0', '')],
  ['baseline, plugins', () => gw(BASELINE, 'old', PLUGINS)],
  ['this, plugins', () => gw(fromRoot(), 'new', PLUGINS)]
]
const body = JSON.stringify({ model: 'b/o', max_tokens: 10, stream: process.env.STREAM === '1', messages: [{ role: 'user', content: 'hi' }] })
const headers: Record<string, string> = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_KEY}`, ...(SIGNALS ? { 'x-svc-tags': 'team-a, feature-x' } : {}) }
const ROUNDS = Number(process.env.ROUNDS ?? 4)
const targets = []
for (const [name, boot] of cases) targets.push({ name, ...(await boot()), us: [] as number[], main: [] as number[], rps: [] as number[], p50: [] as number[], p99: [] as number[], non2xx: 0 })
let k = 0
const ONE = process.env.CONNECTIONS === '1'
const SECONDS = Number(process.env.SECONDS ?? 5)
for (let round = 0; round <= ROUNDS; round++) {
  for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
    const url = `http://127.0.0.1:${t.port}/v1/chat/completions`
    if (ONE && round === 0) { await warm(url, t.pid, body, headers); continue }
    if (ONE) {
      const r = await sequential(url, SECONDS, t.pid, body, headers)
      t.us.push(r.cpuUs); t.main.push(r.mainUs); t.rps.push(r.rps); t.p50.push(r.p50); t.p99.push(r.p99); t.non2xx += r.errors
      continue
    }
    const requests = [{ setupRequest: (req: autocannon.Request) => ({ ...req, headers: { ...headers, 'idempotency-key': `c-${process.pid}-${k++}` } }) }]
    const c0 = processCpuUs(t.pid)
    const m0 = mainThreadCpuUs(t.pid)
    const t0 = performance.now()
    const r = await autocannon({ url, method: 'POST', connections: 32, amount: round === 0 ? 3000 : N, body, headers, requests })
    if (round === 0) continue
    t.us.push((processCpuUs(t.pid) - c0) / N)
    t.main.push((mainThreadCpuUs(t.pid) - m0) / N)
    // calls over the wall time: autocannon's per-second average is coarse for runs of a few seconds
    t.rps.push(r.requests.total / ((performance.now() - t0) / 1000))
    t.non2xx += r.non2xx
  }
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
// at one connection, also what each target adds over the bare proxy of the same round (the median over rounds)
const bare = targets[0]!
const added = (t: typeof bare, q: 'p50' | 'p99'): string => {
  const d = median(t[q].map((x, i) => x - (bare[q][i] ?? NaN)))
  return `${d >= 0 ? '+' : ''}${d.toFixed(2)}`
}
for (const t of targets) console.log(`${t.name.padEnd(20)} ${median(t.us).toFixed(0).padStart(5)} µs/call (${t.us.map((x) => x.toFixed(0)).join(' ')})  main ${median(t.main).toFixed(0)}  ${Math.round(median(t.rps))} req/s${ONE ? `  p50 ${median(t.p50).toFixed(2)} (${added(t, 'p50')}) p99 ${median(t.p99).toFixed(2)} (${added(t, 'p99')}) ms` : ''}  non2xx ${t.non2xx}`)
await stopServers()
for (const drop of drops) await drop()
