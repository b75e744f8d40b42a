import { hashKey } from '../tenants.js'
import { LOGIN_COLUMNS, loginRow, SESSION_COLUMNS, sessionRow, toLogin, toSession, toSessionInfo, type LoginRow, type SessionRow } from '../sessions.js'
import type { PendingLogin, Role, Session, SessionInfo, SessionStore } from '../types.js'
import type { DB } from './db.js'

/** Operators' sessions on the file every worker opens: written at once (a sign-in is rare), read by every worker. */
export class SessionRepository implements SessionStore {
  private readonly insertStmt
  private readonly getStmt
  private readonly endStmt
  private readonly bySubStmt
  private readonly liveStmt
  private readonly endLiveStmt
  private readonly beginStmt
  private readonly takeStmt
  private readonly sweepSessions
  private readonly sweepLogins

  constructor (private readonly db: DB) {
    this.insertStmt = db.prepare<SessionRow>(`INSERT INTO sessions (${SESSION_COLUMNS.join(', ')}) VALUES (${SESSION_COLUMNS.map((c) => `@${c}`).join(', ')})`)
    this.getStmt = db.prepare<[string, number], SessionRow>('SELECT * FROM sessions WHERE id_hash = ? AND expires_at > ?')
    this.endStmt = db.prepare<[string]>('DELETE FROM sessions WHERE id_hash = ?')
    this.bySubStmt = db.prepare<[string], SessionRow>('SELECT * FROM sessions WHERE sub = ?')
    this.liveStmt = db.prepare<[number], SessionRow>('SELECT * FROM sessions WHERE expires_at > ? ORDER BY created_at DESC, id_hash')
    this.endLiveStmt = db.prepare<[string, number], SessionRow>('DELETE FROM sessions WHERE id_hash = ? AND expires_at > ? RETURNING *')
    this.beginStmt = db.prepare<LoginRow>(`INSERT INTO sso_logins (${LOGIN_COLUMNS.join(', ')}) VALUES (${LOGIN_COLUMNS.map((c) => `@${c}`).join(', ')})`)
    this.takeStmt = db.prepare<[string], LoginRow>('DELETE FROM sso_logins WHERE id_hash = ? RETURNING *')
    this.sweepSessions = db.prepare<[number]>('DELETE FROM sessions WHERE expires_at <= ?')
    this.sweepLogins = db.prepare<[number]>('DELETE FROM sso_logins WHERE expires_at <= ?')
  }

  create (id: string, session: Session): void {
    this.insertStmt.run(sessionRow(hashKey(id), session))
  }

  get (id: string, now: number): Session | undefined {
    const row = this.getStmt.get(hashKey(id), now)
    return row === undefined ? undefined : toSession(row)
  }

  end (id: string): boolean {
    return this.endStmt.run(hashKey(id)).changes > 0
  }

  endSubject (sub: string, keep?: { role: Role, org: string | null }): number {
    return this.db.transaction(() => {
      let ended = 0
      for (const row of this.bySubStmt.all(sub)) {
        if (keep !== undefined && row.role === keep.role && row.org_id === keep.org) continue
        ended += this.endStmt.run(row.id_hash).changes
      }
      return ended
    }).immediate()
  }

  list (now: number): SessionInfo[] {
    return this.liveStmt.all(now).map(toSessionInfo)
  }

  endHandle (handle: string, now: number): SessionInfo | undefined {
    const row = this.endLiveStmt.get(handle, now)
    return row === undefined ? undefined : toSessionInfo(row)
  }

  begin (id: string, login: PendingLogin): void {
    this.beginStmt.run(loginRow(hashKey(id), login))
  }

  take (id: string, now: number): PendingLogin | undefined {
    const row = this.takeStmt.get(hashKey(id))
    return row === undefined || row.expires_at <= now ? undefined : toLogin(row)
  }

  sweep (now: number): number {
    return this.sweepSessions.run(now).changes + this.sweepLogins.run(now).changes
  }
}
