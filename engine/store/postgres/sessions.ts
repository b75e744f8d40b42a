import { hashKey } from '../tenants.js'
import { loginRow, SESSION_COLUMNS, sessionRow, toLogin, toSession, toSessionInfo, type LoginRow, type SessionRow } from '../sessions.js'
import type { PendingLogin, Role, Session, SessionInfo, SessionStore } from '../types.js'
import type { Connection } from './db.js'

/** How long Redis keeps a sign-in under way: longer than any sign-in lasts. */
const LOGIN_KEPT_MS = 15 * 60_000

const INSERT = `INSERT INTO sessions (${SESSION_COLUMNS.join(', ')}) VALUES (${SESSION_COLUMNS.map((_c, i) => `$${i + 1}`).join(', ')})`

/**
 * Operators' sessions in PostgreSQL, which every instance reads; sign-ins under way in Redis,
 * where they expire by themselves and are taken once (GET and DEL in one transaction).
 */
export class SessionRepository implements SessionStore {
  constructor (private readonly conn: Connection) {}

  private loginKey (idHash: string): string { return this.conn.key('sso-login', idHash) }

  async create (id: string, session: Session): Promise<void> {
    const row = sessionRow(hashKey(id), session)
    await this.conn.q(INSERT, SESSION_COLUMNS.map((c) => row[c]))
  }

  async get (id: string, now: number): Promise<Session | undefined> {
    const rows = (await this.conn.q<SessionRow>('SELECT * FROM sessions WHERE id_hash = $1 AND expires_at > $2', [hashKey(id), now])).rows
    return rows[0] === undefined ? undefined : toSession(rows[0])
  }

  async end (id: string): Promise<boolean> {
    return ((await this.conn.q('DELETE FROM sessions WHERE id_hash = $1', [hashKey(id)])).rowCount ?? 0) > 0
  }

  async endSubject (sub: string, keep?: { role: Role, org: string | null }): Promise<number> {
    const r = keep === undefined
      ? await this.conn.q('DELETE FROM sessions WHERE sub = $1', [sub])
      : await this.conn.q('DELETE FROM sessions WHERE sub = $1 AND NOT (role = $2 AND org_id IS NOT DISTINCT FROM $3)', [sub, keep.role, keep.org])
    return r.rowCount ?? 0
  }

  async list (now: number): Promise<SessionInfo[]> {
    return (await this.conn.q<SessionRow>('SELECT * FROM sessions WHERE expires_at > $1 ORDER BY created_at DESC, id_hash', [now])).rows.map(toSessionInfo)
  }

  async endHandle (handle: string, now: number): Promise<SessionInfo | undefined> {
    const row = (await this.conn.q<SessionRow>('DELETE FROM sessions WHERE id_hash = $1 AND expires_at > $2 RETURNING *', [handle, now])).rows[0]
    return row === undefined ? undefined : toSessionInfo(row)
  }

  async begin (id: string, login: PendingLogin): Promise<void> {
    const row = loginRow(hashKey(id), login)
    // Redis forgets it on its own clock; take() holds it to expires_at on the gateway's
    await this.conn.r(async (redis) => await redis.set(this.loginKey(row.id_hash), JSON.stringify(row), 'PX', LOGIN_KEPT_MS))
  }

  async take (id: string, now: number): Promise<PendingLogin | undefined> {
    const key = this.loginKey(hashKey(id))
    const results = await this.conn.r(async (redis) => await redis.multi().get(key).del(key).exec())
    const text = results?.[0]?.[1]
    if (typeof text !== 'string') return undefined
    const row = JSON.parse(text) as LoginRow
    return row.expires_at <= now ? undefined : toLogin(row)
  }

  async sweep (now: number): Promise<number> {
    return (await this.conn.q('DELETE FROM sessions WHERE expires_at <= $1', [now])).rowCount ?? 0
  }
}
