// Bytes allocated per call by function, in one or more built checkouts: each gateway (every plugin,
// a fresh Idempotency-Key per call) runs with ./alloc-probe.mjs preloaded, takes a warm-up, then
// CALLS calls (default 20000) at 32 connections while V8's sampling heap profiler records every
// allocation it samples, freed or not. A count of what a call allocates, steadier on a shared
// machine than CPU time: what a scavenge costs follows from it.
//   node --import tsx bench/alloc.ts /path/to/built/checkout [...]   (SIGNALS=1: limits and two
//   tags, as in ab.ts; TOP: rows printed, default 25; STREAM=1: streamed calls; BEDROCK=1: the
//   model on Bedrock's Converse, signed)
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import { fileURLToPath } from 'node:url'
import autocannon from 'autocannon'
import { fromRoot } from '../paths.js'
import { startServer, stopServers } from './servers.js'
import { ALL_PLUGINS, BENCH_KEY, writeSmallConfig } from './small-config.js'

interface Node { callFrame: { functionName: string, url: string, lineNumber: number }, selfSize: number, children: Node[] }

const CALLS = Number(process.env.CALLS ?? 20000)
const TOP = Number(process.env.TOP ?? 25)
const SIGNALS = process.env.SIGNALS === '1'
const dir = mkdtempSync(join(tmpdir(), 'alloc-'))
const up = await startServer([fromRoot('bench', 'upstream.mjs')])
const base = `http://127.0.0.1:${up.port}`
const cliOf = (root: string): string => existsSync(`${root}/dist/cli/index.js`) ? `${root}/dist/cli/index.js` : `${root}/dist/cli.js`
const body = JSON.stringify({ model: 'b/o', max_tokens: 10, stream: process.env.STREAM === '1', messages: [{ role: 'user', content: 'hi' }] })
const headers = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_KEY}`, ...(SIGNALS ? { 'x-svc-tags': 'team-a, feature-x' } : {}) }
let k = 0

/** The module a line of a bundled file belongs to, from the `// path` comments esbuild writes. */
const bundles = new Map<string, Array<[number, string]>>()
function moduleOf (url: string, line: number): string {
  if (!url.startsWith('file://')) return url === '' ? '(V8)' : url
  const path = fileURLToPath(url)
  if (path.includes('/node_modules/')) return `npm:${path.slice(path.lastIndexOf('node_modules/') + 13).split('/')[0]!}`
  let starts = bundles.get(path)
  if (starts === undefined) {
    starts = []
    const lines = readFileSync(path, 'utf8').split('\n')
    for (let i = 0; i < lines.length; i++) {
      const m = /^\/\/ (\S+\.(?:ts|js|mjs|cjs|json))$/.exec(lines[i]!)
      if (m !== null) starts.push([i, m[1]!])
    }
    bundles.set(path, starts)
  }
  let name = path.slice(path.indexOf('/dist/') + 1)
  for (const [at, mod] of starts) { if (at > line) break; name = mod }
  return name.startsWith('node_modules/') ? `npm:${name.split('/')[1]!}` : name
}

for (const [i, root] of process.argv.slice(2).entries()) {
  const config = writeSmallConfig(join(dir, `g${i}.json`), join(dir, `g${i}.db`), base, ALL_PLUGINS, SIGNALS ? { limits: { rpm: 1e9, tpm: 1e12 } } : {})
  // BEDROCK=1: the model on AWS Bedrock's Converse (translated, signed; BEDROCK_AUTH=bearer: an API key), as in profile.ts
  if (process.env.BEDROCK === '1') {
    const cfg = JSON.parse(readFileSync(config, 'utf8')) as { providers: Array<Record<string, unknown>> }
    cfg.providers = [{ id: 'u', protocol: 'converse', platform: 'bedrock', region: 'us-east-1', base_url: base, passthrough: true, ...(process.env.BEDROCK_AUTH === 'bearer' ? { api_key: 'bench-bedrock-key' } : { aws: { access_key_id: 'AKIDBENCH', secret_access_key: 'bench-secret' } }) }]
    writeFileSync(config, JSON.stringify(cfg))
  }
  const file = join(dir, `g${i}.heapprofile`)
  const gw = await startServer(['--import', fromRoot('bench', 'alloc-probe.mjs'), cliOf(root), 'serve', '--config', config, '--workers', '1'], { LOG_LEVEL: 'error', ALLOC_PROFILE: file })
  const run = async (n: number): Promise<void> => { await autocannon({ url: `http://127.0.0.1:${gw.port}/v1/chat/completions`, method: 'POST', connections: 32, amount: n, body, headers, requests: [{ setupRequest: (req: autocannon.Request) => ({ ...req, headers: { ...headers, 'idempotency-key': `a-${process.pid}-${k++}` } }) }] }) }
  await run(8000)
  process.kill(gw.pid, 'SIGUSR2')
  await new Promise((resolve) => setTimeout(resolve, 300))
  await run(CALLS)
  process.kill(gw.pid, 'SIGUSR2')
  while (!existsSync(file)) await new Promise((resolve) => setTimeout(resolve, 100))
  await new Promise((resolve) => setTimeout(resolve, 300))
  const { head } = JSON.parse(readFileSync(file, 'utf8')) as { head: Node }
  const byFn = new Map<string, number>()
  const byMod = new Map<string, number>()
  let total = 0
  // CALLERS=name: who calls the functions of that name, and what they allocate there (three frames up)
  const callers = new Map<string, number>()
  const who = process.env.CALLERS
  const stack: string[] = []
  const walk = (n: Node): void => {
    const f = n.callFrame
    stack.push(`${f.functionName || '(anonymous)'} ${moduleOf(f.url, f.lineNumber)}:${f.lineNumber + 1}`)
    if (who !== undefined && f.functionName === who && n.selfSize > 0) {
      const k = stack.slice(-4, -1).reverse().join(' ← ')
      callers.set(k, (callers.get(k) ?? 0) + n.selfSize)
    }
    if (n.selfSize > 0) {
      const mod = moduleOf(f.url, f.lineNumber)
      // named without the line: two builds bundle the same function at different lines
      const fn = `${f.functionName || '(anonymous)'} ${mod}${f.functionName === '' ? `:${f.lineNumber + 1}` : ''}`
      byFn.set(fn, (byFn.get(fn) ?? 0) + n.selfSize)
      byMod.set(mod, (byMod.get(mod) ?? 0) + n.selfSize)
      total += n.selfSize
    }
    for (const c of n.children) walk(c)
    stack.pop()
  }
  walk(head)
  console.log(`${basename(root)}: ${(total / CALLS).toFixed(0)} bytes sampled per call`)
  for (const [m, b] of [...byMod].sort((a, b) => b[1] - a[1]).slice(0, 15)) console.log(`  ${(b / CALLS).toFixed(0).padStart(6)}  ${m}`)
  for (const [f, b] of [...byFn].sort((a, b) => b[1] - a[1]).slice(0, TOP)) console.log(`  ${(b / CALLS).toFixed(0).padStart(6)}  ${f}`)
  for (const [c, b] of [...callers].sort((a, b) => b[1] - a[1]).slice(0, 12)) console.log(`  ${(b / CALLS).toFixed(0).padStart(6)}  ${who ?? ''} ← ${c}`)
  gw.child.kill('SIGTERM')
}
await stopServers()
