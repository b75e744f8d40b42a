import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import type { Config } from '../../config/schema.js'
import { AdminUnauthorized, PermissionDenied, RouteNotFound } from '../kernel/errors.js'
import type { Role } from '../store/types.js'

// The admin tokens: admin.token (role admin, named `admin` in the audit log) and admin.tokens,
// each with its role, organization and name. A bearer is compared with every token in constant
// time, so how long a check takes tells nothing of which token came close. With no admin access
// configured at all, the admin routes answer 404, as if they did not exist.

/** Who holds an admin token. */
export interface TokenHolder { role: Role, org: string | null, name: string }

const digest = (s: string): Buffer => createHash('sha256').update(s).digest()

/** `Authorization: Bearer <value>`'s value, or undefined. */
export function bearerOf (request: FastifyRequest): string | undefined {
  const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '')
  return m === null ? undefined : m[1]
}

/** Whether the config opens the admin API at all: a token, or single sign-on. */
export const adminOpen = (config: Pick<Config, 'admin' | 'sso'>): boolean =>
  config.admin.token !== '' || config.admin.tokens.length > 0 || config.sso !== undefined

/** The holder of an admin token, looked up in constant time over every configured token. */
export function adminTokens (admin: Config['admin']): (bearer: string) => TokenHolder | undefined {
  const table = [
    ...(admin.token === '' ? [] : [{ digest: digest(admin.token), holder: { role: 'admin' as const, org: null, name: 'admin' } }]),
    ...admin.tokens.map((t) => ({ digest: digest(t.token), holder: { role: t.role, org: t.org ?? null, name: t.name } }))
  ]
  return (bearer) => {
    const d = digest(bearer)
    let found: TokenHolder | undefined
    for (const entry of table) if (timingSafeEqual(d, entry.digest)) found = entry.holder
    return found
  }
}

/**
 * A check that throws unless the request carries an admin token of one of `roles` (/metrics:
 * admin and viewer, whose figures span every organization).
 */
export function adminGuard (admin: Config['admin'], roles: readonly Role[] = ['admin', 'viewer']): (request: FastifyRequest) => void {
  const lookup = adminTokens(admin)
  const none = admin.token === '' && admin.tokens.length === 0
  return (request) => {
    if (none) throw new RouteNotFound({ method: request.method, url: request.url.split('?')[0] ?? request.url })
    const bearer = bearerOf(request)
    const holder = bearer === undefined ? undefined : lookup(bearer)
    if (holder === undefined) throw new AdminUnauthorized()
    if (!roles.includes(holder.role)) throw new PermissionDenied({ role: holder.role, action: 'read the metrics of every organization' })
  }
}
