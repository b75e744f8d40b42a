import type { DB } from './db.js'
import { auditRecord, toAuditRow, type AuditRecord } from '../tenants.js'
import type { Actor, AuditEntry, AuditRow, AuditStore, Cursor } from '../types.js'

/** The audit log: written in the transaction of the change it tells of, read newest first. */
export class AuditRepository implements AuditStore {
  private readonly insertStmt
  private readonly firstStmt
  private readonly afterStmt
  private readonly orgFirstStmt
  private readonly orgAfterStmt

  constructor (db: DB) {
    this.insertStmt = db.prepare<AuditRecord>('INSERT INTO audit_log (id, at, action, target, org_id, actor, identity, detail) VALUES (@id, @at, @action, @target, @org_id, @actor, @identity, @detail)')
    this.firstStmt = db.prepare<[number], AuditRecord>('SELECT * FROM audit_log ORDER BY at DESC, id DESC LIMIT ?')
    this.afterStmt = db.prepare<[number, string, number], AuditRecord>('SELECT * FROM audit_log WHERE (at, id) < (?, ?) ORDER BY at DESC, id DESC LIMIT ?')
    this.orgFirstStmt = db.prepare<[string, number], AuditRecord>('SELECT * FROM audit_log WHERE org_id = ? ORDER BY at DESC, id DESC LIMIT ?')
    this.orgAfterStmt = db.prepare<[string, number, string, number], AuditRecord>('SELECT * FROM audit_log WHERE org_id = ? AND (at, id) < (?, ?) ORDER BY at DESC, id DESC LIMIT ?')
  }

  /** Inside the caller's transaction. */
  insert (action: string, target: string, org: string | null, detail: Record<string, unknown>, by: Actor, now: number): void {
    this.insertStmt.run(auditRecord(action, target, org, detail, by, now))
  }

  record (entry: AuditEntry, now: number, by: Actor): void {
    this.insert(entry.action, entry.target, entry.org ?? null, entry.detail ?? {}, by, now)
  }

  page (limit: number, cursor?: Cursor, org?: string): AuditRow[] {
    const rows = org === undefined
      ? (cursor === undefined ? this.firstStmt.all(limit) : this.afterStmt.all(cursor.created_at, cursor.id, limit))
      : (cursor === undefined ? this.orgFirstStmt.all(org, limit) : this.orgAfterStmt.all(org, cursor.created_at, cursor.id, limit))
    return rows.map(toAuditRow)
  }
}
