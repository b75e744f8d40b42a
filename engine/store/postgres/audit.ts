import type pg from 'pg'
import { auditRecord, toAuditRow, type AuditRecord } from '../tenants.js'
import type { Actor, AuditEntry, AuditRow, AuditStore, Cursor } from '../types.js'
import type { Connection } from './db.js'

const INSERT = 'INSERT INTO audit_log (id, at, action, target, org_id, actor, identity, detail) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)'
const params = (r: AuditRecord): unknown[] => [r.id, r.at, r.action, r.target, r.org_id, r.actor, r.identity, r.detail]

/** The audit log: written in the transaction of the change it tells of, read newest first. */
export class AuditRepository implements AuditStore {
  constructor (private readonly conn: Connection) {}

  /** Inside the caller's transaction. */
  async insert (client: pg.PoolClient, action: string, target: string, org: string | null, detail: Record<string, unknown>, by: Actor, now: number): Promise<void> {
    await client.query(INSERT, params(auditRecord(action, target, org, detail, by, now)))
  }

  async record (entry: AuditEntry, now: number, by: Actor): Promise<void> {
    await this.conn.q(INSERT, params(auditRecord(entry.action, entry.target, entry.org ?? null, entry.detail ?? {}, by, now)))
  }

  async page (limit: number, cursor?: Cursor, org?: string): Promise<AuditRow[]> {
    // ($n::text IS NULL OR org_id = $n): every line, or one organization's, in one statement
    const rows = cursor === undefined
      ? (await this.conn.q<AuditRecord>('SELECT * FROM audit_log WHERE ($2::text IS NULL OR org_id = $2) ORDER BY at DESC, id DESC LIMIT $1', [limit, org ?? null])).rows
      : (await this.conn.q<AuditRecord>('SELECT * FROM audit_log WHERE ($4::text IS NULL OR org_id = $4) AND (at, id) < ($1, $2) ORDER BY at DESC, id DESC LIMIT $3', [cursor.created_at, cursor.id, limit, org ?? null])).rows
    return rows.map(toAuditRow)
  }
}
