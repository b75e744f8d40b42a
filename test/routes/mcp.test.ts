import t from 'tap'
import { Agent } from 'undici'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import { flatToolName as exposedName } from '../../engine/kernel/tool-names.js'
import type { UsageRow } from '../../engine/store/types.js'
import { eventually, FakeClock, KEY_A, KEY_B } from '../helper.js'
import { ADMIN, call, connect, gateway, records, refusal, rpc, tenants, textOf } from '../mcp-gateway.js'
import { LEAKED, LONG_TOOL, streamed } from '../mock-mcp.js'

// The MCP endpoint in one process, over real sockets, driven with the MCP SDK's client: servers
// behind over Streamable HTTP (test/mock-mcp.ts) and stdio (test/mcp-stdio-server.ts); the tools
// a key sees and may call; what a tools/call sends and returns; a server down, slow or restarted;
// and every tools/call governed and metered like a model call. (mcp-tenants.test.ts: what one
// tenant can reach of another's through the servers; mcp-output.test.ts: what of the servers'
// answers reaches a client.)

t.test('exposed names stay within what clients accept, and tell tools apart', async (t) => {
  t.equal(exposedName('docs', 'echo'), 'docs__echo')
  const long = exposedName('docs', LONG_TOOL)
  t.match(long, /^[A-Za-z0-9_-]{1,64}$/)
  t.equal(long.length, 64, 'cut to 64')
  t.not(exposedName('docs', LONG_TOOL + 'x'), long, 'two long names that share their start differ')
  t.match(exposedName('docs', 'files.read'), /^docs__files_read_[0-9a-f]{8}$/, 'a character clients refuse is replaced, and the name tagged')
  t.equal(exposedName('docs', 'files.read'), exposedName('docs', 'files.read'), 'stable')
})

t.test('initialize, tools/list by the key\'s grants, and /mcp/{server}', async (t) => {
  const gw = await gateway(t, { stdio: true })
  const a = await connect(t, gw, KEY_A)
  t.same(a.getServerVersion()?.name, 'modelgate', 'the gateway is an MCP server named modelgate')
  t.ok(a.getServerCapabilities()?.tools, 'with the tools capability')
  const listed = (await a.listTools()).tools
  const names = listed.map((x) => x.name).sort()
  t.same(names, [
    'docs__add', 'docs__crash', 'docs__echo', 'docs__fail', 'docs__leak', 'docs__pid', 'docs__reject', 'docs__slow',
    'docs__remember', 'docs__recall', 'docs__big', 'docs__whoami', 'docs__deny', 'docs__report',
    exposedName('docs', 'files.read'), exposedName('docs', LONG_TOOL), 'files__crash', 'files__echo', 'files__pid'
  ].sort(), 'docs/* and three files tools: the stdio server was waited for')
  t.ok(names.every((n) => /^[A-Za-z0-9_-]{1,64}$/.test(n)), 'every name is one a client accepts')
  const add = listed.find((x) => x.name === 'docs__add')
  const original = gw.mock.tools.tools.find((x) => x.name === 'add')
  t.same(add?.description, original?.description, 'description unchanged')
  t.same(add?.inputSchema, original?.inputSchema, 'inputSchema unchanged')
  t.same(add?.outputSchema, original?.outputSchema, 'outputSchema unchanged')

  const none = await connect(t, gw, KEY_B)
  t.same((await none.listTools()).tools, [], 'a key that names no mcp glob sees no tool')

  const one = await connect(t, gw, KEY_A, '/mcp/files')
  t.same((await one.listTools()).tools.map((x) => x.name).sort(), ['crash', 'echo', 'pid'], '/mcp/files: its tools under their own names')
  t.equal(textOf(await one.callTool({ name: 'echo', arguments: { text: 'by its own name' } }) as CallToolResult), 'by its own name')
  const own = await refusal(one.callTool({ name: 'add', arguments: { a: 1, b: 2 } }))
  t.equal(own.code, -32602, 'a tool of the server the key may not use is unknown there too')

  const missing = await rpc(gw, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { authorization: `Bearer ${KEY_A}` }, '/mcp/nope')
  t.equal(missing.status, 404)
  t.match(missing.body, { jsonrpc: '2.0', id: null, error: { message: /No MCP server nope/, data: { status: 404, code: 'mcp_server_not_found' } } })
})

t.test('no key, a bad key, an expired key: 401 with WWW-Authenticate: Bearer, in JSON-RPC\'s shape', async (t) => {
  const clock = new FakeClock()
  const gw = await gateway(t, { plugins: [{ name: 'cors' }, { name: 'auth' }], extras: { clock }, tenants: tenants({ expires_at: new Date(clock.now() + 60_000).toISOString() }) })
  // a client in a browser: its preflight, and the headers it may read
  const preflight = await fetch(gw.base + '/mcp', { method: 'OPTIONS', headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type,mcp-protocol-version,mcp-session-id' } })
  t.equal(preflight.status, 204)
  t.match(preflight.headers.get('access-control-allow-headers'), /mcp-protocol-version.*mcp-session-id|mcp-session-id.*mcp-protocol-version/)
  const seen = await rpc(gw, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { origin: 'https://app.example' })
  t.match(seen.headers.get('access-control-expose-headers'), /WWW-Authenticate/, 'a browser client can read what the 401 asks for')
  const init = { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'x', version: '1' } } }
  for (const headers of [{}, { authorization: 'Bearer mg-not-a-key-0123456789' }] as Array<Record<string, string>>) {
    const r = await rpc(gw, init, headers)
    t.equal(r.status, 401)
    t.equal(r.headers.get('www-authenticate'), 'Bearer')
    t.match(r.body, { jsonrpc: '2.0', id: null, error: { code: -32000, message: /API key/, data: { status: 401 } } })
  }
  t.equal((await rpc(gw, init, { authorization: `Bearer ${KEY_A}` })).status, 200)
  clock.advance(61_000)
  const expired = await rpc(gw, init, { authorization: `Bearer ${KEY_A}` })
  t.equal(expired.status, 401)
  t.match(expired.body, { error: { message: /expired/ } })
  const get = await fetch(gw.base + '/mcp', { headers: { authorization: `Bearer ${KEY_B}`, accept: 'text/event-stream' } })
  t.equal(get.status, 405, 'no session, so no GET stream')
  t.equal(get.headers.get('allow'), 'POST')
  t.equal((await fetch(gw.base + '/mcp', { method: 'DELETE', headers: { authorization: `Bearer ${KEY_B}` } })).status, 405)
})

t.test('tools/call: the result as the server gave it, its headers, progress, errors and the record', async (t) => {
  const gw = await gateway(t, { metrics: true })
  const a = await connect(t, gw, KEY_A)
  const sum = await a.callTool({ name: 'docs__add', arguments: { a: 2, b: 3 } }) as CallToolResult
  t.same(sum, { content: [{ type: 'text', text: '5' }], structuredContent: { sum: 5 } }, 'content and structuredContent unchanged')
  const seen = gw.mock.tools.calls.at(-1)
  t.same(seen?.arguments, { a: 2, b: 3 })
  t.equal(seen?.headers.authorization, 'Bearer upstream-token', 'the server got its configured headers, not the client\'s key')
  t.equal(textOf(await a.callTool({ name: exposedName('docs', 'files.read'), arguments: { path: '/x' } }) as CallToolResult), 'files.read called with {"path":"/x"}', 'a rewritten name reaches the tool by its own')

  const slow = await a.callTool({ name: 'docs__slow', arguments: { ms: 40 } }, undefined, { onprogress: () => {} }) as CallToolResult
  t.equal(textOf(slow), 'waited 40 ms', 'a call that asks for progress, with the SDK\'s client')
  const messages = await streamed(gw.base, { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'docs__slow', arguments: { ms: 80 }, _meta: { progressToken: 'p-1' } } }, KEY_A)
  t.same(messages.map((m) => m.method === undefined ? 'result' : (m.params as { progress: number }).progress), [20, 40, 60, 80, 'result'], 'the server\'s progress notifications, every one, then the result')
  t.ok(messages.slice(0, 4).every((m) => m.method === 'notifications/progress' && (m.params as { progressToken: unknown }).progressToken === 'p-1'), 'each under the client\'s own token')
  t.same(messages[4], { jsonrpc: '2.0', id: 7, result: { content: [{ type: 'text', text: 'waited 80 ms' }] } })

  const failed = await a.callTool({ name: 'docs__fail' }) as CallToolResult
  t.same(failed, { isError: true, content: [{ type: 'text', text: 'it failed' }] }, 'a tool\'s own error result, unchanged')
  const rejected = await refusal(a.callTool({ name: 'docs__reject' }))
  t.equal(rejected.code, -32602, 'the server\'s JSON-RPC error, relayed')
  t.match(rejected.message, /the mock refuses this call/)
  t.same(rejected.data, { why: 'asked to' })

  const before = gw.mock.tools.calls.length
  const unknown = await refusal(a.callTool({ name: 'docs__nope' }))
  t.equal(unknown.code, -32602, 'an unknown tool: invalid params, as MCP answers')
  t.match(unknown.message, /Unknown tool: docs__nope/)
  const other = await connect(t, gw, KEY_B)
  const denied = await refusal(other.callTool({ name: 'docs__echo', arguments: { text: 'x' } }))
  t.equal(denied.code, -32602, 'a tool the key may not use is unknown to it')
  t.equal(gw.mock.tools.calls.length, before, 'neither reached a server')

  const all = await records(gw)
  const rows = all.filter((r) => r.status !== 'refused')
  t.equal(rows.length, 6, 'one record per tools/call that reached its server')
  t.same(all.filter((r) => r.status === 'refused').map((r) => [r.model, r.error, r.cost_nano, r.provider]).sort(), [['docs__echo', 'tool_not_found', 0, null], ['docs__nope', 'tool_not_found', 0, null]],
    'an unknown tool, and one the key may not use, are refused calls of their key, under the name called')
  const add = rows.find((r) => r.model === 'docs/add') as UsageRow
  t.match(add, { endpoint: 'mcp.tools_call', provider: 'docs', model: 'docs/add', status: 'ok', cost_nano: 1_000_000, org_id: 'acme', project_id: 'web', prompt_tokens: 0 })
  t.ok(add.latency_ms >= 0)
  t.same(add.attempts.map((x) => [x.provider, x.outcome]), [['docs', 'ok']])
  t.match(rows.find((r) => r.model === 'docs/fail'), { status: 'ok', cost_nano: 1_000_000 }, 'a tool that answered isError ran: charged')
  t.match(rows.find((r) => r.model === 'docs/reject'), { status: 'upstream_error', cost_nano: 0 }, 'an error answer is not charged')

  const api = await fetch(`${gw.base}/admin/v1/usage?endpoint=mcp.tools_call&status=ok,upstream_error`, { headers: { authorization: `Bearer ${ADMIN}` } })
  const listed = (await api.json() as { data: Array<Record<string, unknown>> }).data
  t.equal(listed.length, 6)
  t.match(listed.find((r) => r.model === 'docs/add'), { endpoint: 'mcp.tools_call', provider: 'docs', cost_usd: '0.001' })

  const metrics = await (await fetch(`${gw.base}/metrics`)).text()
  t.match(metrics, /modelgate_mcp_tool_calls_total\{server="docs",tool="add",status="ok"\} 1/)
  t.match(metrics, /modelgate_mcp_tool_calls_total\{server="docs",tool="reject",status="upstream_error"\} 1/)
  t.notMatch(metrics, /tool="nope"/, 'no label from a client\'s string')
})

t.test('a server down, slow or restarted: an isError result in bounded time, the others keep working', async (t) => {
  const gw = await gateway(t, {
    servers: (mock) => [
      { id: 'docs', transport: 'http', url: mock.url },
      { id: 'slowpoke', transport: 'http', url: mock.url, timeout_s: 0.3 },
      // nothing listens on port 9 of loopback
      { id: 'gone', transport: 'http', url: 'http://127.0.0.1:9/mcp', timeout_s: 2 }
    ],
    tenants: tenants({ mcp: ['*'] })
  })
  const a = await connect(t, gw, KEY_A)
  const servers = async (): Promise<Array<Record<string, unknown>>> => (await (await fetch(`${gw.base}/admin/v1/mcp/servers`, { headers: { authorization: `Bearer ${ADMIN}` } })).json() as { data: Array<Record<string, unknown>> }).data
  const listed = await servers()
  t.match(listed.find((s) => s.id === 'docs'), { transport: 'http', status: 'ready', last_error: null })
  t.ok((listed.find((s) => s.id === 'docs')?.tools as string[]).includes('echo'), 'its tools by their own names')
  // the unreachable server's first connection may still be under way when the list is read: wait for its outcome
  const gone = await eventually(5000, servers, (l) => l.find((s) => s.id === 'gone')?.status !== 'starting')
  t.match(gone.find((s) => s.id === 'gone'), { status: 'down', tools: [], last_error: /ECONNREFUSED/ })

  // the tool would answer after 3 s, and successfully: an error naming the timeout is the gateway's
  const slow = await a.callTool({ name: 'slowpoke__slow', arguments: { ms: 3000 } }) as CallToolResult
  t.equal(slow.isError, true, 'past its timeout_s: an error result')
  t.match(textOf(slow), /slowpoke did not answer in time/)
  t.equal(textOf(await a.callTool({ name: 'docs__echo', arguments: { text: 'still here' } }) as CallToolResult), 'still here', 'the other servers keep working')
  t.match((await records(gw)).find((r) => r.model === 'slowpoke/slow'), { status: 'timeout', cost_nano: 0 })

  await gw.mock.stop()
  const seen = await eventually(5000, servers, (l) => l.find((s) => s.id === 'docs')?.status !== 'ready')
  t.not(seen.find((s) => s.id === 'docs')?.status, 'ready', 'a server that went away is seen so with no call made (its event stream failed, then a ping)')
  const down = await a.callTool({ name: 'docs__echo', arguments: { text: 'x' } }) as CallToolResult
  t.equal(down.isError, true, 'a server that stopped answering: an error result')
  t.match(textOf(down), /MCP server docs is unavailable/, 'known down: said so, not waited out to a timeout')
  t.not((await servers()).find((s) => s.id === 'docs')?.status, 'ready', 'down (or trying again)')
  t.ok((await a.listTools()).tools.some((x) => x.name === 'docs__echo'), 'its tools stay listed while it is down')
  t.match((await records(gw))[0], { model: 'docs/echo', status: 'upstream_error', cost_nano: 0 })

  // back on the same port, with no memory of the gateway's session: reconnected with backoff
  await gw.mock.restart()
  const back = await eventually(10_000, servers, (l) => l.find((s) => s.id === 'docs')?.status === 'ready')
  t.equal(back.find((s) => s.id === 'docs')?.status, 'ready', 'connected again')
  t.equal(textOf(await a.callTool({ name: 'docs__echo', arguments: { text: 'back' } }) as CallToolResult), 'back')

  // a restart the gateway did not notice: the server answers 404 to the old session, and the call is made on a new one
  await gw.mock.stop()
  await gw.mock.restart()
  t.equal(textOf(await a.callTool({ name: 'docs__echo', arguments: { text: 'new session' } }) as CallToolResult), 'new session')
})

t.test('stdio: spawned, its stderr in the log, restarted with backoff when it exits; tools refreshed on list_changed', async (t) => {
  // shared: the calls go to the server's own process, the one restarted with backoff
  const gw = await gateway(t, { stdio: 'shared' })
  const a = await connect(t, gw, KEY_A)
  const first = JSON.parse(textOf(await a.callTool({ name: 'files__pid' }) as CallToolResult)) as { pid: number, ppid: number }
  t.equal(first.ppid, process.pid, 'the gateway spawned it')
  t.ok(gw.logs.some((l) => l.mcp_server === 'files' && typeof l.stderr === 'string' && l.stderr.includes(`mock MCP server ready (pid ${first.pid})`)), 'its stderr is in the log')
  await a.callTool({ name: 'files__crash' })
  const after = await eventually(10_000, async () => await a.callTool({ name: 'files__pid' }) as CallToolResult, (r) => r.isError !== true)
  const second = JSON.parse(textOf(after)) as { pid: number }
  t.not(second.pid, first.pid, 'a new process answers')
  t.ok(gw.logs.some((l) => l.mcp_server === 'files' && l.msg === 'MCP server unavailable' && typeof l.retry_in_ms === 'number'), 'the exit is logged with the pause before the restart')

  await gw.mock.addTool({ name: 'fresh', description: 'added later', inputSchema: { type: 'object' } })
  const listed = await eventually(5000, async () => (await a.listTools()).tools.map((x) => x.name), (n) => n.includes('docs__fresh'))
  t.ok(listed.includes('docs__fresh'), 'a tool the server added is listed once it says its tools changed')
  t.equal(textOf(await a.callTool({ name: 'docs__fresh', arguments: {} }) as CallToolResult), 'fresh called with {}')
})

t.test('governed like a model call: rpm, budget, balance, quota, guardrails, revocation of an open session, the IP rate limit', async (t) => {
  t.test('the key\'s rpm counts tools/call only; its budget in USD', async (t) => {
    const gw = await gateway(t, { tenants: tenants({ limits: { rpm: 3 } }) })
    const a = await connect(t, gw, KEY_A)
    for (let i = 0; i < 4; i++) await a.listTools()
    for (let i = 0; i < 3; i++) t.equal(textOf(await a.callTool({ name: 'docs__echo', arguments: { text: `${i}` } }) as CallToolResult), `${i}`)
    const over = await refusal(a.callTool({ name: 'docs__echo', arguments: { text: 'one more' } }))
    t.equal(over.code, -32000)
    t.match(over.data, { status: 429, code: 429, type: 'rate_limit_error' })
    t.ok((over.data as { retry_after?: number }).retry_after !== undefined, 'with when to retry')
    t.equal(gw.mock.tools.calls.length, 3, 'the refused call reached no server')

    const budget = await gateway(t, { tenants: tenants({ budget: { usd: 0.002, per: 'day' } }) })
    const b = await connect(t, budget, KEY_A)
    await b.callTool({ name: 'docs__echo', arguments: { text: '1' } })
    await b.callTool({ name: 'docs__echo', arguments: { text: '2' } })
    const spent = await refusal(b.callTool({ name: 'docs__echo', arguments: { text: '3' } }))
    t.match(spent.data, { status: 429, code: 429, type: 'quota_exceeded' }, 'two calls at $0.001 spend a $0.002 budget')
    t.same((await records(budget)).map((r) => [r.status, r.error]), [['refused', 'quota_exceeded'], ['ok', null], ['ok', null]], 'the two calls, and the refused one')
  })

  t.test('the balance holds the call\'s price; a project quota in USD', async (t) => {
    const gw = await gateway(t, { plugins: [{ name: 'auth' }, { name: 'balance' }, { name: 'usage' }], tenants: tenants({}, { balance_usd: 0.0015 }) })
    const a = await connect(t, gw, KEY_A)
    await a.callTool({ name: 'docs__echo', arguments: { text: 'paid' } })
    const broke = await refusal(a.callTool({ name: 'docs__echo', arguments: { text: 'unpaid' } }))
    t.match(broke.data, { status: 402, code: 402 })
    await gw.app.gateway.store.flush()
    const org = await gw.app.gateway.store.orgs.get('acme')
    t.equal(org?.balance_nano, 500_000, '$0.0015 less one call at $0.001')
    t.equal(org?.held_nano, 0)

    const quota = await gateway(t, { tenants: [{ org: 'acme', balance_usd: 25, projects: [{ id: 'web', quota: { usd: 0.001, per: 'month' }, keys: [{ key: KEY_A, mcp: ['*'] }] }] }] })
    const q = await connect(t, quota, KEY_A)
    await q.callTool({ name: 'docs__echo', arguments: { text: 'first' } })
    t.match((await refusal(q.callTool({ name: 'docs__echo', arguments: { text: 'second' } }))).data, { status: 429, type: 'quota_exceeded' })
  })

  t.test('guardrails on the arguments (block) and on the result\'s text (redact)', async (t) => {
    const gw = await gateway(t, {
      plugins: [{ name: 'auth' }, { name: 'usage' }, {
        name: 'guardrails',
        options: { rules: [{ name: 'no-cards', pattern: '\\d{4}-\\d{4}-\\d{4}-\\d{4}', action: 'block', on: ['request'] }, { name: 'no-keys', pattern: 'sk-[A-Za-z0-9]{20,}', action: 'redact', on: ['response'] }] }
      }]
    })
    const a = await connect(t, gw, KEY_A)
    const blocked = await refusal(a.callTool({ name: 'docs__echo', arguments: { text: 'card 1234-5678-9012-3456' } }))
    t.equal(blocked.code, -32602)
    t.match(blocked.data, { status: 400, code: 'content_blocked' })
    t.match(blocked.message, /no-cards/)
    t.equal(gw.mock.tools.calls.length, 0, 'nothing sent')
    const leak = await a.callTool({ name: 'docs__leak' }) as CallToolResult
    t.notMatch(JSON.stringify(leak), /sk-abc/, 'the key is in neither the text nor the structured content')
    t.equal(textOf(leak), LEAKED.replace(/sk-\w+/, '[REDACTED]'))
  })

  t.test('a revoked key: the next request of an open session answers 401', async (t) => {
    const gw = await gateway(t)
    const a = await connect(t, gw, KEY_A)
    await a.callTool({ name: 'docs__echo', arguments: { text: 'before' } })
    const id = (await gw.app.gateway.store.keys.list('acme', 'web')).find((k) => k.mcp.length > 0)?.id as string
    t.equal((await fetch(`${gw.base}/admin/v1/keys/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${ADMIN}` } })).status, 200)
    const err = await a.callTool({ name: 'docs__echo', arguments: { text: 'after' } }).then(() => null, (e: unknown) => e as Error)
    t.match(err?.message, /401/, 'the same client is refused')
  })

  t.test('the IP rate limit covers /mcp; a batch holding a tools/call is refused', async (t) => {
    const gw = await gateway(t, { plugins: [{ name: 'rate-limit', options: { max: 3, window_s: 600 } }, { name: 'auth' }] })
    const batch = await rpc(gw, [call('docs__echo', { text: 'a' }, 1), call('docs__echo', { text: 'b' }, 2)], { authorization: `Bearer ${KEY_A}` })
    t.equal(batch.status, 400)
    t.match(batch.body, { error: { code: -32600, message: /alone/ } })
    const statuses: number[] = []
    for (let i = 0; i < 3; i++) statuses.push((await rpc(gw, { jsonrpc: '2.0', id: 1, method: 'tools/list' }, { authorization: `Bearer ${KEY_A}` })).status)
    t.same(statuses, [200, 200, 429], 'the fourth request of the window')
  })

  t.test('a client that leaves mid-call: the server is told, the call ends as client_aborted', async (t) => {
    const gw = await gateway(t)
    const ac = new AbortController()
    // a client of its own: undici opens a spare connection after an abort, which would hold the gateway's close
    const dispatcher = new Agent()
    t.teardown(() => dispatcher.destroy())
    const pending = fetch(gw.base + '/mcp', {
      method: 'POST',
      signal: ac.signal,
      // (Node's fetch takes a dispatcher of the undici package)
      ...{ dispatcher },
      headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify(call('docs__slow', { ms: 3000 }))
    }).catch(() => null)
    await eventually(5000, () => gw.mock.tools.calls.length, (n) => n === 1)
    ac.abort()
    await pending
    const rows = await eventually(5000, async () => await records(gw), (r) => r.length === 1)
    t.match(rows[0], { model: 'docs/slow', status: 'client_aborted', cost_nano: 0 })
    await eventually(5000, () => gw.mock.methods, (m) => m.includes('notifications/cancelled'))
    t.ok(gw.mock.methods.includes('notifications/cancelled'), 'the server was told to cancel')
  })
})

t.test('keys get MCP grants through the admin API', async (t) => {
  const gw = await gateway(t)
  const admin = { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }
  const created = await fetch(`${gw.base}/admin/v1/keys`, { method: 'POST', headers: admin, body: JSON.stringify({ org: 'acme', project: 'web', mcp: ['docs/echo'] }) })
  t.equal(created.status, 201)
  const k = await created.json() as { id: string, key: string, mcp: string[] }
  t.same(k.mcp, ['docs/echo'])
  const c = await connect(t, gw, k.key)
  t.same((await c.listTools()).tools.map((x) => x.name), ['docs__echo'])
  const patched = await fetch(`${gw.base}/admin/v1/keys/${k.id}`, { method: 'PATCH', headers: admin, body: JSON.stringify({ mcp: ['docs/add', 'docs/slow'] }) })
  t.same((await patched.json() as { mcp: string[] }).mcp, ['docs/add', 'docs/slow'])
  t.same((await c.listTools()).tools.map((x) => x.name).sort(), ['docs__add', 'docs__slow'], 'the change applies to the next request')
  const audit = await (await fetch(`${gw.base}/admin/v1/audit`, { headers: admin })).json() as { data: Array<{ action: string, detail: Record<string, unknown> }> }
  t.same(audit.data.find((e) => e.action === 'key.update')?.detail, { mcp: ['docs/add', 'docs/slow'] }, 'the audit log says so')
  const other = await fetch(`${gw.base}/admin/v1/keys`, { method: 'POST', headers: admin, body: JSON.stringify({ org: 'acme', project: 'web' }) })
  t.same((await other.json() as { mcp: string[] }).mcp, [], 'none by default')
})
