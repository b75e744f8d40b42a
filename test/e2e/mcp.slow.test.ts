import t, { type Test } from 'tap'
import { execFile, spawn } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { fromRoot } from '../../paths.js'
import { childEnv, eventually, KEY_A, spawnGateway, testConfig } from '../helper.js'
import { STDIO_TIMEOUT_S } from '../mcp-gateway.js'
import { mockMcpHttp, streamed } from '../mock-mcp.js'
import { REDIS_URL, scratchDatabase, scratchRedisPrefix, servicesMissing } from '../scratch-services.js'
import { tempDir } from '../temp-dir.js'

// The MCP endpoint end to end: `serve --workers 2` and two instances on PostgreSQL + Redis, where
// any worker and any instance answers any request of a client; `modelgate mcp list`; real MCP
// clients (the MCP SDK's, the MCP Inspector's CLI, and, from test/agents, Claude Code and the
// Gemini CLI, which check that the gateway answers as an HTTP MCP server with a Bearer header);
// and the reference server-everything behind the gateway over stdio. (mcp-memory.test.ts: the
// gateway's memory under results of 50 MB.)

const ADMIN = 'mcp-e2e-admin-token-0123456789ab'
const STDIO_SERVER = fromRoot('.build', 'test', 'mcp-stdio-server.js')
const EVERYTHING = fromRoot('node_modules', '@modelcontextprotocol', 'server-everything', 'dist', 'index.js')
const INSPECTOR = fromRoot('node_modules', '@modelcontextprotocol', 'inspector-cli', 'build')
const CLAUDE = fromRoot('test', 'agents', 'node_modules', '.bin', 'claude')
const GEMINI = fromRoot('test', 'agents', 'node_modules', '.bin', 'gemini')
const NOT_INSTALLED = 'test/agents is not installed: run `npm ci --prefix test/agents`'

interface Run { code: number | null, stdout: string, stderr: string }

function run (file: string, args: string[], opts: { cwd?: string, env?: Record<string, string>, timeout?: number } = {}): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(file, args, { cwd: opts.cwd, timeout: opts.timeout ?? 60_000, stdio: ['ignore', 'pipe', 'pipe'], env: childEnv(opts.env) })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => { stdout += String(d) })
    child.stderr.on('data', (d: Buffer) => { stderr += String(d) })
    child.on('close', (code) => { resolve({ code, stdout, stderr }) })
  })
}

const modelgate = (args: string[]): Promise<Run> => new Promise((resolve) => {
  execFile(process.execPath, [fromRoot('dist', 'cli', 'index.js'), ...args], { env: childEnv() }, (err, stdout, stderr) => {
    resolve({ code: err === null ? 0 : (err as { code?: number }).code ?? 1, stdout, stderr })
  })
})

/**
 * An MCP SDK client on `bases` in turn: each request on a new connection to the next one, as a
 * client may send them (the session is in no connection), so that they reach every worker or instance.
 */
async function client (t: Test, bases: string[], key: string): Promise<Client> {
  let n = 0
  const c = new Client({ name: 'e2e', version: '1.0.0' })
  await c.connect(new StreamableHTTPClientTransport(new URL(`${bases[0] as string}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${key}`, connection: 'close' } },
    fetch: async (url, init) => {
      const base = bases[n++ % bases.length] as string
      return await fetch(new URL(new URL(url).pathname, base), init)
    }
  }))
  t.teardown(() => c.close())
  return c
}

const textOf = (r: unknown): string => (r as CallToolResult).content.map((c) => c.type === 'text' ? c.text : '').join('')
const alive = (pid: number): boolean => { try { process.kill(pid, 0); return true } catch { return false } }

t.test('serve --workers 2: any worker answers any request of a client; mcp list asks the running gateway', async (t) => {
  const dir = tempDir('mcp-workers')
  // the config names the server by a path relative to its own folder
  writeFileSync(join(dir, 'server.mjs'), `import ${JSON.stringify(STDIO_SERVER)}\n`)
  const config = {
    admin: { token: ADMIN },
    plugins: [{ name: 'auth' }, { name: 'quota' }, { name: 'usage' }],
    mcp: { servers: [{ id: 'files', transport: 'stdio', command: process.execPath, args: ['./server.mjs'], pricing: { per_call: 0.01 } }] },
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, mcp: ['files/*'], limits: { rpm: 12 } }] }] }]
  }
  const gw = await spawnGateway(t, { ...config, store: { sqlite: join(dir, 'gw.db') } }, ['--workers', '2'], {}, dir)
  const base = `http://127.0.0.1:${gw.port}`
  const admin = { authorization: `Bearer ${ADMIN}` }
  const servers = async (): Promise<{ workers: number, data: Array<{ status: string, tools: string[], workers: Array<{ pid: number }> }> }> => await (await fetch(`${base}/admin/v1/mcp/servers`, { headers: admin })).json() as never
  const view = await eventually(15_000, servers, (v) => v.workers === 2 && v.data[0]?.status === 'ready')
  t.equal(view.workers, 2, 'both workers report')
  t.equal(view.data[0]?.status, 'ready', 'each spawned its server, from the path relative to the config file')
  t.ok(view.data[0]?.tools.includes('pid'))

  const c = await client(t, [base], KEY_A)
  const parents = new Set<number>()
  const children = new Set<number>()
  for (let i = 0; i < 12; i++) {
    const who = JSON.parse(textOf(await c.callTool({ name: 'files__pid' }))) as { pid: number, ppid: number }
    parents.add(who.ppid)
    children.add(who.pid)
  }
  t.equal(parents.size, 2, 'the calls of one client reached both workers, each through its own server process')
  t.match((await c.callTool({ name: 'files__pid' }).catch((e: unknown) => e)), { code: -32000, data: { status: 429 } }, 'the key\'s rpm holds across the workers')
  const usage = await (await fetch(`${base}/admin/v1/usage?endpoint=mcp.tools_call`, { headers: admin })).json() as { data: Array<{ cost_usd: string, status: string, error: string | null }> }
  t.equal(usage.data.length, 13, 'every call recorded, the refused one too')
  t.equal(usage.data.filter((r) => r.cost_usd === '0.01' && r.status === 'ok').length, 12)
  t.match(usage.data.filter((r) => r.status === 'refused'), [{ cost_usd: '0', error: 'key_rate_limited' }], 'the call over the key\'s rpm, refused')

  // the same config file: the pid file beside its store leads to the running gateway
  const listed = await modelgate(['mcp', 'list', '--config', join(dir, 'gw.json')])
  t.equal(listed.code, 0, `mcp list exits 0${listed.code === 0 ? '' : `: ${listed.stderr}`}`)
  t.match(listed.stderr, new RegExp(`as seen by the gateway at http://127\\.0\\.0\\.1:${gw.port}`))
  t.match(listed.stdout, /^files\tstdio\tready\t\d+ tools: echo, add, slow/m)
  const json = await modelgate(['mcp', 'list', '--json', '--config', join(dir, 'gw.json')])
  t.match(JSON.parse(json.stdout), [{ id: 'files', transport: 'stdio', status: 'ready', workers: [{}, {}] }])

  // a reload: every worker serves the servers the file names now, and ends the processes it spawned before
  const mock = await mockMcpHttp()
  t.teardown(() => mock.close())
  writeFileSync(join(dir, 'gw.json'), JSON.stringify({
    server: { port: 0 },
    ...config,
    store: { sqlite: join(dir, 'gw.db') },
    mcp: { servers: [...config.mcp.servers, { id: 'docs', transport: 'http', url: mock.url }] },
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, mcp: ['files/*', 'docs/*'], limits: { rpm: 12 } }] }] }]
  }))
  const reloaded = await (await fetch(`${base}/admin/v1/reload`, { method: 'POST', headers: admin })).json() as { changes: string[], workers: number }
  t.equal(reloaded.workers, 2)
  t.ok(reloaded.changes.includes('mcp.servers: added docs'), `the change said: ${reloaded.changes.join('; ')}`)
  for (let i = 0; i < 4; i++) {
    const names = (await c.listTools()).tools.map((x) => x.name)
    t.ok(names.includes('docs__echo') && names.includes('files__pid'), `after the reload, worker answer ${i + 1}: both servers' tools`)
  }
  await eventually(10_000, () => [...children].filter(alive), (l) => l.length === 0)
  t.same([...children].filter(alive), [], 'the stdio processes of the configuration before are gone')

  gw.kill('SIGTERM')
  t.equal(await gw.exited, 0)
})

t.test('modelgate mcp list with no gateway running: it connects to each server itself', async (t) => {
  const dir = tempDir('mcp-list')
  const file = join(dir, 'gw.json')
  writeFileSync(file, JSON.stringify({
    store: { sqlite: join(dir, 'gw.db') },
    mcp: { servers: [{ id: 'files', transport: 'stdio', command: process.execPath, args: [STDIO_SERVER] }, { id: 'gone', transport: 'http', url: 'http://127.0.0.1:9/mcp', timeout_s: 3 }] }
  }))
  const listed = await modelgate(['mcp', 'list', '--config', file])
  t.equal(listed.code, 1, 'a server that is not ready: exit status 1')
  t.match(listed.stderr, /as seen by this command/)
  t.match(listed.stdout, /^files\tstdio\tready\t\d+ tools: /m)
  t.match(listed.stdout, /^gone\thttp\tdown\tno tools\t\(.*ECONNREFUSED/m)
})

t.test('real clients: the MCP Inspector CLI; server-everything over stdio behind the gateway', async (t) => {
  const mock = await mockMcpHttp()
  const app: FastifyInstance = await buildApp(testConfig({
    plugins: [{ name: 'auth' }, { name: 'usage' }],
    // (the config's request_timeout_s of 5 s would be the servers' too: server-everything loads
    // hundreds of modules, which a loaded machine can take longer than that to start)
    mcp: { servers: [{ id: 'docs', transport: 'http', url: mock.url }, { id: 'everything', transport: 'stdio', command: process.execPath, args: [EVERYTHING, 'stdio'], timeout_s: STDIO_TIMEOUT_S }] },
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, mcp: ['*'] }] }] }]
  }))
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { await app.close(); await mock.close() })
  const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}/mcp`

  const c = await client(t, [url.replace(/\/mcp$/, '')], KEY_A)
  const tools = (await c.listTools()).tools.map((x) => x.name)
  t.ok(tools.includes('everything__echo') && tools.includes('everything__get-sum'), 'server-everything\'s tools, by the gateway')
  t.equal(textOf(await c.callTool({ name: 'everything__echo', arguments: { message: 'hello' } })), 'Echo: hello')
  t.match(textOf(await c.callTool({ name: 'everything__get-sum', arguments: { a: 2, b: 40 } })), /42/)
  // (read from the wire: the SDK's client may drop a progress notification that comes in one read with the result)
  const messages = await streamed(url.replace(/\/mcp$/, ''), { jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'everything__trigger-long-running-operation', arguments: { duration: 0.3, steps: 3 }, _meta: { progressToken: 42 } } }, KEY_A)
  t.same(messages.map((m) => (m.params as { progress?: number } | undefined)?.progress ?? 'result'), [1, 2, 3, 'result'], 'its progress notifications, relayed, then its result')

  // (the Inspector's CLI finds its package.json from the folder it runs in: it runs from its own)
  const inspector = async (args: string[], key = KEY_A): Promise<Run> => await run(process.execPath, [join(INSPECTOR, 'cli.js'), '--cli', url, '--transport', 'http', '--header', `Authorization: Bearer ${key}`, ...args], { cwd: INSPECTOR })
  const list = await inspector(['--method', 'tools/list'])
  t.equal(list.code, 0, `the Inspector lists the tools${list.code === 0 ? '' : `: ${list.stderr}`}`)
  const listed = JSON.parse(list.stdout.slice(list.stdout.indexOf('{'))) as { tools: Array<{ name: string }> }
  t.ok(listed.tools.some((x) => x.name === 'docs__echo') && listed.tools.some((x) => x.name === 'everything__echo'))
  const called = await inspector(['--method', 'tools/call', '--tool-name', 'docs__echo', '--tool-arg', 'text=inspected'])
  t.equal(called.code, 0, `the Inspector calls one${called.code === 0 ? '' : `: ${called.stderr}`}`)
  t.same(JSON.parse(called.stdout.slice(called.stdout.indexOf('{'))), { content: [{ type: 'text', text: 'inspected' }] })
  const refused = await inspector(['--method', 'tools/list'], 'mg-not-a-key-0123456789abcdef')
  t.not(refused.code, 0)
  t.match(refused.stdout + refused.stderr, /Invalid or missing API key/)
  const rows = await app.gateway.store.usage.page({}, 20)
  t.same(rows.map((r) => r.model).sort(), ['docs/echo', 'everything/echo', 'everything/get-sum', 'everything/trigger-long-running-operation'])
})

// what the agent CLIs reach besides the gateway (update checks, usage statistics) goes through
// HTTPS_PROXY: a listener that takes note of each connection and closes it
async function proxyTrap (t: Test): Promise<string> {
  const server = createServer((socket) => {
    socket.on('error', () => {})
    setTimeout(() => socket.destroy(), 50)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return `http://127.0.0.1:${(server.address() as { port: number }).port}`
}

t.test('Claude Code and the Gemini CLI, given the gateway as an HTTP MCP server with a Bearer header, connect to it', { skip: existsSync(CLAUDE) && existsSync(GEMINI) ? false : NOT_INSTALLED }, async (t) => {
  const mock = await mockMcpHttp()
  const app: FastifyInstance = await buildApp(testConfig({
    plugins: [{ name: 'auth' }],
    mcp: { servers: [{ id: 'docs', transport: 'http', url: mock.url }] },
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, mcp: ['*'] }] }] }]
  }))
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { await app.close(); await mock.close() })
  const url = `http://127.0.0.1:${(app.server.address() as { port: number }).port}/mcp`
  const trap = await proxyTrap(t)
  const proxy = { HTTPS_PROXY: trap, HTTP_PROXY: trap, NO_PROXY: '127.0.0.1,localhost' }

  for (const [key, expected] of [[KEY_A, /modelgate: .*\(HTTP\) - ✔ Connected/], ['mg-not-a-key-0123456789abcdef', /modelgate: .*\(HTTP\) - ✘/]] as const) {
    const home = tempDir('claude-home')
    const env = { HOME: home, CLAUDE_CONFIG_DIR: join(home, '.claude'), DISABLE_AUTOUPDATER: '1', CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1', ...proxy }
    const added = await run(CLAUDE, ['mcp', 'add', '--transport', 'http', 'modelgate', url, '--header', `Authorization: Bearer ${key}`], { cwd: home, env })
    t.equal(added.code, 0, `claude mcp add${added.code === 0 ? '' : `: ${added.stderr}`}`)
    const listed = await run(CLAUDE, ['mcp', 'list'], { cwd: home, env })
    t.match(listed.stdout, expected, `claude mcp list with ${key === KEY_A ? 'the key' : 'a bad key'}`)
  }

  for (const [key, expected] of [[KEY_A, /✓ modelgate: .*\(http\) - Connected/], ['mg-not-a-key-0123456789abcdef', /✗ modelgate: .*\(http\) - Disconnected/]] as const) {
    const home = tempDir('gemini-home')
    mkdirSync(join(home, '.gemini'))
    writeFileSync(join(home, '.gemini', 'settings.json'), JSON.stringify({
      security: { auth: { selectedType: 'gemini-api-key' } },
      privacy: { usageStatisticsEnabled: false },
      telemetry: { enabled: false },
      general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
      mcpServers: { modelgate: { httpUrl: url, headers: { Authorization: `Bearer ${key}` } } }
    }))
    const env = { HOME: home, GEMINI_CLI_HOME: home, GEMINI_CLI_SYSTEM_SETTINGS_PATH: join(home, 'system-settings.json'), GEMINI_API_KEY: 'unused', GEMINI_CLI_TRUST_WORKSPACE: 'true', GEMINI_TELEMETRY_ENABLED: 'false', ...proxy }
    const listed = await run(GEMINI, ['mcp', 'list'], { cwd: home, env, timeout: 90_000 })
    t.match(listed.stdout + listed.stderr, expected, `gemini mcp list with ${key === KEY_A ? 'the key' : 'a bad key'}`)
  }
  t.ok(mock.methods.includes('initialize'), 'the gateway reached its server behind')
})

t.test('two instances on PostgreSQL + Redis: one client\'s requests on both, its rpm, its revocation and its records shared', async (t) => {
  const missing = await servicesMissing()
  if (missing !== null) { t.plan(0, `PostgreSQL or Redis not reachable (${missing})`); return }
  const url = await scratchDatabase(t)
  const mock = await mockMcpHttp()
  t.teardown(() => mock.close())
  const config = {
    store: { postgres: url, redis: REDIS_URL, redis_prefix: scratchRedisPrefix(t, 'mgmcp') },
    admin: { token: ADMIN },
    plugins: [{ name: 'auth' }, { name: 'quota' }, { name: 'usage' }],
    mcp: { servers: [{ id: 'docs', transport: 'http', url: mock.url, pricing: { per_call: 0.002 } }] },
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, mcp: ['docs/*'], limits: { rpm: 6 } }] }] }]
  }
  const a = await spawnGateway(t, config, ['--workers', '1'])
  const b = await spawnGateway(t, config, ['--workers', '1'])
  const bases = [`http://127.0.0.1:${a.port}`, `http://127.0.0.1:${b.port}`]
  // initialize on one instance, then every request on the other one in turn
  const c = await client(t, bases, KEY_A)
  t.ok((await c.listTools()).tools.some((x) => x.name === 'docs__echo'))
  for (let i = 0; i < 6; i++) t.equal(textOf(await c.callTool({ name: 'docs__echo', arguments: { text: `#${i}` } })), `#${i}`)
  t.match(await c.callTool({ name: 'docs__echo', arguments: { text: 'seventh' } }).catch((e: unknown) => e), { data: { status: 429 } }, 'rpm 6 across the two instances')
  const admin = { authorization: `Bearer ${ADMIN}` }
  const usage = await (await fetch(`${bases[1] as string}/admin/v1/usage?endpoint=mcp.tools_call&status=ok`, { headers: admin })).json() as { data: Array<{ cost_usd: string }> }
  t.equal(usage.data.length, 6, 'either instance lists every record')
  t.ok(usage.data.every((r) => r.cost_usd === '0.002'))
  const overRpm = await (await fetch(`${bases[0] as string}/admin/v1/usage?endpoint=mcp.tools_call&status=refused`, { headers: admin })).json() as { data: Array<{ error: string }> }
  t.match(overRpm.data, [{ error: 'key_rate_limited' }], 'and the refused one')

  const keys = await (await fetch(`${bases[0] as string}/admin/v1/keys`, { headers: admin })).json() as { data: Array<{ id: string }> }
  t.equal((await fetch(`${bases[0] as string}/admin/v1/keys/${keys.data[0]?.id as string}`, { method: 'DELETE', headers: admin })).status, 200)
  const refused = await eventually(3000, async () => await c.listTools().then(() => null, (e: unknown) => e as Error), (e) => e !== null)
  t.match(refused?.message, /401/, 'a key revoked on one instance is refused by both, for a client already connected')
})
