import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js'
import { MockTools, mockServer } from './mock-mcp.js'

// The test MCP server over stdio (test/mock-mcp.ts's tools), which the gateway spawns: run as
// `node .build/test/mcp-stdio-server.js`. It says on stderr that it started (the gateway logs a
// server's stderr), and exits when its stdin closes.

process.stderr.write(`mock MCP server ready (pid ${process.pid})\n`)
await mockServer(new MockTools()).connect(new StdioServerTransport())
process.stdin.on('end', () => { process.exit(0) })
