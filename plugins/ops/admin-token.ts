import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyRequest } from 'fastify'
import { AdminUnauthorized, RouteNotFound } from '../kernel/errors.js'

// The admin token's check, for the admin API and a /metrics that needs it. With no token
// configured the route answers 404, as if it did not exist.

const digest = (s: string): Buffer => createHash('sha256').update(s).digest()

/** A check that throws unless the request carries `Authorization: Bearer <token>`. */
export function adminGuard (token: string): (request: FastifyRequest) => void {
  const expected = digest(token)
  return (request) => {
    if (token === '') throw new RouteNotFound({ method: request.method, url: request.url.split('?')[0] ?? request.url })
    const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '')
    if (m === null || !timingSafeEqual(digest(m[1] as string), expected)) throw new AdminUnauthorized()
  }
}
