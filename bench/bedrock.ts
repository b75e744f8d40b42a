// node --import tsx bench/bedrock.ts : the two Bedrock figures of `npm run bench` alone, with
// fewer servers beside them: through one gateway (every plugin on, one worker) in front of the
// fixed upstream, a chat call to an OpenAI-protocol model against a chat call to a Bedrock
// Converse model (translated to Converse through Messages, signed with SigV4, its answer read
// back), CPU per call at 32 connections; and their streams (Bedrock's as an AWS event stream)
// at 16 concurrent clients. Interleaved rounds (BENCH_ROUNDS, default 5) of BENCH_SLICE_S
// seconds (default 4); the figures are the medians of the per-round ratios. BEDROCK_AUTH=bearer:
// a Bedrock API key instead of SigV4 (no signature), to tell the signing's cost from the rest.
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import { fromRoot } from '../paths.js'
import { processCpuUs } from './proc-cpu.js'
import { startServer, stopServers } from './servers.js'
import { ALL_PLUGINS, BENCH_KEY } from './small-config.js'

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
const SLICE = Number(process.env.BENCH_SLICE_S ?? 4)
const headers = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_KEY}` }
const chatBody = (model: string, stream = false): string => JSON.stringify({ model, stream, max_tokens: 64, messages: [{ role: 'user', content: 'Say twenty words.' }] })
const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)] as number }

async function cpuPerCall (url: string, body: string, pid: number): Promise<{ cpuUs: number, rps: number, errors: number }> {
  const cpu0 = processCpuUs(pid)
  const r = await autocannon({ url, method: 'POST', body, headers, connections: 32, duration: SLICE })
  return { cpuUs: (processCpuUs(pid) - cpu0) / r.requests.total, rps: r.requests.average, errors: r.non2xx + r.errors }
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
      { id: 'up-bedrock', protocol: 'converse', platform: 'bedrock', region: 'us-east-1', base_url: up, ...(process.env.BEDROCK_AUTH === 'bearer' ? { api_key: 'bench-bedrock-key' } : { aws: { access_key_id: 'AKIDBENCH', secret_access_key: 'bench-secret' } }) }
    ],
    models: [model('bench/openai', 'up-openai'), model('bench/nova', 'up-bedrock')],
    tenants: [{ org: 'o', balance_usd: 1e6, quota: { tokens: 1e12, per: 'day' }, projects: [{ id: 'p', keys: [{ key: BENCH_KEY }] }] }]
  }))
  const gw = await startServer([fromRoot('dist', 'cli', 'index.js'), 'serve', '--config', join(dir, 'gw.json'), '--workers', '1'], { LOG_LEVEL: 'error' })
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
    const c: Record<string, { cpuUs: number, rps: number, errors: number }> = {}
    const s: Record<string, { perS: number, errors: number }> = {}
    for (const m of order) c[m] = await cpuPerCall(url, chatBody(m), gw.pid)
    for (const m of order) s[m] = await streams(url, chatBody(m, true))
    cpu.push(c['bench/nova']!.cpuUs / c['bench/openai']!.cpuUs)
    stream.push(s['bench/nova']!.perS / s['bench/openai']!.perS)
    raw.push({ openai_cpu_us: c['bench/openai']!.cpuUs, bedrock_cpu_us: c['bench/nova']!.cpuUs, openai_rps: c['bench/openai']!.rps, bedrock_rps: c['bench/nova']!.rps, openai_streams_s: s['bench/openai']!.perS, converse_streams_s: s['bench/nova']!.perS, errors: c['bench/openai']!.errors + c['bench/nova']!.errors + s['bench/openai']!.errors + s['bench/nova']!.errors })
  }
  console.table(raw.map((x) => Object.fromEntries(Object.entries(x).map(([k, v]) => [k, Math.round(v * 10) / 10]))))
  console.log(`A Bedrock Converse call (signed, translated) / an OpenAI-protocol call, CPU per call: ${median(cpu).toFixed(2)}× (median of ${ROUNDS} rounds; target ≤ 1.15)`)
  console.log(`Translated Converse stream (chat → Bedrock's event stream) / chat passthrough stream: ${median(stream).toFixed(2)}× (target ≥ 0.70)`)
  await stopServers()
}

main().then(() => process.exit(0), (err: unknown) => { console.error(err); process.exit(1) })
