// node --import tsx bench/bedrock.ts : the two Bedrock figures of `npm run bench` alone, with
// fewer servers beside them: through one gateway (every plugin on, one worker) in front of the
// fixed upstream, a chat call to an OpenAI-protocol model against a chat call to a Bedrock
// Converse model (translated to Converse through Messages, signed with SigV4, its answer read
// back), CPU per call at 32 connections; and their streams (Bedrock's as an AWS event stream)
// at 16 concurrent clients. Interleaved rounds (BENCH_ROUNDS, default 5) of BENCH_SLICE_S
// seconds (default 4); the figures are the medians of the per-round ratios. BEDROCK_AUTH=bearer:
// a Bedrock API key instead of SigV4 (no signature), to tell the signing's cost from the rest.
import { mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import { fromRoot } from '../paths.js'
import { byModule, type CpuProfile } from './by-module.js'
import { processCpuUs, threadsCpuUs } from './proc-cpu.js'
import { startServer, stopServers } from './servers.js'
import { ALL_PLUGINS, BENCH_KEY } from './small-config.js'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const SLICE = Number(process.env.BENCH_SLICE_S ?? 4)
const headers = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_KEY}` }
const chatBody = (model: string, stream = false): string => JSON.stringify({ model, stream, max_tokens: 64, messages: [{ role: 'user', content: 'Say twenty words.' }] })
const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] as number }

// THREADS=1: each thread's CPU per call too (the main thread, then V8's and libuv's threads by start order)
const THREADS = process.env.THREADS === '1'
// RATE: both calls offered at this many calls a second (below either's capacity) instead of as fast as they go
const RATE = Number(process.env.RATE ?? 0)
const EXTRA = process.env.EXTRA === '1'
// IDEM=1: a fresh Idempotency-Key on every call, as `npm run bench` sends them (the idempotency plugin's store write on each)
const IDEM = process.env.IDEM === '1'
let keys = 0
// ROOT: another built checkout's gateway instead of this one's (a before and after of a change)
const ROOT = process.env.ROOT ?? fromRoot()
// PROF=1: the gateway runs with --cpu-prof, and the main thread's time per call by source module
// is printed for each of the two calls (bench/by-module.ts), over the CPU slices only
const PROF = process.env.PROF === '1'
const windows: Record<string, Array<{ from: number, to: number, calls: number }>> = {}
const nowUs = (): number => Number(process.hrtime.bigint() / 1000n)
async function cpuPerCall (url: string, body: string, pid: number): Promise<{ cpuUs: number, rps: number, errors: number, threads: Record<string, number> }> {
  const cpu0 = processCpuUs(pid)
  const t0 = THREADS ? threadsCpuUs(pid) : new Map<string, number>()
  const from = nowUs()
  const r = await autocannon({ url, method: 'POST', body, headers, connections: 32, duration: SLICE, ...(RATE > 0 ? { overallRate: RATE } : {}), ...(IDEM ? { requests: [{ setupRequest: (req: autocannon.Request) => ({ ...req, headers: { ...headers, 'idempotency-key': `b-${process.pid}-${keys++}` } }) }] } : {}) })
  ;(windows[body] ??= []).push({ from, to: nowUs(), calls: r.requests.total })
  const t1 = THREADS ? threadsCpuUs(pid) : new Map<string, number>()
  const threads = Object.fromEntries([...t1].map(([k, v]) => [k, (v - (t0.get(k) ?? 0)) / r.requests.total]))
  return { cpuUs: (processCpuUs(pid) - cpu0) / r.requests.total, rps: r.requests.average, errors: r.non2xx + r.errors, threads }
}

async function streams (url: string, body: string): Promise<{ perS: number, errors: number }> {
  const end = Date.now() + SLICE * 1000
  let n = 0
  let errors = 0
  const t0 = Date.now()
  await Promise.all(Array.from({ length: 16 }, async () => {
    while (Date.now() < end) {
      const res = await fetch(url, { method: 'POST', headers, body })
      const text = await res.text()
      if (res.status !== 200 || !text.includes('[DONE]')) errors++
      else n++
    }
  }))
  return { perS: n / ((Date.now() - t0) / 1000), errors }
}

async function main (): Promise<void> {
  const upstream = await startServer([fromRoot('bench', 'upstream.mjs')])
  const up = `http://127.0.0.1:${upstream.port}`
  const dir = mkdtempSync(join(tmpdir(), 'mg-bench-bedrock-'))
  const model = (id: string, provider: string): Record<string, unknown> => ({ id, name: id, provider, upstream_model: 'bench', context_length: 128000, supported_parameters: ['max_tokens'], pricing: { input: 1, cached_input: 0.5, output: 2 } })
  writeFileSync(join(dir, 'gw.json'), JSON.stringify({
    server: { port: 0, request_timeout_s: 30 },
    store: { sqlite: join(dir, 'gw.db') },
    plugins: ALL_PLUGINS.split(',').map((name) => ({ name, ...(name === 'rate-limit' ? { options: { max: 1e9 } } : {}) })),
    providers: [
      { id: 'up-openai', protocol: 'openai', base_url: `${up}/v1`, api_key: 'x' },
      { id: 'up-messages', protocol: 'messages', base_url: up, api_key: 'x' },
      { id: 'up-bedrock-key', protocol: 'converse', platform: 'bedrock', region: 'us-east-1', base_url: up, api_key: 'bench-bedrock-key' },
      { id: 'up-bedrock', protocol: 'converse', platform: 'bedrock', region: 'us-east-1', base_url: up, ...(process.env.BEDROCK_AUTH === 'bearer' ? { api_key: 'bench-bedrock-key' } : { aws: { access_key_id: 'AKIDBENCH', secret_access_key: 'bench-secret' } }) }
    ],
    models: [model('bench/openai', 'up-openai'), model('bench/nova', 'up-bedrock'), model('bench/claude', 'up-messages'), model('bench/nova-key', 'up-bedrock-key')],
    tenants: [{ org: 'o', balance_usd: 1e6, quota: { tokens: 1e12, per: 'day' }, projects: [{ id: 'p', keys: [{ key: BENCH_KEY }] }] }]
  }))
  const profDir = mkdtempSync(join(tmpdir(), 'mg-bench-bedrock-prof-'))
  const gw = await startServer([...(PROF ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : []), join(ROOT, 'dist', 'cli', 'index.js'), 'serve', '--config', join(dir, 'gw.json'), '--workers', '1'], { LOG_LEVEL: 'error' })
  const url = `http://127.0.0.1:${gw.port}/v1/chat/completions`
  // warm-up: both paths compiled before anything is timed
  for (const m of ['bench/openai', 'bench/nova']) {
    await autocannon({ url, method: 'POST', body: chatBody(m), headers, connections: 32, amount: 6000 })
    await autocannon({ url, method: 'POST', body: chatBody(m, true), headers, connections: 16, amount: 2000 })
  }
  const cpu: number[] = []
  const stream: number[] = []
  const raw: Array<Record<string, number>> = []
  for (let r = 0; r < ROUNDS; r++) {
    // every other round in reverse order: a case measured after another is not always the second
    const order = r % 2 === 0 ? ['bench/openai', 'bench/nova'] : ['bench/nova', 'bench/openai']
    const c: Record<string, Awaited<ReturnType<typeof cpuPerCall>>> = {}
    const s: Record<string, { perS: number, errors: number }> = {}
    for (const m of order) c[m] = await cpuPerCall(url, chatBody(m), gw.pid)
    // EXTRA=1: where the difference comes from, beside the two figures: the same chat call
    // translated to a Messages upstream (no Converse, no signature), and to Bedrock with an API key
    // (Converse, no signature)
    if (EXTRA) for (const m of ['bench/claude', 'bench/nova-key']) c[m] = await cpuPerCall(url, chatBody(m), gw.pid)
    for (const m of order) s[m] = await streams(url, chatBody(m, true))
    cpu.push(c['bench/nova']!.cpuUs / c['bench/openai']!.cpuUs)
    stream.push(s['bench/nova']!.perS / s['bench/openai']!.perS)
    if (THREADS) for (const m of Object.keys(c)) console.log(m, Object.entries(c[m]!.threads).filter(([, v]) => v >= 1).map(([k, v]) => `${k} ${v.toFixed(1)}`).join(', '))
    raw.push({ openai_cpu_us: c['bench/openai']!.cpuUs, bedrock_cpu_us: c['bench/nova']!.cpuUs, ...(EXTRA ? { messages_cpu_us: c['bench/claude']!.cpuUs, bedrock_key_cpu_us: c['bench/nova-key']!.cpuUs } : {}), openai_rps: c['bench/openai']!.rps, bedrock_rps: c['bench/nova']!.rps, openai_streams_s: s['bench/openai']!.perS, converse_streams_s: s['bench/nova']!.perS, errors: c['bench/openai']!.errors + c['bench/nova']!.errors + s['bench/openai']!.errors + s['bench/nova']!.errors })
  }
  console.table(raw.map((x) => Object.fromEntries(Object.entries(x).map(([k, v]) => [k, Math.round(v * 10) / 10]))))
  console.log(`A Bedrock Converse call (signed, translated) / an OpenAI-protocol call, CPU per call: ${median(cpu).toFixed(2)}× (median of ${ROUNDS} rounds; target ≤ 1.15)`)
  console.log(`Translated Converse stream (chat → Bedrock's event stream) / chat passthrough stream: ${median(stream).toFixed(2)}× (target ≥ 0.70)`)
  await stopServers()
  if (PROF) {
    const f = readdirSync(profDir).find((x) => x.endsWith('.cpuprofile') && x.includes(`.${gw.pid}.0.`))
    if (f === undefined) throw new Error('no profile of the gateway\'s main thread')
    const prof = JSON.parse(readFileSync(join(profDir, f), 'utf8')) as CpuProfile
    // the two calls compared (PROF_CALLS=a,b: two of the models above, with EXTRA=1 for the others)
    const [a, b] = (process.env.PROF_CALLS ?? 'bench/openai,bench/nova').split(',') as [string, string]
    // kept beside the profile for a closer look (by function: bench/by-function.ts)
    writeFileSync(join(profDir, 'windows.json'), JSON.stringify({ profile: f, windows: { [a]: windows[chatBody(a)], [b]: windows[chatBody(b)] } }))
    console.log(`profile and its windows: ${profDir}`)
    const per: Record<string, Map<string, number>> = {}
    for (const m of [a, b]) {
      const sum = new Map<string, number>()
      let calls = 0
      for (const w of windows[chatBody(m)] ?? []) {
        calls += w.calls
        for (const [k, t] of byModule(prof, w.from, w.to, { node: 'file' })) sum.set(k, (sum.get(k) ?? 0) + t)
      }
      per[m] = new Map([...sum].map(([k, t]) => [k, t / calls]))
    }
    const names = [...new Set([...per[a]!.keys(), ...per[b]!.keys()])]
    const rows = names.map((k) => ({ module: k, a: per[a]!.get(k) ?? 0, b: per[b]!.get(k) ?? 0 }))
    const total = (m: 'a' | 'b'): number => rows.reduce((acc, r) => acc + r[m], 0)
    console.log(`main thread, busy, µs per call: ${a} ${total('a').toFixed(1)}, ${b} ${total('b').toFixed(1)} (the profiler's own cost included); by module, the largest differences first:`)
    for (const r of rows.sort((x, y) => Math.abs(y.b - y.a) - Math.abs(x.b - x.a)).slice(0, 30)) console.log(`${r.a.toFixed(1).padStart(7)} ${r.b.toFixed(1).padStart(7)} ${(r.b - r.a).toFixed(1).padStart(7)}  ${r.module}`)
  }
}

main().then(() => process.exit(0), (err: unknown) => { console.error(err); process.exit(1) })
