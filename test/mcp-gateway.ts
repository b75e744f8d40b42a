import type { Test } from 'tap'
import { Writable } from 'node:stream'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import { McpError, type CallToolResult } from '@modelcontextprotocol/sdk/types.js'
import type { FastifyInstance } from 'fastify'
import { fromRoot } from '../paths.js'
import type { UsageRow } from '../engine/store/types.js'
import { build, KEY_A, KEY_B, KEY_OTHER_ORG, type BuildExtras } from './helper.js'
import { mockMcpHttp, type MockMcpHttp } from './mock-mcp.js'

// A gateway with MCP servers behind it for the MCP route tests: the HTTP mock of test/mock-mcp.ts
// as `docs` (with a credential in its headers), and the stdio one as `files` when asked; its log
// kept; and how a client reaches it (the MCP SDK's client, or fetch as a client without it).

export const STDIO = fromRoot('.build', 'test', 'mcp-stdio-server.js')
export const ADMIN = 'mcp-admin-token-0123456789abcdef'
/** How long a stdio server of the tests may take to start (a loaded machine starts a process slowly). */
export const STDIO_TIMEOUT_S = 30
/** The credential the gateway sends the `docs` server. */
export const UPSTREAM_TOKEN = 'upstream-token'

export interface Gw { app: FastifyInstance, base: string, mock: MockMcpHttp, logs: Array<Record<string, unknown>> }

export const tenants = (keys: Record<string, unknown> = {}, org: Record<string, unknown> = {}): unknown[] => [
  {
    org: 'acme',
    balance_usd: 25,
    ...org,
    projects: [{
      id: 'web',
      keys: [
        { key: KEY_A, models: ['*'], mcp: ['docs/*', 'files/echo', 'files/pid', 'files/crash'], ...keys },
        { key: KEY_B, models: ['*'] }
      ]
    }]
  },
  { org: 'zeta', projects: [{ id: 'app', keys: [{ key: KEY_OTHER_ORG, mcp: ['*'] }] }] }
]

export interface GatewayOptions {
  plugins?: unknown[]
  servers?: (mock: MockMcpHttp) => unknown[]
  tenants?: unknown[]
  /** The stdio server `files` too; 'shared': with `shared: true`. */
  stdio?: boolean | 'shared'
  /** The mcp section's other keys (max_result_mb, max_sessions, session_idle_s). */
  mcp?: Record<string, unknown>
  /** The HTTP mock answers JSON rather than event streams. */
  json?: boolean
  extras?: BuildExtras
  metrics?: boolean
}

export async function gateway (t: Test, opts: GatewayOptions = {}): Promise<Gw> {
  const mock = await mockMcpHttp(0, { json: opts.json })
  t.teardown(() => mock.close())
  const logs: Array<Record<string, unknown>> = []
  const stream = new Writable({ write (chunk, _enc, cb) { for (const l of String(chunk).split('\n')) if (l !== '') logs.push(JSON.parse(l)); cb() } })
  const servers = opts.servers?.(mock) ?? [
    { id: 'docs', transport: 'http', url: mock.url, headers: { Authorization: `Bearer ${UPSTREAM_TOKEN}` }, pricing: { per_call: 0.001 } },
    ...(opts.stdio === undefined || opts.stdio === false ? [] : [{ id: 'files', transport: 'stdio', command: process.execPath, args: [STDIO], timeout_s: STDIO_TIMEOUT_S, ...(opts.stdio === 'shared' ? { shared: true } : {}) }])
  ]
  const app = await build(t, {
    plugins: opts.plugins ?? [{ name: 'auth' }, { name: 'quota' }, { name: 'usage' }],
    admin: { token: ADMIN },
    metrics: { enabled: opts.metrics === true, auth: 'open' },
    mcp: { servers, ...opts.mcp },
    tenants: opts.tenants ?? tenants()
  }, { logger: { level: 'info', stream }, ...opts.extras })
  await app.listen({ host: '127.0.0.1', port: 0 })
  return { app, base: `http://127.0.0.1:${(app.server.address() as { port: number }).port}`, mock, logs }
}

export async function connect (t: Test, gw: Gw, key: string, path = '/mcp'): Promise<Client> {
  const client = new Client({ name: 'test', version: '1.0.0' })
  await client.connect(new StreamableHTTPClientTransport(new URL(gw.base + path), { requestInit: { headers: { Authorization: `Bearer ${key}` } } }))
  t.teardown(() => client.close())
  return client
}

/** A JSON-RPC request to the endpoint with fetch, as a client without the SDK sends it. */
export async function rpc (gw: Gw, body: unknown, headers: Record<string, string> = {}, path = '/mcp'): Promise<{ status: number, headers: Headers, body: Record<string, unknown> }> {
  const res = await fetch(gw.base + path, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream', ...headers }, body: JSON.stringify(body) })
  const text = await res.text()
  return { status: res.status, headers: res.headers, body: text === '' ? {} : JSON.parse(text) as Record<string, unknown> }
}

export const call = (name: string, args: Record<string, unknown> = {}, id = 1): unknown => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: args } })
export const textOf = (r: unknown): string => (r as CallToolResult).content.map((c) => c.type === 'text' ? c.text : '').join('')
export const records = async (gw: Gw): Promise<UsageRow[]> => await gw.app.gateway.store.usage.page({}, 100)

/** The JSON-RPC error a request was answered with. */
export async function refusal (p: Promise<unknown>): Promise<McpError> {
  try {
    await p
  } catch (err) {
    if (err instanceof McpError) return err
    throw err
  }
  throw new Error('the call was not refused')
}
