import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { actorOf, type Operator } from '../access.js'
import { SessionNotFound } from '../../engine/kernel/errors.js'
import { hashKey } from '../../engine/store/tenants.js'
import type { SessionInfo } from '../../engine/store/types.js'
import { Answers, type OperatorSession } from './answers.js'
import { SessionParams, SessionsQuery } from './schemas.js'

// Operators' console sessions (single sign-on), for an admin to see who is signed in and cut
// someone off: list the live ones, end one, or end every one of a user. A session is named by its
// handle, the SHA-256 of its cookie's id, which the store keeps and no browser can present; the
// id and the CSRF token are never shown. Sessions are read from the store on every call, so an
// ended one is refused by every worker and instance from the next call on. Each end is audited.

const sessions: FastifyPluginAsyncTypebox = async (fastify) => {
  const { store, clock } = fastify.gateway

  const show = (s: SessionInfo, own: string | null): OperatorSession => ({
    id: s.handle,
    sub: s.sub,
    email: s.email,
    name: s.name,
    role: s.role,
    org: s.org,
    created_at: new Date(s.created_at).toISOString(),
    expires_at: new Date(s.expires_at).toISOString(),
    // the caller's own: ending it signs the caller out
    current: s.handle === own
  })

  const ownHandle = (op: Operator | null): string | null => op?.session == null ? null : hashKey(op.session.id)

  fastify.get('/sessions', { schema: { response: { 200: Answers.sessions } } }, async (request) => {
    const own = ownHandle(request.operator)
    return { object: 'list' as const, data: (await store.sessions.list(clock.now())).map((s) => show(s, own)) }
  })

  fastify.delete('/sessions/:id', { schema: { params: SessionParams, response: { 200: Answers.sessionEnded } } }, async (request) => {
    const { id } = request.params
    const now = clock.now()
    const ended = await store.sessions.endHandle(id, now)
    if (ended === undefined) throw new SessionNotFound({ id })
    await store.audit.record({ action: 'session.revoke', target: ended.sub, org: ended.org, detail: { session: id, role: ended.role, org: ended.org } }, now, actorOf(request))
    return { id, ended: true as const }
  })

  fastify.delete('/sessions', { schema: { querystring: SessionsQuery, response: { 200: Answers.subjectEnded } } }, async (request) => {
    const { sub } = request.query
    const now = clock.now()
    // the organization of the user's sessions, for the audit line (an org_admin's; none when they differ)
    const orgs = new Set((await store.sessions.list(now)).filter((s) => s.sub === sub).map((s) => s.org))
    const ended = await store.sessions.endSubject(sub)
    // nothing ended, nothing changed: no line in the audit log
    if (ended > 0) await store.audit.record({ action: 'session.revoke', target: sub, org: orgs.size === 1 ? [...orgs][0] : null, detail: { sessions: ended } }, now, actorOf(request))
    return { sub, ended }
  })
}

export default sessions
