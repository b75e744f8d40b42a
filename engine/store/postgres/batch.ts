import type { ContentRow, QuotaUsage, UsageRow } from '../types.js'
import { isConnectionError, unavailable, type Connection } from './db.js'

const RETRY_MS = 250
/** How long a lease give-back nobody waits for may wait for other writes to go with. */
const LATER_MS = 5

// The whole batch is one call of modelgate_end_batch (migration 005), one round trip and one
// statement, prepared once per connection.
const END_BATCH = { name: 'modelgate_end_batch', text: 'SELECT * FROM modelgate_end_batch($1)' }

interface GiveBack { id: string, org: string, decide: () => number }

interface Batch {
  /** What leaves each lease (its calls' charges taken from it, and give-backs), by lease id. */
  leases: Map<string, { org: string, released: number }>
  /** Charges by organization. */
  charges: Map<string, number>
  quotas: Map<string, { scope: string, window: number, tokens: number, cost: number }>
  rows: UsageRow[]
  contents: ContentRow[]
  /** When keys were last used, by key id. */
  touches: Map<string, number>
  writes: number
  /** The quota windows' totals after the commit. */
  totals: Map<string, QuotaUsage>
  done: Promise<void>
  resolve: () => void
  reject: (err: unknown) => void
}

const deadlock = (err: unknown): boolean => (err as { code?: string } | null)?.code === '40P01'

function newBatch (): Batch {
  let resolve!: () => void
  let reject!: (err: unknown) => void
  const done = new Promise<void>((_resolve, _reject) => { resolve = _resolve; reject = _reject })
  done.catch(() => {}) // each caller gets the rejection from its own promise
  return { leases: new Map(), charges: new Map(), quotas: new Map(), rows: [], contents: [], touches: new Map(), writes: 0, totals: new Map(), done, resolve, reject }
}

/**
 * The end-of-call writes (lease charges and give-backs, quota counts, usage records), committed
 * together in one transaction. A batch starts at the end of the event-loop turn when none is
 * being committed; while one is, everything that arrives gathers into the next, which starts the
 * moment it finishes: a lone call waits for one commit, and under load batches grow by
 * themselves. Each write's promise settles when its batch commits, before the call's last byte.
 * While PostgreSQL cannot be reached the batch is kept and tried again every RETRY_MS (the
 * batches after it wait), so a call that was answered keeps its charge and its record; only a
 * closing store, or an error that is not a lost connection, gives up.
 */
export class EndOfCallBatch {
  private filling: Batch | null = null
  private inFlight: Promise<void> | null = null
  private scheduled = false
  private later: GiveBack[] = []
  private touches = new Map<string, number>()
  private laterTimer: NodeJS.Timeout | null = null
  private closed = false
  /** Told each batch's commit time (s) and size (metrics). */
  onBatch: ((seconds: number, writes: number) => void) | null = null

  constructor (private readonly conn: Connection, private readonly onError: (err: unknown, what: string) => void) {}

  consume (id: string, org: string, fromLease: number, charge: number): Promise<void> {
    const b = this.batch()
    this.release(b, id, org, fromLease)
    b.charges.set(org, (b.charges.get(org) ?? 0) + charge)
    b.writes++
    return b.done
  }

  /** Joins the next batch, or one of its own within LATER_MS; `decide` runs once, when that batch starts. */
  giveBackLater (id: string, org: string, decide: () => number): void {
    this.later.push({ id, org, decide })
    this.startLaterTimer()
  }

  /** A key was used at `at`: written with the next batch, or one of its own within LATER_MS. */
  touchLater (id: string, at: number): void {
    if ((this.touches.get(id) ?? 0) < at) this.touches.set(id, at)
    this.startLaterTimer()
  }

  private startLaterTimer (): void {
    if (this.laterTimer === null) {
      this.laterTimer = setTimeout(() => { this.laterTimer = null; this.batch() }, LATER_MS)
      this.laterTimer.unref()
    }
  }

  giveBackNow (id: string, org: string, amount: number): Promise<void> {
    const b = this.batch()
    this.release(b, id, org, amount)
    b.writes++
    return b.done
  }

  /** Resolves with the window's totals once committed. */
  count (scope: string, window: number, tokens: number, cost: number): Promise<QuotaUsage> {
    const b = this.batch()
    const k = `${window}\n${scope}`
    const q = b.quotas.get(k)
    if (q === undefined) b.quotas.set(k, { scope, window, tokens, cost })
    else { q.tokens += tokens; q.cost += cost }
    b.writes++
    return b.done.then(() => b.totals.get(k) ?? { tokens, cost_nano: cost })
  }

  record (row: UsageRow, content?: ContentRow): Promise<void> {
    const b = this.batch()
    b.rows.push(row)
    if (content !== undefined) b.contents.push(content)
    b.writes++
    return b.done
  }

  /** Commits everything queued, give-backs included; resolves when nothing is left. */
  async flush (): Promise<void> {
    if (this.later.length > 0 || this.touches.size > 0) this.batch()
    while (this.filling !== null || this.inFlight !== null) {
      if (this.inFlight === null) this.start()
      await this.inFlight?.catch(() => {})
    }
  }

  /** Commits what is queued; a batch waiting for PostgreSQL gets one last try. */
  async close (): Promise<void> {
    this.closed = true
    if (this.laterTimer !== null) { clearTimeout(this.laterTimer); this.laterTimer = null }
    await this.flush()
  }

  private release (b: Batch, id: string, org: string, amount: number): void {
    if (amount <= 0) return
    const l = b.leases.get(id)
    if (l === undefined) b.leases.set(id, { org, released: amount })
    else l.released += amount
  }

  /** The batch now gathering, made (and its start scheduled) when there is none. */
  private batch (): Batch {
    if (this.filling === null) this.filling = newBatch()
    if (!this.scheduled && this.inFlight === null) {
      this.scheduled = true
      setImmediate(() => { this.scheduled = false; this.start() })
    }
    return this.filling
  }

  private start (): void {
    if (this.inFlight !== null || this.filling === null) return
    const b = this.filling
    this.filling = null
    const later = this.later
    this.later = []
    if (this.laterTimer !== null) { clearTimeout(this.laterTimer); this.laterTimer = null }
    for (const g of later) {
      const amount = g.decide()
      if (amount > 0) { this.release(b, g.id, g.org, amount); b.writes++ }
    }
    if (this.touches.size > 0) {
      b.touches = this.touches
      b.writes += this.touches.size
      this.touches = new Map()
    }
    if (b.writes === 0) { b.resolve(); return }
    this.inFlight = this.commit(b).finally(() => {
      this.inFlight = null
      if (this.filling !== null) this.start()
    })
  }

  private async commit (b: Batch): Promise<void> {
    for (;;) {
      try {
        const t0 = performance.now()
        await this.conn.ready
        await this.write(b)
        this.conn.observe(undefined)
        this.onBatch?.((performance.now() - t0) / 1000, b.writes)
        b.resolve()
        return
      } catch (err) {
        this.conn.observe(err)
        if (!this.closed && (isConnectionError(err) || deadlock(err))) {
          this.onError(err, 'end-of-call writes not committed yet; retrying')
          await new Promise((resolve) => setTimeout(resolve, RETRY_MS).unref())
          continue
        }
        this.onError(err, 'end-of-call writes not committed')
        try { unavailable(err) } catch (shown) { b.reject(shown) }
        return
      }
    }
  }

  private async write (b: Batch): Promise<void> {
    const payload = JSON.stringify({
      leases: [...b.leases].map(([id, l]) => [id, l.org, l.released]),
      charges: [...b.charges],
      quotas: [...b.quotas.values()].map((q) => [q.scope, q.window, q.tokens, q.cost]),
      touches: [...b.touches],
      usage: b.rows,
      contents: b.contents
    })
    const res = await this.conn.pool.query<{ q_scope: string, q_window: number, q_tokens: number, q_cost: number }>({ ...END_BATCH, values: [payload] })
    for (const r of res.rows) b.totals.set(`${r.q_window}\n${r.q_scope}`, { tokens: r.q_tokens, cost_nano: r.q_cost })
  }
}
