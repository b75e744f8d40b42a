import { randomUUID } from 'node:crypto'
import { McpError, type JSONRPCMessage, type RequestId } from '@modelcontextprotocol/sdk/types.js'

// The byte cap on what a server behind the gateway answers (`mcp.max_result_mb`). The transports
// count each message's bytes as they arrive (fetch.ts over HTTP, stdio.ts over stdio) and keep
// none past the cap: the message is dropped and the SDK's client is handed, for the request it
// answered, an error of the gateway's own instead. That error carries a mark made at start, which
// no server can know, so that the link tells it from an error a server sent.

const MARK = randomUUID()
const MARK_FIELD = 'modelgate_cut'

/** The error answer given to the client for request `id` in place of one larger than `limitBytes`. */
export function oversizeAnswer (id: RequestId, limitBytes: number): JSONRPCMessage {
  return { jsonrpc: '2.0', id, error: { code: -32603, message: `The answer is larger than ${describeBytes(limitBytes)}`, data: { [MARK_FIELD]: MARK } } }
}

/** Whether a request failed because its answer was larger than the cap (not an error of the server's). */
export function isOversize (err: unknown): boolean {
  return err instanceof McpError && (err.data as Record<string, unknown> | undefined)?.[MARK_FIELD] === MARK
}

/** `mcp.max_result_mb` in bytes. */
export const capBytes = (mb: number): number => Math.floor(mb * 1024 * 1024)

/** A byte count as an operator wrote it: "8 MB", "0.5 MB". */
export function describeBytes (bytes: number): string {
  return `${Math.round(bytes / 1024 / 1024 * 1000) / 1000} MB`
}
