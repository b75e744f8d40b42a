import t from 'tap'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { eventually, FakeClock } from '../helper.js'
import { call, gateway, rpc, STDIO, STDIO_TIMEOUT_S, textOf } from '../mcp-gateway.js'

// The organizations' own sessions with the MCP servers (one stdio process each) are bounded: at
// most mcp.max_sessions at once, the least recently used idle one closed to open another, idle
// ones closed after mcp.session_idle_s, and a call refused when every one is in use, so that
// processes cannot pile up however many organizations call. (mcp-tenants.test.ts: why there is
// one per organization.)

const auth = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })
const alive = (pid: number): boolean => { try { process.kill(pid, 0); return true } catch { return false } }
const pidOf = (r: unknown): number => (JSON.parse(textOf(r)) as { pid: number }).pid

t.test('the organizations\' sessions are bounded: the least recently used closed first, idle ones closed, never more processes than mcp.max_sessions', async (t) => {
  const clock = new FakeClock()
  const names = ['o1', 'o2', 'o3', 'o4']
  const keyOf = (org: string): string => `mg-test-key-${org}-0123456789abcdef`
  const gw = await gateway(t, {
    servers: () => [{ id: 'files', transport: 'stdio', command: process.execPath, args: [STDIO], timeout_s: STDIO_TIMEOUT_S }],
    tenants: names.map((org) => ({ org, projects: [{ id: 'p', keys: [{ key: keyOf(org), mcp: ['files/*'] }] }] })),
    mcp: { max_sessions: 2, session_idle_s: 60 },
    extras: { clock }
  })
  const sessions = gw.app.mcpServers?.sessions
  const seen = new Map<string, number[]>()
  const living = (): number[] => [...new Set([...seen.values()].flat())].filter(alive)
  const pid = async (org: string): Promise<number> => {
    const r = await rpc(gw, call('files__pid'), auth(keyOf(org)))
    const p = pidOf((r.body as { result: CallToolResult }).result)
    seen.set(org, [...seen.get(org) ?? [], p])
    t.ok(living().length <= 2 && (sessions?.size ?? 0) <= 2, `after a call of ${org}: ${living().length} processes of the organizations`)
    return p
  }

  const p1 = await pid('o1')
  const p2 = await pid('o2')
  t.not(p1, p2)
  t.equal(await pid('o1'), p1, 'o1 keeps its process, and is now the most recently used')
  const p3 = await pid('o3')
  t.notOk(alive(p2), 'o2, the least recently used, was closed to make room (before o3\'s process started)')
  t.ok(alive(p1), 'o1 was not')
  t.not(p3, p2)

  // unused for the idle time: closed, before the next call's process starts
  const before = living()
  clock.advance(61_000)
  const fresh = await pid('o3')
  const gone = await eventually(5000, () => before.filter(alive), (l) => l.length === 0)
  t.same(gone, [], 'the idle processes are gone')
  t.ok(alive(fresh))

  // every session in use: a call of another organization is refused at once, nothing is spawned
  const mark = gw.logs.length
  const ac = new AbortController()
  const slow = ['o1', 'o2'].map(async (org) => await fetch(gw.base + '/mcp', {
    method: 'POST',
    signal: ac.signal,
    headers: { ...auth(keyOf(org)), 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
    body: JSON.stringify(call('files__slow', { ms: 30_000 }))
  }).catch(() => null))
  // both calls hold their sessions once these are open (o3's, idle, was closed for one of them)
  const opened = (): unknown[] => gw.logs.slice(mark).filter((l) => l.msg === 'MCP session opened').map((l) => l.org).sort()
  t.same(await eventually(STDIO_TIMEOUT_S * 1000, opened, (o) => o.length === 2), ['o1', 'o2'])
  const refused = await rpc(gw, call('files__pid'), auth(keyOf('o4')))
  const result = (refused.body as { result: CallToolResult }).result
  t.equal(result.isError, true)
  t.match(textOf(result), /all 2 sessions with MCP servers are in use \(mcp\.max_sessions\)/)
  t.ok(living().length <= 2)
  ac.abort()
  await Promise.all(slow)
})
