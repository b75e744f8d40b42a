// Memory under load (the targets in bench/README.md): 1,000 concurrent open streams through one gateway (every
// plugin on), then 100,000 non-streaming requests; RSS of the gateway process before, at peak and
// after, and the usage records counted in its SQLite file after a graceful stop. Growth over the
// 100,000 is read after a forced garbage collection (bench/gc-probe.mjs) at both ends, starting
// after a warm-up of WARMUP requests: a raw reading mostly measures when V8 last collected.
//   npm run build && node --import tsx bench/memory.ts [--quick]
import { existsSync, mkdtempSync, readFileSync, writeFileSync, mkdirSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import Database from 'better-sqlite3'
import { fromRoot } from '../paths.js'
import { startServer, stopServers } from './servers.js'
import { ALL_PLUGINS, BENCH_KEY, writeSmallConfig } from './small-config.js'

const QUICK = process.argv.includes('--quick')
const STREAMS = QUICK ? 200 : 1000
const REQUESTS = Number(process.env.MEM_REQUESTS ?? (QUICK ? 10_000 : 100_000))
const WARMUP = Number(process.env.MEM_WARMUP ?? (QUICK ? 2_000 : 5_000))

const rssMb = (pid: number): number => Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024

async function main (): Promise<void> {
  const up = await startServer([fromRoot('bench', 'upstream.mjs')], { PACE_MS: '40' })
  const dir = mkdtempSync(join(tmpdir(), 'mg-mem-'))
  const db = join(dir, 'gw.db')
  writeSmallConfig(join(dir, 'c.json'), db, `http://127.0.0.1:${up.port}`, ALL_PLUGINS, { connections: 2000, timeoutS: 60 })
  const probeOut = join(dir, 'probe.jsonl')
  const gw = await startServer(['--expose-gc', '--import', fromRoot('bench', 'gc-probe.mjs'), fromRoot('dist', 'cli', 'index.js'), 'serve', '--config', join(dir, 'c.json'), '--workers', '1'], { LOG_LEVEL: 'error', MEM_PROBE_OUT: probeOut })
  let probes = 0
  const afterGc = async (): Promise<{ rss_mb: number, heap_used_mb: number, external_mb: number }> => {
    gw.child.kill('SIGUSR2')
    probes++
    for (;;) {
      const lines = existsSync(probeOut) ? readFileSync(probeOut, 'utf8').trim().split('\n') : []
      if (lines.length >= probes) return JSON.parse(lines[probes - 1] as string)
      await new Promise((resolve) => setTimeout(resolve, 50))
    }
  }
  const url = `http://127.0.0.1:${gw.port}/v1/chat/completions`
  const headers = { authorization: `Bearer ${BENCH_KEY}`, 'content-type': 'application/json' }
  const pid = gw.pid
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
  const chat = JSON.stringify({ model: 'b/o', messages: [{ role: 'user', content: 'x' }] })
  const warm = await autocannon({ url, method: 'POST', headers, connections: 32, amount: WARMUP, body: chat })
  const baseRaw = rssMb(pid)
  const base = await afterGc()
  const r = await autocannon({ url, method: 'POST', headers, connections: 32, amount: REQUESTS, body: chat })
  const afterRequests = rssMb(pid)
  const end = await afterGc()
  await stopServers() // the gateway commits what it still holds as it stops
  const raw = new Database(db, { readonly: true })
  const records = (raw.prepare('SELECT count(*) AS n FROM usage_records_all').get() as { n: number }).n
  raw.close()
  const ok = r.requests.total - r.non2xx
  const warmOk = warm.requests.total - warm.non2xx
  const result = {
    streams: { concurrent: STREAMS, completed, rss_before_mb: before, rss_peak_mb: peak, rss_after_mb: afterStreams },
    requests: {
      warmup: WARMUP,
      sent: r.requests.total,
      ok,
      raw: { rss_before_mb: baseRaw, rss_after_mb: afterRequests, growth_pct: (afterRequests / baseRaw - 1) * 100 },
      after_gc: { before: base, after: end, rss_growth_pct: (end.rss_mb / base.rss_mb - 1) * 100 }
    },
    usage_records: records,
    records_expected: completed + warmOk + ok
  }
  console.log(JSON.stringify(result, null, 2))
  mkdirSync(fromRoot('bench', 'results'), { recursive: true })
  writeFileSync(fromRoot('bench', 'results', 'memory-latest.json'), JSON.stringify(result, null, 2))
}

main().then(() => process.exit(0), (err: unknown) => { console.error(err); process.exit(1) })
