// Where the slowest calls at one connection spend their time, timed inside the gateway: one
// gateway (one worker, PLUGINS, default all) preloaded with slow-trace.mjs takes calls one after
// another for SECONDS (default 10) after the usual warm-up; then the slowest 1% of its requests
// (server-side) are set against the faster half: time in SQLite statements, in GC pauses, and
// the slowest statements inside them.
//   node --import tsx bench/slow-calls.ts
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { fromRoot } from '../paths.js'
import { startServer, stopServers } from './servers.js'
import { sequential, warm } from './single.js'
import { ALL_PLUGINS, writeSmallConfig } from './small-config.js'

type Span = [number, number]
/** A request's span and the event loop's busy ms within it. */
type Request = [number, number, number]
const dir = mkdtempSync(join(tmpdir(), 'slow-'))
const up = await startServer([fromRoot('bench', 'upstream.mjs')])
const config = writeSmallConfig(join(dir, 'g.json'), join(dir, 'g.db'), `http://127.0.0.1:${up.port}`, process.env.PLUGINS ?? ALL_PLUGINS)
const trace = join(dir, 'trace.json')
const gw = await startServer(['--import', fromRoot('bench', 'slow-trace.mjs'), fromRoot('dist', 'cli', 'index.js'), 'serve', '--config', config, '--workers', '1'],
  { LOG_LEVEL: 'error', SLOWTRACE: trace, GW_ROOT: fromRoot() })
const url = `http://127.0.0.1:${gw.port}/v1/chat/completions`
await warm(url, gw.pid)
const dump = async (): Promise<void> => {
  process.kill(gw.pid, 'SIGUSR2')
  const since = Date.now()
  while (!existsSync(trace) && Date.now() - since < 5000) await new Promise((resolve) => setTimeout(resolve, 20))
}
await dump() // the warm-up's spans are dropped
const client = await sequential(url, Number(process.env.SECONDS ?? 10), gw.pid)
rmSync(trace)
await dump()
const { requests, gcs, statements, upstream } = JSON.parse(readFileSync(trace, 'utf8')) as { requests: Request[], gcs: Span[], statements: Array<[number, number, string]>, upstream: Span[] }
await stopServers()

const length = ([a, b]: Span | Request): number => b - a
const sorted = requests.map(length).sort((x, y) => x - y)
const at = (q: number): number => sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * q))] as number
const slow = requests.filter((r) => length(r) >= at(0.99))
const fast = requests.filter((r) => length(r) <= at(0.5))
const inside = (spans: Array<[number, number, ...unknown[]]>, [a, b]: Span | Request): number => spans.reduce((t, [s, e]) => (s >= a && e <= b ? t + e - s : t), 0)
const mean = (rs: Request[], f: (r: Request) => number): string => (rs.reduce((t, r) => t + f(r), 0) / rs.length * 1000).toFixed(0)
const µs = (ms: number): string => (ms * 1000).toFixed(0)
console.log(`client side: ${client.calls} calls, p50 ${client.p50.toFixed(3)} ms, p99 ${client.p99.toFixed(3)} ms`)
console.log(`server side: p50 ${µs(at(0.5))} µs, p99 ${µs(at(0.99))} µs, p99.9 ${µs(at(0.999))} µs; ${gcs.length} GC pauses`)
console.log('µs per call, the faster half / the slowest 1%:')
console.log(`  in all          ${mean(fast, length)} / ${mean(slow, length)}`)
console.log(`  event loop busy ${mean(fast, (r) => r[2])} / ${mean(slow, (r) => r[2])}`)
console.log(`  in SQLite       ${mean(fast, (r) => inside(statements, r))} / ${mean(slow, (r) => inside(statements, r))}`)
console.log(`  in GC           ${mean(fast, (r) => inside(gcs, r))} / ${mean(slow, (r) => inside(gcs, r))}`)
console.log(`  upstream call   ${mean(fast, (r) => inside(upstream, r))} / ${mean(slow, (r) => inside(upstream, r))}  (from undici's request to the answer's headers)`)
console.log(`slowest 1% with a GC pause inside: ${slow.filter((r) => inside(gcs, r) > 0).length} of ${slow.length}`)
console.log('the slowest statements inside them:')
const within = statements.filter(([s, e]) => slow.some(([a, b]) => s >= a && e <= b)).sort((x, y) => (y[1] - y[0]) - (x[1] - x[0]))
for (const [s, e, sql] of within.slice(0, 10)) console.log(`  ${µs(e - s).padStart(6)} µs  ${sql}`)
