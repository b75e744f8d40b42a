// CPU per MCP tools/call of several built checkouts side by side, in interleaved rounds, every
// plugin of ALL_PLUGINS on, against one MCP server (bench/mcp-upstream.mjs) priced per call: for
// comparing the MCP call path of two builds.
//   node --import tsx bench/mcp-ab.ts /path/a /path/b ...      (CALLS per round, default 3000; ROUNDS, default 4)
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { basename, join } from 'node:path'
import autocannon from 'autocannon'
import { fromRoot } from '../paths.js'
import { mainThreadCpuUs, processCpuUs } from './proc-cpu.js'
import { startServer, stopServers } from './servers.js'
import { ALL_PLUGINS, BENCH_KEY, writeSmallConfig } from './small-config.js'

const N = Number(process.env.CALLS ?? 3000)
const ROUNDS = Number(process.env.ROUNDS ?? 4)
const roots = process.argv.slice(2)
const dir = mkdtempSync(join(tmpdir(), 'mcpab-'))
const mcp = await startServer([fromRoot('bench', 'mcp-upstream.mjs')])
const cliOf = (root: string): string => existsSync(`${root}/dist/cli/index.js`) ? `${root}/dist/cli/index.js` : `${root}/dist/cli.js`
const targets: Array<{ name: string, port: number, pid: number, us: number[], main: number[], rps: number[], non2xx: number }> = []
for (const [i, root] of roots.entries()) {
  const file = writeSmallConfig(join(dir, `g${i}.json`), join(dir, `g${i}.db`), 'http://127.0.0.1:9', ALL_PLUGINS)
  const config = JSON.parse(readFileSync(file, 'utf8')) as { tenants: Array<{ projects: Array<{ keys: Array<Record<string, unknown>> }> }> }
  for (const k of config.tenants[0]?.projects[0]?.keys ?? []) k.mcp = ['bench/*']
  writeFileSync(file, JSON.stringify({ ...config, mcp: { servers: [{ id: 'bench', transport: 'http', url: `http://127.0.0.1:${mcp.port}/mcp`, pricing: { per_call: 0.0001 } }] } }))
  targets.push({ name: basename(root) + ` ${i}`, ...(await startServer([cliOf(root), 'serve', '--config', file, '--workers', '1'], { LOG_LEVEL: 'error' })), us: [], main: [], rps: [], non2xx: 0 })
}
const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'bench__echo', arguments: { text: 'x' } } })
const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream', authorization: `Bearer ${BENCH_KEY}` }
for (let round = 0; round <= ROUNDS; round++) {
  for (const t of round % 2 === 0 ? targets : [...targets].reverse()) {
    const c0 = processCpuUs(t.pid)
    const m0 = mainThreadCpuUs(t.pid)
    const r = await autocannon({ url: `http://127.0.0.1:${t.port}/mcp`, method: 'POST', connections: 8, amount: round === 0 ? 1000 : N, body, headers })
    if (round === 0) continue
    t.us.push((processCpuUs(t.pid) - c0) / N)
    t.main.push((mainThreadCpuUs(t.pid) - m0) / N)
    t.rps.push(r.requests.average)
    t.non2xx += r.non2xx
  }
}
const median = (xs: number[]): number => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!
for (const t of targets) console.log(`${t.name.padEnd(14)} ${median(t.us).toFixed(0).padStart(5)} µs/call (${t.us.map((x) => x.toFixed(0)).join(' ')})  main ${median(t.main).toFixed(0).padStart(4)}  ${Math.round(median(t.rps))} req/s  non2xx ${t.non2xx}`)
await stopServers()
