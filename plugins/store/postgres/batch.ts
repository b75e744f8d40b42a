import type pg from 'pg'
import type { ContentRow, QuotaUsage, UsageRow } from '../types.js'
import { inTransaction, isConnectionError, unavailable, type Connection } from './db.js'

const RETRY_MS = 250
/** How long a lease give-back nobody waits for may wait for other writes to go with. */
const LATER_MS = 5

export const USAGE_COLUMNS = ['id', 'created_at', 'trace_id', 'org_id', 'project_id', 'key_id', 'endpoint', 'model', 'provider', 'stream', 'status',
  'prompt_tokens', 'cached_input_tokens', 'completion_tokens', 'total_tokens', 'cost_nano', 'latency_ms', 'ttft_ms', 'cache_hit', 'saved_nano'] as const satisfies ReadonlyArray<keyof UsageRow>

const USAGE_TYPES: Record<typeof USAGE_COLUMNS[number], string> = {
  id: 'text', created_at: 'bigint', trace_id: 'text', org_id: 'text', project_id: 'text', key_id: 'text', endpoint: 'text', model: 'text', provider: 'text',
  stream: 'int', status: 'text', prompt_tokens: 'bigint', cached_input_tokens: 'bigint', completion_tokens: 'bigint', total_tokens: 'bigint', cost_nano: 'bigint',
  latency_ms: 'float8', ttft_ms: 'float8', cache_hit: 'int', saved_nano: 'bigint'
}

const INSERT_USAGE = `INSERT INTO usage_records (${USAGE_COLUMNS.join(', ')})
  SELECT * FROM unnest(${USAGE_COLUMNS.map((c, i) => `$${i + 1}::${USAGE_TYPES[c]}[]`).join(', ')})`

// Leases shrink by what their calls took and what is given back, never below zero: a lease row
// already released (its instance was taken for dead) releases nothing more, and its calls' charges
// still apply. Every charge is capped at the balance.
const SETTLE = `WITH l AS (SELECT * FROM unnest($1::text[], $2::bigint[]) AS l(id, released)),
  old AS (SELECT h.id, h.org_id, h.amount_nano AS amount, LEAST(l.released, h.amount_nano) AS released FROM holds h JOIN l ON l.id = h.id FOR UPDATE OF h),
  shrunk AS (UPDATE holds h SET amount_nano = old.amount - old.released FROM old WHERE h.id = old.id AND old.amount > old.released),
  gone AS (DELETE FROM holds h USING old WHERE h.id = old.id AND old.amount <= old.released),
  per AS (SELECT org, sum(released) AS released, sum(charge) AS charge FROM (
      SELECT org_id AS org, released, 0::bigint AS charge FROM old
      UNION ALL SELECT org, 0::bigint, charge FROM unnest($3::text[], $4::bigint[]) AS c(org, charge)) x GROUP BY org)
  UPDATE organizations o SET held_nano = o.held_nano - per.released,
    balance_nano = o.balance_nano - LEAST(per.charge, o.balance_nano), spent_nano = o.spent_nano + LEAST(per.charge, o.balance_nano)
  FROM per WHERE o.id = per.org`

// rows in key order, so that two instances' batches lock shared rows in the same order
const COUNT_QUOTAS = `INSERT INTO quota_usage (scope, window_start, tokens, cost_nano)
  SELECT scope, win, tokens, cost FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bigint[]) AS q(scope, win, tokens, cost) ORDER BY scope, win
  ON CONFLICT (scope, window_start) DO UPDATE SET tokens = quota_usage.tokens + EXCLUDED.tokens, cost_nano = quota_usage.cost_nano + EXCLUDED.cost_nano
  RETURNING scope, window_start, tokens, cost_nano`

const TOUCH_KEYS = `UPDATE api_keys k SET last_used_at = t.at FROM unnest($1::text[], $2::bigint[]) AS t(id, at)
  WHERE k.id = t.id AND (k.last_used_at IS NULL OR k.last_used_at < t.at)`

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
  const done = new Promise<void>((res, rej) => { resolve = res; reject = rej })
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
        await inTransaction(this.conn.pool, async (client) => { await this.write(client, b) })
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

  private async write (client: pg.PoolClient, b: Batch): Promise<void> {
    if (b.leases.size > 0 || b.charges.size > 0) {
      const orgs = new Set([...b.charges.keys(), ...[...b.leases.values()].map((l) => l.org)])
      // organizations first, in id order, as refills and releases lock them: no deadlock
      await client.query('SELECT 1 FROM organizations WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE', [[...orgs]])
      await client.query(SETTLE, [[...b.leases.keys()], [...b.leases.values()].map((l) => l.released), [...b.charges.keys()], [...b.charges.values()]])
    }
    if (b.quotas.size > 0) {
      const qs = [...b.quotas.values()]
      const res = await client.query<{ scope: string, window_start: number, tokens: number, cost_nano: number }>(COUNT_QUOTAS,
        [qs.map((q) => q.scope), qs.map((q) => q.window), qs.map((q) => q.tokens), qs.map((q) => q.cost)])
      for (const r of res.rows) b.totals.set(`${r.window_start}\n${r.scope}`, { tokens: r.tokens, cost_nano: r.cost_nano })
    }
    if (b.touches.size > 0) {
      const ids = [...b.touches.keys()].sort()
      await client.query(TOUCH_KEYS, [ids, ids.map((id) => b.touches.get(id))])
    }
    if (b.rows.length > 0) await client.query(INSERT_USAGE, USAGE_COLUMNS.map((c) => b.rows.map((r) => r[c])))
    if (b.contents.length > 0) {
      await client.query('INSERT INTO usage_content (usage_id, created_at, request, response) SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[])',
        [b.contents.map((c) => c.usage_id), b.contents.map((c) => c.created_at), b.contents.map((c) => c.request), b.contents.map((c) => c.response)])
    }
  }
}
