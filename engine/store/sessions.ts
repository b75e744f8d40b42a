import type { PendingLogin, Role, Session, SessionInfo } from './types.js'

// Operators' sessions and sign-ins under way as both stores hold them: rows keyed by the SHA-256
// of the browser's secret, so that the tables hold nothing a browser could present.

export interface SessionRow {
  id_hash: string
  sub: string
  email: string | null
  name: string | null
  role: string
  org_id: string | null
  csrf: string
  created_at: number
  expires_at: number
  id_token: string | null
}

export interface LoginRow { id_hash: string, state: string, nonce: string, verifier: string, target: string, expires_at: number }

export const SESSION_COLUMNS = ['id_hash', 'sub', 'email', 'name', 'role', 'org_id', 'csrf', 'created_at', 'expires_at', 'id_token'] as const satisfies ReadonlyArray<keyof SessionRow>
export const LOGIN_COLUMNS = ['id_hash', 'state', 'nonce', 'verifier', 'target', 'expires_at'] as const satisfies ReadonlyArray<keyof LoginRow>

export function sessionRow (idHash: string, s: Session): SessionRow {
  return { id_hash: idHash, sub: s.sub, email: s.email, name: s.name, role: s.role, org_id: s.org, csrf: s.csrf, created_at: s.created_at, expires_at: s.expires_at, id_token: s.id_token }
}

export function toSession (r: SessionRow): Session {
  return { sub: r.sub, email: r.email, name: r.name, role: r.role as Role, org: r.org_id, csrf: r.csrf, created_at: r.created_at, expires_at: r.expires_at, id_token: r.id_token }
}

export function toSessionInfo (r: SessionRow): SessionInfo {
  return { handle: r.id_hash, sub: r.sub, email: r.email, name: r.name, role: r.role as Role, org: r.org_id, created_at: r.created_at, expires_at: r.expires_at }
}

export function loginRow (idHash: string, l: PendingLogin): LoginRow {
  return { id_hash: idHash, state: l.state, nonce: l.nonce, verifier: l.verifier, target: l.to, expires_at: l.expires_at }
}

export function toLogin (r: LoginRow): PendingLogin {
  return { state: r.state, nonce: r.nonce, verifier: r.verifier, to: r.target === 'admin' ? 'admin' : 'developer', expires_at: r.expires_at }
}
