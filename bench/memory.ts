// Memory under load (PRODUCT.md §7): 1,000 concurrent open streams through one gateway, then
// 100,000 non-streaming requests in a row; RSS of the gateway process before, at peak and after,
// and the usage records counted in its SQLite file after a graceful stop.
//   npm run build && TS_NODE_TRANSPILE_ONLY=1 node --import @tapjs/typescript/import bench/memory.ts [--quick]
import { spawn } from 'node:child_process'
import { mkdtempSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import Database from 'better-sqlite3'
import { fromRoot } from '../paths.js'

const QUICK = process.argv.includes('--quick')
const STREAMS = QUICK ? 200 : 1000
const REQUESTS = Number(process.env.MEM_REQUESTS ?? (QUICK ? 10_000 : 100_000))
const KEY = 'mg-bench-key-0123456789abcdef'

const rssMb = (pid: number): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024

async function startChild (args: string[], env: Record<string, string>) {
  const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] })
  const port = await new Promise<number>((resolve) => {
    let out = ''
    child.stdout!.on('data', (d: Buffer) => { out += String(d); const m = /listening (\d+)|127\.0\.0\.1:(\d+)/.exec(out); if (m !== null) resolve(Number(m[1] ?? m[2])) })
  })
  return { child, port }
}

async function main (): Promise<void> {
  const up = await startChild([fromRoot('bench', 'upstream.mjs')], { PACE_MS: '40' })
  const dir = mkdtempSync(join(tmpdir(), 'mg-mem-'))
  const db = join(dir, 'gw.db')
  writeFileSync(join(dir, 'c.json'), JSON.stringify({
    server: { port: 0, request_timeout_s: 60 }, store: { sqlite: db },
    plugins: [{ name: 'rate-limit', options: { max: 1e9 } }, { name: 'auth' }, { name: 'idempotency' }, { name: 'quota' }, { name: 'usage' }, { name: 'diagnostics' }],
    providers: [{ id: 'u', protocol: 'openai', base_url: `http://127.0.0.1:${up.port}/v1`, api_key: 'x', connections: 2000 }],
    models: [{ id: 'b/o', name: 'b', provider: 'u', context_length: 1000, supported_parameters: ['max_tokens'], pricing: { input: 1, output: 2 } }],
    tenants: [{ org: 'o', quota: { tokens: 1e12, per: 'day' }, projects: [{ id: 'p', keys: [{ key: KEY }] }] }]
  }))
  const gw = await startChild([fromRoot('dist', 'cli.js'), 'serve', '--config', join(dir, 'c.json'), '--workers', '1'], { LOG_LEVEL: 'error' })
  const url = `http://127.0.0.1:${gw.port}/v1/chat/completions`
  const headers = { authorization: `Bearer ${KEY}`, 'content-type': 'application/json' }
  const pid = gw.child.pid as number
  const before = rssMb(pid)
  let peak = before
  const poll = setInterval(() => { peak = Math.max(peak, rssMb(pid)) }, 50)
  let completed = 0
  const { Agent } = await import('undici')
  const dispatcher = new Agent({ connections: STREAMS + 10 })
  await Promise.all(Array.from({ length: STREAMS }, async () => {
    const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify({ model: 'b/o', stream: true, messages: [{ role: 'user', content: 'x' }] }), dispatcher } as RequestInit)
    const text = await res.text()
    if (text.includes('[DONE]')) completed++
  }))
  clearInterval(poll)
  const afterStreams = rssMb(pid)
  const r = await autocannon({ url, method: 'POST', headers, connections: 32, amount: REQUESTS, body: JSON.stringify({ model: 'b/o', messages: [{ role: 'user', content: 'x' }] }) })
  const afterRequests = rssMb(pid)
  gw.child.kill('SIGTERM')
  await new Promise((resolve) => gw.child.on('exit', resolve))
  up.child.kill()
  const raw = new Database(db, { readonly: true })
  const records = (raw.prepare('SELECT count(*) AS n FROM usage_records').get() as { n: number }).n
  raw.close()
  const ok = r.requests.total - r.non2xx
  const result = {
    streams: { concurrent: STREAMS, completed, rss_before_mb: before, rss_peak_mb: peak, rss_after_mb: afterStreams },
    requests: { sent: r.requests.total, ok, rss_before_mb: afterStreams, rss_after_mb: afterRequests, growth_pct: (afterRequests / afterStreams - 1) * 100 },
    usage_records: records,
    records_expected: completed + ok
  }
  console.log(JSON.stringify(result, null, 2))
  mkdirSync(fromRoot('bench', 'results'), { recursive: true })
  writeFileSync(fromRoot('bench', 'results', 'memory-latest.json'), JSON.stringify(result, null, 2))
}

main().then(() => process.exit(0), (err: unknown) => { console.error(err); process.exit(1) })
