import { hash } from 'node:crypto'

// The one way the gateway flattens a tool that lives inside something (an MCP server's tool, a
// Responses namespace's function) into a single tool name: `{outer}__{name}`, the separator
// Codex itself uses, made to fit the rule clients and upstreams hold tool names to (1 to 64 of
// [A-Za-z0-9_-]; Claude Code refuses others). A name that had to change (another character, or
// too long) is cleaned, cut, and ends with a short hash of the whole, so that it cannot meet a
// name that needed no change, two tools never share one, and a tool keeps its name across
// restarts.

const VALID = /^[A-Za-z0-9_-]{1,64}$/
const HASH_LENGTH = 8
const MAX_TOOL_NAME = 64

/** `{outer}__{name}`, with no doubled separator where `outer` ends or `name` starts with `_`. */
export function flatToolName (outer: string, name: string): string {
  const joined = `${outer.replace(/_+$/, '')}__${name.replace(/^_+/, '')}`
  if (VALID.test(joined)) return joined
  const tag = hash('sha256', joined, 'hex').slice(0, HASH_LENGTH)
  return `${joined.replace(/[^A-Za-z0-9_-]/g, '_').slice(0, MAX_TOOL_NAME - HASH_LENGTH - 1)}_${tag}`
}
