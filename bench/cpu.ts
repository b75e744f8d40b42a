// CPU time per request of each proxy (µs of user+system CPU the proxy process spends per call),
// read from /proc/<pid>/stat around a fixed number of calls. It moves less than requests/s when
// the load generator and upstream compete for the same cores, but on a shared machine single
// rounds of one build still differ by a quarter: compare medians of many interleaved rounds
// (ROUNDS). CUMULATIVE=1 adds the plugins one at a time (see below). Linux only; needs a build
// (npm run build).
//   node --import tsx bench/cpu.ts [N]
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import { fromRoot } from '../paths.js'
import { mainThreadCpuUs, processCpuUs } from './proc-cpu.js'
import { startServer, stopServers, type Server } from './servers.js'
import { ALL_PLUGINS, BENCH_KEY, writeSmallConfig } from './small-config.js'

const N = Number(process.argv[2] ?? 20000)
const dir = mkdtempSync(join(tmpdir(), 'cpu-'))
const up = await startServer([fromRoot('bench', 'upstream.mjs')])
const base = `http://127.0.0.1:${up.port}`
const all = (process.env.PLUGINS ?? ALL_PLUGINS)
const gateway = (name: string, list: string) => () =>
  startServer([fromRoot('dist', 'cli', 'index.js'), 'serve', '--config', writeSmallConfig(join(dir, `${name}.json`), join(dir, `${name}.db`), base, list), '--workers', '1'], { LOG_LEVEL: 'error' })
const cases: Array<[string, () => Promise<Server>]> = [
  ['reply-from', () => startServer([fromRoot('bench', 'bare-proxy.mjs')], { UPSTREAM: base, KIND: 'reply-from' })],
  ['undici handler', () => startServer([fromRoot('bench', 'bare-proxy.mjs')], { UPSTREAM: base, KIND: 'undici' })],
  ['modelgate, no plugins', gateway('none', '')]
]
if (process.env.CUMULATIVE) {
  // CUMULATIVE=1: one gateway per prefix of the plugin list (in PLUGINS' order), so each row's
  // difference from the one above is what that plugin costs a call
  const names = all.split(',').filter(Boolean)
  names.forEach((name, i) => cases.push([`+ ${name}`, gateway(`p${i}`, names.slice(0, i + 1).join(','))]))
} else {
  cases.push([`modelgate, ${all === '' ? 'none' : all.split(',').length + ' plugins'}`, gateway('all', all)])
}
const body = JSON.stringify({ model: 'b/o', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
const headers = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_KEY}` }
const ROUNDS = Number(process.env.ROUNDS ?? 3)
const targets = []
for (const [name, boot] of cases) targets.push({ name, ...(await boot()), us: [] as number[], main: [] as number[], rps: [] as number[], non2xx: 0 })
let k = 0
for (let round = 0; round <= ROUNDS; round++) {
  for (const t of targets) {
    const url = `http://127.0.0.1:${t.port}/v1/chat/completions`
    // IDEM=1: a fresh Idempotency-Key per call, so the idempotency plugin does its real work
    const requests = process.env.IDEM ? [{ setupRequest: (req: autocannon.Request) => ({ ...req, headers: { ...headers, 'idempotency-key': `c-${process.pid}-${k++}` } }) }] : undefined
    const c0 = processCpuUs(t.pid)
    const m0 = mainThreadCpuUs(t.pid)
    const r = await autocannon({ url, method: 'POST', connections: 32, amount: round === 0 ? 3000 : N, body, headers, ...(requests ? { requests } : {}) })
    if (round === 0) continue // warm-up
    t.us.push((processCpuUs(t.pid) - c0) / N)
    t.main.push((mainThreadCpuUs(t.pid) - m0) / N)
    t.rps.push(r.requests.average)
    t.non2xx += r.non2xx
  }
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
for (const t of targets) console.log(`${t.name.padEnd(28)} ${median(t.us).toFixed(0).padStart(5)} µs/call (${t.us.map((x) => x.toFixed(0)).join(' ')})  main thread ${median(t.main).toFixed(0)}  ${Math.round(median(t.rps))} req/s  non2xx ${t.non2xx}`)
await stopServers()
