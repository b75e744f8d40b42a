// npm run bench [-- --quick] : measures, side by side in one run on this machine, the fixed-
// response upstream directly, a bare Fastify + @fastify/reply-from proxy, a bare Fastify handler
// over an undici pool, modelgate with every plugin on (one worker, and one per core; and one
// worker with the response cache answering every call; and one with an MCP server behind /mcp, whose
// tools/call is timed against calling that server straight), and the Portkey gateway when it is
// installed (PORTKEY_DIR, default /tmp/portkey: `npm install --prefix /tmp/portkey
// @portkey-ai/gateway`; it is kept out of this project's dependencies); then, at one connection
// (calls one after another), the bare proxy against modelgate plugin list by plugin list, and on
// PostgreSQL + Redis when they answer (bench/single.ts); the spend signals (tags and rate-limit
// headers) on against off, three gateways at once (bench/signals.ts); and each `modelgate` command
// against `node -e 0` (bench/cli.ts).
// Prints a table and writes bench/results/<time>.json and latest.json.
// Figures are ratios of one run: the machine is shared and noisy, absolute numbers vary.
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync, mkdirSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { cpus, tmpdir, totalmem } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import { Pool } from 'undici'
import { fromRoot } from '../paths.js'
import { SqliteStore } from '../engine/store/sqlite/index.js'
import type { UsageRow } from '../engine/store/types.js'
import { cliTimes, printCliTimes } from './cli.js'
import { metricsCostUs } from './metrics-cost.js'
import { mainThreadCpuUs, processCpuUs } from './proc-cpu.js'
import { startServer, own, stopSome, type Server } from './servers.js'
import { measureSignals, signalsLine } from './signals.js'
import { EVERY, EVERY_PG, printSingle, singleConnection } from './single.js'
import { BENCH_KEY } from './small-config.js'

const QUICK = process.argv.includes('--quick')
const DURATION = Number(process.env.BENCH_DURATION_S ?? (QUICK ? 3 : 15))
// Each case runs DURATION seconds in all, split into ROUNDS slices run in turn with the other
// cases, and each figure is the median of its slices: a neighbour's burst on this shared machine
// then hits every case alike instead of one of them. Every other round runs the cases in reverse
// order: on this machine a case measured right after another ran up to 30% faster or slower
// depending on its place, and a fixed order put that on the same cases every round.
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? (QUICK ? 1 : 5))
const SLICE = Math.max(2, Math.round(DURATION / ROUNDS))

// The guardrails plugin's cost is measured on calls it finds nothing in: two rules of the kinds
// operators write (a secret's shape with no upper length, and a bounded number pattern).
const GUARDRAILS = { name: 'guardrails', options: { rules: [{ name: 'keys', pattern: 'sk-[A-Za-z0-9_-]{20,}' }, { name: 'cards', pattern: '\\b\\d{4}[ -]?\\d{4}[ -]?\\d{4}[ -]?\\d{4}\\b', action: 'block' }] } }

function gatewayConfig (upstream: number, db: string, opts: { metrics?: boolean, extraPlugins?: Array<Record<string, unknown>>, cache?: boolean } = {}): Record<string, unknown> {
  const { metrics = true, extraPlugins = [], cache = false } = opts
  const model = (id: string, provider: string): Record<string, unknown> => ({
    id,
    name: id,
    provider,
    upstream_model: 'bench',
    context_length: 128000,
    max_output_tokens: 4096,
    architecture: { input_modalities: ['text'], output_modalities: ['text'] },
    supported_parameters: ['temperature', 'max_tokens'],
    pricing: { input: 1, cached_input: 0.5, output: 2 }
  })
  return {
    server: { port: 0, request_timeout_s: 30 },
    store: { sqlite: db },
    plugins: [
      { name: 'cors' }, { name: 'rate-limit', options: { max: 1_000_000_000, window_s: 60 } }, { name: 'auth' },
      // the response cache where it belongs: before the quota and balance, which a hit skips
      { name: 'idempotency' }, ...(cache ? [{ name: 'cache' }] : []), { name: 'quota' }, { name: 'balance' }, { name: 'usage' }, { name: 'diagnostics' },
      ...extraPlugins
    ],
    providers: [
      { id: 'up-openai', protocol: 'openai', base_url: `http://127.0.0.1:${upstream}/v1`, api_key: 'x', passthrough: true },
      { id: 'up-messages', protocol: 'messages', base_url: `http://127.0.0.1:${upstream}`, api_key: 'x' },
      // AWS Bedrock's Converse, every call signed with SigV4 (the fixed upstream checks no signature)
      { id: 'up-bedrock', protocol: 'converse', platform: 'bedrock', region: 'us-east-1', base_url: `http://127.0.0.1:${upstream}`, aws: { access_key_id: 'AKIDBENCH', secret_access_key: 'bench-secret' } },
      // the same upstream, for the model that always answers 503 (a breaker of its own)
      { id: 'up-down', protocol: 'openai', base_url: `http://127.0.0.1:${upstream}/v1`, api_key: 'x' }
    ],
    models: [
      model('bench/openai', 'up-openai'), model('bench/claude', 'up-messages'), model('bench/nova', 'up-bedrock'),
      // answered 503 by its provider, then by its fallback: the fallback figure
      { ...model('bench/down', 'up-down'), upstream_model: 'bench-down', fallbacks: [{ models: ['bench/openai'] }] },
      { id: 'bench/embed', name: 'bench/embed', provider: 'up-openai', upstream_model: 'bench', context_length: 8192, architecture: { input_modalities: ['text'], output_modalities: ['embeddings'] }, pricing: { input: 0.02, output: 0 } }
    ],
    // the fallback figure's provider fails on every call: its breaker kept shut, so that each call has its failed attempt
    upstream: { breaker: { failures: 1_000_000_000 } },
    // on: every call's figures are counted (as in the default config); /metrics itself is not scraped
    metrics: { enabled: metrics },
    tenants: [{ org: 'bench', balance_usd: 1_000_000, quota: { tokens: 1_000_000_000_000, per: 'day' }, projects: [{ id: 'p', keys: [{ key: BENCH_KEY, passthrough: ['up-openai'] }] }] }]
  }
}

/** A port nobody listens on now, for a server that cannot be told to pick one itself. */
async function freePort (): Promise<number> {
  return await new Promise((resolve, reject) => {
    const srv = createServer()
    srv.once('error', reject)
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number }
      srv.close(() => resolve(port))
    })
  })
}

/** Portkey's server from its npm package, on a port of ours; undefined when it is not installed. */
async function startPortkey (dir: string): Promise<Server | undefined> {
  const entry = join(dir, 'node_modules', '@portkey-ai', 'gateway', 'build', 'start-server.js')
  if (!existsSync(entry)) return undefined
  const port = await freePort()
  const child = spawn(process.execPath, [entry, `--port=${port}`, '--headless'], { cwd: dir, env: { ...process.env, NODE_ENV: 'production' }, stdio: 'ignore' })
  own(child)
  for (let i = 0; i < 100; i++) {
    try {
      await fetch(`http://127.0.0.1:${port}/`)
      return { port, pid: child.pid!, child }
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100))
    }
  }
  throw new Error('Portkey did not start listening within 10 s')
}

const responsesBody = (model: string): string => JSON.stringify({ model, stream: true, max_output_tokens: 64, input: 'Say twenty words.' })
const geminiBody = (): string => JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'Say twenty words.' }] }], generationConfig: { maxOutputTokens: 64 } })
const embedBody = (): string => JSON.stringify({ model: 'bench/embed', input: 'A sentence of about the length an app embeds, to look up later.', encoding_format: 'base64' })
const chatBody = (model: string, stream = false): string => JSON.stringify({ model, stream, max_tokens: 64, messages: [{ role: 'user', content: 'Say twenty words.' }] })
const headers: Record<string, string> = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_KEY}` }
const cacheHeaders: Record<string, string> = { ...headers, 'x-svc-cache': 'on' }
/** What Portkey needs to forward to our upstream as an OpenAI-compatible host. */
const portkeyHeaders = (upstream: string): Record<string, string> => ({ ...headers, 'x-portkey-provider': 'openai', 'x-portkey-custom-host': `${upstream}/v1` })

/**
 * `cpuUs` / `mainUs`: the target process's CPU per request (all its threads / its main thread
 * alone), in µs; NaN where it spans several processes (the cluster) or /proc is missing.
 */
interface Load { rps: number, p50: number, p99: number, errors: number, cpuUs?: number, mainUs?: number }

let idempotencyKeys = 0

async function load (url: string, body: string, connections: number, extra = headers, pid = NaN): Promise<Load> {
  const cpu0 = processCpuUs(pid)
  const main0 = mainThreadCpuUs(pid)
  const r = await autocannon({
    url,
    method: 'POST',
    body,
    headers: extra,
    connections,
    duration: SLICE,
    // A fresh Idempotency-Key per request, so modelgate's idempotency plugin does its real work.
    // Every target gets it (the proxies forward it, the upstream ignores it): building each
    // request costs autocannon CPU on the cores the targets share, and it must cost all alike.
    requests: [{ setupRequest: (req: autocannon.Request) => ({ ...req, headers: { ...extra, 'idempotency-key': `k-${process.pid}-${idempotencyKeys++}` } }) }]
  })
  return {
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.non2xx + r.errors,
    cpuUs: (processCpuUs(pid) - cpu0) / r.requests.total,
    mainUs: (mainThreadCpuUs(pid) - main0) / r.requests.total
  }
}

/**
 * One connection, one request at a time (the MCP tools/call figure; bench/single.ts times the chat calls) for the duration, timed with performance.now() (autocannon
 * rounds latencies to whole milliseconds, too coarse for added latency).
 */
async function sequential (url: string, body: string, extra = headers, idempotency = true): Promise<Load> {
  const { origin, pathname } = new URL(url)
  const pool = new Pool(origin, { connections: 1 })
  const times: number[] = []
  let errors = 0
  const end = Date.now() + SLICE * 1000
  while (Date.now() < end) {
    const h = idempotency ? { ...extra, 'idempotency-key': `s-${process.pid}-${idempotencyKeys++}` } : extra
    const t0 = performance.now()
    const res = await pool.request({ method: 'POST', path: pathname, headers: h, body })
    await res.body.text()
    times.push(performance.now() - t0)
    if (res.statusCode !== 200) errors++
  }
  await pool.close()
  times.sort((a, b) => a - b)
  const pct = (p: number): number => times[Math.min(times.length - 1, Math.floor(times.length * p))] as number
  return { rps: times.length / SLICE, p50: pct(0.5), p99: pct(0.99), errors }
}

interface StreamLoad { streamsPerS: number, chunksPerS: number, ttfbP50: number, ttfbP99: number, errors: number }

/** `concurrency` clients open streams back to back for the duration; time to first byte and chunks. */
async function streamLoad (url: string, body: string, concurrency: number, extra = headers): Promise<StreamLoad> {
  const end = Date.now() + SLICE * 1000
  const ttfb: number[] = []
  let chunks = 0
  let streams = 0
  let errors = 0
  const started = Date.now()
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (Date.now() < end) {
      const t0 = performance.now()
      try {
        const res = await fetch(url, { method: 'POST', headers: extra, body })
        if (res.status !== 200 || res.body === null) { errors++; await res.text(); continue }
        let first = true
        const decoder = new TextDecoder()
        for await (const part of res.body) {
          if (first) { ttfb.push(performance.now() - t0); first = false }
          chunks += decoder.decode(part as Uint8Array, { stream: true }).split('\n\n').length - 1
        }
        streams++
      } catch { errors++ }
    }
  }))
  const secs = (Date.now() - started) / 1000
  ttfb.sort((a, b) => a - b)
  const pct = (p: number): number => ttfb.length === 0 ? NaN : ttfb[Math.min(ttfb.length - 1, Math.floor(ttfb.length * p))] as number
  return { streamsPerS: streams / secs, chunksPerS: chunks / secs, ttfbP50: pct(0.5), ttfbP99: pct(0.99), errors }
}

/** Usage records committed per second into a SQLite file, in the usage plugin's batches of 500. */
function ledgerWrites (): number {
  const dir = mkdtempSync(join(tmpdir(), 'mg-bench-ledger-'))
  const store = new SqliteStore(join(dir, 'ledger.db'))
  const row = (i: number): UsageRow => ({ id: `u${i}`, created_at: Date.now(), trace_id: `t${i}`, org_id: 'o', project_id: 'p', key_id: 'k', endpoint: 'chat.completions', model: 'm', provider: 'p', stream: 0, status: 'ok', prompt_tokens: 10, cached_input_tokens: 2, completion_tokens: 5, total_tokens: 15, cost_nano: 123, latency_ms: 3, ttft_ms: 1, cache_hit: 0, saved_nano: 0, attempts: [], dropped_params: [], tags: [], cache_write_tokens: 0, images: 0, cost_detail: { input: 80, cached_input: 3, cache_write: 0, output: 40, images: 0, per_request: 0, tool_call: 0, tier: null }, error: null })
  let i = 0
  const t0 = performance.now()
  while (performance.now() - t0 < 2000) {
    const batch: UsageRow[] = []
    for (let k = 0; k < 500; k++) batch.push(row(i++))
    store.usage.insertMany(batch, [])
  }
  const rate = i / ((performance.now() - t0) / 1000)
  void store.close()
  return rate
}

/**
 * Every case once per round, in reverse order every other round; each figure is the median of
 * its rounds (errors: the sum). `runs` keeps each round's figures, for paired ratios.
 */
async function inRounds<T extends object> (cases: Array<[string, () => Promise<T>]>): Promise<{ median: Record<string, T>, runs: Map<string, T[]> }> {
  const runs = new Map<string, T[]>()
  for (let r = 0; r < ROUNDS; r++) {
    for (const [name, run] of r % 2 === 0 ? cases : [...cases].reverse()) runs.set(name, [...(runs.get(name) ?? []), await run()])
  }
  const out: Record<string, T> = {}
  for (const [name, rs] of runs) {
    const keys = Object.keys(rs[0] as object) as Array<keyof T>
    out[name] = Object.fromEntries(keys.map((k) => {
      const xs = rs.map((r) => r[k] as number)
      return [k, k === 'errors' ? xs.reduce((a, b) => a + b, 0) : median(xs)]
    })) as T
  }
  return { median: out, runs }
}

const median = (xs: number[]): number => { const v = [...xs].sort((a, b) => a - b); return v.length === 0 ? NaN : v.length % 2 === 1 ? v[(v.length - 1) / 2] as number : ((v[v.length / 2 - 1] as number) + (v[v.length / 2] as number)) / 2 }

/** The median over rounds of a's figure over b's in the same round (requests/s by default): the two shared that round's machine. */
function pairedRatio (runs: Map<string, Load[]>, a: string, b: string, figure: 'rps' | 'cpuUs' = 'rps'): number {
  const xs = runs.get(a); const ys = runs.get(b)
  if (xs === undefined || ys === undefined) return NaN
  return median(xs.map((x, i) => (x[figure] ?? NaN) / (ys[i]?.[figure] ?? NaN)))
}

const fmt = (n: number, d = 0): string => Number.isFinite(n) ? n.toFixed(d) : 'n/a'
const ratio = (a: number, b: number | undefined): string => b === undefined || !Number.isFinite(b) || b === 0 ? 'n/a' : (a / b).toFixed(2)

async function main (): Promise<void> {
  if (!existsSync(fromRoot('dist', 'cli', 'index.js'))) throw new Error('run `npm run build` first (npm install does it)')
  const upstream = await startServer([fromRoot('bench', 'upstream.mjs')])
  const up = `http://127.0.0.1:${upstream.port}`
  const replyFrom = await startServer([fromRoot('bench', 'bare-proxy.mjs')], { UPSTREAM: up, KIND: 'reply-from' })
  const undiciProxy = await startServer([fromRoot('bench', 'bare-proxy.mjs')], { UPSTREAM: up, KIND: 'undici' })
  const dir = mkdtempSync(join(tmpdir(), 'mg-bench-'))
  const cfg = join(dir, 'gateway.json')
  writeFileSync(cfg, JSON.stringify(gatewayConfig(upstream.port, join(dir, 'gw.db'))))
  const gateway = await startServer([fromRoot('dist', 'cli', 'index.js'), 'serve', '--config', cfg, '--workers', '1'], { LOG_LEVEL: 'error' })
  const cfgGuard = join(dir, 'gateway-guardrails.json')
  writeFileSync(cfgGuard, JSON.stringify(gatewayConfig(upstream.port, join(dir, 'gw-guardrails.db'), { extraPlugins: [GUARDRAILS] })))
  const guarded = await startServer([fromRoot('dist', 'cli', 'index.js'), 'serve', '--config', cfgGuard, '--workers', '1'], { LOG_LEVEL: 'error' })
  const cfgOff = join(dir, 'gateway-metrics-off.json')
  writeFileSync(cfgOff, JSON.stringify(gatewayConfig(upstream.port, join(dir, 'gw-off.db'), { metrics: false })))
  const metricsOff = await startServer([fromRoot('dist', 'cli', 'index.js'), 'serve', '--config', cfgOff, '--workers', '1'], { LOG_LEVEL: 'error' })
  const cfgCache = join(dir, 'gateway-cache.json')
  writeFileSync(cfgCache, JSON.stringify(gatewayConfig(upstream.port, join(dir, 'gw-cache.db'), { cache: true })))
  const cached = await startServer([fromRoot('dist', 'cli', 'index.js'), 'serve', '--config', cfgCache, '--workers', '1'], { LOG_LEVEL: 'error' })
  const cfgAll = join(dir, 'gateway-all-cores.json')
  writeFileSync(cfgAll, JSON.stringify(gatewayConfig(upstream.port, join(dir, 'gw-all-cores.db'))))
  const allCores = await startServer([fromRoot('dist', 'cli', 'index.js'), 'serve', '--config', cfgAll], { LOG_LEVEL: 'error' })
  // an MCP server, and a gateway (every plugin on) with it behind /mcp
  const mcpUp = await startServer([fromRoot('bench', 'mcp-upstream.mjs')])
  const cfgMcp = join(dir, 'gateway-mcp.json')
  const mcpConfig = gatewayConfig(upstream.port, join(dir, 'gw-mcp.db')) as { tenants: Array<{ projects: Array<{ keys: Array<Record<string, unknown>> }> }> }
  for (const k of mcpConfig.tenants[0]?.projects[0]?.keys ?? []) k.mcp = ['bench/*']
  writeFileSync(cfgMcp, JSON.stringify({ ...mcpConfig, mcp: { servers: [{ id: 'bench', transport: 'http', url: `http://127.0.0.1:${mcpUp.port}/mcp`, pricing: { per_call: 0.0001 } }] } }))
  const mcpGateway = await startServer([fromRoot('dist', 'cli', 'index.js'), 'serve', '--config', cfgMcp, '--workers', '1'], { LOG_LEVEL: 'error' })
  const portkeyDir = process.env.PORTKEY_DIR ?? '/tmp/portkey'
  const portkeyServer = await startPortkey(portkeyDir)
  const portkey = portkeyServer === undefined ? `not installed in ${portkeyDir}` : 'installed'
  const pk = portkeyServer === undefined ? undefined : `http://127.0.0.1:${portkeyServer.port}/v1/chat/completions`

  const chatUrl = (s: Server): string => `http://127.0.0.1:${s.port}/v1/chat/completions`
  const targets: Record<string, Server> = { upstream, 'reply-from': replyFrom, 'undici handler': undiciProxy }
  const mg = `http://127.0.0.1:${gateway.port}`
  const results: Record<string, unknown> = {
    machine: { cpus: cpus().length, model: cpus()[0]?.model, memory_gb: Math.round(totalmem() / 2 ** 30), node: process.version },
    duration_s: DURATION,
    rounds: ROUNDS,
    portkey
  }
  process.stderr.write(`bench: ${DURATION}s per case in ${ROUNDS} rounds (medians); upstream, two bare proxies, modelgate (all plugins on; 1 worker and ${cpus().length}) and Portkey (${portkey}) in separate processes\n`)

  // warm-up, not measured: every server's JIT and connection pools
  const warm: Array<[string, string, Record<string, string>]> = [...Object.values(targets), gateway, guarded, metricsOff, allCores].map((s) => [chatUrl(s), chatBody('bench/openai'), headers])
  const mcpWarm = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${BENCH_KEY}` }
  warm.push([`http://127.0.0.1:${mcpUp.port}/mcp`, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'echo', arguments: { text: 'x' } } }), mcpWarm])
  warm.push([`http://127.0.0.1:${mcpGateway.port}/mcp`, JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'bench__echo', arguments: { text: 'x' } } }), mcpWarm])
  // its first call stores the answer every later one hits
  warm.push([chatUrl(cached), chatBody('bench/openai'), cacheHeaders])
  if (pk !== undefined) warm.push([pk, chatBody('bench'), portkeyHeaders(up)])
  warm.push([`http://127.0.0.1:${replyFrom.port}/v1/embeddings`, embedBody(), headers], [`${mg}/v1/embeddings`, embedBody(), headers])
  warm.push([`${mg}/v1/chat/completions`, chatBody('bench/nova'), headers], [`${mg}/v1/chat/completions`, chatBody('bench/nova', true), headers])
  for (const [url, body, h] of warm) await autocannon({ url, method: 'POST', body, headers: h, connections: 32, duration: 1 })
  // the MCP figure is taken at one connection, where a gateway still compiles its hot code for
  // tens of seconds after a one-second warm-up: 8,000 calls each first, as bench/single.ts gives
  // the chat gateways it times
  for (const [url, body, h] of warm.filter(([url]) => url.endsWith('/mcp'))) await autocannon({ url, method: 'POST', body, headers: h, connections: 32, amount: 8000 })
  // what the MCP figure times is a tool's answer, not a refusal
  const mcpCheck = await (await fetch(`http://127.0.0.1:${mcpGateway.port}/mcp`, { method: 'POST', headers: mcpWarm, body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'bench__echo', arguments: { text: 'checked' } } }) })).text()
  if (!mcpCheck.includes('"text":"checked"')) throw new Error(`the gateway's MCP tools/call did not answer as the server does: ${mcpCheck}`)
  const mgChat = `${mg}/v1/chat/completions`
  const throughputCases: Array<[string, () => Promise<Load>]> = Object.entries(targets).map(([name, s]) => [name, async () => await load(chatUrl(s), chatBody('bench/openai'), 32, headers, s.pid)])
  throughputCases.push(
    ['modelgate passthrough', async () => await load(mgChat, chatBody('bench/openai'), 32, headers, gateway.pid)],
    ['modelgate translated', async () => await load(mgChat, chatBody('bench/claude'), 32, headers, gateway.pid)],
    // a chat call to a Bedrock model: translated to Converse, signed, its answer translated back
    ['modelgate Bedrock Converse', async () => await load(mgChat, chatBody('bench/nova'), 32, headers, gateway.pid)],
    // the provider's own API through /passthrough (the model named by its upstream name, metered and priced)
    ['modelgate /passthrough', async () => await load(`${mg}/passthrough/up-openai/chat/completions`, chatBody('bench'), 32, headers, gateway.pid)],
    ['modelgate + guardrails', async () => await load(chatUrl(guarded), chatBody('bench/openai'), 32, headers, guarded.pid)],
    ['modelgate metrics off', async () => await load(chatUrl(metricsOff), chatBody('bench/openai'), 32, headers, metricsOff.pid)],
    // every call the same and asking for the cache: each one a hit, no upstream hop
    ['modelgate cache hit', async () => await load(chatUrl(cached), chatBody('bench/openai'), 32, cacheHeaders, cached.pid)],
    // POST /v1/embeddings (a 1,536-value base64 vector back), through each
    ['reply-from embeddings', async () => await load(`http://127.0.0.1:${replyFrom.port}/v1/embeddings`, embedBody(), 32, headers, replyFrom.pid)],
    ['modelgate embeddings', async () => await load(`${mg}/v1/embeddings`, embedBody(), 32, headers, gateway.pid)],
    // its CPU is spread over the cluster's workers: not read
    [`modelgate ${cpus().length} workers`, async () => await load(chatUrl(allCores), chatBody('bench/openai'), 32)]
  )
  if (pk !== undefined) throughputCases.push(['portkey', async () => await load(pk, chatBody('bench'), 32, portkeyHeaders(up), portkeyServer!.pid)])
  const { median: throughput, runs: throughputRuns } = await inRounds(throughputCases)
  // an MCP tools/call, one after another on one connection, as a client sends it (no Idempotency-Key)
  const mcpHeaders = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', 'mcp-protocol-version': '2025-06-18' }
  const toolCall = (name: string): string => JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: { text: 'Say twenty words.' } } })
  const { median: mcp } = await inRounds<Load>([
    ['straight to the server', async () => await sequential(`http://127.0.0.1:${mcpUp.port}/mcp`, toolCall('echo'), mcpHeaders, false)],
    ['through modelgate', async () => await sequential(`http://127.0.0.1:${mcpGateway.port}/mcp`, toolCall('bench__echo'), { ...mcpHeaders, authorization: `Bearer ${BENCH_KEY}` }, false)]
  ])
  // a fallback at one connection: a call to bench/down (its provider answers 503 at once, then
  // bench/openai answers) against a call to bench/openai, less the failed attempt itself (the
  // upstream's 503 asked for directly): what the gateway adds to move a call to the next model
  const downBody = JSON.stringify({ model: 'bench-down', messages: [{ role: 'user', content: 'Say twenty words.' }] })
  const { median: fb } = await inRounds<Load>([
    ['failed attempt alone', async () => await sequential(`${up}/v1/chat/completions`, downBody, headers, false)],
    ['modelgate, no fallback', async () => await sequential(mgChat, chatBody('bench/openai'), headers)],
    ['modelgate, one fallback', async () => await sequential(mgChat, chatBody('bench/down'), headers)]
  ])
  const fbAdded = (fb['modelgate, one fallback']?.p50 ?? NaN) - (fb['modelgate, no fallback']?.p50 ?? NaN) - (fb['failed attempt alone']?.p50 ?? NaN)
  const streamCases: Array<[string, () => Promise<StreamLoad>]> = [
    ['upstream', async () => await streamLoad(`${up}/v1/chat/completions`, chatBody('bench/openai', true), 16)],
    ['reply-from', async () => await streamLoad(chatUrl(replyFrom), chatBody('bench/openai', true), 16)],
    ['modelgate passthrough', async () => await streamLoad(mgChat, chatBody('bench/openai', true), 16)],
    ['modelgate translated', async () => await streamLoad(mgChat, chatBody('bench/claude', true), 16)],
    ['modelgate Responses → chat', async () => await streamLoad(`${mg}/v1/responses`, responsesBody('bench/openai'), 16)],
    ['modelgate Gemini → chat', async () => await streamLoad(`${mg}/v1beta/models/bench/openai:streamGenerateContent?alt=sse`, geminiBody(), 16)],
    ['modelgate chat → Converse', async () => await streamLoad(mgChat, chatBody('bench/nova', true), 16)],
    ['modelgate + guardrails', async () => await streamLoad(chatUrl(guarded), chatBody('bench/openai', true), 16)]
  ]
  if (pk !== undefined) streamCases.push(['portkey', async () => await streamLoad(pk, chatBody('bench', true), 16, portkeyHeaders(up))])
  const { median: streaming } = await inRounds(streamCases)
  // one stream at a time: the time to first byte a gateway adds, without queueing behind others
  const { median: streamOne } = await inRounds<StreamLoad>([
    ['upstream', async () => await streamLoad(`${up}/v1/chat/completions`, chatBody('bench/openai', true), 1)],
    ['reply-from', async () => await streamLoad(chatUrl(replyFrom), chatBody('bench/openai', true), 1)],
    ['modelgate passthrough', async () => await streamLoad(mgChat, chatBody('bench/openai', true), 1)],
    ['modelgate translated', async () => await streamLoad(mgChat, chatBody('bench/claude', true), 1)]
  ])
  // one connection: the bare proxy, modelgate plugin list by plugin list (processes of their own,
  // warmed up), PostgreSQL + Redis, Portkey. The servers of the sections above go first: a quiet
  // gateway is measured on a machine without a dozen others idling beside it (their threads and
  // timers wake on the same two cores), as bench/single.ts and ab.ts measure it
  await stopSome([undiciProxy, gateway, guarded, metricsOff, cached, allCores, mcpGateway, mcpUp])
  const single = await singleConnection({
    upstream,
    bare: replyFrom,
    rounds: ROUNDS,
    slice: SLICE,
    others: pk === undefined ? [] : [{ label: 'portkey', server: portkeyServer!, url: pk, body: chatBody('bench'), headers: portkeyHeaders(up) }]
  })
  // the spend signals: gateways of their own, loaded at once at a rate none saturates (bench/signals.ts)
  const signals = await measureSignals({ upstream, blocks: QUICK ? 2 : 8, rounds: QUICK ? 2 : 4, slice: 3, warm: QUICK ? 3 : 5, rate: 1000 })
  const ledger = ledgerWrites()
  const metricsUs = metricsCostUs()
  // the command line, each command a process of its own beside node -e 0 (bench/cli.ts)
  const cli = await cliTimes({ runs: QUICK ? 1 : 5 })

  const bare = throughput['reply-from']?.rps
  const pkRps = throughput.portkey?.rps
  const pkStreamErrors = streaming.portkey?.errors ?? 0
  console.log('\nNon-streaming chat, 32 connections')
  console.log('target                    req/s    p50 ms  p99 ms  errors  ×reply-from  ×portkey  CPU µs/call (main thread)')
  for (const [name, r] of Object.entries(throughput)) console.log(`${name.padEnd(24)} ${fmt(r.rps).padStart(7)} ${fmt(r.p50, 1).padStart(8)} ${fmt(r.p99, 1).padStart(7)} ${String(r.errors).padStart(7)}  ${ratio(r.rps, bare).padStart(10)}  ${ratio(r.rps, pkRps).padStart(8)}  ${fmt(r.cpuUs ?? NaN).padStart(8)} (${fmt(r.mainUs ?? NaN)})`)
  console.log('\nOne connection, calls one after another (CPU per call, p50 and p99 added: per-round medians against the bare proxy of the same round)')
  printSingle(single)
  const added50 = single.added[EVERY]?.p50 ?? NaN
  const added99 = single.added[EVERY]?.p99 ?? NaN
  console.log('\nMCP tools/call, one connection: p50 / p99 ms')
  for (const [name, r] of Object.entries(mcp)) console.log(`${name.padEnd(24)} ${fmt(r.p50, 2).padStart(6)} ${fmt(r.p99, 2).padStart(7)}  errors ${r.errors}`)
  const mcpAdded50 = (mcp['through modelgate']?.p50 ?? NaN) - (mcp['straight to the server']?.p50 ?? NaN)
  const mcpAdded99 = (mcp['through modelgate']?.p99 ?? NaN) - (mcp['straight to the server']?.p99 ?? NaN)
  console.log(`Added by modelgate to an MCP tools/call (all plugins on, a usage record each): p50 ${fmt(mcpAdded50, 2)} ms, p99 ${fmt(mcpAdded99, 2)} ms (target ≤ 1 at p50)`)
  results.mcp_tools_call = { ...mcp, added_ms: { p50: mcpAdded50, p99: mcpAdded99 } }
  console.log('\nA fallback across models, one connection: p50 / p99 ms')
  for (const [name, r] of Object.entries(fb)) console.log(`${name.padEnd(24)} ${fmt(r.p50, 2).padStart(6)} ${fmt(r.p99, 2).padStart(7)}  errors ${r.errors}`)
  console.log(`Added by one fallback besides the failed attempt: p50 ${fmt(fbAdded, 2)} ms (target ≤ 0.5)`)
  results.fallback = { ...fb, added_p50_ms: fbAdded }
  console.log('\nStreaming chat (22 chunks a stream), 16 concurrent streams')
  console.log('target                  streams/s  chunks/s  ttfb p50 ms  ttfb p99 ms  errors')
  for (const [name, r] of Object.entries(streaming)) console.log(`${name.padEnd(24)} ${fmt(r.streamsPerS).padStart(8)} ${fmt(r.chunksPerS).padStart(9)} ${fmt(r.ttfbP50, 2).padStart(12)} ${fmt(r.ttfbP99, 2).padStart(12)} ${String(r.errors).padStart(7)}`)
  const translatedRatio = (streaming['modelgate translated']?.streamsPerS ?? NaN) / (streaming['modelgate passthrough']?.streamsPerS ?? NaN)
  console.log('\nStreaming chat, one stream at a time: time to first byte, ms')
  console.log('target                    p50      p99     p50 over the upstream')
  for (const [name, r] of Object.entries(streamOne)) console.log(`${name.padEnd(24)} ${fmt(r.ttfbP50, 2).padStart(5)} ${fmt(r.ttfbP99, 2).padStart(8)} ${fmt(r.ttfbP50 - (streamOne.upstream?.ttfbP50 ?? NaN), 2).padStart(10)}`)
  if (pkStreamErrors > 0) console.log('(Portkey answered its streams with errors: on Node 20 it fails with "TypeError: immutable" when it rewrites the streamed response\'s headers)')
  console.log(`\nTranslated / passthrough stream throughput: ${fmt(translatedRatio, 2)} (target ≥ 0.70)`)
  const responsesRatio = (streaming['modelgate Responses → chat']?.streamsPerS ?? NaN) / (streaming['modelgate passthrough']?.streamsPerS ?? NaN)
  console.log(`Translated Responses / chat passthrough stream throughput: ${fmt(responsesRatio, 2)} (target ≥ 0.70)`)
  const geminiRatio = (streaming['modelgate Gemini → chat']?.streamsPerS ?? NaN) / (streaming['modelgate passthrough']?.streamsPerS ?? NaN)
  console.log(`Translated Gemini (streamGenerateContent → chat) / chat passthrough stream throughput: ${fmt(geminiRatio, 2)} (target ≥ 0.70)`)
  const converseRatio = (streaming['modelgate chat → Converse']?.streamsPerS ?? NaN) / (streaming['modelgate passthrough']?.streamsPerS ?? NaN)
  console.log(`Translated Converse stream (chat → Bedrock's event stream) / chat passthrough stream throughput: ${fmt(converseRatio, 2)} (target ≥ 0.70)`)
  const bedrockCpu = pairedRatio(throughputRuns, 'modelgate Bedrock Converse', 'modelgate passthrough', 'cpuUs')
  console.log(`A Bedrock Converse call (signed, translated) / an OpenAI-protocol call, CPU per call: ${fmt(bedrockCpu, 2)}× per round (median); ${fmt(throughput['modelgate Bedrock Converse']?.cpuUs ?? NaN)} / ${fmt(throughput['modelgate passthrough']?.cpuUs ?? NaN)} µs of the medians (target ≤ 1.15)`)
  const saturatedUs = throughput['modelgate passthrough']?.cpuUs ?? NaN
  const signalsShare = signals.addedUs / saturatedUs
  console.log(`${signalsLine(signals)}${signals.errors > 0 ? `; ${signals.errors} errors` : ''}`)
  console.log(`  the signals' µs over a call at 32 connections (${fmt(saturatedUs)} µs): ${fmt(signalsShare * 100, 1)}% (${fmt(signals.addedInterval[0] / saturatedUs * 100, 1)} to ${fmt(signals.addedInterval[1] / saturatedUs * 100, 1)}%)`)
  const guardStream = (streaming['modelgate + guardrails']?.streamsPerS ?? NaN) / (streaming['modelgate passthrough']?.streamsPerS ?? NaN)
  const guardCpu = (throughput['modelgate + guardrails']?.cpuUs ?? NaN) / (throughput['modelgate passthrough']?.cpuUs ?? NaN)
  console.log(`Guardrails (2 rules, no match): CPU per request ${fmt(guardCpu, 2)}× modelgate without it; stream throughput ${fmt(guardStream, 2)}×`)
  const pairedBare = pairedRatio(throughputRuns, 'modelgate passthrough', 'reply-from')
  const pairedPk = pairedRatio(throughputRuns, 'modelgate passthrough', 'portkey')
  console.log(`modelgate (all plugins) / bare reply-from proxy, non-streaming: ${fmt(pairedBare, 2)} per round (median), ${ratio(throughput['modelgate passthrough']?.rps ?? NaN, bare)} of the medians (target ≥ 0.80)`)
  // CPU per request moves less than requests/s when the load generator and the upstream compete
  // for the same cores: what the gateway costs, beside what it reached on this machine
  const mgLoad = throughput['modelgate passthrough']; const bareLoad = throughput['reply-from']
  const cpuOverBare = (mgLoad?.cpuUs ?? NaN) / (bareLoad?.cpuUs ?? NaN)
  const mainOverBare = (mgLoad?.mainUs ?? NaN) / (bareLoad?.mainUs ?? NaN)
  console.log(`  CPU per request, modelgate / bare reply-from proxy: ${fmt(cpuOverBare, 2)} (main thread ${fmt(mainOverBare, 2)}; medians of the rounds)`)
  const metricsCpu = pairedRatio(throughputRuns, 'modelgate passthrough', 'modelgate metrics off', 'cpuUs')
  const metricsShare = metricsUs / (mgLoad?.cpuUs ?? NaN)
  console.log(`Metrics: ${fmt(metricsUs, 2)} µs of CPU per call measured alone, ${fmt(metricsShare * 100, 2)}% of modelgate's CPU per request (target ≤ 3%); gateways with metrics on / off: ${fmt(metricsCpu, 3)} per round (median), ${fmt(mgLoad?.cpuUs ?? NaN)} / ${fmt(throughput['modelgate metrics off']?.cpuUs ?? NaN)} µs of the medians`)
  const passthroughRoute = pairedRatio(throughputRuns, 'modelgate /passthrough', 'reply-from')
  results.passthrough_route_over_reply_from = passthroughRoute
  console.log(`Pass-through route (/passthrough/{provider}, all plugins) / bare reply-from proxy: ${fmt(passthroughRoute, 2)} per round (median), ${ratio(throughput['modelgate /passthrough']?.rps ?? NaN, bare)} of the medians (target ≥ 0.90)`)
  const cacheHit = pairedRatio(throughputRuns, 'modelgate cache hit', 'reply-from')
  results.cache_hit_over_reply_from = cacheHit
  console.log(`Cache hits (all plugins and the cache, every call a hit) / bare reply-from proxy: ${fmt(cacheHit, 2)} per round (median), ${ratio(throughput['modelgate cache hit']?.rps ?? NaN, bare)} of the medians (target ≥ 1.50)`)
  const embeddings = pairedRatio(throughputRuns, 'modelgate embeddings', 'reply-from embeddings')
  const embeddingsCpu = pairedRatio(throughputRuns, 'modelgate embeddings', 'reply-from embeddings', 'cpuUs')
  results.embeddings_over_reply_from = { throughput: embeddings, cpu_per_request: embeddingsCpu }
  console.log(`Embeddings (POST /v1/embeddings, all plugins) / bare reply-from proxy: ${fmt(embeddings, 2)} per round (median), ${ratio(throughput['modelgate embeddings']?.rps ?? NaN, throughput['reply-from embeddings']?.rps)} of the medians (target ≥ 0.80); CPU per request ${fmt(embeddingsCpu, 2)}×`)
  console.log(`Usage ledger: ${fmt(ledger)} records/s into SQLite (target ≥ 20,000)`)
  console.log(`modelgate (all plugins, 1 worker) / Portkey, non-streaming: ${fmt(pairedPk, 2)} per round (median), ${ratio(throughput['modelgate passthrough']?.rps ?? NaN, pkRps)} of the medians (target ≥ 10; Portkey ${portkey})`)
  console.log('\nThe command line: each command against node -e 0 (targets: --help adds ≤ 0.3 s, every other command ≤ 0.5 s)')
  printCliTimes(cli)

  Object.assign(results, {
    responses_translated_over_passthrough: responsesRatio,
    gemini_translated_over_passthrough: geminiRatio,
    bedrock: { converse_stream_over_passthrough: converseRatio, cpu_per_call_over_openai: bedrockCpu },
    signals: { cpu_per_call_on_over_off: signals.ratio, interval: signals.interval, null_pair: signals.nullRatio, null_interval: signals.nullInterval, added_us: signals.addedUs, added_interval: signals.addedInterval, added_over_saturated_call: signalsShare, blocks: signals.blocks.map((b) => [b.ratio, b.nullRatio, b.added]), us: signals.us, errors: signals.errors },
    guardrails: { cpu_per_request_over_modelgate: guardCpu, stream_throughput_over_modelgate: guardStream },
    throughput,
    throughput_rounds: Object.fromEntries([...throughputRuns].map(([name, rs]) => [name, rs.map((r) => r.rps)])),
    single_connection: { median: single.median, over_reply_from: single.added, rounds: single.rounds, postgres: single.postgres ?? 'measured' },
    added_latency_ms: { p50: added50, p99: added99, cpu_per_call_over_reply_from: single.added[EVERY]?.cpu ?? NaN, postgres: single.added[EVERY_PG] ?? null },
    streaming,
    streaming_one_at_a_time: streamOne,
    translated_over_passthrough: translatedRatio,
    ledger_records_per_s: ledger,
    cli,
    ratios: {
      modelgate_over_reply_from: (throughput['modelgate passthrough']?.rps ?? NaN) / (bare ?? NaN),
      modelgate_all_cores_over_reply_from: (throughput[`modelgate ${cpus().length} workers`]?.rps ?? NaN) / (bare ?? NaN),
      modelgate_over_portkey: pkRps === undefined ? null : (throughput['modelgate passthrough']?.rps ?? NaN) / pkRps,
      cpu_per_request_modelgate_over_reply_from: { process: cpuOverBare, main_thread: mainOverBare },
      cpu_per_request_metrics_on_over_off: metricsCpu,
      metrics_us_per_call: metricsUs,
      metrics_share_of_cpu_per_request: metricsShare,
      // the median over rounds of the two cases' ratio in the same round
      paired: {
        modelgate_over_reply_from: pairedBare,
        modelgate_all_cores_over_reply_from: pairedRatio(throughputRuns, `modelgate ${cpus().length} workers`, 'reply-from'),
        modelgate_over_portkey: pkRps === undefined ? null : pairedPk
      }
    }
  })
  mkdirSync(fromRoot('bench', 'results'), { recursive: true })
  const json = JSON.stringify(results, null, 2)
  writeFileSync(fromRoot('bench', 'results', `${new Date().toISOString().replace(/[:.]/g, '-')}.json`), json)
  writeFileSync(fromRoot('bench', 'results', 'latest.json'), json)
}

main().then(() => process.exit(0), (err: unknown) => { console.error(err); process.exit(1) })
