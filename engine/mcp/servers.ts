import type { FastifyBaseLogger } from 'fastify'
import type { CallToolRequest, CallToolResult, Tool } from '@modelcontextprotocol/sdk/types.js'
import type { Config } from '../../config/schema.js'
import { globMatcher } from '../gateway/catalog.js'
import { systemClock, type Clock } from '../kernel/clock.js'
import { usdToNano } from '../kernel/money.js'
import { maskJson } from '../upstream/credentials.js'
import { McpLink, ServerUnavailable, type ToolCallOptions } from './link.js'
import { flatToolName } from '../kernel/tool-names.js'
import { capBytes } from './result-cap.js'
import { serverSecrets } from './secrets.js'
import { TenantSessions } from './sessions.js'

// The MCP servers behind the gateway (the config's `mcp.servers`), one link each, and the tools
// they list as the gateway's own MCP server offers them: at /mcp every server's tools, named
// `{server}__{tool}`; at /mcp/{server} one server's, under their own names. A key sees and calls
// the tools its `mcp` globs match as `{server}/{tool}`; any other is unknown to it.
//
// A server's own link lists its tools (once for every tenant) and says its status. Its tool calls
// go to the calling organization's own session with it (sessions.ts), unless the server is
// `shared`, when they go through its own link. Exposed names are unique: a tool whose name at
// /mcp another server's tool already has (the server listed first in the config keeps it) is
// left out of /mcp, and the operator warned; it stays at /mcp/{server} under its own name.

/** How long a tools/list waits for servers still connecting (started, restarting) before it answers without them. */
export const LIST_WAIT_MS = 10_000

/** A tool a key may call: its server, its name there, and what it is called at /mcp. */
export interface ToolTarget {
  link: McpLink
  /** Its name at its server. */
  name: string
  /** Its name at /mcp. */
  exposed: string
  /** `{server}/{tool}`: what the key's globs match, and the usage record's model. */
  ref: string
  /** The server's price per call, in nano-dollars. */
  priceNano: number
  timeoutMs: number
}

export type ServerView = ReturnType<McpLink['view']>

export class McpServers {
  /** Each server's own link: its tools and status (and its calls, when it is shared). */
  readonly links = new Map<string, McpLink>()
  /** Every configured secret of the servers (header values, secret-looking env values), longest first. */
  readonly secrets: readonly string[]
  readonly sessions: TenantSessions
  /** Exposed name → target, for /mcp. */
  private byExposed = new Map<string, ToolTarget>()
  /** Server → its tools listed at /mcp, with their exposed names. */
  private exposed = new Map<string, Array<{ tool: Tool, name: string }>>()
  /** Server → its tools, each name once (as listed at /mcp/{server}). */
  private own = new Map<string, Tool[]>()
  /** Collisions already told to the operator. */
  private readonly warned = new Set<string>()
  private readonly prices = new Map<string, number>()
  private readonly matchers = new Map<string, (ref: string) => boolean>()

  constructor (config: Pick<Config, 'mcp' | 'server'>, private readonly log: FastifyBaseLogger, clock: Clock = systemClock) {
    const maxResultBytes = capBytes(config.mcp.max_result_mb)
    for (const s of config.mcp.servers) {
      const timeoutMs = (s.timeout_s ?? config.server.request_timeout_s) * 1000
      this.links.set(s.id, new McpLink(s, timeoutMs, log, () => { this.index() }, { maxResultBytes }))
      this.prices.set(s.id, s.pricing === undefined ? 0 : usdToNano(s.pricing.per_call))
    }
    this.secrets = [...new Set(config.mcp.servers.flatMap(serverSecrets))].sort((a, b) => b.length - a.length)
    this.sessions = new TenantSessions(config.mcp.max_sessions, config.mcp.session_idle_s * 1000, clock,
      (server, org) => new McpLink(server.config, server.timeoutMs, log, () => {}, { maxResultBytes, tenant: org }))
  }

  start (): void { for (const l of this.links.values()) l.start() }

  has (server: string): boolean { return this.links.has(server) }

  /** Every server: its transport, status, tools and last error. */
  views (): ServerView[] { return [...this.links.values()].map((l) => l.view()) }

  async close (): Promise<void> {
    await Promise.all([this.sessions.close(), ...[...this.links.values()].map(async (l) => { await l.close() })])
  }

  /** `value` (a result, an error's message or data) with every configured secret of the servers masked, in place. */
  mask<T> (value: T): T { return maskJson(value, this.secrets) }

  /**
   * Calls a tool for organization `org`: on that organization's own session with the server, or
   * on the server's own link when it is shared. Rejects as McpLink.call does; with
   * ServerUnavailable, at once, when the server is known down or every session is in use.
   */
  async call (target: ToolTarget, org: string, params: CallToolRequest['params'], opts: ToolCallOptions): Promise<CallToolResult> {
    const server = target.link
    if (server.config.shared) return await server.call(params, opts)
    if (server.status === 'down') throw new ServerUnavailable(server.id, server.lastError ?? 'not connected')
    const lease = await this.sessions.acquire(server, org)
    if (lease === null) throw new ServerUnavailable(server.id, `all ${this.sessions.max} sessions with MCP servers are in use (mcp.max_sessions)`)
    try {
      return await lease.link.call(params, opts)
    } finally {
      lease.release()
    }
  }

  /**
   * The tools `globs` allow (null: every tool), of one server or of all, as the gateway lists
   * them. Waits, up to LIST_WAIT_MS, for the servers still connecting, so that a client that
   * lists right after the gateway started gets their tools.
   */
  async list (server: string | null, globs: readonly string[] | null): Promise<Tool[]> {
    const links = server === null ? [...this.links.values()] : [this.links.get(server)].filter((l) => l !== undefined)
    if (links.some((l) => l.status === 'starting')) await Promise.all(links.map(async (l) => { await l.settled(Math.min(LIST_WAIT_MS, l.timeoutMs)) }))
    const allowed = this.allowed(globs)
    const out: Tool[] = []
    for (const l of links) {
      const tools = server === null ? this.exposed.get(l.id) ?? [] : (this.own.get(l.id) ?? []).map((tool) => ({ tool, name: tool.name }))
      for (const { tool: t, name } of tools) {
        if (!allowed(`${l.id}/${t.name}`)) continue
        const tool: Tool = { ...t, name }
        // tasks are not offered: a tool that asks for them is called as any other
        delete tool.execution
        out.push(tool)
      }
    }
    return out
  }

  /**
   * The tool `name` names for a key (`globs`; null: every tool), at /mcp (`server` null: its
   * exposed name) or at /mcp/{server} (its own name); undefined when there is none the key may
   * use. A tool of a server still connecting is looked up once it has listed its tools.
   */
  async find (name: string, server: string | null, globs: readonly string[] | null): Promise<ToolTarget | undefined> {
    const link = server === null ? this.links.get(name.slice(0, Math.max(0, name.indexOf('__')))) : this.links.get(server)
    if (link?.status === 'starting') await link.settled(link.timeoutMs)
    const target = server === null ? this.byExposed.get(name) : this.target(link, name)
    if (target === undefined || !this.allowed(globs)(target.ref)) return undefined
    return target
  }

  private target (link: McpLink | undefined, name: string): ToolTarget | undefined {
    if (link === undefined || !link.tools.some((t) => t.name === name)) return undefined
    return this.targetOf(link, name)
  }

  private targetOf (link: McpLink, name: string): ToolTarget {
    return { link, name, exposed: flatToolName(link.id, name), ref: `${link.id}/${name}`, priceNano: this.prices.get(link.id) ?? 0, timeoutMs: link.timeoutMs }
  }

  /**
   * Makes the exposed names of every server's tools again (a server connected, or its tools
   * changed), in the config's order of servers: a name already taken is not given twice.
   */
  private index (): void {
    const byExposed = new Map<string, ToolTarget>()
    const exposed = new Map<string, Array<{ tool: Tool, name: string }>>()
    const own = new Map<string, Tool[]>()
    for (const link of this.links.values()) {
      const names = new Set<string>()
      const mine: Tool[] = []
      const listed: Array<{ tool: Tool, name: string }> = []
      for (const t of link.tools) {
        if (names.has(t.name)) {
          this.collision(`${link.id}/${t.name}`, { mcp_server: link.id, tool: t.name }, 'MCP tool left out: its server lists another tool of the same name')
          continue
        }
        names.add(t.name)
        mine.push(t)
        const target = this.targetOf(link, t.name)
        const taken = byExposed.get(target.exposed)
        if (taken !== undefined) {
          this.collision(`${target.ref}\n${taken.ref}`, { mcp_server: link.id, tool: t.name, exposed: target.exposed, taken_by: taken.ref }, `MCP tool left out of /mcp: its name there is ${taken.ref}'s`)
          continue
        }
        byExposed.set(target.exposed, target)
        listed.push({ tool: t, name: target.exposed })
      }
      own.set(link.id, mine)
      exposed.set(link.id, listed)
    }
    this.byExposed = byExposed
    this.exposed = exposed
    this.own = own
  }

  /** Warns of a tool left out, once. */
  private collision (key: string, fields: Record<string, string>, message: string): void {
    if (this.warned.has(key)) return
    this.warned.add(key)
    this.log.warn(fields, message)
  }

  private allowed (globs: readonly string[] | null): (ref: string) => boolean {
    if (globs === null) return () => true
    if (globs.length === 0) return () => false
    const key = globs.join('\n')
    let m = this.matchers.get(key)
    if (m === undefined) {
      m = globMatcher(globs)
      this.matchers.set(key, m)
    }
    return m
  }
}
