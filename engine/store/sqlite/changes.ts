import type { DB } from './db.js'
import type { ChangeFeed } from '../changes.js'
import { asChange } from '../tenants.js'
import type { TenancyChange } from '../types.js'

// How often a serving process reads the changes other processes on the file committed.
const POLL_MS = 500

/**
 * Tenancy changes on a SQLite file: each is written in the transaction that makes it, and the
 * processes listening read those of the others every POLL_MS. The workers of one `serve` hear
 * each other at once on their bus as well; the table is what reaches them from a CLI command.
 */
export class ChangeLog {
  private readonly insertStmt
  private readonly sinceStmt
  private readonly lastStmt
  private readonly sweepStmt
  private poller: NodeJS.Timeout | null = null
  private last = 0

  constructor (db: DB, private readonly origin: string, readonly feed: ChangeFeed, private readonly onError: (err: unknown, what: string) => void) {
    this.insertStmt = db.prepare('INSERT INTO tenancy_changes (at, origin, change) VALUES (?, ?, ?)')
    this.sinceStmt = db.prepare<[number, string], { seq: number, change: string }>('SELECT seq, change FROM tenancy_changes WHERE seq > ? AND origin <> ? ORDER BY seq')
    this.lastStmt = db.prepare<[], { seq: number | null }>('SELECT max(seq) AS seq FROM tenancy_changes')
    this.sweepStmt = db.prepare('DELETE FROM tenancy_changes WHERE at < ?')
  }

  /** Writes `change` inside the caller's transaction. */
  write (change: TenancyChange, now: number): void {
    this.insertStmt.run(now, this.origin, JSON.stringify(change))
  }

  /** Tells this process's listeners and the processes on the bus (after the commit). */
  async publish (change: TenancyChange): Promise<void> {
    await this.feed.publish(change)
  }

  /** Starts reading the other processes' changes (once there is someone to tell). */
  poll (): void {
    if (this.poller !== null) return
    this.last = this.lastStmt.get()?.seq ?? 0
    this.poller = setInterval(() => {
      try {
        for (const r of this.sinceStmt.all(this.last, this.origin)) {
          this.last = r.seq
          const change = asChange(JSON.parse(r.change) as Record<string, unknown>)
          if (change !== undefined) void this.feed.deliver(change)
        }
      } catch (err) {
        this.onError(err, 'reading the tenancy changes of other processes failed')
      }
    }, POLL_MS)
    this.poller.unref()
  }

  sweep (before: number): number {
    return this.sweepStmt.run(before).changes
  }

  close (): void {
    if (this.poller !== null) clearInterval(this.poller)
    this.poller = null
  }
}
