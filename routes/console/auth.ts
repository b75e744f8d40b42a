import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import { isLoopbackUrl } from '../../config/load.js'
import type { SsoConfig } from '../../config/schema.js'
import { SsoLoginExpired, SsoNoRole, type GatewayError } from '../../engine/kernel/errors.js'
import { errorInput } from '../../engine/gateway/core.js'
import { LOGIN_TTL_MS, newSecret, SsoClient } from '../../engine/ops/sso.js'
import { cookieOf, SESSION_COOKIE } from '../access.js'

// Single sign-on for both consoles (engine/ops/sso.ts does the OpenID Connect part):
//   GET /console/auth/status     whether the gateway offers it (the pages ask before they show a sign-in);
//   GET /console/auth/login      starts a sign-in: its state, nonce and PKCE verifier are kept in
//                                the store under a random id, which a short-lived cookie scoped to
//                                /console/auth carries; the browser goes to the identity provider;
//   GET /console/auth/callback   ends it: the sign-in is taken from the store once (a replayed
//                                callback finds nothing), the code exchanged, the ID token verified,
//                                the role found from the groups; a session is stored and its id set
//                                in the session cookie, and the browser goes back to its console;
//   POST /console/auth/logout    ends the session (a session's call: it needs the CSRF token), and
//                                answers where to send the browser to sign out at the identity
//                                provider too (its end_session_endpoint), or null.
// A user whose groups match no role is refused with a page, and every session they had ends;
// a sign-in with another role than before ends the sessions of the old role.
// Pages, not JSON, answer what a browser navigates to.

const LOGIN_COOKIE = 'mg_login'
const LOGIN_PATH = '/console/auth'

const LoginQuery = Type.Object({ to: Type.Union([Type.Literal('admin'), Type.Literal('developer')], { default: 'admin' }) })
// the identity provider's answer is read by the OpenID Connect library, whatever it holds
const CallbackQuery = Type.Object({}, { additionalProperties: Type.String() })

/** A cookie with the attributes every console cookie has: HttpOnly, SameSite=Lax, Secure unless the console is plain HTTP on this machine. */
function cookie (name: string, value: string, path: string, maxAgeS: number, secure: boolean): string {
  return `${name}=${value}; Path=${path}; Max-Age=${maxAgeS}; HttpOnly; SameSite=Lax${secure ? '; Secure' : ''}`
}

const escapeHtml = (s: string): string => s.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`)

/** A small page for a sign-in that could not end well: the localized message, and a way to try again. */
function page (request: FastifyRequest, reply: FastifyReply, err: GatewayError): FastifyReply {
  const message = errorInput(request, err).message
  request.log.warn({ err }, 'single sign-on refused')
  return reply.status(err.statusCode).type('text/html; charset=utf-8').header('cache-control', 'no-store').send(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Sign-in refused · modelgate</title><link rel="icon" type="image/svg+xml" href="/console/favicon.svg"></head>
<body><main><h1>Sign-in refused</h1><p id="reason" data-code="${escapeHtml(String(err.spec.code ?? err.statusCode))}">${escapeHtml(message)}</p>
<p><a href="/console/auth/login?to=admin">Sign in to the operator's console</a> · <a href="/console/auth/login?to=developer">Sign in to the developer console</a></p></main></body></html>
`)
}

const auth: FastifyPluginAsyncTypebox<{ sso: SsoConfig | undefined }> = async (fastify, opts) => {
  const { store, clock } = fastify.gateway
  const sso = opts.sso

  fastify.get('/status', async () => ({ sso: sso !== undefined }))
  if (sso === undefined) return

  const client = new SsoClient(sso, clock.now)
  const secure = !(sso.redirect_url.startsWith('http://') && isLoopbackUrl(sso.redirect_url))
  const sessionS = Math.round(sso.session_hours * 3600)

  fastify.get('/login', { schema: { querystring: LoginQuery } }, async (request, reply) => {
    try {
      const { url, login } = await client.start(request.query.to)
      const id = newSecret()
      await store.sessions.begin(id, login)
      return await reply.header('set-cookie', cookie(LOGIN_COOKIE, id, LOGIN_PATH, LOGIN_TTL_MS / 1000, secure)).header('cache-control', 'no-store').redirect(url.href, 302)
    } catch (err) {
      if ((err as Partial<GatewayError>).key === undefined) throw err
      return page(request, reply, err as GatewayError)
    }
  })

  fastify.get('/callback', { schema: { querystring: CallbackQuery } }, async (request, reply) => {
    // the sign-in cookie is spent, whatever comes of it
    reply.header('set-cookie', cookie(LOGIN_COOKIE, '', LOGIN_PATH, 0, secure)).header('cache-control', 'no-store')
    try {
      const id = cookieOf(request, LOGIN_COOKIE)
      const login = id === undefined || id === '' ? undefined : await store.sessions.take(id, clock.now())
      if (login === undefined) throw new SsoLoginExpired()
      const user = await client.finish(request.url.slice(request.url.indexOf('?') + 1), login)
      const role = client.roleOf(user.groups)
      if (role === undefined) {
        await store.sessions.endSubject(user.sub)
        throw new SsoNoRole({ who: user.email ?? user.name ?? user.sub })
      }
      await store.sessions.endSubject(user.sub, role)
      const sessionId = newSecret()
      const now = clock.now()
      await store.sessions.create(sessionId, { sub: user.sub, email: user.email, name: user.name, role: role.role, org: role.org, csrf: newSecret(), created_at: now, expires_at: now + sessionS * 1000, id_token: user.idToken })
      await store.audit.record({ action: 'session.start', target: user.sub, org: role.org, detail: { role: role.role, org: role.org } }, now, { kind: 'sso', sub: user.sub, email: user.email })
      request.log.info({ sub: user.sub, role: role.role, org: role.org }, 'signed in')
      reply.header('set-cookie', cookie(SESSION_COOKIE, sessionId, '/', sessionS, secure))
      return await reply.redirect(login.to === 'admin' ? '/console/admin/' : '/console/', 303)
    } catch (err) {
      if ((err as Partial<GatewayError>).key === undefined) throw err
      return page(request, reply, err as GatewayError)
    }
  })

  fastify.post('/logout', async (request, reply) => {
    const op = request.operator
    let endSession: string | null = null
    if (op?.session != null) {
      await store.sessions.end(op.session.id)
      if (op.identity.kind === 'sso') await store.audit.record({ action: 'session.end', target: op.identity.sub, org: op.org, detail: {} }, clock.now(), op.identity)
      // ended here first: the provider's logout is the browser's next step, and may fail on its own
      try {
        endSession = await client.logoutUrl(op.session.idToken)
      } catch (err) {
        request.log.warn({ err }, 'signed out here; the identity provider could not be reached to sign out there too')
      }
    }
    return await reply.header('set-cookie', cookie(SESSION_COOKIE, '', '/', 0, secure)).header('cache-control', 'no-store').send({ signed_out: true, end_session_url: endSession })
  })
}

export default auth
