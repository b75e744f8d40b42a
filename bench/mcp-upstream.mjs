// An MCP server that costs little, for the MCP figure: Streamable HTTP on the MCP SDK (its
// low-level Server, stateless, JSON answers), one tool `echo` that answers with its text. What the
// gateway adds to a tools/call is measured against calling it straight. Prints its port on stdout.
import { createServer } from 'node:http'
import { Server } from '@modelcontextprotocol/sdk/server/index.js'
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js'
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js'

const TOOLS = [{ name: 'echo', description: 'Echoes the text back', inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] } }]

function mcpServer () {
  const server = new Server({ name: 'bench-mcp', version: '1.0.0' }, { capabilities: { tools: {} } })
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: TOOLS }))
  server.setRequestHandler(CallToolRequestSchema, async (request) => ({ content: [{ type: 'text', text: String(request.params.arguments?.text ?? '') }] }))
  return server
}

const http = createServer((req, res) => {
  let body = ''
  req.setEncoding('utf8')
  req.on('data', (d) => { body += d })
  req.on('end', async () => {
    if (req.method !== 'POST') { res.writeHead(405, { allow: 'POST' }).end(); return }
    // the SDK's stateless mode: a server and a transport for each request
    const server = mcpServer()
    const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true })
    res.on('close', () => { void transport.close(); void server.close() })
    await server.connect(transport)
    await transport.handleRequest(req, res, JSON.parse(body))
  })
})
http.keepAliveTimeout = 60_000
http.listen(0, '127.0.0.1', () => { process.stdout.write(`listening ${http.address().port}\n`) })
