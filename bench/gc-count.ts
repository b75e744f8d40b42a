// Young-generation collections per call of one or more builds, a rough measure of what a call
// allocates: each gateway runs with a fixed semi-space and --trace-gc, takes CALLS calls (all
// plugins, a fresh Idempotency-Key each), and the scavenges it printed are counted.
// SIGNALS=1: the key has limits out of reach and every call two tags, as in bench/ab.ts.
//   node --import tsx bench/gc-count.ts /path/to/built/checkout [...]
import { spawn } from 'node:child_process'
import { existsSync, mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import autocannon from 'autocannon'
import { fromRoot } from '../paths.js'
import { startServer, stopServers } from './servers.js'
import { ALL_PLUGINS, BENCH_KEY, writeSmallConfig } from './small-config.js'

const CALLS = Number(process.env.CALLS ?? 20000)
const SEMI_MB = 8
const dir = mkdtempSync(join(tmpdir(), 'gcc-'))
const up = await startServer([fromRoot('bench', 'upstream.mjs')])
const base = `http://127.0.0.1:${up.port}`
const cliOf = (root: string): string => existsSync(`${root}/dist/cli/index.js`) ? `${root}/dist/cli/index.js` : `${root}/dist/cli.js`
const body = JSON.stringify({ model: 'b/o', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
const SIGNALS = process.env.SIGNALS === '1'
const headers = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_KEY}`, ...(SIGNALS ? { 'x-svc-tags': 'team-a, feature-x' } : {}) }
let k = 0
for (const [i, root] of process.argv.slice(2).entries()) {
  const config = writeSmallConfig(join(dir, `g${i}.json`), join(dir, `g${i}.db`), base, ALL_PLUGINS, SIGNALS ? { limits: { rpm: 1e9, tpm: 1e12 } } : {})
  const child = spawn(process.execPath, [`--max-semi-space-size=${SEMI_MB}`, `--min-semi-space-size=${SEMI_MB}`, '--trace-gc', cliOf(root), 'serve', '--config', config, '--workers', '1', '--port', '0'], { env: { ...process.env, LOG_LEVEL: 'error' }, stdio: ['ignore', 'pipe', 'inherit'] })
  let out = ''
  child.stdout.on('data', (d: Buffer) => { out += String(d) })
  const port = await new Promise<number>((resolve) => { const t = setInterval(() => { const m = /listening on http:\/\/[^/]+:(\d+)/.exec(out); if (m !== null) { clearInterval(t); resolve(Number(m[1])) } }, 20) })
  const run = async (n: number) => await autocannon({ url: `http://127.0.0.1:${port}/v1/chat/completions`, method: 'POST', connections: 32, amount: n, body, headers, requests: [{ setupRequest: (req: autocannon.Request) => ({ ...req, headers: { ...headers, 'idempotency-key': `g-${process.pid}-${k++}` } }) }] })
  await run(5000)
  const before = (out.match(/Scavenge/g) ?? []).length
  const beforeMs = (out.match(/Mark-Compact/g) ?? []).length
  await run(CALLS)
  const lines = out.split('\n').filter((l) => l.includes('Scavenge')).slice(before)
  const ms = lines.map((l) => Number(/([\d.]+) \/ [\d.]+ ms/.exec(l)?.[1] ?? NaN)).filter((x) => !Number.isNaN(x))
  const scav = (out.match(/Scavenge/g) ?? []).length - before
  const mc = (out.match(/Mark-Compact/g) ?? []).length - beforeMs
  console.log(`${basename(root).padEnd(14)} ${scav} scavenges, ${mc} mark-compacts for ${CALLS} calls: about ${(scav * SEMI_MB * 1024 / CALLS).toFixed(1)} KB allocated per call; ${(ms.reduce((a, b) => a + b, 0) / CALLS * 1000).toFixed(1)} µs of scavenge pauses per call`)
  child.kill('SIGTERM')
}
await stopServers()
