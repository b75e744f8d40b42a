import { summaryRow, summarySql } from '../summary.js'
import { usageId, type ContentRow, type Cursor, type SummaryField, type SummaryRow, type UsageBucket, type UsageDetail, type UsageFilter, type UsageRow, type UsageStore, type UsageTotals } from '../types.js'
import type { EndOfCallBatch } from './batch.js'
import type { Connection } from './db.js'

/** The filters given (and the cursor) as a WHERE clause, its values appended to `params`. */
function where (f: UsageFilter, cursor: Cursor | undefined, params: unknown[]): string {
  const conds: string[] = []
  const add = (sql: string, v: unknown): void => { params.push(v); conds.push(sql.replace('?', `$${params.length}`)) }
  if (f.org !== undefined) add('org_id = ?', f.org)
  if (f.project !== undefined) add('project_id = ?', f.project)
  if (f.key_id !== undefined) add('key_id = ?', f.key_id)
  if (f.model !== undefined) add('model = ?', f.model)
  if (f.endpoint !== undefined) add('endpoint = ?', f.endpoint)
  if (f.provider !== undefined) add('provider = ?', f.provider)
  if (f.tag !== undefined) {
    add('tags @> jsonb_build_array(?::text)', f.tag)
    // the literal term lets PostgreSQL read the tagged records' own (partial) index
    conds.push("tags <> '[]'::jsonb")
  }
  if (f.status !== undefined) {
    add('status = ANY(?::text[])', f.status)
    // the literal term lets PostgreSQL read the failed calls' own (partial) index
    if (!f.status.includes('ok')) conds.push("status <> 'ok'")
  }
  if (f.since !== undefined) add('created_at >= ?', f.since)
  if (f.until !== undefined) add('created_at < ?', f.until)
  if (cursor !== undefined) {
    params.push(cursor.created_at, cursor.id)
    conds.push(`(created_at, id) < ($${params.length - 1}, $${params.length})`)
  }
  return conds.length === 0 ? '' : `WHERE ${conds.join(' AND ')}`
}

/** Usage records: written with the end-of-call batch, read by the admin API, the console and the CLI. */
export class UsageRepository implements UsageStore {
  constructor (private readonly conn: Connection, private readonly batch: EndOfCallBatch) {}

  /** Joins the end-of-call batch; resolves once it is committed. */
  record (row: UsageRow, content?: ContentRow): Promise<void> {
    return this.batch.record(row, content)
  }

  async page (f: UsageFilter, limit: number, cursor?: Cursor): Promise<UsageRow[]> {
    const params: unknown[] = []
    const w = where(f, cursor, params)
    params.push(limit)
    return (await this.conn.q<UsageRow>(`SELECT * FROM usage_records ${w} ORDER BY created_at DESC, id DESC LIMIT $${params.length}`, params)).rows
  }

  async byTrace (traceId: string): Promise<UsageDetail | undefined> {
    const id = usageId(traceId)
    const row = (await this.conn.q<UsageRow>('SELECT * FROM usage_records WHERE id = $1 AND trace_id = $2', [id, traceId])).rows[0]
    if (row === undefined) return undefined
    const content = (await this.conn.q<{ request: string | null, response: string | null }>('SELECT request, response FROM usage_content WHERE usage_id = $1', [id])).rows[0]
    return { row, content: content ?? null }
  }

  async totals (f: UsageFilter): Promise<UsageTotals> {
    const params: unknown[] = []
    const w = where(f, undefined, params)
    return (await this.conn.q<UsageTotals>(`SELECT count(*)::bigint AS calls, coalesce(sum(prompt_tokens), 0)::bigint AS prompt_tokens,
      coalesce(sum(cached_input_tokens), 0)::bigint AS cached_input_tokens, coalesce(sum(completion_tokens), 0)::bigint AS completion_tokens,
      coalesce(sum(total_tokens), 0)::bigint AS total_tokens, coalesce(sum(cost_nano), 0)::bigint AS cost_nano FROM usage_records ${w}`, params)).rows[0] as UsageTotals
  }

  async summary (f: UsageFilter, groupBy: SummaryField[], bucketMs?: number): Promise<SummaryRow[]> {
    const params: unknown[] = []
    const w = where(f, undefined, params)
    const bucketed = bucketMs !== undefined
    if (bucketed) params.push(bucketMs)
    const sql = summarySql('postgres', groupBy, bucketed, w, `$${params.length}::bigint`)
    const rows = (await this.conn.q<Record<string, string | null>>(sql, params)).rows
    return rows.map((r) => summaryRow(r, groupBy, bucketed))
  }

  async buckets (org: string, project: string, since: number, size: number): Promise<UsageBucket[]> {
    return (await this.conn.q<UsageBucket>(`SELECT (created_at / $4::bigint) * $4::bigint AS t, count(*)::bigint AS calls,
      sum(prompt_tokens)::bigint AS prompt_tokens, sum(cached_input_tokens)::bigint AS cached_input_tokens,
      sum(completion_tokens)::bigint AS completion_tokens, sum(cost_nano)::bigint AS cost_nano, sum(saved_nano)::bigint AS saved_nano
      FROM usage_records WHERE org_id = $1 AND project_id = $2 AND created_at >= $3 GROUP BY 1 ORDER BY 1`, [org, project, since, Math.max(1, Math.floor(size))])).rows
  }

  async sweepContent (before: number): Promise<number> {
    return (await this.conn.q('DELETE FROM usage_content WHERE created_at < $1', [before])).rowCount ?? 0
  }
}
