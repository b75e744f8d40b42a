import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process'
import { PassThrough } from 'node:stream'
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import {
  isJSONRPCErrorResponse, isJSONRPCNotification, isJSONRPCRequest, isJSONRPCResultResponse, JSONRPCMessageSchema,
  type JSONRPCMessage, type RequestId
} from '@modelcontextprotocol/sdk/types.js'
import { describeBytes, oversizeAnswer } from './result-cap.js'

// The stdio transport to a server the gateway spawns. It does what the MCP SDK's
// StdioClientTransport does (a minimal environment plus the configured one, stderr handed over
// as a stream, stdin closed then SIGTERM then SIGKILL to end it) except for how it reads: a
// message, one line of the server's stdout, is kept only up to the byte cap, and one longer than
// that is skipped to its end while the request it answered gets the cap's error (result-cap.ts).
// The SDK's reader grows one buffer by copying it per chunk and, past its limit, closes the
// process, and with it every call in flight and the state of whoever it serves.

/** Bytes kept of each end of a line too long to keep: where its JSON-RPC id is. */
const EDGE = 256
/** How long the process has, at each step of closing it (stdin closed, then SIGTERM), to exit. */
const CLOSE_STEP_MS = 2000

export type LineItem = { line: string } | { head: string, tail: string }

/** The lines of a byte stream, each kept up to `limit` bytes; a longer one comes out as its two ends. */
export class LineReader {
  private parts: Buffer[] = []
  private size = 0
  private head: Buffer | null = null
  private tail: Buffer = Buffer.alloc(0)

  constructor (readonly limit: number) {}

  /** The bytes held now: the start of a line not yet ended, or the ends of one being skipped. */
  get held (): number { return this.head === null ? this.size : this.head.length + this.tail.length }

  push (chunk: Buffer): LineItem[] {
    const out: LineItem[] = []
    let at = 0
    while (at < chunk.length) {
      const nl = chunk.indexOf(0x0a, at)
      this.take(chunk.subarray(at, nl === -1 ? chunk.length : nl))
      if (nl === -1) break
      const item = this.finish()
      if (item !== null) out.push(item)
      at = nl + 1
    }
    return out
  }

  private take (piece: Buffer): void {
    if (piece.length === 0) return
    if (this.head === null && this.size + piece.length <= this.limit) {
      this.parts.push(piece)
      this.size += piece.length
      return
    }
    if (this.head === null) {
      // past the limit: from now on only the ends are kept
      this.head = Buffer.concat([...this.parts, piece], Math.min(EDGE, this.size + piece.length))
      for (const p of this.parts) this.tail = lastBytes(this.tail, p)
      this.parts = []
      this.size = 0
    }
    this.tail = lastBytes(this.tail, piece)
  }

  private finish (): LineItem | null {
    if (this.head !== null) {
      const item = { head: this.head.toString('utf8'), tail: this.tail.toString('utf8') }
      this.head = null
      this.tail = Buffer.alloc(0)
      return item
    }
    const line = Buffer.concat(this.parts, this.size).toString('utf8').replace(/\r$/, '')
    this.parts = []
    this.size = 0
    return line === '' ? null : { line }
  }
}

/** The last EDGE bytes of `before` followed by `piece`, copied (a chunk's slice would keep the chunk). */
function lastBytes (before: Buffer, piece: Buffer): Buffer {
  if (piece.length >= EDGE) return Buffer.from(piece.subarray(piece.length - EDGE))
  const both = Buffer.concat([before, piece])
  return both.length <= EDGE ? both : Buffer.from(both.subarray(both.length - EDGE))
}

const ID = '(-?\\d+|"(?:[^"\\\\]|\\\\.)*")'
// the SDK writes an answer's id last ({"result": …, "jsonrpc": "2.0", "id": 7}); others first
const ID_FIRST = new RegExp(`^\\s*\\{\\s*(?:"jsonrpc"\\s*:\\s*"2\\.0"\\s*,\\s*)?"id"\\s*:\\s*${ID}`)
const ID_LAST = new RegExp(`"id"\\s*:\\s*${ID}\\s*\\}\\s*$`)
// a request or notification of the server's, which answers nothing
const SERVER_MESSAGE = /^\s*\{\s*"method"\s*:/

export interface StdioParams {
  command: string
  args?: string[]
  env?: Record<string, string>
  cwd?: string
}

export class StdioTransport implements Transport {
  onclose?: () => void
  onerror?: (error: Error) => void
  onmessage?: (message: JSONRPCMessage) => void
  /** The process's stderr, there from the start so that nothing it writes early is lost. */
  readonly stderr = new PassThrough()
  private child: ChildProcessWithoutNullStreams | undefined
  private readonly reader: LineReader
  /** The requests sent and not answered yet, by their id as JSON text. */
  private readonly pending = new Map<string, RequestId>()

  constructor (private readonly params: StdioParams, readonly limitBytes: number) {
    this.reader = new LineReader(limitBytes)
  }

  get pid (): number | null { return this.child?.pid ?? null }

  async start (): Promise<void> {
    if (this.child !== undefined) throw new Error('StdioTransport already started')
    await new Promise<void>((resolve, reject) => {
      const child = spawn(this.params.command, this.params.args ?? [], {
        env: { ...getDefaultEnvironment(), ...this.params.env },
        cwd: this.params.cwd,
        stdio: ['pipe', 'pipe', 'pipe'],
        shell: false
      })
      this.child = child
      child.on('error', (err) => { reject(err); this.onerror?.(err) })
      child.on('spawn', () => { resolve() })
      child.on('close', () => {
        this.child = undefined
        this.onclose?.()
      })
      child.stdin.on('error', (err) => { this.onerror?.(err) })
      child.stdout.on('data', (chunk: Buffer) => { this.read(chunk) })
      child.stdout.on('error', (err) => { this.onerror?.(err) })
      child.stderr.pipe(this.stderr)
    })
  }

  async send (message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin
    if (stdin === undefined) throw new Error('Not connected')
    if (isJSONRPCRequest(message)) this.pending.set(JSON.stringify(message.id), message.id)
    // a request given up (timed out, cancelled) gets no answer
    if (isJSONRPCNotification(message) && message.method === 'notifications/cancelled') this.pending.delete(JSON.stringify(message.params?.requestId))
    if (stdin.write(JSON.stringify(message) + '\n')) return
    await new Promise<void>((resolve) => {
      const done = (): void => { stdin.off('drain', done); stdin.off('close', done); resolve() }
      stdin.once('drain', done)
      stdin.once('close', done)
    })
  }

  async close (): Promise<void> {
    const child = this.child
    this.child = undefined
    if (child === undefined) return
    const exited = new Promise<void>((resolve) => { child.once('close', () => { resolve() }) })
    const step = async (): Promise<void> => { await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, CLOSE_STEP_MS).unref())]) }
    try { child.stdin.end() } catch {}
    await step()
    if (child.exitCode === null && child.signalCode === null) {
      try { child.kill('SIGTERM') } catch {}
      await step()
    }
    if (child.exitCode === null && child.signalCode === null) {
      try { child.kill('SIGKILL') } catch {}
    }
  }

  private read (chunk: Buffer): void {
    for (const item of this.reader.push(chunk)) {
      if (!('line' in item)) {
        this.cut(item.head, item.tail)
        continue
      }
      let message: JSONRPCMessage
      try {
        message = JSONRPCMessageSchema.parse(JSON.parse(item.line))
      } catch (err) {
        this.onerror?.(err as Error)
        continue
      }
      if (isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) this.pending.delete(JSON.stringify(message.id))
      this.onmessage?.(message)
    }
  }

  /** A line past the cap: the request it answered (by its id, or the only one waiting) gets the cap's error. */
  private cut (head: string, tail: string): void {
    const dropped = new Error(`MCP server sent a message larger than ${describeBytes(this.limitBytes)}: dropped`)
    if (SERVER_MESSAGE.test(head)) { this.onerror?.(dropped); return }
    const said = ID_FIRST.exec(head)?.[1] ?? ID_LAST.exec(tail)?.[1]
    const key = said !== undefined && this.pending.has(said) ? said : this.pending.size === 1 ? [...this.pending.keys()][0] : undefined
    if (key === undefined) { this.onerror?.(dropped); return }
    const id = this.pending.get(key) as RequestId
    this.pending.delete(key)
    this.onmessage?.(oversizeAnswer(id, this.limitBytes))
  }
}
