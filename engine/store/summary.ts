import type { SummaryField, SummaryRow } from './types.js'

// The usage summary's SQL, one aggregate over the records its filters select (through the index
// that fits them), for both stores.

/** The column each summary field groups by. */
const COLUMNS: Record<SummaryField, string> = { org: 'org_id', project: 'project_id', key_id: 'key_id', model: 'model', provider: 'provider', tag: 'record_tag.tag' }

/** The tag's column in each dialect's join. */
const TAG_COLUMN = { sqlite: 'record_tag.value', postgres: 'record_tag.tag' }

/** Each record once per tag it carries (once, with tag null, when it carries none). */
const TAG_JOIN = {
  sqlite: ' LEFT JOIN json_each(usage_records.tags) AS record_tag',
  postgres: ' LEFT JOIN LATERAL jsonb_array_elements_text(usage_records.tags) AS record_tag(tag) ON true'
}

const SUMMED = ['prompt_tokens', 'cached_input_tokens', 'completion_tokens', 'cost_nano', 'saved_nano'] as const

/**
 * The statement: group fields, the bucket's start (`created_at` rounded down to a multiple of
 * `bucket`, an expression of the statement's parameter) when bucketed, and the sums. Sums are
 * read exactly: SQLite's as 64-bit integers, PostgreSQL's (numeric) as text.
 */
export function summarySql (dialect: 'sqlite' | 'postgres', groupBy: SummaryField[], bucketed: boolean, where: string, bucket: string): string {
  const keys = groupBy.map((g) => `${g === 'tag' ? TAG_COLUMN[dialect] : COLUMNS[g]} AS ${g}`)
  if (bucketed) keys.push(`(created_at / ${bucket}) * ${bucket} AS bucket_start`)
  const sums = SUMMED.map((c) => dialect === 'sqlite' ? `coalesce(sum(${c}), 0) AS ${c}` : `coalesce(sum(${c}), 0)::text AS ${c}`)
  const errors = dialect === 'sqlite' ? "coalesce(sum(status <> 'ok'), 0) AS errors" : "count(*) FILTER (WHERE status <> 'ok') AS errors"
  const names = [...(bucketed ? ['bucket_start'] : []), ...groupBy]
  const grouped = names.length === 0 ? '' : ` GROUP BY ${names.join(', ')} ORDER BY ${names.join(', ')}`
  const from = groupBy.includes('tag') ? `usage_records${TAG_JOIN[dialect]}` : 'usage_records'
  return `SELECT ${[...keys, 'count(*) AS calls', errors, ...sums].join(', ')} FROM ${from} ${where}${grouped}`
}

export type RawSummary = Record<string, string | number | bigint | null>

/** A row of the statement: counts as numbers, money as bigint. */
export function summaryRow (r: RawSummary, groupBy: SummaryField[], bucketed: boolean): SummaryRow {
  const n = (v: unknown): number => Number(v)
  const big = (v: unknown): bigint => BigInt(v as bigint | string | number)
  const row: SummaryRow = {
    calls: n(r.calls),
    errors: n(r.errors),
    prompt_tokens: n(r.prompt_tokens),
    cached_input_tokens: n(r.cached_input_tokens),
    completion_tokens: n(r.completion_tokens),
    cost_nano: big(r.cost_nano),
    saved_nano: big(r.saved_nano)
  }
  const fields = row as unknown as Record<string, unknown>
  for (const g of groupBy) fields[g] = r[g] ?? null
  if (bucketed) row.bucket_start = n(r.bucket_start)
  return row
}
