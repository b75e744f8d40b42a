import type { DB } from './db.js'

/** A usage_records row (PRODUCT.md §4's UsageRecord with money in nano-dollars). */
export interface UsageRow {
  id: string
  created_at: number
  trace_id: string
  org_id: string | null
  project_id: string | null
  key_id: string | null
  endpoint: string
  model: string
  provider: string | null
  stream: number
  status: string
  prompt_tokens: number
  cached_input_tokens: number
  completion_tokens: number
  total_tokens: number
  cost_nano: number
  latency_ms: number
  ttft_ms: number | null
}

export interface ContentRow { usage_id: string, created_at: number, request: string | null, response: string | null }

export interface UsageFilter {
  org?: string
  project?: string
  key_id?: string
  model?: string
  since?: number
  until?: number
}

export interface Cursor { created_at: number, id: string }

export interface UsageTotals { calls: number, prompt_tokens: number, cached_input_tokens: number, completion_tokens: number, total_tokens: number, cost_nano: number }

const FILTER = `(@org IS NULL OR org_id = @org) AND (@project IS NULL OR project_id = @project)
  AND (@key_id IS NULL OR key_id = @key_id) AND (@model IS NULL OR model = @model)
  AND (@since IS NULL OR created_at >= @since) AND (@until IS NULL OR created_at < @until)`

export class UsageRepository {
  private readonly insertStmt
  private readonly insertContentStmt
  private readonly pageStmt
  private readonly totalsStmt
  private readonly sweepStmt
  private readonly countStmt
  readonly insertMany: (rows: UsageRow[], contents: ContentRow[]) => void

  constructor (db: DB) {
    this.insertStmt = db.prepare(`INSERT INTO usage_records (id, created_at, trace_id, org_id, project_id, key_id, endpoint, model, provider, stream, status,
      prompt_tokens, cached_input_tokens, completion_tokens, total_tokens, cost_nano, latency_ms, ttft_ms)
      VALUES (@id, @created_at, @trace_id, @org_id, @project_id, @key_id, @endpoint, @model, @provider, @stream, @status,
      @prompt_tokens, @cached_input_tokens, @completion_tokens, @total_tokens, @cost_nano, @latency_ms, @ttft_ms)`)
    this.insertContentStmt = db.prepare('INSERT INTO usage_content (usage_id, created_at, request, response) VALUES (@usage_id, @created_at, @request, @response)')
    this.pageStmt = db.prepare<Record<string, unknown>, UsageRow>(`SELECT * FROM usage_records WHERE ${FILTER}
      AND (@c_at IS NULL OR created_at < @c_at OR (created_at = @c_at AND id < @c_id))
      ORDER BY created_at DESC, id DESC LIMIT @limit`)
    this.totalsStmt = db.prepare<Record<string, unknown>, UsageTotals>(`SELECT count(*) AS calls, coalesce(sum(prompt_tokens), 0) AS prompt_tokens,
      coalesce(sum(cached_input_tokens), 0) AS cached_input_tokens, coalesce(sum(completion_tokens), 0) AS completion_tokens,
      coalesce(sum(total_tokens), 0) AS total_tokens, coalesce(sum(cost_nano), 0) AS cost_nano FROM usage_records WHERE ${FILTER}`)
    this.sweepStmt = db.prepare('DELETE FROM usage_content WHERE created_at < ?')
    this.countStmt = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM usage_records')
    this.insertMany = db.transaction((rows: UsageRow[], contents: ContentRow[]) => {
      for (const row of rows) this.insertStmt.run(row)
      for (const c of contents) this.insertContentStmt.run(c)
    })
  }

  private params (f: UsageFilter): Record<string, unknown> {
    return { org: f.org ?? null, project: f.project ?? null, key_id: f.key_id ?? null, model: f.model ?? null, since: f.since ?? null, until: f.until ?? null }
  }

  /** Newest first; pass the last row's cursor to get the next page. */
  page (f: UsageFilter, limit: number, cursor?: Cursor): UsageRow[] {
    return this.pageStmt.all({ ...this.params(f), c_at: cursor?.created_at ?? null, c_id: cursor?.id ?? null, limit })
  }

  totals (f: UsageFilter): UsageTotals {
    return this.totalsStmt.get(this.params(f)) as UsageTotals
  }

  insert (row: UsageRow, content?: ContentRow): void {
    this.insertStmt.run(row)
    if (content !== undefined) this.insertContentStmt.run(content)
  }

  count (): number { return (this.countStmt.get() as { n: number }).n }

  sweepContent (olderThan: number): number {
    return this.sweepStmt.run(olderThan).changes
  }
}

export function encodeCursor (c: Cursor): string {
  return Buffer.from(`${c.created_at}:${c.id}`).toString('base64url')
}

export function decodeCursor (text: string): Cursor | undefined {
  const m = /^(\d+):(.+)$/.exec(Buffer.from(text, 'base64url').toString('utf8'))
  return m === null ? undefined : { created_at: Number(m[1]), id: m[2] as string }
}
