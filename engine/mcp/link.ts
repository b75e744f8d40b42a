import { createInterface } from 'node:readline'
import type { FastifyBaseLogger } from 'fastify'
import { Client } from '@modelcontextprotocol/sdk/client/index.js'
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js'
import type { Transport } from '@modelcontextprotocol/sdk/shared/transport.js'
import {
  CallToolResultSchema, ErrorCode, ListToolsResultSchema, McpError, ProgressNotificationSchema, ToolListChangedNotificationSchema,
  type CallToolRequest, type CallToolResult, type Progress, type Tool
} from '@modelcontextprotocol/sdk/types.js'
import type { McpServerConfig } from '../../config/schema.js'
import { boundedFetch } from './fetch.js'
import { describeBytes, isOversize } from './result-cap.js'
import { StdioTransport } from './stdio.js'

// One MCP server behind the gateway, spoken to with the MCP SDK's client: over Streamable HTTP
// (with the configured headers), or over stdio to a process the link spawns (its stderr goes to
// the log, line by line). The link connects at once (initialize, then tools/list, every page),
// keeps the tool list current (notifications/tools/list_changed), and when the connection is
// lost (the process exited; an HTTP server failed a call, or failed its event stream and then a
// ping) connects again after a pause that doubles from FIRST_BACKOFF_MS up to MAX_BACKOFF_MS. Every wait is bounded by the server's
// timeout: a tool call to a server that is down fails at once, one to a server still starting
// waits for it within its time limit, and none waits longer than that.
//
// A server's own link does all of that; a link that is one organization's session (`tenant`)
// lists no tools (the server's own link does) and is not connected again once lost: the next
// call of that organization opens a new one (sessions.ts).

export type LinkStatus = 'ready' | 'starting' | 'down'

const FIRST_BACKOFF_MS = 500
const MAX_BACKOFF_MS = 30_000
/** A server that stayed up this long is restarted after the first pause again, not the last one. */
const STABLE_MS = 30_000
/** How many tools a server may list (its pages are read until then). */
const MAX_TOOLS = 10_000
const MAX_STDERR_LINE = 2_000
/** How long a server found silent (its event stream failed) has to answer a ping. */
const PROBE_MS = 5_000

/** A tool call whose answer was larger than `mcp.max_result_mb`: it was not read. */
export class ResultTooLarge extends Error {
  constructor (readonly server: string, readonly limitBytes: number) {
    super(`The answer of MCP server ${server} is larger than the gateway's limit of ${describeBytes(limitBytes)} (mcp.max_result_mb); it was dropped`)
    this.name = 'ResultTooLarge'
  }
}

/** Why a tool call got no answer from its server: it is down, unreachable, or too slow. */
export class ServerUnavailable extends Error {
  constructor (readonly server: string, readonly reason: string, readonly timedOut = false) {
    super(timedOut ? `MCP server ${server} did not answer in time (${reason})` : `MCP server ${server} is unavailable: ${reason}`)
    this.name = 'ServerUnavailable'
  }
}

export interface ToolCallOptions {
  /** Aborted when the client goes away: the server is told the call is cancelled. */
  signal: AbortSignal
  timeoutMs: number
  /** The server's progress notifications for this call. */
  onprogress?: (progress: Progress) => void
}

let clientVersion = '0.0.0'
/** The version the gateway's client announces to the servers behind it. */
export function announceVersion (version: string): void { clientVersion = version }

const describe = (err: unknown): string => {
  if (err instanceof StreamableHTTPError) return `HTTP ${err.code ?? '?'}`
  const e = err as { message?: unknown, cause?: { code?: unknown, message?: unknown } } | null
  const cause = e?.cause?.code ?? e?.cause?.message
  const message = typeof e?.message === 'string' ? e.message : String(err)
  return (typeof cause === 'string' ? `${message} (${cause})` : message).slice(0, 300)
}

/** A promise that gives up after `ms`, or when `signal` aborts. */
async function within<T> (p: Promise<T>, ms: number, signal: AbortSignal): Promise<T | 'timeout' | 'aborted'> {
  let timer: NodeJS.Timeout | undefined
  let onAbort: (() => void) | undefined
  try {
    return await Promise.race([
      p,
      new Promise<'timeout'>((resolve) => { timer = setTimeout(() => { resolve('timeout') }, Math.max(0, ms)) }),
      new Promise<'aborted'>((resolve) => {
        onAbort = () => { resolve('aborted') }
        if (signal.aborted) onAbort()
        else signal.addEventListener('abort', onAbort, { once: true })
      })
    ])
  } finally {
    clearTimeout(timer)
    if (onAbort !== undefined) signal.removeEventListener('abort', onAbort)
  }
}

export interface LinkOptions {
  /** The largest message the server may send (mcp.max_result_mb), in bytes. */
  maxResultBytes: number
  /** The organization whose session this is (a tenant's link); absent: the server's own link. */
  tenant?: string
}

export class McpLink {
  status: LinkStatus = 'starting'
  lastError: string | null = null
  /** The tools the server last listed: kept while it is down, so that clients' lists stay put. */
  tools: readonly Tool[] = []
  private client: Client | null = null
  private connecting: Promise<void> | null = null
  private retry: NodeJS.Timeout | null = null
  private backoffMs = FIRST_BACKOFF_MS
  private readyAt = 0
  private closed = false
  /** The server said its tools changed: list them again once the client is current. */
  private stale = false
  private listing: Promise<void> | null = null
  private probing = false
  /** The calls that asked for progress, by the token sent with them. */
  private readonly progress = new Map<string, (p: Progress) => void>()
  private tokens = 0

  constructor (
    readonly config: McpServerConfig,
    readonly timeoutMs: number,
    private readonly log: FastifyBaseLogger,
    private readonly changed: () => void,
    private readonly opts: LinkOptions
  ) {}

  get id (): string { return this.config.id }

  /** The organization this link is the session of; undefined: the server's own link. */
  get tenant (): string | undefined { return this.opts.tenant }

  /** An organization's session that was lost or never made: it will not connect again. */
  get gone (): boolean { return this.opts.tenant !== undefined && this.status === 'down' && this.connecting === null }

  /** Starts connecting; the status says how it goes. */
  start (): void { void this.connect() }

  /** Waits (up to `ms`) for a connection being made; at once when there is none. */
  async settled (ms: number): Promise<void> {
    if (this.connecting !== null) await within(this.connecting, ms, new AbortController().signal)
  }

  /**
   * Calls a tool. Resolves with the server's result as it is; rejects with ServerUnavailable when
   * the server is down, unreachable or slower than `timeoutMs`, with the server's own JSON-RPC
   * error (McpError) when it answered one, and with anything when `signal` aborted.
   */
  async call (params: CallToolRequest['params'], opts: ToolCallOptions): Promise<CallToolResult> {
    const deadline = performance.now() + opts.timeoutMs
    const client = await this.current(deadline, opts.signal)
    try {
      return await this.request(client, params, opts, deadline)
    } catch (err) {
      // the server forgot the session (it restarted, or dropped it): a new one, and the call once more
      if (!(err instanceof StreamableHTTPError && err.code === 404) || opts.signal.aborted) throw this.failure(client, err)
      this.drop(client)
      return await this.request(await this.current(deadline, opts.signal), params, opts, deadline).catch((e: unknown) => { throw this.failure(this.client, e) })
    }
  }

  /** What a list of this server's tools says: its id, transport, status and tools. */
  view (): { id: string, transport: 'http' | 'stdio', status: LinkStatus, tools: string[], last_error: string | null } {
    return { id: this.id, transport: this.config.transport, status: this.status, tools: this.tools.map((t) => t.name), last_error: this.lastError }
  }

  async close (): Promise<void> {
    this.closed = true
    if (this.retry !== null) clearTimeout(this.retry)
    this.retry = null
    const client = this.client
    this.client = null
    await client?.close().catch(() => {})
    // a connection being made closes itself when it sees `closed`
    await this.connecting?.catch(() => {})
  }

  /** The connected client, waiting (until `deadline`) for a connection being made. */
  private async current (deadline: number, signal: AbortSignal): Promise<Client> {
    if (this.client !== null) return this.client
    if (this.connecting === null) throw new ServerUnavailable(this.id, this.lastError ?? 'not connected')
    const waited = await within(this.connecting, deadline - performance.now(), signal)
    if (waited === 'timeout') throw new ServerUnavailable(this.id, 'still connecting', true)
    if (waited === 'aborted') throw new ServerUnavailable(this.id, 'the call was cancelled')
    if (this.client === null) throw new ServerUnavailable(this.id, this.lastError ?? 'not connected')
    return this.client
  }

  private async request (client: Client, params: CallToolRequest['params'], opts: ToolCallOptions, deadline: number): Promise<CallToolResult> {
    const timeout = Math.max(1, deadline - performance.now())
    if (opts.onprogress === undefined) return await client.request({ method: 'tools/call', params }, CallToolResultSchema, { signal: opts.signal, timeout })
    // progress is routed here rather than by the SDK's onprogress, which drops a notification
    // that arrives in the same read as the answer (its handler is gone by the time the
    // notification is handled: modelcontextprotocol/typescript-sdk#2580)
    const token = `mg-${++this.tokens}`
    this.progress.set(token, opts.onprogress)
    try {
      return await client.request({ method: 'tools/call', params: { ...params, _meta: { ...params._meta, progressToken: token } } }, CallToolResultSchema, { signal: opts.signal, timeout })
    } finally {
      this.progress.delete(token)
    }
  }

  /** What a failed call rejects with; a connection found broken is dropped (and made again later). */
  private failure (client: Client | null, err: unknown): unknown {
    if (isOversize(err)) return new ResultTooLarge(this.id, this.opts.maxResultBytes)
    if (err instanceof McpError) {
      if (err.code === ErrorCode.RequestTimeout) return new ServerUnavailable(this.id, `${this.timeoutMs / 1000} s`, true)
      if (err.code === ErrorCode.ConnectionClosed) return new ServerUnavailable(this.id, 'the connection closed')
      // the server's own error answer
      return err
    }
    if (err instanceof StreamableHTTPError) return new ServerUnavailable(this.id, describe(err))
    // a result that is not one (the SDK's check of its shape)
    if ((err as Error | null)?.name === 'ZodError') return new ServerUnavailable(this.id, 'it answered something that is not a tool result')
    // no answer at all: the connection is broken
    const reason = describe(err)
    if (client !== null && client === this.client) this.lost(client, reason)
    return new ServerUnavailable(this.id, reason)
  }

  private connect (): Promise<void> {
    if (this.connecting === null) {
      if (this.retry !== null) clearTimeout(this.retry)
      this.retry = null
      this.status = 'starting'
      this.connecting = this.attempt().finally(() => { this.connecting = null })
    }
    return this.connecting
  }

  private async attempt (): Promise<void> {
    let client: Client | null = null
    try {
      client = await this.open()
      this.stale = false
      const tools = this.tenant === undefined ? await this.list(client) : []
      if (this.closed) { await client.close(); return }
      this.client = client
      this.status = 'ready'
      this.lastError = null
      this.readyAt = Date.now()
      if (this.tenant !== undefined) {
        this.log.info({ mcp_server: this.id, org: this.tenant }, 'MCP session opened')
        return
      }
      this.tools = tools
      this.log.info({ mcp_server: this.id, tools: tools.length }, 'MCP server connected')
      this.changed()
      if (this.stale) void this.refresh(client)
    } catch (err) {
      await client?.close().catch(() => {})
      if (!this.closed) this.failed(describe(err))
    }
  }

  private async open (): Promise<Client> {
    const client = new Client({ name: 'modelgate', version: clientVersion }, { capabilities: {} })
    client.onerror = (err) => {
      this.log.debug({ err, mcp_server: this.id }, 'MCP server connection error')
      // an HTTP server's event stream failed (it went away, say): ask whether it still answers
      if (this.config.transport === 'http') this.probe(client)
    }
    client.onclose = () => { this.lost(client, 'the connection closed') }
    client.setNotificationHandler(ProgressNotificationSchema, (n) => {
      const { progressToken, ...progress } = n.params
      this.progress.get(String(progressToken))?.(progress)
    })
    // an organization's session leaves its server's tools to the server's own link
    if (this.tenant === undefined) {
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
        this.stale = true
        void this.refresh(client)
      })
    }
    try {
      await client.connect(this.transport(), { timeout: this.timeoutMs })
    } catch (err) {
      await client.close().catch(() => {})
      throw err
    }
    return client
  }

  private transport (): Transport {
    const c = this.config
    const limit = this.opts.maxResultBytes
    if (c.transport === 'http') return new StreamableHTTPClientTransport(new URL(c.url as string), { requestInit: { headers: c.headers ?? {} }, fetch: boundedFetch(limit) })
    const t = new StdioTransport({ command: c.command as string, args: c.args ?? [], env: c.env ?? {}, cwd: c.cwd }, limit)
    const who = this.tenant === undefined ? { mcp_server: this.id } : { mcp_server: this.id, org: this.tenant }
    createInterface({ input: t.stderr, crlfDelay: Infinity }).on('line', (line) => {
      this.log.info({ ...who, stderr: line.slice(0, MAX_STDERR_LINE) }, 'MCP server stderr')
    })
    return t
  }

  /** Every page of the server's tools/list. */
  private async list (client: Client): Promise<Tool[]> {
    const tools: Tool[] = []
    let cursor: string | undefined
    do {
      const page = await client.request({ method: 'tools/list', params: cursor === undefined ? {} : { cursor } }, ListToolsResultSchema, { timeout: this.timeoutMs })
      tools.push(...page.tools)
      cursor = page.nextCursor
    } while (cursor !== undefined && tools.length < MAX_TOOLS)
    return tools.slice(0, MAX_TOOLS)
  }

  /** Lists the tools again (the server said they changed); one listing at a time, the last change always read. */
  private async refresh (client: Client): Promise<void> {
    if (client !== this.client) return
    if (this.listing !== null) return
    this.stale = false
    this.listing = this.list(client).then((tools) => {
      if (client !== this.client) return
      this.tools = tools
      this.changed()
    }, (err: unknown) => {
      this.log.warn({ mcp_server: this.id, err: describe(err) }, 'MCP server: listing its tools again failed')
    }).finally(() => {
      this.listing = null
      if (this.stale) void this.refresh(client)
    })
    await this.listing
  }

  /** Pings a server that may be gone; one that does not answer is lost (and connected again later). */
  private probe (client: Client): void {
    if (client !== this.client || this.probing) return
    this.probing = true
    client.ping({ timeout: Math.min(this.timeoutMs, PROBE_MS) }).then(() => {}, (err: unknown) => { this.lost(client, describe(err)) }).finally(() => { this.probing = false })
  }

  /** A new connection at once (the server forgot ours). */
  private drop (client: Client): void {
    if (client !== this.client) return
    this.client = null
    void client.close().catch(() => {})
    void this.connect()
  }

  /** The connection is gone: connect again after a pause. */
  private lost (client: Client, reason: string): void {
    if (client !== this.client) return
    this.client = null
    void client.close().catch(() => {})
    if (!this.closed) this.failed(reason)
  }

  private failed (reason: string): void {
    this.status = 'down'
    this.lastError = reason
    if (this.tenant !== undefined) {
      this.log.warn({ mcp_server: this.id, org: this.tenant, err: reason }, 'MCP session lost')
      return
    }
    if (this.readyAt !== 0 && Date.now() - this.readyAt > STABLE_MS) this.backoffMs = FIRST_BACKOFF_MS
    const wait = this.backoffMs
    this.backoffMs = Math.min(MAX_BACKOFF_MS, this.backoffMs * 2)
    this.log.warn({ mcp_server: this.id, err: reason, retry_in_ms: wait }, 'MCP server unavailable')
    if (this.retry !== null) clearTimeout(this.retry)
    this.retry = setTimeout(() => { this.retry = null; void this.connect() }, wait)
    this.retry.unref()
  }
}
