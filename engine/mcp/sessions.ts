import type { Clock } from '../kernel/clock.js'
import type { McpLink } from './link.js'

// The organizations' own sessions with the servers behind the gateway: what a tool keeps in a
// session (an HTTP server's Mcp-Session-Id) or a process (a stdio server) is then the state of
// one organization only. A session is opened on an organization's first call to a server and
// kept while it is used; there are at most `max` of them, all servers together (those still
// closing count), and one unused for `idleMs` is closed. To open one more when all `max` are
// taken, the least recently used that no call is using is closed first; when every one is in
// use, the call is refused. So there are never more sessions, nor stdio processes, than `max`.

interface Session {
  link: McpLink
  /** Calls in flight on it. */
  busy: number
  /** When its last call ended (the clock's ms). */
  usedAt: number
}

/** A session lent to one call: `release` once the call is over. */
export interface Lease {
  link: McpLink
  release: () => void
}

export class TenantSessions {
  /** By `{server}\n{org}`, the least recently used first. */
  private readonly open = new Map<string, Session>()
  /** Sessions being closed (a process has a few seconds to exit). */
  private readonly closing = new Set<Promise<void>>()
  private readonly sweeper: NodeJS.Timeout

  constructor (
    readonly max: number,
    readonly idleMs: number,
    private readonly clock: Clock,
    /** A new session (its link, not started) of `org` with the server whose own link is `server`. */
    private readonly make: (server: McpLink, org: string) => McpLink
  ) {
    // (every call sweeps too: this is for the sessions of organizations that stopped calling)
    this.sweeper = setInterval(() => { this.sweep() }, Math.min(idleMs, 60_000))
    this.sweeper.unref()
  }

  /** How many are open or still closing. */
  get size (): number { return this.open.size + this.closing.size }

  /**
   * The session of `org` with `server`, opened if there is none (it connects while the call waits
   * for it); null when `max` are taken and every one is in use.
   */
  async acquire (server: McpLink, org: string): Promise<Lease | null> {
    const key = `${server.id}\n${org}`
    let s: Session | undefined
    for (;;) {
      this.sweep()
      s = this.open.get(key)
      if (s !== undefined && s.link.gone) {
        this.drop(key, s)
        s = undefined
      }
      if (s !== undefined || this.size < this.max) break
      if (!this.evictOne() && this.closing.size === 0) return null
      // room is made once a session has closed
      await Promise.race(this.closing)
    }
    if (s === undefined) {
      const link = this.make(server, org)
      link.start()
      s = { link, busy: 0, usedAt: this.clock.now() }
    } else {
      this.open.delete(key)
    }
    // last in the map: the most recently used
    this.open.set(key, s)
    s.busy++
    const session = s
    let released = false
    return {
      link: session.link,
      release: () => {
        if (released) return
        released = true
        session.busy--
        session.usedAt = this.clock.now()
      }
    }
  }

  /** Closes the sessions unused for idleMs. */
  sweep (): void {
    const now = this.clock.now()
    for (const [key, s] of this.open) if (s.busy === 0 && now - s.usedAt >= this.idleMs) this.drop(key, s)
  }

  async close (): Promise<void> {
    clearInterval(this.sweeper)
    for (const [key, s] of this.open) this.drop(key, s)
    await Promise.all(this.closing)
  }

  /** Closes the least recently used session no call is using; false when every one is in use. */
  private evictOne (): boolean {
    for (const [key, s] of this.open) {
      if (s.busy === 0) {
        this.drop(key, s)
        return true
      }
    }
    return false
  }

  private drop (key: string, s: Session): void {
    this.open.delete(key)
    const closed: Promise<void> = s.link.close().catch(() => {}).finally(() => { this.closing.delete(closed) })
    this.closing.add(closed)
  }
}
