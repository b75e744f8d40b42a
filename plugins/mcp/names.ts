import { hash } from 'node:crypto'

// The names the gateway's own MCP server gives the tools of the servers behind it:
// `{server}__{tool}`. Clients refuse names outside [A-Za-z0-9_-]{1,64} (Claude Code does), so a
// name that is longer, or holds another character, is cleaned and cut, and ends with a short hash
// of the whole name: two tools never share a name, and a tool keeps its name across restarts.

const VALID = /^[A-Za-z0-9_-]{1,64}$/
const HASH_LENGTH = 8
export const MAX_TOOL_NAME = 64

/** The name a tool of `server` is listed and called by at /mcp. */
export function exposedName (server: string, tool: string): string {
  const plain = `${server}__${tool}`
  if (VALID.test(plain)) return plain
  const tag = hash('sha256', plain, 'hex').slice(0, HASH_LENGTH)
  return `${plain.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, MAX_TOOL_NAME - HASH_LENGTH - 1)}_${tag}`
}
