import type { DB } from './db.js'

export interface Bucket { t: number, calls: number, prompt_tokens: number, cached_input_tokens: number, completion_tokens: number, cost_nano: number }

/** Read-only queries behind the developer console, scoped to one project. */
export class ConsoleQueries {
  private readonly bucketsStmt

  constructor (db: DB) {
    this.bucketsStmt = db.prepare<Record<string, unknown>, Bucket>(`SELECT (created_at / CAST(@size AS INTEGER)) * CAST(@size AS INTEGER) AS t, count(*) AS calls,
      sum(prompt_tokens) AS prompt_tokens, sum(cached_input_tokens) AS cached_input_tokens,
      sum(completion_tokens) AS completion_tokens, sum(cost_nano) AS cost_nano
      FROM usage_records WHERE org_id = @org AND project_id = @project AND created_at >= @since
      GROUP BY 1 ORDER BY 1`)
  }

  buckets (org: string, project: string, since: number, size: number): Bucket[] {
    return this.bucketsStmt.all({ org, project, since, size })
  }
}
