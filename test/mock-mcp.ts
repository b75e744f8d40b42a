import { createServer, type IncomingMessage, type Server as HttpServer, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { randomUUID } from 'node:crypto'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { CallToolRequestSchema, ListToolsRequestSchema, type CallToolResult, type Tool } from '@modelcontextprotocol/sdk/types.js'

// An MCP server for the tests, built on the MCP SDK's low-level Server (tools with plain JSON
// Schemas, names of any shape): served over Streamable HTTP with sessions (mockMcpHttp), or over
// stdio (test/mcp-stdio-server.ts, which the gateway spawns). Its tools:
//   echo {text}        the text back
//   add {a, b}         the sum, as text and as structured content (with an outputSchema)
//   slow {ms}          answers after ms, with a progress notification every 20 ms when asked for
//   fail               a result with isError: true
//   leak               a text holding something shaped like a provider key
//   pid                the process's pid and its parent's (the gateway worker that spawned it)
//   crash              (stdio) exits the process
//   reject             a JSON-RPC error of its own (-32602)
//   files.read, and a tool whose name is too long for a client: names the gateway must rewrite
//   remember {text}    keeps the text in the session (over HTTP) or the process (over stdio)
//   recall             what remember kept there
//   big {mb}           a text of mb megabytes
//   whoami             the Authorization header it was sent (HTTP), or $MOCK_SECRET (stdio), as text and structured content
//   deny               a JSON-RPC error whose message and data echo that credential
//   report             a progress notification whose message echoes it, then a result
// `addTool` adds one at run time and tells every connected client its tools changed.

const str = { type: 'string' } as const
const obj = (properties: Record<string, object> = {}, required: string[] = []): Tool['inputSchema'] => ({ type: 'object', properties, required })

export const LONG_TOOL = 'a_tool_whose_name_is_far_too_long_for_any_client_to_accept_as_it_is'

export const BASE_TOOLS: Tool[] = [
  { name: 'echo', description: 'Echoes the text back', inputSchema: obj({ text: str }, ['text']) },
  { name: 'add', description: 'Adds two numbers', inputSchema: obj({ a: { type: 'number' }, b: { type: 'number' } }, ['a', 'b']), outputSchema: obj({ sum: { type: 'number' } }, ['sum']) },
  { name: 'slow', description: 'Answers after ms milliseconds', inputSchema: obj({ ms: { type: 'number' } }, ['ms']) },
  { name: 'fail', description: 'Always fails', inputSchema: obj() },
  { name: 'leak', description: 'Returns a secret', inputSchema: obj() },
  { name: 'pid', description: 'The server process and its parent', inputSchema: obj() },
  { name: 'crash', description: 'Exits the server process', inputSchema: obj() },
  { name: 'reject', description: 'Answers a JSON-RPC error', inputSchema: obj() },
  { name: 'files.read', description: 'A name with a dot', inputSchema: obj({ path: str }) },
  { name: LONG_TOOL, description: 'A name too long for clients', inputSchema: obj() },
  { name: 'remember', description: 'Keeps a text in this session', inputSchema: obj({ text: str }, ['text']) },
  { name: 'recall', description: 'The text this session keeps', inputSchema: obj() },
  { name: 'big', description: 'A text of mb megabytes', inputSchema: obj({ mb: { type: 'number' } }, ['mb']) },
  { name: 'whoami', description: 'The credential it was given', inputSchema: obj() },
  { name: 'deny', description: 'An error naming the credential it was given', inputSchema: obj() },
  { name: 'report', description: 'Progress naming the credential it was given', inputSchema: obj() }
]

export const LEAKED = 'the key is sk-abcdefghijklmnopqrstuvwxyz0123456789'

const text = (t: string): CallToolResult => ({ content: [{ type: 'text', text: t }] })
const sleep = async (ms: number): Promise<void> => { await new Promise((resolve) => setTimeout(resolve, ms)) }

export interface SeenCall { name: string, arguments: Record<string, unknown>, headers: Record<string, string | string[] | undefined> }

/** What one session (HTTP) or process (stdio) of the mock keeps. */
export interface Memory { text: string }

/** The credential a call came with: its Authorization header over HTTP, $MOCK_SECRET over stdio. */
const credential = (headers: SeenCall['headers'] | undefined): string => String(headers?.authorization ?? process.env.MOCK_SECRET ?? '')

/** The tools and what calling them does; shared by the HTTP and stdio servers. */
export class MockTools {
  readonly tools: Tool[] = [...BASE_TOOLS]
  readonly calls: SeenCall[] = []

  async call (name: string, args: Record<string, unknown>, extra: { progress?: (n: number, message?: string) => Promise<void>, headers?: SeenCall['headers'], memory?: Memory }): Promise<CallToolResult> {
    this.calls.push({ name, arguments: args, headers: extra.headers ?? {} })
    switch (name) {
      case 'echo': return text(String(args.text))
      case 'add': {
        const sum = Number(args.a) + Number(args.b)
        return { content: [{ type: 'text', text: String(sum) }], structuredContent: { sum } }
      }
      case 'slow': {
        const ms = Number(args.ms)
        for (let waited = 0; waited < ms; waited += 20) {
          await sleep(Math.min(20, ms - waited))
          await extra.progress?.(waited + 20)
        }
        return text(`waited ${ms} ms`)
      }
      case 'fail': return { isError: true, content: [{ type: 'text', text: 'it failed' }] }
      case 'leak': return { content: [{ type: 'text', text: LEAKED }], structuredContent: { note: LEAKED } }
      case 'pid': return text(JSON.stringify({ pid: process.pid, ppid: process.ppid }))
      case 'crash': setImmediate(() => process.exit(3)); return text('exiting')
      case 'remember': if (extra.memory !== undefined) extra.memory.text = String(args.text); return text('kept')
      case 'recall': return text(`kept: ${extra.memory?.text ?? ''}`)
      case 'big': return text('x'.repeat(Math.floor(Number(args.mb) * 1024 * 1024)))
      case 'whoami': return { content: [{ type: 'text', text: `called with ${credential(extra.headers)}` }], structuredContent: { credential: credential(extra.headers) } }
      case 'report': await extra.progress?.(1, `working as ${credential(extra.headers)}`); return text('reported')
      default: return text(`${name} called with ${JSON.stringify(args)}`)
    }
  }
}

/** An SDK Server answering with `tools`. */
export function mockServer (tools: MockTools, headers?: () => SeenCall['headers']): Server {
  const server = new Server({ name: 'mock-mcp', version: '1.0.0' }, { capabilities: { tools: { listChanged: true } } })
  const memory: Memory = { text: '' }
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: tools.tools }))
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const { name } = request.params
    if (name === 'reject' || name === 'deny') {
      const { McpError } = await import('@modelcontextprotocol/sdk/types.js')
      if (name === 'reject') throw new McpError(-32602, 'the mock refuses this call', { why: 'asked to' })
      const seen = credential(headers?.())
      throw new McpError(-32603, `the credential ${seen} may not do this`, { seen, nested: [{ again: seen }] })
    }
    const token = request.params._meta?.progressToken
    return await tools.call(name, request.params.arguments ?? {}, {
      headers: headers?.(),
      memory,
      progress: token === undefined
        ? undefined
        : async (n, message) => { await extra.sendNotification({ method: 'notifications/progress', params: { progressToken: token, progress: n, ...(message === undefined ? {} : { message }) } }) }
    })
  })
  return server
}

export interface MockMcpHttp {
  url: string
  port: number
  tools: MockTools
  /** Requests received, by JSON-RPC method. */
  methods: string[]
  /** Stops answering (connections refused) until restart(); its sessions are forgotten. */
  stop: () => Promise<void>
  restart: () => Promise<void>
  /** Adds a tool and tells every session its tools changed. */
  addTool: (tool: Tool) => Promise<void>
  close: () => Promise<void>
}

async function readBody (req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = []
  for await (const c of req) chunks.push(c as Buffer)
  const raw = Buffer.concat(chunks).toString('utf8')
  return raw === '' ? undefined : JSON.parse(raw)
}

/** A Streamable HTTP MCP server with sessions, at http://127.0.0.1:<port>/mcp; `json`: it answers JSON rather than event streams. */
export async function mockMcpHttp (port = 0, opts: { json?: boolean } = {}): Promise<MockMcpHttp> {
  const tools = new MockTools()
  const methods: string[] = []

  let sessions = new Map<string, { transport: StreamableHTTPServerTransport, server: Server }>()
  let current: SeenCall['headers'] = {}

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    if (!(req.url ?? '').startsWith('/mcp')) { res.writeHead(404).end(); return }
    const body = req.method === 'POST' ? await readBody(req) : undefined
    for (const m of Array.isArray(body) ? body : [body]) if (typeof (m as { method?: unknown } | undefined)?.method === 'string') methods.push((m as { method: string }).method)
    current = req.headers
    const sid = req.headers['mcp-session-id']
    let session = typeof sid === 'string' ? sessions.get(sid) : undefined
    if (session === undefined) {
      if (typeof sid === 'string') {
        res.writeHead(404, { 'content-type': 'application/json' }).end(JSON.stringify({ jsonrpc: '2.0', error: { code: -32001, message: 'Session not found' }, id: null }))
        return
      }
      const transport: StreamableHTTPServerTransport = new StreamableHTTPServerTransport({
        sessionIdGenerator: () => randomUUID(),
        enableJsonResponse: opts.json === true,
        onsessioninitialized: (id) => { sessions.set(id, s) }
      })
      const server = mockServer(tools, () => current)
      const s = { transport, server }
      transport.onclose = () => { if (transport.sessionId !== undefined) sessions.delete(transport.sessionId) }
      await server.connect(transport)
      session = s
    }
    await session.transport.handleRequest(req, res, body)
  }

  let http: HttpServer | null = null
  const listen = async (p: number): Promise<number> => {
    const s = createServer((req, res) => { handle(req, res).catch((err: unknown) => { if (!res.headersSent) res.writeHead(500).end(String(err)) }) })
    // a result of tens of MB keeps this process busy for seconds: Node's 5 s would then close a
    // kept-alive connection the gateway has just sent its next request on
    s.keepAliveTimeout = 60_000
    http = s
    await new Promise<void>((resolve) => s.listen(p, '127.0.0.1', resolve))
    return (s.address() as AddressInfo).port
  }
  const stop = async (): Promise<void> => {
    const s = http
    http = null
    for (const { transport } of sessions.values()) await transport.close().catch(() => {})
    sessions = new Map()
    if (s !== null) {
      s.closeAllConnections()
      await new Promise<void>((resolve) => s.close(() => { resolve() }))
    }
  }
  const bound = await listen(port)
  return {
    url: `http://127.0.0.1:${bound}/mcp`,
    port: bound,
    tools,
    methods,
    stop,
    restart: async () => { await listen(bound) },
    addTool: async (tool) => {
      tools.tools.push(tool)
      for (const { server } of sessions.values()) await server.sendToolListChanged().catch(() => {})
    },
    close: stop
  }
}

/**
 * The JSON-RPC messages of a request's event stream, in order, as they were sent (the SDK's client
 * drops a progress notification that arrives in the same read as the result:
 * modelcontextprotocol/typescript-sdk#2580).
 */
export async function streamed (base: string, body: unknown, key: string): Promise<Array<Record<string, unknown>>> {
  const res = await fetch(base + '/mcp', { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' }, body: JSON.stringify(body) })
  if (!(res.headers.get('content-type') ?? '').startsWith('text/event-stream')) throw new Error(`not an event stream: ${res.status} ${await res.text()}`)
  return (await res.text()).split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6)) as Record<string, unknown>)
}
