// CPU per call of this build against another checkout's build, in interleaved rounds, with no
// plugins and with PLUGINS (default: all eight), beside the bare reply-from proxy. For judging
// a change to the hot path: build both (npm run build in each), then
//   BASELINE=/path/to/other/checkout node --import tsx bench/ab.ts [N]
// STREAM=1 measures streamed calls instead; ROUNDS (default 4) rounds after a warm-up.
// CONNECTIONS=1: calls one after another (bench/single.ts) for SECONDS (default 5) a round instead
// of N calls at 32 connections; p50 and p99 are printed too, each with what it adds over the bare
// proxy (the median over rounds of the difference in the same round). STORE=postgres: the two gateways with
// plugins on PostgreSQL + Redis (a database and a key prefix each, removed at the end).
// GEMINI=1: a Gemini client's streamGenerateContent?alt=sse instead (translated to the OpenAI-protocol upstream and back).
// TOGETHER=1: each round loads every target at once for SECONDS (default 5), 32 connections each, so
// that the machine's load at that moment is the same for all (on a shared machine whose load moves
// from one round to the next); CPU per call is what each process spent over the calls it answered.
// THREADS=1: also each target's CPU per call by thread (main, worker, v8, libuv: bench/proc-cpu.ts).
// SIGNALS=1: the key has limits out of reach (rpm and tpm: the rate-limit headers on every
// answer) and every call carries two tags in X-SVC-Tags (kept on its usage record). SIGNALS=split:
// only this checkout's gateway has them: the baseline's key has the same limits with the quota
// plugin's rate_limit_headers: false and its calls no tags (run with BASELINE=. to weigh what the
// signals cost one build; bench/signals.ts does the same with three gateways at once).
// SIGNALS_PARTS (with split): `headers` or `tags` gives this checkout's gateway that part alone, `none`
// neither (a null pair: the same gateway on both sides).
import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import { fromRoot } from '../paths.js'
import { mainThreadCpuUs, processCpuUs, threadsCpuUs } from './proc-cpu.js'
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
const SPLIT = process.env.SIGNALS === 'split'
const SIGNALS = process.env.SIGNALS === '1' || SPLIT
const PARTS = process.env.SIGNALS_PARTS ?? 'both'
if (!['both', 'headers', 'tags', 'none'].includes(PARTS)) throw new Error('SIGNALS_PARTS: both, headers, tags or none')
/** Whether the target named `name` has the signals on (SIGNALS=split: this checkout's only). */
const signalled = (name: string): boolean => SIGNALS && (!SPLIT || name.startsWith('new'))
/** Which of the two signals target `name` shows: the rate-limit headers, the tags. */
const headersOn = (name: string): boolean => signalled(name) && (!SPLIT || PARTS === 'both' || PARTS === 'headers')
const tagsOn = (name: string): boolean => signalled(name) && (!SPLIT || PARTS === 'both' || PARTS === 'tags')
const gw = async (root: string, name: string, list: string) => {
  const limits = { rpm: 1e9, tpm: 1e12 }
  const signals = headersOn(name) ? { limits } : SPLIT ? { limits, limitHeaders: false } : {}
  let config = writeSmallConfig(join(dir, `${name}.json`), join(dir, `${name}.db`), base, list, signals)
  if (process.env.STORE === 'postgres' && list !== '') {
    const scratch = await scratchPostgres()
    if (typeof scratch === 'string') throw new Error(scratch)
    drops.push(scratch.drop)
    config = onPostgres(config, scratch)
  }
  return await startServer([cliOf(root), 'serve', '--config', config, '--workers', '1'], { LOG_LEVEL: 'error' })
}
// WITH_PLUGINS=1: the two gateways with plugins and the bare proxy only (half the time a round)
const cases: Array<[string, () => Promise<{ port: number, pid: number }>]> = [
  ['reply-from', () => startServer([fromRoot('bench', 'bare-proxy.mjs')], { UPSTREAM: base, KIND: 'reply-from' })],
  ...(process.env.WITH_PLUGINS === '1'
    ? []
    : [['baseline, no plugins', () => gw(BASELINE, 'old0', '')], ['this, no plugins', () => gw(fromRoot(), 'new0', '')]] as Array<[string, () => Promise<{ port: number, pid: number }>]>),
  ['baseline, plugins', () => gw(BASELINE, 'old', PLUGINS)],
  ['this, plugins', () => gw(fromRoot(), 'new', PLUGINS)]
]
const GEMINI = process.env.GEMINI === '1'
const gatewayBody = GEMINI
  ? JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'Say twenty words.' }] }], generationConfig: { maxOutputTokens: 64 } })
  : JSON.stringify({ model: 'b/o', max_tokens: 10, stream: process.env.STREAM === '1', messages: [{ role: 'user', content: 'hi' }] })
// the bare proxy has no Gemini route: with GEMINI it relays the chat stream the gateways translate from
const chatStream = JSON.stringify({ model: 'b/o', max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'hi' }] })
const route = GEMINI ? '/v1beta/models/b/o:streamGenerateContent?alt=sse' : '/v1/chat/completions'
const plain: Record<string, string> = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_KEY}` }
const tagged: Record<string, string> = { ...plain, ...(SIGNALS ? { 'x-svc-tags': 'team-a, feature-x' } : {}) }
const headersOf = (t: { name: string }): Record<string, string> => SPLIT && !(t.name.startsWith('this') && tagsOn('new')) ? plain : tagged
const ROUNDS = Number(process.env.ROUNDS ?? 4)
const targets = []
for (const [name, boot] of cases) targets.push({ name, ...(await boot()), us: [] as number[], main: [] as number[], rps: [] as number[], p50: [] as number[], p99: [] as number[], threads: new Map<string, number[]>(), non2xx: 0 })
let k = 0
const ONE = process.env.CONNECTIONS === '1'
const SECONDS = Number(process.env.SECONDS ?? 5)
const TOGETHER = process.env.TOGETHER === '1'
for (let round = 0; round <= (TOGETHER ? ROUNDS : -1); round++) {
  const runs = targets.map(async (t) => {
    const headers = headersOf(t)
    const bare = GEMINI && t.name === 'reply-from'
    const url = `http://127.0.0.1:${t.port}${bare ? '/v1/chat/completions' : route}`
    const requests = [{ setupRequest: (req: autocannon.Request) => ({ ...req, headers: { ...headers, 'idempotency-key': `t-${process.pid}-${k++}` } }) }]
    const c0 = processCpuUs(t.pid)
    const m0 = mainThreadCpuUs(t.pid)
    const r = await autocannon({ url, method: 'POST', connections: 32, duration: round === 0 ? 8 : SECONDS, body: bare ? chatStream : gatewayBody, headers, requests })
    return { t, calls: r.requests.total, us: processCpuUs(t.pid) - c0, main: mainThreadCpuUs(t.pid) - m0, non2xx: r.non2xx }
  })
  for (const { t, calls, us, main, non2xx } of await Promise.all(runs)) {
    if (round === 0) continue
    t.us.push(us / calls); t.main.push(main / calls); t.rps.push(calls / SECONDS); t.non2xx += non2xx
  }
}
for (let round = 0; round <= (TOGETHER ? -1 : ROUNDS); round++) {
  for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
    const headers = headersOf(t)
    const bare = GEMINI && t.name === 'reply-from'
    const url = `http://127.0.0.1:${t.port}${bare ? '/v1/chat/completions' : route}`
    const body = bare ? chatStream : gatewayBody
    if (ONE && round === 0) { await warm(url, t.pid, body, headers); continue }
    if (ONE) {
      const r = await sequential(url, SECONDS, t.pid, body, headers)
      t.us.push(r.cpuUs); t.main.push(r.mainUs); t.rps.push(r.rps); t.p50.push(r.p50); t.p99.push(r.p99); t.non2xx += r.errors
      continue
    }
    const requests = [{ setupRequest: (req: autocannon.Request) => ({ ...req, headers: { ...headers, 'idempotency-key': `c-${process.pid}-${k++}` } }) }]
    const c0 = processCpuUs(t.pid)
    const m0 = mainThreadCpuUs(t.pid)
    const th0 = threadsCpuUs(t.pid)
    const t0 = performance.now()
    const r = await autocannon({ url, method: 'POST', connections: 32, amount: round === 0 ? 3000 : N, body, headers, requests })
    if (round === 0) continue
    t.us.push((processCpuUs(t.pid) - c0) / N)
    t.main.push((mainThreadCpuUs(t.pid) - m0) / N)
    // by thread; what the process counts beyond its live threads is threads that ended in the round
    const th1 = threadsCpuUs(t.pid)
    let live = 0
    for (const [kind, us] of th1) {
      const d = us - (th0.get(kind) ?? 0)
      live += d
      t.threads.set(kind, [...(t.threads.get(kind) ?? []), d / N])
    }
    t.threads.set('ended', [...(t.threads.get('ended') ?? []), t.us[t.us.length - 1]! - live / N])
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
// this build over the baseline, each round's ratio (the two shared that round's machine), and their median
for (const which of ['no plugins', 'plugins']) {
  const a = targets.find((t) => t.name === `baseline, ${which}`)
  const b = targets.find((t) => t.name === `this, ${which}`)
  if (a === undefined || b === undefined) continue
  const ratios = (q: 'us' | 'main'): number[] => b[q].map((x, i) => x / a[q][i]!)
  console.log(`this / baseline, ${which}: process ${median(ratios('us')).toFixed(3)}× (${ratios('us').map((x) => x.toFixed(2)).join(' ')}), main ${median(ratios('main')).toFixed(3)}×, medians' ratio ${(median(b.us) / median(a.us)).toFixed(3)}×`)
}
if (process.env.THREADS === '1') {
  for (const t of targets) console.log(`${t.name.padEnd(20)} by thread: ${[...t.threads].map(([kind, xs]) => `${kind} ${median(xs).toFixed(1)}`).join(', ')}`)
}
await stopServers()
for (const drop of drops) await drop()
