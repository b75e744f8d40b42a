// node --import tsx bench/signals.ts: what the spend signals cost a chat call, in one gateway (every
// plugin, one worker): calls by a key with limits out of reach (the six rate-limit headers on each
// answer) carrying two tags, against calls by a key without limits or tags, in interleaved slices
// of BENCH_SLICE_S seconds (default 4) at 32 connections, BENCH_ROUNDS rounds (default 6), each
// round off, on, on, off (or on, off, off, on) so that a slice's place in the round (the first after
// another's load pays for some of it: a checkpoint, the store's WAL) weighs both alike. One process
// for both, so that the store, the heap and the machine's load are the same for each. The figure is
// the median of the per-round ratios of CPU per call (the whole process, /proc), beside the ratio
// of all the rounds' CPU per call.
// PROF=1: the gateway runs with --cpu-prof, and its profile and the two calls' windows are left
// for bench/by-function.ts.
import { mkdtempSync, readdirSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import { fromRoot } from '../paths.js'
import { processCpuUs } from './proc-cpu.js'
import { startServer, stopServers } from './servers.js'
import { ALL_PLUGINS, BENCH_KEY } from './small-config.js'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6)
const SLICE = Number(process.env.BENCH_SLICE_S ?? 4)
const PROF = process.env.PROF === '1'
const SIGNAL_KEY = `${BENCH_KEY}-signals`
const body = JSON.stringify({ model: 'b/o', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
const cases = {
  off: { 'content-type': 'application/json', authorization: `Bearer ${BENCH_KEY}` },
  on: { 'content-type': 'application/json', authorization: `Bearer ${SIGNAL_KEY}`, 'x-svc-tags': 'team-a, feature-x' }
}
const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] as number }
const nowUs = (): number => Number(process.hrtime.bigint() / 1000n)

const upstream = await startServer([fromRoot('bench', 'upstream.mjs')])
const dir = mkdtempSync(join(tmpdir(), 'mg-bench-signals-'))
writeFileSync(join(dir, 'gw.json'), JSON.stringify({
  server: { port: 0 },
  store: { sqlite: join(dir, 'gw.db') },
  plugins: ALL_PLUGINS.split(',').map((name) => ({ name, ...(name === 'rate-limit' ? { options: { max: 1e9 } } : {}) })),
  providers: [{ id: 'u', protocol: 'openai', base_url: `http://127.0.0.1:${upstream.port}/v1`, api_key: 'x' }],
  models: [{ id: 'b/o', name: 'b', provider: 'u', context_length: 1000, supported_parameters: ['max_tokens'], pricing: { input: 1, output: 2 } }],
  tenants: [{ org: 'o', balance_usd: 1e6, quota: { tokens: 1e12, per: 'day' }, projects: [{ id: 'p', keys: [{ key: BENCH_KEY }, { key: SIGNAL_KEY, limits: { rpm: 1e9, tpm: 1e12 } }] }] }]
}))
const gw = await startServer([...(PROF ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : []), fromRoot('dist', 'cli', 'index.js'), 'serve', '--config', join(dir, 'gw.json'), '--workers', '1'], { LOG_LEVEL: 'error' })
const url = `http://127.0.0.1:${gw.port}/v1/chat/completions`
const load = async (headers: Record<string, string>, duration: number): Promise<autocannon.Result> => await autocannon({ url, method: 'POST', body, headers, connections: 32, duration })
for (const h of Object.values(cases)) await load(h, 3) // warm-up: both paths compiled
const windows: Record<string, Array<{ from: number, to: number, calls: number }>> = { off: [], on: [] }
const ratios: number[] = []
const total = { off: 0, on: 0 }
const totalCalls = { off: 0, on: 0 }
const rows: Array<Record<string, number>> = []
for (let r = 0; r < ROUNDS; r++) {
  const order = r % 2 === 0 ? ['off', 'on', 'on', 'off'] as const : ['on', 'off', 'off', 'on'] as const
  const cpu = { off: 0, on: 0 }
  const calls = { off: 0, on: 0 }
  for (const k of order) {
    const c0 = processCpuUs(gw.pid)
    const from = nowUs()
    const res = await load(cases[k], SLICE)
    windows[k]!.push({ from, to: nowUs(), calls: res.requests.total })
    cpu[k] += processCpuUs(gw.pid) - c0
    calls[k] += res.requests.total
    if (res.non2xx + res.errors > 0) throw new Error(`${k}: ${res.non2xx} non-2xx answers, ${res.errors} errors`)
  }
  total.off += cpu.off; total.on += cpu.on; totalCalls.off += calls.off; totalCalls.on += calls.on
  const off = cpu.off / calls.off
  const on = cpu.on / calls.on
  ratios.push(on / off)
  rows.push({ off_cpu_us: Math.round(off * 10) / 10, on_cpu_us: Math.round(on * 10) / 10, ratio: Math.round(on / off * 1000) / 1000 })
}
console.table(rows)
const whole = (total.on / totalCalls.on) / (total.off / totalCalls.off)
console.log(`Signals on (limits' headers, two tags) / off, CPU per call: ${median(ratios).toFixed(3)}× (median of ${ROUNDS} rounds); ${whole.toFixed(3)}× over all of them (target ≤ 1.05)`)
await stopServers()
if (PROF) {
  const f = readdirSync(dir).find((x) => x.endsWith('.cpuprofile') && x.includes(`.${gw.pid}.0.`))
  writeFileSync(join(dir, 'windows.json'), JSON.stringify({ profile: f, windows }))
  console.log(`profile and its windows: ${dir} (node --import tsx bench/by-function.ts ${dir})`)
}
process.exit(0)
