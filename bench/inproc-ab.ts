// CPU per call of this checkout's gateway against another checkout's, both in this one process
// (each its own modules, its own store file), every plugin on, answering from the built-in demo
// provider through app.inject 32 at a time, in short alternating batches. On a machine shared with
// other work, two gateways measured in turn a few hundred milliseconds apart meet the same load,
// which separate processes measured round after round do not. What a socket costs is left out.
//   BASELINE=/path/to/other/checkout node --import tsx bench/inproc-ab.ts [CALLS a batch, default 2000]
//   (ROUNDS, default 20; SIGNALS=1: the key has limits out of reach and every call two tags;
//   SIGNALS=split: this checkout's gateway only, the other's key the same limits without their headers
//   (the quota plugin's rate_limit_headers: false) and its calls no tags, so that BASELINE=. weighs what they cost one build)
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { fromRoot } from '../paths.js'
import { ALL_PLUGINS, BENCH_KEY } from './small-config.js'

const N = Number(process.argv[2] ?? 2000)
const ROUNDS = Number(process.env.ROUNDS ?? 20)
const BATCH = 32
const BASELINE = process.env.BASELINE
if (BASELINE === undefined) throw new Error('BASELINE=/path/to/another/checkout is needed')
const SPLIT = process.env.SIGNALS === 'split'
const SIGNALS = process.env.SIGNALS === '1' || SPLIT
/** Whether the gateway named `name` has the signals on (SIGNALS=split: this checkout's only). */
const signalled = (name: string): boolean => SIGNALS && (!SPLIT || name === 'this')
const dir = mkdtempSync(join(tmpdir(), 'inproc-ab-'))

async function appAt (root: string, name: string): Promise<FastifyInstance> {
  const { buildApp } = await import(join(root, 'app.ts')) as typeof import('../app.js')
  const { parseConfig } = await import(join(root, 'config', 'load.ts')) as typeof import('../config/load.js')
  const config = parseConfig({
    server: { port: 0 },
    store: { sqlite: join(dir, `${name}.db`) },
    // SIGNALS=split: the other gateway's key has the same limits without their headers (and its calls no tags)
    plugins: ALL_PLUGINS.split(',').map((p) => ({ name: p, ...(p === 'rate-limit' ? { options: { max: 1e9 } } : p === 'quota' && SPLIT && !signalled(name) ? { options: { rate_limit_headers: false } } : {}) })),
    providers: [{ id: 'demo', protocol: 'openai', builtin: 'demo' }],
    models: [{ id: 'b/o', name: 'b', provider: 'demo', upstream_model: 'echo-1', context_length: 1000, supported_parameters: ['max_tokens'], pricing: { input: 1, output: 2 } }],
    tenants: [{ org: 'o', balance_usd: 1000000, quota: { tokens: 1e12, per: 'day' }, projects: [{ id: 'p', keys: [{ key: BENCH_KEY, ...(SIGNALS ? { limits: { rpm: 1e9, tpm: 1e12 } } : {}) }] }] }]
  }, {})
  const app = await buildApp(config, { logger: false })
  await app.ready()
  return app
}

const payload = JSON.stringify({ model: 'b/o', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
const plain = { authorization: `Bearer ${BENCH_KEY}`, 'content-type': 'application/json' }
const tagged = { ...plain, 'x-svc-tags': 'team-a, feature-x' }
let k = 0
async function load (app: FastifyInstance, n: number, name: string): Promise<number> {
  const headers = signalled(name) ? tagged : plain
  let bad = 0
  for (let done = 0; done < n; done += BATCH) {
    const answers = await Promise.all(Array.from({ length: Math.min(BATCH, n - done) }, async () => await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...headers, 'idempotency-key': `i-${k++}` }, payload })))
    bad += answers.filter((a) => a.statusCode !== 200).length
  }
  return bad
}

const apps = [{ name: 'baseline', app: await appAt(BASELINE, 'base'), us: [] as number[], bad: 0 }, { name: 'this', app: await appAt(fromRoot(), 'this'), us: [] as number[], bad: 0 }]
for (let i = 0; i < 3; i++) for (const a of apps) a.bad += await load(a.app, 4000, a.name) // warm-up: both compiled before either is measured
for (let r = 0; r < ROUNDS; r++) {
  for (const a of r % 2 === 0 ? apps : [...apps].reverse()) {
    const c0 = process.cpuUsage()
    a.bad += await load(a.app, N, a.name)
    const c = process.cpuUsage(c0)
    a.us.push((c.user + c.system) / N)
  }
}
const median = (xs: number[]): number => [...xs].sort((x, y) => x - y)[Math.floor(xs.length / 2)] as number
const [base, mine] = apps as [typeof apps[0], typeof apps[0]]
for (const a of apps) console.log(`${a.name.padEnd(9)} ${median(a.us).toFixed(1).padStart(6)} µs/call  rounds ${a.us.map((x) => x.toFixed(0)).join(' ')}${a.bad > 0 ? `  non-200: ${a.bad}` : ''}`)
const ratios = mine.us.map((x, i) => x / base.us[i]!)
console.log(`this / baseline: ${median(ratios).toFixed(3)}× (median of the rounds' ratios; ${ratios.map((x) => x.toFixed(2)).join(' ')}), medians' ratio ${(median(mine.us) / median(base.us)).toFixed(3)}×`)
for (const a of apps) await a.app.close()
