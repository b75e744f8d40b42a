import t from 'tap'
import { existsSync, readFileSync } from 'node:fs'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { fromRoot } from '../../paths.js'
import { KEY_A, spawnGateway } from '../helper.js'
import { mockMcpHttp } from '../mock-mcp.js'

// The gateway in a process of its own, so that its memory is its own, behind it an HTTP MCP server
// (in this process) and a stdio one, each answering tool calls with 50 MB results.

const STDIO_SERVER = fromRoot('.build', 'test', 'mcp-stdio-server.js')
const textOf = (r: unknown): string => (r as CallToolResult).content.map((c) => c.type === 'text' ? c.text : '').join('')

/** The resident set of a process and its peak so far, in MB (Linux /proc). */
function memoryOf (pid: number): { rss: number, peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  const kb = (name: string): number => Number(new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN)
  return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 }
}

// What the gateway holds of a tool's result is bounded by mcp.max_result_mb (8 MB here), however
// large the result: its peak resident set is read, which also holds the garbage of the socket and
// pipe buffers a result passed through until V8 collects it (some 32-64 MB), so the bounds checked
// are far below the results' sizes rather than near the cap. The test prints the figures.
t.test('tool results of 50 MB, one and three at once, leave the gateway\'s memory flat', { skip: existsSync('/proc/self/status') ? false : 'reads /proc' }, async (t) => {
  const mock = await mockMcpHttp()
  t.teardown(() => mock.close())
  const gw = await spawnGateway(t, {
    store: { sqlite: ':memory:' },
    plugins: [{ name: 'auth' }, { name: 'usage' }],
    mcp: { servers: [{ id: 'docs', transport: 'http', url: mock.url }, { id: 'files', transport: 'stdio', command: process.execPath, args: [STDIO_SERVER], timeout_s: 60 }] },
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, mcp: ['*'] }] }] }]
  }, ['--workers', '1'])
  const c = new Client({ name: 'e2e', version: '1.0.0' })
  await c.connect(new StreamableHTTPClientTransport(new URL(`http://127.0.0.1:${gw.port}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${KEY_A}` } } }))
  t.teardown(() => c.close())
  const MB = 50
  // warm up: the sessions, pools and code paths in place before the baseline
  for (const server of ['docs', 'files']) t.equal(textOf(await c.callTool({ name: `${server}__big`, arguments: { mb: 1 } })).length, 1024 * 1024)
  const before = memoryOf(gw.pid)

  const one = await c.callTool({ name: 'docs__big', arguments: { mb: MB } }) as CallToolResult
  t.equal(one.isError, true)
  t.match(textOf(one), /larger than the gateway's limit of 8 MB/)
  const mid = memoryOf(gw.pid)
  const three = await Promise.all(['docs', 'docs', 'files'].map(async (server) => await c.callTool({ name: `${server}__big`, arguments: { mb: MB } }) as CallToolResult))
  t.ok(three.every((r) => r.isError === true && /larger than/.test(textOf(r))), `each of three at once: an error result (${three.map((r) => textOf(r).slice(0, 120)).join('; ')})`)
  const after = memoryOf(gw.pid)
  const growthOne = mid.peak - Math.max(before.peak, before.rss)
  const growthThree = after.peak - Math.max(before.peak, before.rss)
  t.comment(`gateway RSS ${before.rss.toFixed(1)} MB before (peak ${before.peak.toFixed(1)}), peak ${mid.peak.toFixed(1)} MB after one ${MB} MB result, ${after.peak.toFixed(1)} MB after three at once`)
  t.ok(growthOne < MB, `one ${MB} MB result: peak RSS grew ${growthOne.toFixed(1)} MB`)
  t.ok(growthThree < 2 * MB, `three at once: peak RSS grew ${growthThree.toFixed(1)} MB, against ${3 * MB} MB of results`)
  t.equal(textOf(await c.callTool({ name: 'files__echo', arguments: { text: 'after' } })), 'after', 'the servers keep answering')
})
