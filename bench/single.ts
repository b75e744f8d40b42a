// One connection: calls one after another, each sent when the one before has been answered, as
// most self-hosted gateways are used and as published gateway comparisons measure them. Beside
// the bare reply-from proxy, in interleaved rounds: modelgate with every plugin, with none, with
// auth alone and auth plus each plugin that writes to the store, on SQLite (one worker), and
// every plugin on PostgreSQL + Redis (one instance) when they answer. A fresh Idempotency-Key per
// call to every target. For each: requests/s, CPU per call of the target process from /proc,
// p50 and p99; and against the bare proxy of the same round: p50 and p99 added, CPU per call as
// a ratio (the medians over rounds of those per-round figures). `npm run bench` runs it with its
// own rounds; on its own:
//   node --import tsx bench/single.ts          (BENCH_DURATION_S per case, default 15, in BENCH_ROUNDS, default 5;
//                                               SINGLE_LISTS: 'label=plugin,plugin;…' instead of the default lists;
//                                               ROOT: another built checkout's gateway; SINGLE_PG=0: no PostgreSQL)
// Needs a build (npm run build). PostgreSQL at $PG_ADMIN_URL, Redis at $REDIS_URL (a database and
// a Redis key prefix of its own are made and removed).
import { randomBytes } from 'node:crypto'
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import autocannon from 'autocannon'
import { Pool } from 'undici'
import { fromRoot } from '../paths.js'
import { mainThreadCpuUs, processCpuUs } from './proc-cpu.js'
import { startServer, stopServers, type Server } from './servers.js'
import { ALL_PLUGINS, BENCH_KEY, writeSmallConfig } from './small-config.js'

export interface SingleLoad {
  rps: number
  /** Latency percentiles, ms. */
  p50: number
  p99: number
  errors: number
  /** CPU per call of the target process (all its threads) and of its main thread, µs. */
  cpuUs: number
  mainUs: number
  calls: number
}

/** Plugin lists measured at one connection (label, comma-separated plugins). */
export const SINGLE_LISTS: Array<[string, string]> = [
  ['no plugins', ''],
  ['auth', 'auth'],
  ['auth + idempotency', 'auth,idempotency'],
  ['auth + quota', 'auth,quota'],
  ['auth + balance', 'auth,balance'],
  ['auth + usage', 'auth,usage'],
  ['every plugin but usage', ALL_PLUGINS.replace(',usage', '')],
  ['every plugin', ALL_PLUGINS]
]
export const BARE = 'reply-from'
export const EVERY = 'every plugin'
export const EVERY_PG = 'every plugin, PostgreSQL + Redis'

const ADMIN_URL = process.env.PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
const body = JSON.stringify({ model: 'b/o', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
const headers = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_KEY}` }
let keys = 0

/** Calls one after another on one keep-alive connection for `seconds`, timed with performance.now() (autocannon rounds to whole ms). */
export async function sequential (url: string, seconds: number, pid = NaN, payload = body, extra: Record<string, string> = headers): Promise<SingleLoad> {
  const { origin, pathname } = new URL(url)
  const pool = new Pool(origin, { connections: 1 })
  const times: number[] = []
  let errors = 0
  const cpu0 = processCpuUs(pid)
  const main0 = mainThreadCpuUs(pid)
  const started = performance.now()
  const end = started + seconds * 1000
  while (performance.now() < end) {
    const h = { ...extra, 'idempotency-key': `s-${process.pid}-${keys++}` }
    const t0 = performance.now()
    const res = await pool.request({ method: 'POST', path: pathname, headers: h, body: payload })
    await res.body.text()
    times.push(performance.now() - t0)
    if (res.statusCode !== 200) errors++
  }
  const wall = (performance.now() - started) / 1000
  const cpu = processCpuUs(pid) - cpu0
  const main = mainThreadCpuUs(pid) - main0
  await pool.close()
  times.sort((a, b) => a - b)
  const pct = (p: number): number => times[Math.min(times.length - 1, Math.floor(times.length * p))] as number
  return { rps: times.length / wall, p50: pct(0.5), p99: pct(0.99), errors, cpuUs: cpu / times.length, mainUs: main / times.length, calls: times.length }
}

const WARM_CALLS = 8000

/** WARM_CALLS calls at 32 connections, then a second one after another. */
export async function warm (url: string, pid = NaN, payload = body, extra: Record<string, string> = headers): Promise<void> {
  await autocannon({ url, method: 'POST', body: payload, headers: extra, connections: 32, amount: WARM_CALLS, requests: [{ setupRequest: (req: autocannon.Request) => ({ ...req, headers: { ...extra, 'idempotency-key': `w-${process.pid}-${keys++}` } }) }] })
  await sequential(url, 1, pid, payload, extra)
}

const median = (xs: number[]): number => { const v = xs.filter(Number.isFinite).sort((a, b) => a - b); return v.length === 0 ? NaN : v.length % 2 === 1 ? v[(v.length - 1) / 2] as number : ((v[v.length / 2 - 1] as number) + (v[v.length / 2] as number)) / 2 }

export interface SingleResult {
  /** Per case: the medians of its rounds (errors summed). */
  median: Record<string, SingleLoad>
  /** Per case against the bare proxy of the same round, medians over rounds: ms added, CPU per call as a ratio. */
  added: Record<string, { p50: number, p99: number, cpu: number }>
  rounds: Record<string, SingleLoad[]>
  /** Why PostgreSQL + Redis were not measured, or null. */
  postgres: string | null
}

/** A database and a Redis prefix of the bench's own, or why there are none. */
export async function scratchPostgres (): Promise<{ url: string, prefix: string, drop: () => Promise<void> } | string> {
  const { default: pg } = await import('pg')
  const { Redis } = await import('ioredis')
  const admin = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 2000 })
  try { await admin.connect() } catch (err) { return `PostgreSQL: ${(err as Error).message}` }
  const redis = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  try { await redis.connect(); await redis.ping() } catch (err) { await admin.end(); redis.disconnect(); return `Redis: ${(err as Error).message}` }
  const name = `mg_bench_${randomBytes(5).toString('hex')}`
  await admin.query(`CREATE DATABASE ${name}`)
  const prefix = `mgs:${randomBytes(4).toString('hex')}:`
  return {
    url: ADMIN_URL.replace(/\/postgres$/, `/${name}`),
    prefix,
    drop: async () => {
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await admin.end()
      // an idempotency key per call: removed a thousand at a time
      let cursor = '0'
      do {
        const [next, found] = await redis.scan(cursor, 'MATCH', `${prefix}*`, 'COUNT', 1000)
        cursor = next
        if (found.length > 0) await redis.unlink(...found)
      } while (cursor !== '0')
      redis.disconnect()
    }
  }
}

/** Points the config in `file` at PostgreSQL + Redis (a database and prefix from scratchPostgres); returns `file`. */
export function onPostgres (file: string, scratch: { url: string, prefix: string }): string {
  const cfg = JSON.parse(readFileSync(file, 'utf8')) as Record<string, unknown>
  cfg.store = { postgres: scratch.url, redis: REDIS_URL, redis_prefix: scratch.prefix }
  writeFileSync(file, JSON.stringify(cfg))
  return file
}

/**
 * Starts the gateways of `lists` (and every plugin on PostgreSQL + Redis when `postgres`) against
 * `upstream`, warms each up, then runs every case `rounds` times for `slice` seconds, in turn
 * with the bare proxy `bare`, every other round in reverse order. Stops nothing: the caller's
 * stopServers() does. The PostgreSQL database and Redis keys are removed before it returns.
 */
export interface OtherTarget { label: string, server: Server, url: string, body: string, headers: Record<string, string> }

export async function singleConnection (opts: { upstream: Server, bare: Server, rounds: number, slice: number, lists?: Array<[string, string]>, postgres?: boolean, others?: OtherTarget[], root?: string }): Promise<SingleResult> {
  const base = `http://127.0.0.1:${opts.upstream.port}`
  const dir = mkdtempSync(join(tmpdir(), 'mg-bench-single-'))
  const serve = async (config: string): Promise<Server> => await startServer([join(opts.root ?? fromRoot(), 'dist', 'cli', 'index.js'), 'serve', '--config', config, '--workers', '1'], { LOG_LEVEL: 'error' })
  const chat = (s: Server): string => `http://127.0.0.1:${s.port}/v1/chat/completions`
  const targets: OtherTarget[] = [{ label: BARE, server: opts.bare, url: chat(opts.bare), body, headers }]
  const ours = async (label: string, config: string): Promise<void> => { const server = await serve(config); targets.push({ label, server, url: chat(server), body, headers }) }
  for (const [i, [label, list]] of (opts.lists ?? SINGLE_LISTS).entries()) await ours(label, writeSmallConfig(join(dir, `g${i}.json`), join(dir, `g${i}.db`), base, list))
  let scratch: Awaited<ReturnType<typeof scratchPostgres>> | null = null
  if (opts.postgres !== false) {
    scratch = await scratchPostgres()
    if (typeof scratch !== 'string') await ours(EVERY_PG, onPostgres(writeSmallConfig(join(dir, 'pg.json'), join(dir, 'unused.db'), base, ALL_PLUGINS), scratch))
  }
  targets.push(...(opts.others ?? []))
  try {
    // Warm-up, not measured: at one connection a fresh process is still compiling its hot code
    // (TurboFan, on helper threads) for tens of seconds, which would count in its CPU per call;
    // WARM_CALLS at 32 connections get it to the steady state of a gateway that has been serving.
    for (const t of targets) await warm(t.url, t.server.pid, t.body, t.headers)
    const rounds: Record<string, SingleLoad[]> = {}
    for (let r = 0; r < opts.rounds; r++) {
      for (const t of r % 2 === 0 ? targets : [...targets].reverse()) (rounds[t.label] ??= []).push(await sequential(t.url, opts.slice, t.server.pid, t.body, t.headers))
    }
    const out: SingleResult = { median: {}, added: {}, rounds, postgres: typeof scratch === 'string' ? scratch : null }
    const bare = rounds[BARE] as SingleLoad[]
    for (const [label, rs] of Object.entries(rounds)) {
      out.median[label] = {
        rps: median(rs.map((x) => x.rps)),
        p50: median(rs.map((x) => x.p50)),
        p99: median(rs.map((x) => x.p99)),
        errors: rs.reduce((a, x) => a + x.errors, 0),
        cpuUs: median(rs.map((x) => x.cpuUs)),
        mainUs: median(rs.map((x) => x.mainUs)),
        calls: rs.reduce((a, x) => a + x.calls, 0)
      }
      out.added[label] = {
        p50: median(rs.map((x, i) => x.p50 - (bare[i] as SingleLoad).p50)),
        p99: median(rs.map((x, i) => x.p99 - (bare[i] as SingleLoad).p99)),
        cpu: median(rs.map((x, i) => x.cpuUs / (bare[i] as SingleLoad).cpuUs))
      }
    }
    return out
  } finally {
    if (scratch !== null && typeof scratch !== 'string') {
      // its gateway first, so that the database can go
      const s = targets.find((t) => t.label === EVERY_PG)?.server
      if (s !== undefined && s.child.exitCode === null) { s.child.kill('SIGTERM'); await new Promise((resolve) => s.child.once('exit', resolve)) }
      await scratch.drop()
    }
  }
}

const fmt = (n: number, d = 0): string => Number.isFinite(n) ? n.toFixed(d) : 'n/a'
const signed = (n: number, d = 2): string => Number.isFinite(n) ? `${n >= 0 ? '+' : ''}${n.toFixed(d)}` : 'n/a'

/** The table of a run, and the targets of the case with every plugin. */
export function printSingle (r: SingleResult): void {
  console.log('target                              req/s  CPU µs/call (main)  × bare CPU   p50 ms  p99 ms   p50 added  p99 added  errors')
  for (const [label, m] of Object.entries(r.median)) {
    const a = r.added[label]
    const bare = label === BARE
    console.log(`${label.padEnd(34)} ${fmt(m.rps).padStart(6)}  ${fmt(m.cpuUs).padStart(8)} (${fmt(m.mainUs)})`.padEnd(62) +
      `${bare ? '' : fmt(a?.cpu ?? NaN, 2)}`.padStart(8) + `${fmt(m.p50, 2).padStart(9)} ${fmt(m.p99, 2).padStart(7)}` +
      `${bare ? '' : signed(a?.p50 ?? NaN)}`.padStart(12) + `${bare ? '' : signed(a?.p99 ?? NaN)}`.padStart(11) + String(m.errors).padStart(8))
  }
  if (r.postgres !== null) console.log(`(PostgreSQL + Redis not measured: ${r.postgres})`)
  const every = r.added[EVERY]
  if (every !== undefined) console.log(`Every plugin, one connection, over the bare proxy (per-round medians): p50 ${signed(every.p50)} ms (target ≤ 0.3), p99 ${signed(every.p99)} ms (target ≤ 1), CPU per call ${fmt(every.cpu, 2)}× (target ≤ 2)`)
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const DURATION = Number(process.env.BENCH_DURATION_S ?? 15)
  const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5)
  const lists = process.env.SINGLE_LISTS?.split(';').map((s) => s.split('=') as [string, string])
  const upstream = await startServer([fromRoot('bench', 'upstream.mjs')])
  const bare = await startServer([fromRoot('bench', 'bare-proxy.mjs')], { UPSTREAM: `http://127.0.0.1:${upstream.port}`, KIND: 'reply-from' })
  process.stderr.write(`bench/single.ts: one connection, ${DURATION}s per case in ${ROUNDS} rounds (medians)\n`)
  const r = await singleConnection({ upstream, bare, rounds: ROUNDS, slice: Math.max(1, DURATION / ROUNDS), lists, postgres: process.env.SINGLE_PG !== '0', root: process.env.ROOT })
  printSingle(r)
  await stopServers()
}
