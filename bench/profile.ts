// Profiles modelgate under load: the fixed upstream, one gateway with the plugins in $PLUGINS
// (comma-separated; default: all), 32 connections for $DURATION s (default 5). PROF=1 runs the
// gateway with --cpu-prof and prints the top self-time functions; BASELINE=1 profiles the bare
// reply-from proxy instead, to compare. PASSTHROUGH=1 loads /passthrough/u/chat/completions (the
// provider's own route) instead of /v1/chat/completions. STORE=postgres runs the gateway on
// PostgreSQL + Redis (a database and a key prefix of its own, removed at the end); CACHE=1 puts the
// response cache in the chain and asks for it on every call (all hits after the first). Needs a
// build (npm run build). BEDROCK=1: the model on AWS Bedrock (Converse, signed; with BEDROCK_AUTH=bearer by an API key). CONNECTIONS: other than 32 (1: a quiet connection). MODULES=1 (with
// PROF=1): the main thread's time per call by source module instead (./by-module.ts), after WARM
// seconds at 32 connections (default 10) that the profile leaves out; MODULES=file splits Node's
// own modules' time by module, MODULES=caller by the file that called into them.
// SIGNALS=1: the key has limits out of reach and every call two tags, as in bench/ab.ts.
//   PROF=1 node --import tsx bench/profile.ts
//   PROF=1 MODULES=1 CONNECTIONS=1 IDEM=1 DURATION=10 node --import tsx bench/profile.ts
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import { fromRoot } from '../paths.js'
import { byModule, type CpuProfile } from './by-module.js'
import { startServer, stopServers } from './servers.js'
import { ALL_PLUGINS, BENCH_KEY, writeSmallConfig } from './small-config.js'
// ROOT: another built checkout to profile (its command at dist/cli/index.js, or dist/cli.js before cli/)
const cliOf = (root: string): string => existsSync(join(root, 'dist', 'cli', 'index.js')) ? join(root, 'dist', 'cli', 'index.js') : join(root, 'dist', 'cli.js')
const dir = process.env.PROF_DIR ?? mkdtempSync(join(tmpdir(), 'prof-'))
mkdirSync(dir, { recursive: true })
const up = await startServer([fromRoot('bench', 'upstream.mjs')])
const plugins = process.env.PLUGINS ?? (process.env.CACHE ? ALL_PLUGINS.replace('idempotency,', 'idempotency,cache,') : ALL_PLUGINS)
const SIGNALS = process.env.SIGNALS === '1'
writeSmallConfig(join(dir, 'c.json'), join(dir, 'gw.db'), `http://127.0.0.1:${up.port}`, plugins, SIGNALS ? { limits: { rpm: 1e9, tpm: 1e12 } } : {})
// BEDROCK=1: the model is served by AWS Bedrock's Converse (translated from chat, signed with SigV4)
if (process.env.BEDROCK !== undefined) {
  const cfg = JSON.parse(readFileSync(join(dir, 'c.json'), 'utf8')) as { providers: Array<Record<string, unknown>> }
  cfg.providers = [{ id: 'u', protocol: 'converse', platform: 'bedrock', region: 'us-east-1', base_url: `http://127.0.0.1:${up.port}`, passthrough: true, ...(process.env.BEDROCK_AUTH === 'bearer' ? { api_key: 'bench-bedrock-key' } : { aws: { access_key_id: 'AKIDBENCH', secret_access_key: 'bench-secret' } }) }]
  writeFileSync(join(dir, 'c.json'), JSON.stringify(cfg))
}
let dropStore = async (): Promise<void> => {}
if (process.env.STORE === 'postgres') {
  const { default: pg } = await import('pg')
  const { Redis } = await import('ioredis')
  const adminUrl = process.env.PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
  const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'
  const name = `mg_prof_${process.pid}`
  const admin = new pg.Client({ connectionString: adminUrl })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  const prefix = `mgp:${process.pid}:`
  const cfg = JSON.parse(readFileSync(join(dir, 'c.json'), 'utf8')) as Record<string, unknown>
  cfg.store = { postgres: adminUrl.replace(/\/postgres$/, `/${name}`), redis: redisUrl, redis_prefix: prefix }
  writeFileSync(join(dir, 'c.json'), JSON.stringify(cfg))
  dropStore = async () => {
    await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await admin.end()
    const r = new Redis(redisUrl)
    const keys = await r.keys(`${prefix}*`)
    for (let i = 0; i < keys.length; i += 1000) await r.unlink(...keys.slice(i, i + 1000))
    r.disconnect()
  }
}
// HEAP=1: an allocation sampling profile instead (--heap-prof), to see what each call allocates
const args = process.env.HEAP ? ['--heap-prof', `--heap-prof-dir=${dir}`] : process.env.PROF ? ['--cpu-prof', `--cpu-prof-dir=${dir}`] : []
const gw = process.env.BASELINE
  ? await startServer([...args, fromRoot('bench', 'bare-proxy.mjs')], { UPSTREAM: `http://127.0.0.1:${up.port}`, KIND: 'reply-from' })
  : await startServer([...args, cliOf(process.env.ROOT ?? fromRoot()), 'serve', '--config', join(dir, 'c.json'), '--workers', '1'], { LOG_LEVEL: 'error' })
let n = 0
const headers: Record<string, string> = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_KEY}`, ...(process.env.CACHE ? { 'x-svc-cache': 'on' } : {}), ...(SIGNALS ? { 'x-svc-tags': 'team-a, feature-x' } : {}) }
// IDEM=1: a fresh Idempotency-Key per call
const requests = process.env.IDEM ? [{ setupRequest: (req: autocannon.Request) => ({ ...req, headers: { ...headers, 'idempotency-key': `p-${process.pid}-${n++}` } }) }] : undefined
const path = process.env.PASSTHROUGH ? '/passthrough/u/chat/completions' : '/v1/chat/completions'
const load = async (connections: number, duration: number): Promise<autocannon.Result> => await autocannon({ url: `http://127.0.0.1:${gw.port}${path}`, method: 'POST', connections, duration, body: JSON.stringify({ model: 'b/o', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }), headers, ...(requests ? { requests } : {}) })
const modules = process.env.PROF !== undefined && process.env.MODULES !== undefined
const warmS = Number(process.env.WARM ?? (modules ? 10 : 0))
if (warmS > 0) await load(32, warmS)
// the measured run's window on the profile's clock (µs, monotonic: process.hrtime's)
const from = Number(process.hrtime.bigint() / 1000n)
const res = await load(Number(process.env.CONNECTIONS ?? 32), Number(process.env.DURATION ?? 5))
const to = Number(process.hrtime.bigint() / 1000n)
console.log(process.env.BASELINE ? 'reply-from' : process.env.PLUGINS ?? 'all', 'rps', Math.round(res.requests.average), 'p50', res.latency.p50, 'non2xx', res.non2xx)
await stopServers() // a clean exit, so that --cpu-prof writes the gateway's profile
await dropStore()
if (process.env.PROF) {
  // the gateway's main thread (thread 0) of this run, not the checkpoint thread or an earlier run
  const f = readdirSync(dir).find((x) => x.endsWith('.cpuprofile') && x.includes(`.${gw.pid}.0.`))!
  const prof = JSON.parse(readFileSync(join(dir, f), 'utf8'))
  if (modules) {
    const per = byModule(prof as CpuProfile, from, to, { node: process.env.MODULES === 'file' || process.env.MODULES === 'caller' ? process.env.MODULES : 'one' })
    const calls = res.requests.total
    const busy = [...per.values()].reduce((a, b) => a + b, 0)
    console.log(`main thread, busy: ${(busy / calls).toFixed(1)} µs per call (${calls} calls; the profiler's own cost included)`)
    for (const [k, t] of [...per.entries()].sort((a, b) => b[1] - a[1]).slice(0, 30)) console.log((t / calls).toFixed(1).padStart(7), k)
  } else {
    const self = new Map<string, number>()
    const dt = prof.timeDeltas as number[]; const idx = new Map(prof.nodes.map((nd: any) => [nd.id, nd]))
    const counts = new Map<number, number>()
    prof.samples.forEach((s: number, i: number) => counts.set(s, (counts.get(s) ?? 0) + (dt[i] ?? 0)))
    for (const [id, t] of counts) { const nd: any = idx.get(id); const k = `${nd.callFrame.functionName || '(anon)'} ${nd.callFrame.url.replace(/.*node_modules\//, '').replace('file:///work/main/', '')}:${nd.callFrame.lineNumber}`; self.set(k, (self.get(k) ?? 0) + t) }
    const total = [...self.values()].reduce((a, b) => a + b, 0)
    for (const [k, t] of [...self.entries()].sort((a, b) => b[1] - a[1]).slice(0, 25)) console.log((100 * t / total).toFixed(1).padStart(5) + '%', k)
  }
}
