import type pg from 'pg'
import { auditRecord, toAuditRow, type AuditRecord } from '../tenants.js'
import type { Actor, AuditEntry, AuditRow, AuditStore, Cursor } from '../types.js'
import type { Connection } from './db.js'

const INSERT = 'INSERT INTO audit_log (id, at, action, target, actor, identity, detail) VALUES ($1, $2, $3, $4, $5, $6, $7)'

/** The audit log: written in the transaction of the change it tells of, read newest first. */
export class AuditRepository implements AuditStore {
  constructor (private readonly conn: Connection) {}

  /** Inside the caller's transaction. */
  async insert (client: pg.PoolClient, action: string, target: string, detail: Record<string, unknown>, by: Actor, now: number): Promise<void> {
    const r = auditRecord(action, target, detail, by, now)
    await client.query(INSERT, [r.id, r.at, r.action, r.target, r.actor, r.identity, r.detail])
  }

  async record (entry: AuditEntry, now: number, by: Actor): Promise<void> {
    const r = auditRecord(entry.action, entry.target, entry.detail ?? {}, by, now)
    await this.conn.q(INSERT, [r.id, r.at, r.action, r.target, r.actor, r.identity, r.detail])
  }

  async page (limit: number, cursor?: Cursor): Promise<AuditRow[]> {
    const rows = cursor === undefined
      ? (await this.conn.q<AuditRecord>('SELECT * FROM audit_log ORDER BY at DESC, id DESC LIMIT $1', [limit])).rows
      : (await this.conn.q<AuditRecord>('SELECT * FROM audit_log WHERE (at, id) < ($1, $2) ORDER BY at DESC, id DESC LIMIT $3', [cursor.created_at, cursor.id, limit])).rows
    return rows.map(toAuditRow)
  }
}
