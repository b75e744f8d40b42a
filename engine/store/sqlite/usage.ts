import type { Statement } from 'better-sqlite3'
import type { DB } from './db.js'
import type { ThreadChore } from './checkpointer.js'
import type { GroupCommit } from './group-commit.js'
import { summaryRow, summarySql, type RawSummary } from '../summary.js'
import { usageId, type ContentRow, type CostDetail, type Cursor, type SummaryField, type SummaryRow, type UsageBucket, type UsageDetail, type UsageFilter, type UsageRow, type UsageStore, type UsageTotals } from '../types.js'

const USAGE_COLUMNS = ['id', 'created_at', 'trace_id', 'org_id', 'project_id', 'key_id', 'endpoint', 'model', 'provider', 'stream', 'status',
  'prompt_tokens', 'cached_input_tokens', 'completion_tokens', 'total_tokens', 'cost_nano', 'latency_ms', 'ttft_ms', 'cache_hit', 'saved_nano',
  'cache_write_tokens', 'images', 'error', 'requested_model'] as const satisfies ReadonlyArray<keyof UsageRow>
/** Arrays kept as JSON text, bound after USAGE_COLUMNS; then cost_detail, an object as JSON text or NULL. */
const JSON_COLUMNS = ['attempts', 'dropped_params', 'tags', 'fallbacks'] as const satisfies ReadonlyArray<keyof UsageRow>

/** An array as the JSON text a column keeps; the common empty one without a call to JSON.stringify. */
const jsonText = (a: readonly unknown[] | undefined): string => a === undefined || a.length === 0 ? '[]' : JSON.stringify(a)
// A call's tags are a frozen list shared by the calls that sent the same header (engine/gateway/tags.ts): its text is made once
const tagTexts = new WeakMap<readonly string[], string>()
const tagsText = (tags: readonly string[] | undefined): string => {
  if (tags === undefined || tags.length === 0) return '[]'
  if (!Object.isFrozen(tags)) return JSON.stringify(tags)
  let text = tagTexts.get(tags)
  if (text === undefined) { text = JSON.stringify(tags); tagTexts.set(tags, text) }
  return text
}

/** A cost by part as the JSON text its column keeps: integers only, so written out directly (a fifth of JSON.stringify's time on this hot path). */
const costText = (d: CostDetail | null): string | null => d === null
  ? null
  : `{"input":${d.input},"cached_input":${d.cached_input},"cache_write":${d.cache_write},"output":${d.output},"images":${d.images},"per_request":${d.per_request},"tool_call":${d.tool_call},"tier":${d.tier === null ? 'null' : d.tier}}`

/** A row as read: the JSON columns parsed (in place). */
function parsed (r: UsageRow): UsageRow {
  const raw = r as unknown as Record<string, unknown>
  for (const c of JSON_COLUMNS) raw[c] = typeof raw[c] === 'string' ? JSON.parse(raw[c]) : []
  raw.cost_detail = typeof raw.cost_detail === 'string' ? JSON.parse(raw.cost_detail) : null
  return r
}

// Each filter's condition. A statement holds only the conditions of the filters given, so that
// SQLite can pick the index that fits (org, org + project, or time alone): a prepared
// `(@org IS NULL OR org_id = @org)` would be planned once for every case, as a scan.
const CONDITIONS: Array<[Exclude<keyof UsageFilter, 'status'>, string]> = [
  ['org', 'org_id = @org'], ['project', 'project_id = @project'], ['key_id', 'key_id = @key_id'],
  ['model', 'model = @model'], ['endpoint', 'endpoint = @endpoint'], ['provider', 'provider = @provider'],
  // `tags <> '[]'`: the tagged records' own (partial) index by time, migrations 021 and 022
  ['tag', "tags <> '[]' AND EXISTS (SELECT 1 FROM json_each(usage_records.tags) WHERE value = @tag)"],
  ['since', 'created_at >= @since'], ['until', 'created_at < @until']
]

/**
 * A record whose commit carries at most this many writes goes to usage_journal: a lone call's
 * record, its charge and its quota count (sums of a group: one write each however many calls
 * share it), and one more. One in a larger group goes straight to usage_records, whose pages the
 * group's other records share: under load (32 connections, 17.5 writes a commit on average) the
 * journal's second insert, delete and batch moves cost more than the pages it saves, and the
 * records went straight to the table then (at 16 here, 175 → 192 µs a call in one interleaved run).
 */
const JOURNAL_GROUP = 4
/**
 * The journal is moved into usage_records, on the event loop, once this process has written this
 * many records to it: 512 on a store without a checkpoint thread (':memory:'); with one, the
 * thread moves it (journalChore) and this is only the backstop should the thread stop.
 */
const FOLD_ROWS = 512
const BACKSTOP_FOLD_ROWS = 16_384
/** The journal's size from which the checkpoint thread moves it without waiting for the WAL's next restart. */
const THREAD_FOLD_ROWS = 2048
const CLEAR_SQL = 'DELETE FROM usage_journal'

const pageSql = (where: string): string => `SELECT * FROM usage_records ${where} ORDER BY created_at DESC, id DESC LIMIT @limit`

export class UsageRepository implements UsageStore {
  private readonly insertStmt
  private readonly insertContentStmt
  /** page, totals and summary statements by the filters they hold (one per combination of the filters given, of the number of statuses, and of a cursor: a few thousand at most) */
  private readonly shapes = new Map<string, Statement<Record<string, unknown>, unknown>>()
  private readonly sweepStmt
  private readonly countStmt
  private readonly bucketsStmt
  private readonly byIdStmt
  private readonly contentStmt
  private readonly journalStmt
  private readonly foldStmt
  private readonly clearStmt
  private readonly journalRowsStmt
  private readonly dropJournalRowStmt
  private readonly journalEmptyStmt
  private readonly foldTx: () => void
  /** Records this process wrote to the journal since it last queued a fold. */
  private journaled = 0
  private foldRows = FOLD_ROWS
  private readonly foldSql: string
  private foldQueued = false
  readonly insertMany: (rows: UsageRow[], contents: ContentRow[]) => void

  constructor (private readonly db: DB, private readonly commit: GroupCommit, private readonly onError: (err: unknown, what: string) => void = () => {}) {
    // bound by position: a named binding looks each of the 18 names up on the row object, which
    // made the insert about a quarter slower (batches of 22 records: 18 → 13 µs a record)
    const columns = [...USAGE_COLUMNS, ...JSON_COLUMNS, 'cost_detail']
    const list = columns.join(', ')
    const values = columns.map(() => '?').join(', ')
    this.insertStmt = db.prepare<unknown[]>(`INSERT INTO usage_records (${list}) VALUES (${values})`)
    this.journalStmt = db.prepare<unknown[]>(`INSERT INTO usage_journal (${list}) VALUES (${values})`)
    this.foldSql = `INSERT INTO usage_records (${list}) SELECT ${list} FROM usage_journal ORDER BY rowid`
    this.foldStmt = db.prepare(this.foldSql)
    this.clearStmt = db.prepare(CLEAR_SQL)
    this.journalRowsStmt = db.prepare<[], unknown[]>(`SELECT rowid, ${list} FROM usage_journal ORDER BY rowid`).raw()
    this.dropJournalRowStmt = db.prepare<[number]>('DELETE FROM usage_journal WHERE rowid = ?')
    this.journalEmptyStmt = db.prepare<[], { empty: number }>('SELECT NOT EXISTS (SELECT 1 FROM usage_journal) AS empty')
    const foldTx = db.transaction(() => { this.foldIn() })
    this.foldTx = () => { foldTx.immediate() }
    this.byIdStmt = db.prepare<[string, string], UsageRow>('SELECT * FROM usage_records WHERE id = ? AND trace_id = ?')
    this.contentStmt = db.prepare<[string], { request: string | null, response: string | null }>('SELECT request, response FROM usage_content WHERE usage_id = ?')
    this.insertContentStmt = db.prepare('INSERT INTO usage_content (usage_id, created_at, request, response) VALUES (@usage_id, @created_at, @request, @response)')
    this.sweepStmt = db.prepare('DELETE FROM usage_content WHERE created_at < ?')
    this.countStmt = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM usage_records')
    this.bucketsStmt = db.prepare<Record<string, unknown>, UsageBucket>(`SELECT (created_at / CAST(@size AS INTEGER)) * CAST(@size AS INTEGER) AS t, count(*) AS calls,
      sum(prompt_tokens) AS prompt_tokens, sum(cached_input_tokens) AS cached_input_tokens,
      sum(completion_tokens) AS completion_tokens, sum(cost_nano) AS cost_nano, sum(saved_nano) AS saved_nano
      FROM usage_records WHERE org_id = @org AND project_id = @project AND created_at >= @since
      GROUP BY 1 ORDER BY 1`)
    this.insertMany = db.transaction((rows: UsageRow[], contents: ContentRow[]) => {
      for (const row of rows) this.insertRow(row)
      for (const c of contents) this.insertContentStmt.run(c)
    })
  }

  /** The filters given, as statement parameters, and the WHERE clause that holds them. */
  private where (f: UsageFilter, cursor: Cursor | undefined): { params: Record<string, unknown>, sql: string } {
    const params: Record<string, unknown> = {}
    const conds: string[] = []
    for (const [name, cond] of CONDITIONS) {
      const v = f[name]
      if (v === undefined) continue
      params[name] = v
      conds.push(cond)
    }
    if (f.status !== undefined) {
      conds.push(`status IN (${f.status.map((s, i) => { params[`status${i}`] = s; return `@status${i}` }).join(', ')})`)
      // the literal term lets SQLite read the failed calls' own (partial) index
      if (!f.status.includes('ok')) conds.push("status <> 'ok'")
    }
    if (cursor !== undefined) {
      params.c_at = cursor.created_at
      params.c_id = cursor.id
      conds.push('(created_at, id) < (@c_at, @c_id)')
    }
    return { params, sql: conds.length === 0 ? '' : `WHERE ${conds.join(' AND ')}` }
  }

  private statement (kind: 'page' | 'totals', where: string): Statement<Record<string, unknown>, unknown> {
    const key = `${kind} ${where}`
    let stmt = this.shapes.get(key)
    if (stmt === undefined) {
      stmt = this.db.prepare<Record<string, unknown>, unknown>(kind === 'page'
        ? pageSql(where)
        : `SELECT count(*) AS calls, coalesce(sum(prompt_tokens), 0) AS prompt_tokens,
          coalesce(sum(cached_input_tokens), 0) AS cached_input_tokens, coalesce(sum(completion_tokens), 0) AS completion_tokens,
          coalesce(sum(total_tokens), 0) AS total_tokens, coalesce(sum(cost_nano), 0) AS cost_nano FROM usage_records ${where}`)
      this.shapes.set(key, stmt)
    }
    return stmt
  }

  /**
   * Moves the journal's records into usage_records, in the transaction running (a group's, or
   * the one fold() opens). A record that cannot move (its id already in usage_records: not
   * written twice by this store, whose ids come from random trace ids) stays in the journal and
   * is reported, so that the others still move and nothing is dropped.
   */
  private foldIn (): void {
    this.journaled = 0
    try {
      this.foldStmt.run()
      this.clearStmt.run()
      return
    } catch (err) {
      // the failed statement alone was undone; the records move one by one below
      this.onError(err, 'usage records not moved from the journal at once; moving them one by one')
    }
    for (const [rowid, ...values] of this.journalRowsStmt.all() as unknown[][]) {
      try {
        this.insertStmt.run(...values)
        this.dropJournalRowStmt.run(rowid as number)
      } catch (err) {
        this.onError(err, `usage record ${String(values[0])} kept in usage_journal`)
      }
    }
  }

  /**
   * The journal's move as the checkpoint thread's chore (./checkpointer.ts): made on the thread,
   * in the holds it asks for, so that no call waits on the event loop for a move. From then on the
   * event loop moves the journal only past BACKSTOP_FOLD_ROWS (the thread stopped), and when the
   * thread's move fails (it is reported; the event loop's move then keeps the records it cannot
   * move, one by one).
   */
  journalChore (): ThreadChore {
    this.foldRows = BACKSTOP_FOLD_ROWS
    return {
      // after a full move the journal's rowids start again at 1: its largest is its size, read from one page
      backlogSql: 'SELECT coalesce(max(rowid), 0) FROM usage_journal',
      threshold: THREAD_FOLD_ROWS,
      withRestart: THREAD_FOLD_ROWS / 8,
      sql: [this.foldSql, CLEAR_SQL],
      done: (made) => {
        if (made) { this.journaled = 0; return }
        if (!this.foldQueued) this.queueFold()
      }
    }
  }

  private queueFold (): void {
    this.foldQueued = true
    this.commit.later(() => { this.foldQueued = false; this.foldIn() })
  }

  /** Moves the journal's records (every process's) into usage_records now, in a transaction of its own. */
  fold (): void {
    if ((this.journalEmptyStmt.get() as { empty: number }).empty === 1) return
    if (this.db.inTransaction) this.foldIn()
    else this.foldTx()
  }

  /**
   * Every read of usage_records comes after a fold, so that it sees every committed record. A fold
   * that fails (another process held the write lock past busy_timeout) is reported, and the read
   * goes on without the journal's records rather than failing.
   */
  private foldBeforeRead (): void {
    try { this.fold() } catch (err) { this.onError(err, 'usage journal not moved before a read; the read leaves out its records') }
  }

  /** Newest first; pass the last row's cursor to get the next page. */
  page (f: UsageFilter, limit: number, cursor?: Cursor): UsageRow[] {
    this.foldBeforeRead()
    const { params, sql } = this.where(f, cursor)
    return (this.statement('page', sql).all({ ...params, limit }) as UsageRow[]).map(parsed)
  }

  byTrace (traceId: string): UsageDetail | undefined {
    this.foldBeforeRead()
    const id = usageId(traceId)
    const row = this.byIdStmt.get(id, traceId)
    if (row === undefined) return undefined
    return { row: parsed(row), content: this.contentStmt.get(id) ?? null }
  }

  totals (f: UsageFilter): UsageTotals {
    this.foldBeforeRead()
    const { params, sql } = this.where(f, undefined)
    return this.statement('totals', sql).get(params) as UsageTotals
  }

  /** SQLite's plan for page(f): which index it searches, and whether it sorts (for tests). */
  planOfPage (f: UsageFilter, cursor?: Cursor): string[] {
    const { params, sql } = this.where(f, cursor)
    const rows = this.db.prepare(`EXPLAIN QUERY PLAN ${pageSql(sql)}`).all({ ...params, limit: 1 }) as Array<{ detail: string }>
    return rows.map((r) => r.detail)
  }

  /**
   * Inserted with the other writes of this event-loop turn; resolves once committed. A group of
   * a few writes puts it in the journal (a record with content goes straight to usage_records,
   * which its content row refers to).
   */
  record (row: UsageRow, content?: ContentRow): Promise<void> {
    return this.commit.run(() => {
      if (content !== undefined || this.commit.groupSize > JOURNAL_GROUP) { this.insert(row, content); return }
      this.journalStmt.run(...this.rowValues(row))
      if (++this.journaled >= this.foldRows && !this.foldQueued) this.queueFold()
    }, { retry: true })
  }

  insert (row: UsageRow, content?: ContentRow): void {
    this.insertRow(row)
    if (content !== undefined) this.insertContentStmt.run(content)
  }

  summary (f: UsageFilter, groupBy: SummaryField[], bucketMs?: number): SummaryRow[] {
    this.foldBeforeRead()
    const { params, sql } = this.where(f, undefined)
    const bucketed = bucketMs !== undefined
    const key = `summary ${groupBy.join(',')} ${String(bucketed)} ${sql}`
    let stmt = this.shapes.get(key)
    if (stmt === undefined) {
      // sums as 64-bit integers, read as bigint: exact past 2^53
      stmt = this.db.prepare<Record<string, unknown>, unknown>(summarySql('sqlite', groupBy, bucketed, sql, 'CAST(@bucket AS INTEGER)')).safeIntegers(true)
      this.shapes.set(key, stmt)
    }
    const rows = stmt.all(bucketed ? { ...params, bucket: bucketMs } : params) as RawSummary[]
    return rows.map((r) => summaryRow(r, groupBy, bucketed))
  }

  /** SQLite's plan for summary(f, ...): which index it reads the records through (for tests). */
  planOfSummary (f: UsageFilter, groupBy: SummaryField[], bucketMs?: number): string[] {
    const { params, sql } = this.where(f, undefined)
    const rows = this.db.prepare(`EXPLAIN QUERY PLAN ${summarySql('sqlite', groupBy, bucketMs !== undefined, sql, 'CAST(@bucket AS INTEGER)')}`).all(bucketMs === undefined ? params : { ...params, bucket: bucketMs }) as Array<{ detail: string }>
    return rows.map((r) => r.detail)
  }

  buckets (org: string, project: string, since: number, size: number): UsageBucket[] {
    this.foldBeforeRead()
    return this.bucketsStmt.all({ org, project, since, size })
  }

  private rowValues (r: UsageRow): unknown[] {
    // one array a record, filled in place (each record of a busy gateway passes here)
    const values: unknown[] = []
    for (const c of USAGE_COLUMNS) values.push(r[c] ?? null)
    values.push(jsonText(r.attempts), jsonText(r.dropped_params), tagsText(r.tags), jsonText(r.fallbacks), costText(r.cost_detail))
    return values
  }

  private insertRow (r: UsageRow): void {
    this.insertStmt.run(...this.rowValues(r))
  }

  count (): number {
    this.foldBeforeRead()
    return (this.countStmt.get() as { n: number }).n
  }

  sweepContent (olderThan: number): number {
    return this.sweepStmt.run(olderThan).changes
  }
}
