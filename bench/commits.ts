// What the store's writes cost a call: one gateway with every plugin (metrics on, scraped here),
// a fresh Idempotency-Key per call, 32 connections; from modelgate_store_write_batch_* around
// N calls (default 20,000): group commits per call, writes per commit, and the wall time spent
// in them (the statements and the commit, on the event loop) per call and per commit.
// PLUGINS (comma-separated) replaces the plugin list, to see what each one's writes cost.
// CONNECTIONS=1: calls one after another for SECONDS (default 10) instead, after the warm-up.
//   node --import tsx bench/commits.ts [N]
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import autocannon from 'autocannon'
import { fromRoot } from '../paths.js'
import { startServer, stopServers } from './servers.js'
import { sequential } from './single.js'
import { ALL_PLUGINS, BENCH_KEY, writeSmallConfig } from './small-config.js'
const dir = mkdtempSync(join(tmpdir(), 'cm-'))
const up = await startServer([fromRoot('bench', 'upstream.mjs')])
const f = writeSmallConfig(join(dir, 'g.json'), join(dir, 'g.db'), `http://127.0.0.1:${up.port}`, process.env.PLUGINS ?? ALL_PLUGINS)
const c = JSON.parse(readFileSync(f, 'utf8')); c.metrics = { enabled: true, auth: 'open' }; writeFileSync(f, JSON.stringify(c))
// ROOT: another built checkout's gateway
const gw = await startServer([join(process.env.ROOT ?? fromRoot(), 'dist/cli/index.js'), 'serve', '--config', f, '--workers', '1'], { LOG_LEVEL: 'error' })
const body = JSON.stringify({ model: 'b/o', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
const headers = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_KEY}` }
let k = 0
const N = Number(process.argv[2] ?? 20000)
/** The write-batch histogram's count, sum of seconds and sum of writes. */
const m = async () => { const t = await (await fetch(`http://127.0.0.1:${gw.port}/metrics`)).text(); const g = (n: string) => Number(new RegExp(`^${n} (\\S+)`, 'm').exec(t)?.[1]); return { n: g('modelgate_store_write_batch_seconds_count'), s: g('modelgate_store_write_batch_seconds_sum'), w: g('modelgate_store_write_batch_writes_sum') } }
await autocannon({ url: `http://127.0.0.1:${gw.port}/v1/chat/completions`, method: 'POST', connections: 32, amount: 5000, body, headers, requests: [{ setupRequest: (req: autocannon.Request) => ({ ...req, headers: { ...headers, 'idempotency-key': `w-${k++}` } }) }] })
const a = await m()
let calls = N
if (process.env.CONNECTIONS === '1') {
  const seconds = Number(process.env.SECONDS ?? 10)
  calls = (await sequential(`http://127.0.0.1:${gw.port}/v1/chat/completions`, seconds, gw.pid, body, headers)).calls
} else {
  await autocannon({ url: `http://127.0.0.1:${gw.port}/v1/chat/completions`, method: 'POST', connections: 32, amount: N, body, headers, requests: [{ setupRequest: (req: autocannon.Request) => ({ ...req, headers: { ...headers, 'idempotency-key': `c-${k++}` } }) }] })
}
const b = await m()
console.log('commits/call', ((b.n - a.n) / calls).toFixed(3), 'writes/commit', ((b.w - a.w) / (b.n - a.n)).toFixed(2), 'commit µs/call', ((b.s - a.s) * 1e6 / calls).toFixed(1), 'µs/commit', ((b.s - a.s) * 1e6 / (b.n - a.n)).toFixed(1))
await stopServers()
