import type { FastifyBaseLogger } from 'fastify'
import type { Tool } from '@modelcontextprotocol/sdk/types.js'
import type { Config } from '../../config/schema.js'
import { globMatcher } from '../gateway/catalog.js'
import { usdToNano } from '../kernel/money.js'
import { McpLink } from './link.js'
import { exposedName } from './names.js'

// The MCP servers behind the gateway (the config's `mcp.servers`), one link each, and the tools
// they list as the gateway's own MCP server offers them: at /mcp every server's tools, named
// `{server}__{tool}`; at /mcp/{server} one server's, under their own names. A key sees and calls
// the tools its `mcp` globs match as `{server}/{tool}`; any other is unknown to it.

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
  readonly links = new Map<string, McpLink>()
  /** Exposed name → target, for /mcp. */
  private byExposed = new Map<string, ToolTarget>()
  private readonly prices = new Map<string, number>()
  private readonly matchers = new Map<string, (ref: string) => boolean>()

  constructor (config: Pick<Config, 'mcp' | 'server'>, log: FastifyBaseLogger) {
    for (const s of config.mcp.servers) {
      const timeoutMs = (s.timeout_s ?? config.server.request_timeout_s) * 1000
      this.links.set(s.id, new McpLink(s, timeoutMs, log, () => { this.index() }))
      this.prices.set(s.id, s.pricing === undefined ? 0 : usdToNano(s.pricing.per_call))
    }
  }

  start (): void { for (const l of this.links.values()) l.start() }

  has (server: string): boolean { return this.links.has(server) }

  /** Every server: its transport, status, tools and last error. */
  views (): ServerView[] { return [...this.links.values()].map((l) => l.view()) }

  async close (): Promise<void> {
    await Promise.all([...this.links.values()].map(async (l) => { await l.close() }))
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
      for (const t of l.tools) {
        if (!allowed(`${l.id}/${t.name}`)) continue
        const tool: Tool = server === null ? { ...t, name: exposedName(l.id, t.name) } : { ...t }
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
    return { link, name, exposed: exposedName(link.id, name), ref: `${link.id}/${name}`, priceNano: this.prices.get(link.id) ?? 0, timeoutMs: link.timeoutMs }
  }

  /** Makes the exposed names of every server's tools again (a server connected, or its tools changed). */
  private index (): void {
    const next = new Map<string, ToolTarget>()
    for (const link of this.links.values()) {
      for (const t of link.tools) {
        const target = this.target(link, t.name) as ToolTarget
        if (!next.has(target.exposed)) next.set(target.exposed, target)
      }
    }
    this.byExposed = next
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
