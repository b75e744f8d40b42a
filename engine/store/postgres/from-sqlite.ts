import type Database from 'better-sqlite3'
import type pg from 'pg'
import { sqliteDriver } from '../sqlite/driver.js'
import { inTransaction, migrate, pgPool } from './db.js'

// `modelgate store migrate --from FILE.db --to postgres://…`: copies a SQLite store (stopped) into
// an empty PostgreSQL database in one transaction (the audit log included), then reads both back
// and compares the totals.
// Open balance holds are copied with the holder `migrated`, which never beats a heartbeat: the
// first instance on PostgreSQL releases them once stale_hold_s has passed.

const TABLES: Array<{ name: string, columns: string[] }> = [
  { name: 'organizations', columns: ['id', 'balance_nano', 'held_nano', 'spent_nano', 'uncollected_nano', 'created_at', 'quota', 'deleted_at'] },
  { name: 'projects', columns: ['org_id', 'id', 'created_at', 'quota', 'deleted_at'] },
  {
    name: 'api_keys',
    columns: ['id', 'hash', 'hint', 'org_id', 'project_id', 'name', 'models', 'passthrough', 'mcp', 'source', 'created_at', 'revoked_at',
      'expires_at', 'rpm', 'tpm', 'budget_nano', 'budget_per', 'last_used_at', 'replaces', 'lineage']
  },
  { name: 'holds', columns: ['id', 'org_id', 'amount_nano', 'holder', 'created_at'] },
  { name: 'quota_usage', columns: ['scope', 'window_start', 'tokens', 'cost_nano'] },
  { name: 'usage_records', columns: ['id', 'created_at', 'trace_id', 'org_id', 'project_id', 'key_id', 'endpoint', 'model', 'provider', 'stream', 'status', 'prompt_tokens', 'cached_input_tokens', 'completion_tokens', 'total_tokens', 'cost_nano', 'latency_ms', 'ttft_ms', 'cache_hit', 'saved_nano', 'attempts', 'dropped_params', 'cache_write_tokens', 'images', 'cost_detail', 'error', 'tags', 'requested_model', 'fallbacks'] },
  { name: 'usage_content', columns: ['usage_id', 'created_at', 'request', 'response'] },
  { name: 'audit_log', columns: ['id', 'at', 'action', 'target', 'org_id', 'actor', 'identity', 'detail'] },
  { name: 'passthrough_objects', columns: ['provider', 'id', 'kind', 'org_id', 'project_id', 'created_at'] }
]

const CHUNK = 1000

export interface Totals { organizations: number, balance_nano: number, held_nano: number, spent_nano: number, projects: number, api_keys: number, holds: number, usage_records: number, usage_cost_nano: number, usage_tokens: number }

/** `usage`: the usage records' table, or on the SQLite side the view that adds its journal's. */
const totalsSql = (usage: string): string => `SELECT
  (SELECT count(*) FROM organizations) AS organizations,
  (SELECT coalesce(sum(balance_nano), 0) FROM organizations) AS balance_nano,
  (SELECT coalesce(sum(held_nano), 0) FROM organizations) AS held_nano,
  (SELECT coalesce(sum(spent_nano), 0) FROM organizations) AS spent_nano,
  (SELECT count(*) FROM projects) AS projects,
  (SELECT count(*) FROM api_keys) AS api_keys,
  (SELECT count(*) FROM holds) AS holds,
  (SELECT count(*) FROM ${usage}) AS usage_records,
  (SELECT coalesce(sum(cost_nano), 0) FROM ${usage}) AS usage_cost_nano,
  (SELECT coalesce(sum(total_tokens), 0) FROM ${usage}) AS usage_tokens`

export interface MigrationResult { source: Totals, target: Totals, same: boolean }

export async function migrateSqliteToPostgres (file: string, url: string): Promise<MigrationResult> {
  const SQLite = sqliteDriver()
  const db = new SQLite(file, { readonly: true, fileMustExist: true })
  const pool = pgPool(url, 2)
  try {
    await migrate(pool)
    const existing = (await pool.query<{ n: number }>('SELECT count(*)::bigint AS n FROM organizations')).rows[0]?.n ?? 0
    if (existing > 0) throw new Error(`the target already holds ${existing} organization(s): migrate into an empty database`)
    // the usage records still in the SQLite store's journal too (a file opened read-only is not
    // migrated: one from before the journal has none)
    const usage = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'view' AND name = 'usage_records_all'").get() === undefined ? 'usage_records' : 'usage_records_all'
    await inTransaction(pool, async (client) => {
      for (const table of TABLES) {
        // a table a later migration added is missing from a file last served before it
        if (db.prepare('SELECT 1 FROM sqlite_master WHERE name = ?').get(table.name) === undefined) continue
        await copy(db, client, table.name === 'usage_records' ? usage : table.name, table.name, table.columns)
      }
    })
    const source = numbers(db.prepare(totalsSql(usage)).get() as Record<string, number>)
    const target = numbers((await pool.query(totalsSql('usage_records'))).rows[0] as Record<string, unknown>)
    return { source, target, same: JSON.stringify(source) === JSON.stringify(target) }
  } finally {
    db.close()
    await pool.end()
  }
}

function numbers (row: Record<string, unknown>): Totals {
  return Object.fromEntries(Object.entries(row).map(([k, v]) => [k, Number(v)])) as unknown as Totals
}

/** Copies `columns` of `from` (a table or view of the SQLite file) into `table`. */
async function copy (db: Database.Database, client: pg.PoolClient, from: string, table: string, columns: string[]): Promise<void> {
  // holds written before holders existed have none: they are released like any silent holder's
  const select = table === 'holds'
    ? 'SELECT id, org_id, amount_nano, coalesce(holder, \'migrated\') AS holder, created_at FROM holds'
    : `SELECT ${columns.join(', ')} FROM ${from}`
  let batch: unknown[][] = []
  const flush = async (): Promise<void> => {
    if (batch.length === 0) return
    const params: unknown[] = []
    const values = batch.map((row) => `(${row.map((v) => { params.push(v); return `$${params.length}` }).join(', ')})`)
    await client.query(`INSERT INTO ${table} (${columns.join(', ')}) VALUES ${values.join(', ')}`, params)
    batch = []
  }
  for (const row of db.prepare(select).raw().iterate() as Iterable<unknown[]>) {
    batch.push(table === 'holds' ? row.map((v, i) => (i === 3 ? 'migrated' : v)) : row)
    if (batch.length >= CHUNK) await flush()
  }
  await flush()
}
