// npm run bench:instances: one gateway instance on PostgreSQL + Redis against one on SQLite, and
// two instances on one PostgreSQL + Redis against one, in interleaved rounds (the method of
// bench/run.ts: each case BENCH_DURATION_S in all, split into BENCH_ROUNDS slices taken in turn,
// medians). Every gateway has all plugins on, one worker, and a fresh Idempotency-Key per call.
// Needs PostgreSQL at $PG_ADMIN_URL (default postgres://postgres@127.0.0.1:5432/postgres) and Redis
// at $REDIS_URL (default redis://127.0.0.1:6379); a database and a Redis key prefix of its own
// are made and removed.
import { mkdtempSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { randomBytes } from 'node:crypto'
import autocannon from 'autocannon'
import pg from 'pg'
import { Redis } from 'ioredis'
import { fromRoot } from '../paths.js'
import { mainThreadCpuUs, processCpuUs } from './proc-cpu.js'
import { startServer, stopServers, type Server } from './servers.js'
import { ALL_PLUGINS, BENCH_KEY, writeSmallConfig } from './small-config.js'

const DURATION = Number(process.env.BENCH_DURATION_S ?? 12)
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 4)
const SLICE = Math.max(2, Math.round(DURATION / ROUNDS))
const ADMIN_URL = process.env.PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

interface Load { rps: number, p99: number, errors: number, cpuUs: number, mainUs: number }

let n = 0
const body = JSON.stringify({ model: 'b/o', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
const headers = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_KEY}` }

/** Load spread over `servers` (connections split evenly), for one slice; CPU per request summed over them. */
async function load (servers: Server[], connections = 32): Promise<Load> {
  const cpu0 = servers.map((s) => processCpuUs(s.pid))
  const main0 = servers.map((s) => mainThreadCpuUs(s.pid))
  const results = await Promise.all(servers.map(async (s) => await autocannon({
    url: `http://127.0.0.1:${s.port}/v1/chat/completions`,
    method: 'POST',
    body,
    headers,
    connections: connections / servers.length,
    duration: SLICE,
    requests: [{ setupRequest: (req: autocannon.Request) => ({ ...req, headers: { ...headers, 'idempotency-key': `i-${process.pid}-${n++}` } }) }]
  })))
  const total = results.reduce((a, r) => a + r.requests.total, 0)
  return {
    rps: results.reduce((a, r) => a + r.requests.average, 0),
    p99: Math.max(...results.map((r) => r.latency.p99)),
    errors: results.reduce((a, r) => a + r.non2xx + r.errors, 0),
    cpuUs: servers.reduce((a, s, i) => a + processCpuUs(s.pid) - (cpu0[i] as number), 0) / total,
    mainUs: servers.reduce((a, s, i) => a + mainThreadCpuUs(s.pid) - (main0[i] as number), 0) / total
  }
}

const median = (xs: number[]): number => { const v = [...xs].sort((a, b) => a - b); return v.length % 2 === 1 ? v[(v.length - 1) / 2] as number : ((v[v.length / 2 - 1] as number) + (v[v.length / 2] as number)) / 2 }

async function main (): Promise<void> {
  const name = `mg_bench_${randomBytes(5).toString('hex')}`
  const admin = new pg.Client({ connectionString: ADMIN_URL })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  const redisPrefix = `mgb:${randomBytes(4).toString('hex')}:`
  const dir = mkdtempSync(join(tmpdir(), 'mg-bench-instances-'))
  try {
    const up = await startServer([fromRoot('bench', 'upstream.mjs')])
    const upstream = `http://127.0.0.1:${up.port}`
    const sqliteCfg = writeSmallConfig(join(dir, 'sqlite.json'), join(dir, 'gw.db'), upstream, ALL_PLUGINS)
    const pgCfg = join(dir, 'pg.json')
    writeSmallConfig(pgCfg, join(dir, 'unused.db'), upstream, ALL_PLUGINS)
    const cfg = JSON.parse((await import('node:fs')).readFileSync(pgCfg, 'utf8')) as Record<string, unknown>
    cfg.store = { postgres: ADMIN_URL.replace(/\/postgres$/, `/${name}`), redis: REDIS_URL, redis_prefix: redisPrefix }
    writeFileSync(pgCfg, JSON.stringify(cfg))
    const serve = async (file: string): Promise<Server> => await startServer([fromRoot('dist', 'cli', 'index.js'), 'serve', '--config', file, '--workers', '1'], { LOG_LEVEL: 'error' })
    const sqlite = await serve(sqliteCfg)
    const pgA = await serve(pgCfg)
    const pgB = await serve(pgCfg)
    for (const s of [sqlite, pgA, pgB]) await load([s], 8)
    const cases: Array<[string, () => Promise<Load>]> = [
      ['SQLite, one instance', async () => await load([sqlite])],
      ['PostgreSQL + Redis, one instance', async () => await load([pgA])],
      ['PostgreSQL + Redis, two instances', async () => await load([pgA, pgB])]
    ]
    const runs = new Map<string, Load[]>()
    for (let r = 0; r < ROUNDS; r++) for (const [label, run] of r % 2 === 0 ? cases : [...cases].reverse()) runs.set(label, [...(runs.get(label) ?? []), await run()])
    console.log(`\n${DURATION}s per case in ${ROUNDS} rounds, 32 connections, all plugins, one worker per instance (medians)`)
    console.log('case                                  req/s   p99 ms  errors  CPU µs/request (main thread)')
    const med: Record<string, Load> = {}
    for (const [label, rs] of runs) {
      med[label] = { rps: median(rs.map((x) => x.rps)), p99: median(rs.map((x) => x.p99)), errors: rs.reduce((a, x) => a + x.errors, 0), cpuUs: median(rs.map((x) => x.cpuUs)), mainUs: median(rs.map((x) => x.mainUs)) }
      const m = med[label] as Load
      console.log(`${label.padEnd(36)} ${m.rps.toFixed(0).padStart(6)} ${m.p99.toFixed(0).padStart(8)} ${String(m.errors).padStart(7)}  ${m.cpuUs.toFixed(0).padStart(6)} (${m.mainUs.toFixed(0)})`)
    }
    const paired = (a: string, b: string): number => median((runs.get(a) as Load[]).map((x, i) => x.rps / ((runs.get(b) as Load[])[i] as Load).rps))
    console.log(`\nPostgreSQL + Redis / SQLite, one instance: ${paired('PostgreSQL + Redis, one instance', 'SQLite, one instance').toFixed(2)} per round (target ≥ 0.70)`)
    console.log(`Two instances / one, on PostgreSQL + Redis: ${paired('PostgreSQL + Redis, two instances', 'PostgreSQL + Redis, one instance').toFixed(2)} per round (the two share this machine's cores with the load generator and the upstream)`)
  } finally {
    await stopServers()
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await admin.end()
    const r = new Redis(REDIS_URL)
    // hundreds of thousands of keys (an idempotency key per call): removed a thousand at a time
    const keys = await r.keys(`${redisPrefix}*`)
    for (let i = 0; i < keys.length; i += 1000) await r.unlink(...keys.slice(i, i + 1000))
    r.disconnect()
  }
}

main().catch((err: unknown) => { console.error(err); process.exit(1) })
