import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { flatToolName as exposedName } from '../../engine/kernel/tool-names.js'
import { EventFramer } from '../../engine/mcp/fetch.js'
import { LineReader, type LineItem } from '../../engine/mcp/stdio.js'
import { eventually, KEY_A } from '../helper.js'
import { call, connect, gateway, records, refusal, rpc, STDIO, STDIO_TIMEOUT_S, tenants, textOf, UPSTREAM_TOKEN } from '../mcp-gateway.js'
import { streamed } from '../mock-mcp.js'
import { tempDir } from '../temp-dir.js'

// What the MCP servers behind the gateway send back, and what of it reaches a client: the
// servers' configured credentials masked in results, errors and progress messages; response
// guardrails on all three; no answer past mcp.max_result_mb held; one tool per name at /mcp; a
// refusal's JSON-RPC code.

const auth = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })
const pidOf = (r: unknown): number => (JSON.parse(textOf(r)) as { pid: number }).pid

t.test('the servers\' credentials are masked in results, errors and progress', async (t) => {
  const STDIO_SECRET = 'stdio-secret-0123456789abcdef'
  const gw = await gateway(t, {
    servers: (mock) => [
      { id: 'docs', transport: 'http', url: mock.url, headers: { Authorization: `Bearer ${UPSTREAM_TOKEN}` } },
      { id: 'files', transport: 'stdio', command: process.execPath, args: [STDIO], timeout_s: STDIO_TIMEOUT_S, env: { MOCK_SECRET: STDIO_SECRET, LOG_LEVEL: 'warn' } }
    ],
    tenants: tenants({ mcp: ['*'] })
  })
  const a = await connect(t, gw, KEY_A)
  const who = await a.callTool({ name: 'docs__whoami' }) as CallToolResult
  t.equal(gw.mock.tools.calls.at(-1)?.headers.authorization, `Bearer ${UPSTREAM_TOKEN}`, 'the server was sent its credential')
  t.same(who, { content: [{ type: 'text', text: 'called with [REDACTED]' }], structuredContent: { credential: '[REDACTED]' } }, 'a result\'s text and structured content')

  const denied = await refusal(a.callTool({ name: 'docs__deny' }))
  t.equal(denied.code, -32603, 'the server\'s error, its code kept')
  // (the SDK's McpError puts "MCP error <code>: " before a message, on each side)
  t.equal(denied.message.replace(/^(MCP error -?\d+: )+/, ''), 'the credential [REDACTED] may not do this', 'its message')
  t.same(denied.data, { seen: '[REDACTED]', nested: [{ again: '[REDACTED]' }] }, 'every string of its data')

  const messages = await streamed(gw.base, { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'docs__report', arguments: {}, _meta: { progressToken: 'p' } } }, KEY_A)
  t.same(messages.map((m) => m.method ?? 'result'), ['notifications/progress', 'result'])
  t.equal((messages[0]?.params as { message?: string }).message, 'working as [REDACTED]', 'a progress notification\'s message')

  const fromEnv = await a.callTool({ name: 'files__whoami' }) as CallToolResult
  t.equal(textOf(fromEnv), 'called with [REDACTED]', 'a stdio server\'s secret-looking environment value')
  t.equal(textOf(await a.callTool({ name: 'files__echo', arguments: { text: 'warn is no secret' } })), 'warn is no secret', 'an ordinary value is left alone')
  const everything = JSON.stringify([who, denied, messages, fromEnv, await records(gw)])
  t.notMatch(everything, UPSTREAM_TOKEN)
  t.notMatch(everything, STDIO_SECRET)
})

t.test('response guardrails run on every path a tool\'s output takes: results, errors, progress', async (t) => {
  const gw = await gateway(t, {
    plugins: [{ name: 'auth' }, { name: 'usage' }, {
      name: 'guardrails',
      options: { rules: [{ name: 'no-refusals', pattern: 'refuses|asked', action: 'redact', on: ['response'] }, { name: 'no-reports', pattern: 'working as', action: 'block', on: ['response'] }] }
    }]
  })
  const a = await connect(t, gw, KEY_A)
  const rejected = await refusal(a.callTool({ name: 'docs__reject' }))
  t.equal(rejected.code, -32602, 'the server\'s own code')
  t.equal(rejected.message.replace(/^(MCP error -?\d+: )+/, ''), 'the mock [REDACTED] this call', 'the error\'s message, redacted')
  t.same(rejected.data, { why: '[REDACTED] to' }, 'and its data')

  const messages = await streamed(gw.base, { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'docs__report', arguments: {}, _meta: { progressToken: 'p' } } }, KEY_A)
  t.notOk(messages.some((m) => m.method === 'notifications/progress'), 'the blocked progress message was not sent')
  t.match(messages.at(-1), { id: 4, error: { code: -32602, message: /no-reports/, data: { status: 400, code: 'content_blocked' } } }, 'the call is answered with the refusal')
  t.notMatch(JSON.stringify(messages), /reported/, 'not with the result')
  t.equal(textOf(await a.callTool({ name: 'docs__report' })), 'reported', 'a call that asked for no progress gets none, and its result')
})

t.test('a result larger than mcp.max_result_mb is an error result, and the session keeps working', async (t) => {
  t.test('http, an event stream, with the default limit', async (t) => {
    const gw = await gateway(t)
    const a = await connect(t, gw, KEY_A)
    const big = await a.callTool({ name: 'docs__big', arguments: { mb: 12 } }) as CallToolResult
    t.equal(big.isError, true)
    t.equal(textOf(big), 'The answer of MCP server docs is larger than the gateway\'s limit of 8 MB (mcp.max_result_mb); it was dropped')
    t.equal(textOf(await a.callTool({ name: 'docs__echo', arguments: { text: 'still here' } })), 'still here')
    t.match((await records(gw)).find((r) => r.model === 'docs/big'), { status: 'upstream_error', cost_nano: 0 }, 'not relayed, not charged')
    t.ok(gw.logs.some((l) => l.msg === 'MCP tool call failed' && /larger than/.test(String(l.err))))
  })
  t.test('http, a JSON answer', async (t) => {
    const gw = await gateway(t, { json: true, mcp: { max_result_mb: 1 } })
    const a = await connect(t, gw, KEY_A)
    const big = await a.callTool({ name: 'docs__big', arguments: { mb: 2 } }) as CallToolResult
    t.equal(big.isError, true)
    t.match(textOf(big), /larger than the gateway's limit of 1 MB/)
    t.equal(textOf(await a.callTool({ name: 'docs__big', arguments: { mb: 0.9 } })).length, Math.floor(0.9 * 1024 * 1024), 'one under the limit comes whole')
  })
  t.test('stdio', async (t) => {
    const gw = await gateway(t, { stdio: true, mcp: { max_result_mb: 0.5 }, tenants: tenants({ mcp: ['files/*'] }) })
    const a = await connect(t, gw, KEY_A)
    const pid = pidOf(await a.callTool({ name: 'files__pid' }))
    const big = await a.callTool({ name: 'files__big', arguments: { mb: 3 } }) as CallToolResult
    t.equal(big.isError, true)
    t.match(textOf(big), /larger than the gateway's limit of 0\.5 MB/)
    t.equal(textOf(await a.callTool({ name: 'files__big', arguments: { mb: 0.4 } })).length, Math.floor(0.4 * 1024 * 1024), 'one under the limit comes whole')
    t.equal(pidOf(await a.callTool({ name: 'files__pid' })), pid, 'the process was not ended for it')
  })
})

t.test('what the transports hold of a message is bounded by the cap, however it is cut', async (t) => {
  const LIMIT = 1024 * 1024
  const CHUNK = 64 * 1024
  // a 50 MB line between two small ones, in the chunks a pipe gives
  const reader = new LineReader(LIMIT)
  const items: LineItem[] = []
  let most = 0
  const feed = (b: Buffer): void => { for (let at = 0; at < b.length; at += CHUNK) { items.push(...reader.push(b.subarray(at, at + CHUNK))); most = Math.max(most, reader.held) } }
  feed(Buffer.from('{"jsonrpc":"2.0","id":1,"result":{}}\n{"result":{"content":[{"type":"text","text":"'))
  const block = Buffer.alloc(CHUNK, 'x')
  for (let i = 0; i < 50 * 16; i++) feed(block)
  feed(Buffer.from('"}]},"jsonrpc":"2.0","id":7}\n{"jsonrpc":"2.0","id":8,"result":{}}\n'))
  t.ok(most <= LIMIT, `the line reader held at most ${most} bytes`)
  t.equal(items.length, 3)
  t.same(items[0], { line: '{"jsonrpc":"2.0","id":1,"result":{}}' })
  t.match(items[1], { head: /^\{"result":\{"content"/, tail: /"jsonrpc":"2\.0","id":7\}$/ }, 'the long one as its two ends, where its id is')
  t.same(items[2], { line: '{"jsonrpc":"2.0","id":8,"result":{}}' })

  const framer = new EventFramer(LIMIT)
  const sent: Buffer[] = []
  let held = 0
  const frames = ['event: message\ndata: {"a":1}\n\n', 'data: {"b":2}\r\n\r\n', ': ping\r\r', 'id: 3\ndata: {"c":3}\n\n']
  const stream = Buffer.from(frames.join(''))
  // where an event may end: after its blank line (or its CR, the LF of a CR LF still to come)
  const ends = new Set<number>()
  let at = 0
  for (const frame of frames) {
    at += frame.length
    ends.add(at)
    if (frame.endsWith('\r\n')) ends.add(at - 1)
  }
  // cut at every byte: the same bytes come out, and only at the end of an event
  for (let size = 1; size <= stream.length; size++) {
    const out: number[] = []
    let total = 0
    for (let at = 0; at < stream.length; at += size) {
      const passed = framer.push(stream.subarray(at, at + size))
      t.not(passed, null)
      if (passed !== null && passed.length > 0) out.push(total += passed.length)
    }
    t.equal(total, stream.length)
    t.ok(out.every((end) => ends.has(end)), `cut every ${size} bytes, each piece passed on ends an event`)
  }
  let over = false
  for (let i = 0; i < 50 * 16 && !over; i++) {
    const events = framer.push(i === 0 ? Buffer.concat([Buffer.from('data: '), block]) : block)
    held = Math.max(held, framer.held)
    if (events === null) over = true
    else sent.push(events)
  }
  t.ok(over, 'an event past the cap is refused')
  t.equal(Buffer.concat(sent).length, 0, 'and nothing of it was passed on')
  t.ok(held <= LIMIT, `the framer held at most ${held} bytes`)
})

t.test('exposed names are unique: a name already taken is not listed twice, and the operator is told', async (t) => {
  const gw = await gateway(t, { tenants: tenants({ mcp: ['*'] }) })
  const a = await connect(t, gw, KEY_A)
  const rewritten = exposedName('docs', 'files.read')
  // a tool named as the rewritten name of another, and a second tool of an existing name
  const impostor = rewritten.slice('docs__'.length)
  await gw.mock.addTool({ name: impostor, description: 'takes another tool\'s name', inputSchema: { type: 'object' } })
  await gw.mock.addTool({ name: 'echo', description: 'a second echo', inputSchema: { type: 'object' } })
  // once the server's tools are listed again
  await eventually(5000, () => gw.logs.filter((l) => l.tool === impostor || (l.tool === 'echo' && l.level === 40)).length, (n) => n === 2)
  const names = (await a.listTools()).tools.map((x) => x.name)
  t.equal(names.filter((n) => n === rewritten).length, 1, `${rewritten} listed once`)
  t.equal(names.filter((n) => n === 'docs__echo').length, 1, 'docs__echo listed once')
  t.equal(new Set(names).size, names.length, 'no name twice')
  t.equal(textOf(await a.callTool({ name: rewritten, arguments: { path: '/x' } })), 'files.read called with {"path":"/x"}', 'the name reaches the tool that had it first')
  t.ok(gw.logs.some((l) => l.level === 40 && l.mcp_server === 'docs' && l.tool === impostor && l.exposed === rewritten && l.taken_by === 'docs/files.read'), 'a warning names both')
  t.ok(gw.logs.some((l) => l.level === 40 && l.mcp_server === 'docs' && l.tool === 'echo'), 'and the duplicate')
  const own = (await (await connect(t, gw, KEY_A, '/mcp/docs')).listTools()).tools.map((x) => x.name)
  t.ok(own.includes(impostor) && own.includes('files.read'), 'at /mcp/docs both are there under their own names')
  t.equal(own.filter((n) => n === 'echo').length, 1)
})

t.test('a plugin\'s refusal of a tool call is JSON-RPC -32000; -32602 is for content blocked', async (t) => {
  const dir = tempDir('mcp-refuser')
  const module = join(dir, 'refuser.mjs')
  writeFileSync(module, `export default { name: 'refuser', options: { type: 'object' }, async plugin (fastify) {
  fastify.gateway.addHook('onAdmission', () => { throw fastify.gateway.refusal({ status: 400, code: 'not_today', message: 'No tool calls today' }) })
} }\n`)
  const gw = await gateway(t, { plugins: [{ name: 'auth' }, { name: 'refuser', module }] })
  const r = await rpc(gw, call('docs__echo', { text: 'x' }), auth(KEY_A))
  t.match(r.body, { error: { code: -32000, message: 'No tool calls today', data: { status: 400, code: 'not_today' } } })
  t.equal(gw.mock.tools.calls.length, 0)
})
