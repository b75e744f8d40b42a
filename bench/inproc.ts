// CPU per call of the gateway's own work, plugin list by plugin list, in one process: one app per
// list (each on a store file of its own), answering from the built-in demo provider (no socket,
// no upstream process, no load generator beside it), called through app.inject 32 at a time with
// a fresh Idempotency-Key each, the apps taken in turn round after round. What a socket, the
// kernel and a busy neighbour add is left out, so the differences between lists are steadier
// than bench/cpu.ts's; the figures themselves are not a proxy's CPU per call (inject has its own
// cost, the same for every list).
//   node --import tsx bench/inproc.ts [CALLS per round, default 20000]   (ROUNDS, default 5;
//   LISTS: lists separated by ';', default: every prefix of the full chain)
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../app.js'
import { parseConfig } from '../config/load.js'
import { ALL_PLUGINS, BENCH_KEY } from './small-config.js'

const N = Number(process.argv[2] ?? 20000)
const ROUNDS = Number(process.env.ROUNDS ?? 5)
const BATCH = 32
const all = ALL_PLUGINS.split(',')
const lists = process.env.LISTS !== undefined
  ? process.env.LISTS.split(';').map((l) => l.split(',').filter(Boolean))
  : all.map((_, i) => all.slice(0, i)).concat([all])
const dir = mkdtempSync(join(tmpdir(), 'inproc-'))

async function appFor (plugins: string[], i: number): Promise<FastifyInstance> {
  const config = parseConfig({
    server: { port: 0 },
    store: { sqlite: join(dir, `g${i}.db`) },
    plugins: plugins.map((name) => ({ name, ...(name === 'rate-limit' ? { options: { max: 1e9 } } : {}) })),
    providers: [{ id: 'demo', protocol: 'openai', builtin: 'demo' }],
    models: [{ id: 'b/o', name: 'b', provider: 'demo', upstream_model: 'echo-1', context_length: 1000, supported_parameters: ['max_tokens'], pricing: { input: 1, output: 2 } }],
    tenants: [{ org: 'o', balance_usd: 1000000, quota: { tokens: 1e12, per: 'day' }, projects: [{ id: 'p', keys: [{ key: BENCH_KEY }] }] }]
  }, {})
  const app = await buildApp(config, { logger: false })
  await app.ready()
  return app
}

const payload = JSON.stringify({ model: 'b/o', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
let k = 0
async function load (app: FastifyInstance, n: number): Promise<number> {
  let bad = 0
  for (let done = 0; done < n; done += BATCH) {
    const answers = await Promise.all(Array.from({ length: Math.min(BATCH, n - done) }, async () => await app.inject({
      method: 'POST',
      url: '/v1/chat/completions',
      headers: { authorization: `Bearer ${BENCH_KEY}`, 'content-type': 'application/json', 'idempotency-key': `i-${k++}` },
      payload
    })))
    bad += answers.filter((a) => a.statusCode !== 200).length
  }
  return bad
}

const apps = await Promise.all(lists.map(async (l, i) => ({ name: l.length === 0 ? '(no plugins)' : l.length === all.length ? 'all' : `+ ${l[l.length - 1] as string}`, app: await appFor(l, i), us: [] as number[], bad: 0 })))
for (const a of apps) a.bad += await load(a.app, 3000) // warm-up
for (let r = 0; r < ROUNDS; r++) {
  for (const a of r % 2 === 0 ? apps : [...apps].reverse()) {
    const c0 = process.cpuUsage()
    a.bad += await load(a.app, N)
    const c = process.cpuUsage(c0)
    a.us.push((c.user + c.system) / N)
  }
}
const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] as number
let previous: number | null = null
for (const a of apps) {
  const m = median(a.us)
  console.log(`${a.name.padEnd(16)} ${m.toFixed(1).padStart(6)} µs/call${previous === null ? '' : ` (${m - previous >= 0 ? '+' : ''}${(m - previous).toFixed(1)})`}  rounds ${a.us.map((x) => x.toFixed(0)).join(' ')}${a.bad > 0 ? `  non-200: ${a.bad}` : ''}`)
  previous = m
}
for (const a of apps) await a.app.close()
