import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { WebStandardStreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js'
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv-provider.js'
import {
  CallToolRequestSchema, ListToolsRequestSchema,
  type CallToolRequest, type CallToolResult, type Progress, type Tool
} from '@modelcontextprotocol/sdk/types.js'

// The gateway's own MCP server, named `modelgate`, with the tools capability, on the MCP SDK's
// Server and its Streamable HTTP transport. The gateway keeps no session: each HTTP request is
// answered by a server and a transport made for it alone (the SDK's stateless mode), so that any
// worker of any instance answers any request of a client, and every request is authenticated
// and admitted anew. What the tools are and how a call goes are the caller's (`Handlers`).

export interface Handlers {
  /** The tools the caller may see. */
  list: () => Promise<Tool[]>
  /**
   * A tools/call; `progress` relays the server's progress notifications to the client (null
   * when the client asked for none). Rejects with a JsonRpcError to answer an error.
   */
  call: (params: CallToolRequest['params'], progress: ((p: Progress) => void) | null) => Promise<CallToolResult>
}

/** An error answer to a JSON-RPC request, its message as it is (the SDK's McpError prefixes its own). */
export class JsonRpcError extends Error {
  constructor (readonly code: number, message: string, readonly data?: unknown) {
    super(message)
    this.name = 'JsonRpcError'
  }
}

export interface HttpRequestParts {
  method: string
  url: string
  headers: Record<string, string | string[] | undefined>
}

let validator: AjvJsonSchemaValidator | undefined

// the request headers the transport reads
const READ = ['accept', 'content-type', 'mcp-protocol-version', 'mcp-session-id', 'last-event-id'] as const

/** A JSON-RPC message (or a batch) that asks for progress: its answer must be a stream to carry it. */
function asksProgress (body: unknown): boolean {
  const messages = Array.isArray(body) ? body : [body]
  return messages.some((m) => (m as { params?: { _meta?: { progressToken?: unknown } } } | null)?.params?._meta?.progressToken !== undefined)
}

/**
 * Answers one HTTP request to the MCP endpoint (its body already parsed) with the SDK's server and
 * transport; `done(sent)` is to be called once the answer is sent whole (`sent`), or the client
 * left before. A JSON answer unless the request asked for progress, which needs an event stream.
 */
export async function answer (name: string, version: string, req: HttpRequestParts, body: unknown, handlers: Handlers): Promise<{ response: Response, done: (sent: boolean) => void }> {
  // (a Server makes an Ajv instance of its own unless given one: a tenth of a millisecond and more, each request)
  validator ??= new AjvJsonSchemaValidator()
  const server = new Server({ name, version }, { capabilities: { tools: {} }, jsonSchemaValidator: validator })
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: await handlers.list() }))
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const token = request.params._meta?.progressToken
    // notifications go out in order, and all of them before the result
    let sent: Promise<void> = Promise.resolve()
    const progress = token === undefined
      ? null
      : (p: Progress) => { sent = sent.then(async () => { await extra.sendNotification({ method: 'notifications/progress', params: { ...p, progressToken: token } }) }).catch(() => {}) }
    const result = await handlers.call(request.params, progress)
    await sent
    return result
  })
  const transport = new WebStandardStreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: !asksProgress(body) })
  await server.connect(transport)
  const headers = new Headers()
  for (const h of READ) {
    const v = req.headers[h]
    if (v !== undefined) headers.set(h, Array.isArray(v) ? v.join(', ') : v)
  }
  const response = await transport.handleRequest(new Request(`http://gateway${req.url}`, { method: req.method, headers }), { parsedBody: body })
  // an answer sent whole left nothing open; one the client left may hold a stream and its keep-alive timer
  return { response, done: (sent) => { if (!sent) void server.close().catch(() => {}) } }
}
