import t, { type Test } from 'tap'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { buildApp } from '../../app.js'
import { FakeClock, testConfig } from '../helper.js'
import { CLIENT_ID, CLIENT_SECRET, Jar, signInAtIdp, signOutAtIdp, startIdp, type Account, type Idp } from '../oidc-idp.js'

// Single sign-on against a real OpenID provider (oidc-provider, on loopback): the code flow with
// PKCE, state and nonce, the session it leaves (cookie, CSRF token, expiry, logout), the role
// from the groups, and every way a sign-in must fail: an ID token with a wrong nonce, audience,
// issuer or signature, or expired; a callback replayed, without its sign-in cookie, or with
// another state; a user with no role. Logout ends the session here, then at the provider
// (RP-initiated logout) when it offers it.

const REDIRECT = 'http://127.0.0.1:8080/console/auth/callback'
const ADMIN_TOKEN = 'an-admin-token-0123456789abcdef'

const ACCOUNTS: Record<string, Account> = {
  ann: { email: 'ann@example.com', name: 'Ann', groups: ['platform-admins', 'staff'] },
  fin: { email: 'fin@example.com', groups: ['finance'] },
  dev: { email: 'dev@example.com', groups: ['acme-devs'] },
  nobody: { email: 'nobody@example.com', groups: ['staff'] }
}

function ssoSection (idp: Idp, extra: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    issuer: idp.issuer,
    client_id: CLIENT_ID,
    client_secret: CLIENT_SECRET,
    redirect_url: REDIRECT,
    scopes: ['openid', 'email', 'profile', 'groups'],
    roles: [{ group: 'platform-admins', role: 'admin' }, { group: 'finance', role: 'viewer' }, { group: 'acme-devs', role: 'org_admin', org: 'acme' }],
    ...extra
  }
}

async function gateway (t: Test, idp: Idp, clock = new FakeClock(Date.now()), sso: Record<string, unknown> = {}): Promise<FastifyInstance> {
  const app = await buildApp(testConfig({ admin: { token: ADMIN_TOKEN }, sso: ssoSection(idp, sso) }), { logger: false, clock })
  t.teardown(() => app.close())
  return app
}

/** A Set-Cookie header's cookie of this name: its value and attributes. */
function setCookie (res: LightMyRequestResponse, name: string): { value: string, attrs: string[] } | undefined {
  const raw = res.headers['set-cookie']
  for (const line of ([] as string[]).concat(raw ?? [])) {
    const [pair = '', ...attrs] = line.split(';').map((s) => s.trim())
    if (pair.startsWith(`${name}=`)) return { value: pair.slice(name.length + 1), attrs }
  }
  return undefined
}

interface Started { loginCookie: string, authorize: URL }

async function startLogin (app: FastifyInstance, to = 'admin'): Promise<Started> {
  const res = await app.inject({ method: 'GET', url: `/console/auth/login?to=${to}` })
  if (res.statusCode !== 302) throw new Error(`login answered ${res.statusCode}: ${res.body}`)
  return { loginCookie: setCookie(res, 'mg_login')?.value as string, authorize: new URL(res.headers.location as string) }
}

const callback = async (app: FastifyInstance, back: URL, loginCookie: string | undefined): Promise<LightMyRequestResponse> =>
  await app.inject({ method: 'GET', url: `/console/auth/callback${back.search}`, headers: loginCookie === undefined ? {} : { cookie: `mg_login=${loginCookie}` } })

/** A whole sign-in as `user`: the gateway's callback answer and the session cookie it set. */
async function signIn (app: FastifyInstance, user: string, to = 'admin', jar?: Jar): Promise<{ res: LightMyRequestResponse, session: string | undefined }> {
  const started = await startLogin(app, to)
  const back = await signInAtIdp(started.authorize.href, user, jar)
  const res = await callback(app, back, started.loginCookie)
  return { res, session: setCookie(res, 'mg_session')?.value }
}

const withSession = (session: string, csrf?: string): Record<string, string> => ({ cookie: `mg_session=${session}`, ...(csrf === undefined ? {} : { 'x-csrf-token': csrf }) })

t.test('a sign-in: code flow with PKCE, state and nonce; a session cookie; whoami; the audit log says who', async (t) => {
  const idp = await startIdp(t, [REDIRECT], ACCOUNTS)
  const app = await gateway(t, idp)
  const started = await startLogin(app)
  const q = started.authorize.searchParams
  t.equal(started.authorize.origin + started.authorize.pathname, `${idp.issuer}/auth`, 'to the authorization endpoint the discovery named')
  t.match(Object.fromEntries(q), { client_id: CLIENT_ID, response_type: 'code', redirect_uri: REDIRECT, scope: 'openid email profile groups', code_challenge_method: 'S256' })
  for (const p of ['state', 'nonce', 'code_challenge']) t.ok((q.get(p) ?? '').length >= 43, `a random ${p}`)
  const loginSet = (await app.inject({ method: 'GET', url: '/console/auth/login' })).headers['set-cookie'] as string
  t.match(loginSet, /^mg_login=[\w-]{43}; Path=\/console\/auth; Max-Age=600; HttpOnly; SameSite=Lax$/, 'the sign-in cookie: scoped to /console/auth, ten minutes, HttpOnly, Lax')

  const back = await signInAtIdp(started.authorize.href, 'ann')
  t.equal(back.searchParams.get('state'), q.get('state'), 'the provider sends the state back')
  const res = await callback(app, back, started.loginCookie)
  t.equal(res.statusCode, 303)
  t.equal(res.headers.location, '/console/admin/', 'back to the operator\'s console')
  const cookie = setCookie(res, 'mg_session')
  t.ok(cookie !== undefined && cookie.value.length >= 43, 'an opaque session id')
  t.same(cookie?.attrs, ['Path=/', 'Max-Age=28800', 'HttpOnly', 'SameSite=Lax'], 'HttpOnly, SameSite=Lax, 8 hours, not Secure on plain HTTP on loopback')
  t.match(setCookie(res, 'mg_login'), { value: '', attrs: ['Path=/console/auth', 'Max-Age=0', 'HttpOnly', 'SameSite=Lax'] }, 'the sign-in cookie is spent')

  const who = await app.inject({ method: 'GET', url: '/admin/v1/whoami', headers: withSession(cookie?.value as string) })
  t.equal(who.statusCode, 200)
  t.match(who.json(), { kind: 'sso', role: 'admin', org: null, sub: 'ann', email: 'ann@example.com', name: 'Ann' })
  t.match(who.json().csrf_token, /^[\w-]{43}$/)
  t.equal(Date.parse(who.json().expires_at), app.gateway.clock.now() + 8 * 3_600_000)
  const audit = (await app.inject({ method: 'GET', url: '/admin/v1/audit', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json().data
  t.match(audit[0], { action: 'session.start', target: 'ann', actor: 'admin', identity: { kind: 'sso', sub: 'ann', email: 'ann@example.com' }, detail: { role: 'admin', org: null } })
  t.equal(JSON.stringify(audit).includes(cookie?.value as string), false, 'never the session id')

  const dev = await signIn(app, 'fin', 'developer')
  t.equal(dev.res.headers.location, '/console/', 'a sign-in from the developer console goes back there')
})

t.test('a session\'s changes need its CSRF token; each change records who made it; logout ends the session everywhere', async (t) => {
  const idp = await startIdp(t, [REDIRECT], ACCOUNTS)
  const app = await gateway(t, idp)
  const { session } = await signIn(app, 'ann')
  const headers = withSession(session as string)
  const csrf = (await app.inject({ method: 'GET', url: '/admin/v1/whoami', headers })).json().csrf_token as string
  const orgs = async (): Promise<string[]> => (await app.inject({ method: 'GET', url: '/admin/v1/orgs', headers })).json().data.map((o: { id: string }) => o.id)

  // what a page of another site can make a browser send: the cookie, and no header of its own
  const crossSite = await app.inject({ method: 'POST', url: '/admin/v1/orgs', headers: { ...headers, origin: 'https://evil.example', 'content-type': 'application/x-www-form-urlencoded' }, payload: 'id=evil' })
  t.equal(crossSite.statusCode, 403)
  t.equal(crossSite.json().error.code, 'csrf_failed')
  const noToken = await app.inject({ method: 'POST', url: '/admin/v1/orgs', headers, payload: { id: 'beta' } })
  t.equal(noToken.statusCode, 403)
  t.equal(noToken.json().error.code, 'csrf_failed')
  const wrong = await app.inject({ method: 'POST', url: '/admin/v1/orgs', headers: withSession(session as string, csrf.slice(1) + 'x'), payload: { id: 'beta' } })
  t.equal(wrong.statusCode, 403, 'a wrong token')
  t.same(await orgs(), ['acme', 'zeta'], 'nothing was made')

  const made = await app.inject({ method: 'POST', url: '/admin/v1/orgs', headers: withSession(session as string, csrf), payload: { id: 'beta' } })
  t.equal(made.statusCode, 201)
  const key = await app.inject({ method: 'POST', url: '/admin/v1/keys', headers: withSession(session as string, csrf), payload: { org: 'acme', project: 'web' } })
  t.equal(key.statusCode, 201)
  const tokenMade = await app.inject({ method: 'POST', url: '/admin/v1/orgs', headers: { ...headers, authorization: `Bearer ${ADMIN_TOKEN}` }, payload: { id: 'gamma' } })
  t.equal(tokenMade.statusCode, 201, 'a call with an admin token needs no CSRF token, even beside a cookie')
  const audit = (await app.inject({ method: 'GET', url: '/admin/v1/audit', headers })).json().data as Array<{ action: string, target: string, identity: unknown }>
  t.same(audit.slice(0, 3).map((a) => [a.action, a.target, a.identity]), [
    ['org.create', 'gamma', { kind: 'token', name: 'admin' }],
    ['key.create', key.json().id, { kind: 'sso', sub: 'ann', email: 'ann@example.com' }],
    ['org.create', 'beta', { kind: 'sso', sub: 'ann', email: 'ann@example.com' }]
  ])

  const noCsrfLogout = await app.inject({ method: 'POST', url: '/console/auth/logout', headers })
  t.equal(noCsrfLogout.statusCode, 403, 'logging out is a change: it needs the token too')
  const out = await app.inject({ method: 'POST', url: '/console/auth/logout', headers: withSession(session as string, csrf) })
  t.equal(out.statusCode, 200)
  t.match(setCookie(out, 'mg_session'), { value: '', attrs: ['Path=/', 'Max-Age=0', 'HttpOnly', 'SameSite=Lax'] }, 'the cookie is cleared')
  const after = await app.inject({ method: 'GET', url: '/admin/v1/whoami', headers })
  t.equal(after.statusCode, 401)
  t.equal(after.json().error.code, 'session_ended', 'the session is gone from the store, not only from the browser')
  t.match((await app.inject({ method: 'GET', url: '/admin/v1/audit', headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json().data[0], { action: 'session.end', identity: { kind: 'sso', sub: 'ann' } })
})

t.test('an admin lists the live sessions and ends one, or every one of a user; the ended ones are refused at once; each end is audited', async (t) => {
  const idp = await startIdp(t, [REDIRECT], ACCOUNTS)
  const clock = new FakeClock(Date.now())
  const app = await gateway(t, idp, clock)
  const ann = await signIn(app, 'ann')
  clock.advance(1000)
  const fin = await signIn(app, 'fin')
  clock.advance(1000)
  const finToo = await signIn(app, 'fin', 'developer')
  const token = { authorization: `Bearer ${ADMIN_TOKEN}` }
  const status = async (session: string | undefined): Promise<number> => (await app.inject({ method: 'GET', url: '/admin/v1/whoami', headers: withSession(session as string) })).statusCode

  const csrf = (await app.inject({ method: 'GET', url: '/admin/v1/whoami', headers: withSession(ann.session as string) })).json().csrf_token as string
  const listed = await app.inject({ method: 'GET', url: '/admin/v1/sessions', headers: withSession(ann.session as string) })
  t.equal(listed.statusCode, 200)
  const data = listed.json().data as Array<Record<string, unknown>>
  t.same(data.map((s) => [s.sub, s.email, s.role, s.org, s.current]), [['fin', 'fin@example.com', 'viewer', null, false], ['fin', 'fin@example.com', 'viewer', null, false], ['ann', 'ann@example.com', 'admin', null, true]], 'newest first; the caller\'s own is marked')
  t.same(Object.keys(data[0] ?? {}).sort(), ['created_at', 'current', 'email', 'expires_at', 'id', 'name', 'org', 'role', 'sub'])
  t.equal(data[2]?.expires_at, new Date(clock.now() - 2000 + 8 * 3_600_000).toISOString())
  for (const secret of [ann.session, fin.session, finToo.session, csrf]) t.notOk(listed.body.includes(secret as string), 'never a session id or a CSRF token')

  const noCsrf = await app.inject({ method: 'DELETE', url: `/admin/v1/sessions/${data[0]?.id as string}`, headers: withSession(ann.session as string) })
  t.equal(noCsrf.statusCode, 403, 'ending a session is a change: a session needs its CSRF token for it')
  const viewer = await app.inject({ method: 'DELETE', url: `/admin/v1/sessions/${data[2]?.id as string}`, headers: withSession(fin.session as string, (await app.inject({ method: 'GET', url: '/admin/v1/whoami', headers: withSession(fin.session as string) })).json().csrf_token as string) })
  t.equal(viewer.statusCode, 403, 'a viewer may not')
  t.equal(await status(ann.session), 200)

  const one = await app.inject({ method: 'DELETE', url: `/admin/v1/sessions/${data[1]?.id as string}`, headers: withSession(ann.session as string, csrf) })
  t.equal(one.statusCode, 200)
  t.same(one.json(), { id: data[1]?.id, ended: true })
  t.equal(await status(fin.session), 401, 'the session ended is refused on its next call')
  t.equal((await app.inject({ method: 'GET', url: '/admin/v1/whoami', headers: withSession(fin.session as string) })).json().error.code, 'session_ended')
  t.equal(await status(finToo.session), 200, 'the user\'s other session lives on')
  const again = await app.inject({ method: 'DELETE', url: `/admin/v1/sessions/${data[1]?.id as string}`, headers: token })
  t.equal(again.statusCode, 404)
  t.equal(again.json().error.code, 'session_not_found')
  t.equal((await app.inject({ method: 'DELETE', url: `/admin/v1/sessions/${fin.session as string}`, headers: token })).statusCode, 404, 'the session\'s id is not its handle')

  const noSub = await app.inject({ method: 'DELETE', url: '/admin/v1/sessions', headers: token })
  t.equal(noSub.statusCode, 400, 'ending every session takes a user: never all of them by mistake')
  t.equal(await status(finToo.session), 200)
  const all = await app.inject({ method: 'DELETE', url: '/admin/v1/sessions?sub=fin', headers: token })
  t.same(all.json(), { sub: 'fin', ended: 1 })
  t.equal(await status(finToo.session), 401, 'every session of the user ended')
  t.equal(await status(ann.session), 200, 'another user\'s is untouched')
  t.same((await app.inject({ method: 'DELETE', url: '/admin/v1/sessions?sub=fin', headers: token })).json(), { sub: 'fin', ended: 0 }, 'none left')

  const audit = (await app.inject({ method: 'GET', url: '/admin/v1/audit', headers: token })).json().data as Array<Record<string, unknown>>
  t.match(audit.slice(0, 2), [
    { action: 'session.revoke', target: 'fin', identity: { kind: 'token', name: 'admin' }, detail: { sessions: 1 } },
    { action: 'session.revoke', target: 'fin', identity: { kind: 'sso', sub: 'ann', email: 'ann@example.com' }, detail: { session: data[1]?.id, role: 'viewer', org: null } }
  ], 'each end says who ended whose session; ending nothing writes no line')
  t.equal(audit[2]?.action, 'session.start')

  // an org_admin's sign-in and its end are lines of its organization's audit log
  const dev = await signIn(app, 'dev')
  t.same((await app.inject({ method: 'DELETE', url: '/admin/v1/sessions?sub=dev', headers: token })).json(), { sub: 'dev', ended: 1 })
  t.equal(await status(dev.session), 401)
  const acme = (await app.inject({ method: 'GET', url: '/admin/v1/audit?org=acme', headers: token })).json().data as Array<Record<string, unknown>>
  t.match(acme.slice(0, 2), [{ action: 'session.revoke', target: 'dev', org: 'acme' }, { action: 'session.start', target: 'dev', org: 'acme' }])

  const self = await app.inject({ method: 'DELETE', url: `/admin/v1/sessions/${data[2]?.id as string}`, headers: withSession(ann.session as string, csrf) })
  t.equal(self.statusCode, 200, 'an admin may end its own session')
  t.equal(await status(ann.session), 401, 'and is signed out by it')
})

t.test('logout ends the session here, then sends the browser to the provider\'s end_session_endpoint with the ID token; the provider\'s session ends and the browser comes back to the console', async (t) => {
  const AFTER = 'http://127.0.0.1:8080/console/admin/'
  const idp = await startIdp(t, [REDIRECT], ACCOUNTS, { postLogoutRedirectUris: [AFTER] })
  const app = await gateway(t, idp, undefined, { post_logout_redirect_url: AFTER })
  const browser = new Jar()
  const first = await signIn(app, 'ann', 'admin', browser)
  t.equal(browser.logins, 1)
  const second = await signIn(app, 'ann', 'admin', browser)
  t.equal(second.res.statusCode, 303)
  t.equal(browser.logins, 1, 'the provider remembers the user: a second sign-in shows no login form')

  const csrf = (await app.inject({ method: 'GET', url: '/admin/v1/whoami', headers: withSession(second.session as string) })).json().csrf_token as string
  const out = await app.inject({ method: 'POST', url: '/console/auth/logout', headers: withSession(second.session as string, csrf) })
  t.equal(out.statusCode, 200)
  t.equal(out.json().signed_out, true)
  const url = new URL(out.json().end_session_url as string)
  t.equal(url.origin + url.pathname, `${idp.issuer}/session/end`, 'the end_session_endpoint the discovery named')
  t.equal(url.searchParams.get('client_id'), CLIENT_ID)
  t.equal(url.searchParams.get('post_logout_redirect_uri'), AFTER)
  const hint = url.searchParams.get('id_token_hint') ?? ''
  t.match(JSON.parse(Buffer.from(hint.split('.')[1] ?? '', 'base64url').toString()), { iss: idp.issuer, aud: CLIENT_ID, sub: 'ann' }, 'the ID token of this session\'s sign-in as id_token_hint')
  t.notOk(out.body.includes(second.session as string), 'never the session id')
  const status = async (session: string | undefined): Promise<number> => (await app.inject({ method: 'GET', url: '/admin/v1/whoami', headers: withSession(session as string) })).statusCode
  t.equal(await status(second.session), 401, 'the gateway\'s session ended before the browser leaves')
  t.equal(await status(first.session), 200, 'another session (another tab\'s sign-in) is not this one')

  const back = await signOutAtIdp(url.href, browser)
  t.equal(back.href, AFTER, 'the provider signs the user out and sends the browser back to the console')
  const again = await signIn(app, 'ann', 'admin', browser)
  t.equal(again.res.statusCode, 303)
  t.equal(browser.logins, 2, 'the provider\'s session ended: the next sign-in asks for the login again')
})

t.test('logout without sso.post_logout_redirect_url, for a session without an ID token, at a provider with no end_session_endpoint, and at one that cannot be reached: the session ends here every time', async (t) => {
  const idp = await startIdp(t, [REDIRECT], ACCOUNTS)
  const app = await gateway(t, idp)
  const logout = async (a: FastifyInstance, session: string): Promise<LightMyRequestResponse> => {
    const csrf = (await a.inject({ method: 'GET', url: '/admin/v1/whoami', headers: withSession(session) })).json().csrf_token as string
    return await a.inject({ method: 'POST', url: '/console/auth/logout', headers: withSession(session, csrf) })
  }
  const browser = new Jar()
  const { session } = await signIn(app, 'ann', 'admin', browser)
  const plain = new URL((await logout(app, session as string)).json().end_session_url as string)
  t.same([...plain.searchParams.keys()].sort(), ['client_id', 'id_token_hint'], 'no post_logout_redirect_uri unless configured')
  t.equal((await signOutAtIdp(plain.href, browser)).pathname, '/session/end/success', 'the provider\'s own page then')

  // a session made before the gateway kept ID tokens: the client id says who asks
  const now = app.gateway.clock.now()
  const stored = { sub: 'ann', email: 'ann@example.com', name: null, role: 'admin' as const, org: null, csrf: 'csrf-old', created_at: now, expires_at: now + 60_000, id_token: null }
  await app.gateway.store.sessions.create('a-session-from-before-0123456789', stored)
  const old = await logout(app, 'a-session-from-before-0123456789')
  t.same([...new URL(old.json().end_session_url as string).searchParams.keys()], ['client_id'])

  const bare = await startIdp(t, [REDIRECT], ACCOUNTS, { endSession: false })
  const bareApp = await gateway(t, bare)
  const bareSession = (await signIn(bareApp, 'ann')).session as string
  const none = await logout(bareApp, bareSession)
  t.equal(none.statusCode, 200)
  t.same(none.json(), { signed_out: true, end_session_url: null }, 'a provider without an end_session_endpoint: signed out here only')
  t.equal((await bareApp.inject({ method: 'GET', url: '/admin/v1/whoami', headers: withSession(bareSession) })).statusCode, 401)

  const down = await buildApp(testConfig({ sso: { ...ssoSection(idp), issuer: 'http://127.0.0.1:9' } }), { logger: false })
  t.teardown(() => down.close())
  await down.gateway.store.sessions.create('a-session-at-a-gateway-whose-idp-is-down', stored)
  const unreachable = await logout(down, 'a-session-at-a-gateway-whose-idp-is-down')
  t.equal(unreachable.statusCode, 200, 'a provider that cannot be reached does not keep anyone signed in')
  t.same(unreachable.json(), { signed_out: true, end_session_url: null })
  t.equal((await down.inject({ method: 'GET', url: '/admin/v1/whoami', headers: withSession('a-session-at-a-gateway-whose-idp-is-down') })).statusCode, 401)
})

t.test('sessions expire (sso.session_hours) on the gateway\'s clock', async (t) => {
  const idp = await startIdp(t, [REDIRECT], ACCOUNTS)
  const clock = new FakeClock(Date.now())
  const app = await gateway(t, idp, clock, { session_hours: 2 })
  const { res, session } = await signIn(app, 'fin')
  t.match(setCookie(res, 'mg_session')?.attrs, ['Path=/', 'Max-Age=7200'])
  const who = async (): Promise<number> => (await app.inject({ method: 'GET', url: '/admin/v1/whoami', headers: withSession(session as string) })).statusCode
  clock.advance(2 * 3_600_000 - 1)
  t.equal(await who(), 200, 'valid until its end')
  clock.advance(1)
  t.equal(await who(), 401, 'refused from its end on')
})

t.test('the role comes from the groups; a user with none is refused and loses every session; a new role ends the old one\'s sessions', async (t) => {
  const accounts = structuredClone(ACCOUNTS)
  const idp = await startIdp(t, [REDIRECT], accounts)
  const app = await gateway(t, idp)
  const first = await signIn(app, 'nobody')
  t.equal(first.res.statusCode, 403)
  t.match(first.res.headers['content-type'], /text\/html/, 'a page, for a browser')
  t.match(first.res.body, /nobody@example\.com.*none of your groups is given a role/s)
  t.equal(first.session, undefined, 'no session')

  const asAdmin = await signIn(app, 'ann')
  const asAdminToo = await signIn(app, 'ann')
  t.equal((await app.inject({ method: 'GET', url: '/admin/v1/whoami', headers: withSession(asAdmin.session as string) })).statusCode, 200, 'two sessions of one role live together')
  // the user moves to finance at the provider
  ;(accounts.ann as Account).groups = ['finance']
  const asViewer = await signIn(app, 'ann')
  t.match((await app.inject({ method: 'GET', url: '/admin/v1/whoami', headers: withSession(asViewer.session as string) })).json(), { role: 'viewer' })
  for (const old of [asAdmin, asAdminToo]) t.equal((await app.inject({ method: 'GET', url: '/admin/v1/whoami', headers: withSession(old.session as string) })).statusCode, 401, 'the admin sessions ended')
  ;(accounts.ann as Account).groups = []
  t.equal((await signIn(app, 'ann')).res.statusCode, 403)
  t.equal((await app.inject({ method: 'GET', url: '/admin/v1/whoami', headers: withSession(asViewer.session as string) })).statusCode, 401, 'refused at the next sign-in: every session ends')
})

t.test('an ID token that is not exactly right is refused: nonce, audience, issuer, expiry, signature', async (t) => {
  const idp = await startIdp(t, [REDIRECT], ACCOUNTS, { idTokenTtlS: 120 })
  const clock = new FakeClock(Date.now())
  const app = await gateway(t, idp, clock)
  const now = Math.floor(Date.now() / 1000)
  const cases: Array<[string, NonNullable<Idp['tamper']>, RegExp]> = [
    ['a wrong nonce', { claims: (c) => ({ ...c, nonce: 'another-nonce' }) }, /nonce/],
    ['a wrong audience', { claims: (c) => ({ ...c, aud: 'another-client' }) }, /aud/],
    ['a wrong issuer', { claims: (c) => ({ ...c, iss: 'https://login.evil.example' }) }, /iss/],
    ['an expired token', { claims: (c) => ({ ...c, iat: now - 7200, exp: now - 3600 }) }, /exp/],
    ['a signature of another key', { foreignKey: true }, /signature/i]
  ]
  for (const [name, tamper, reason] of cases) {
    idp.tamper = tamper
    const { res, session } = await signIn(app, 'ann')
    t.equal(res.statusCode, 400, `${name}: refused`)
    t.match(res.body, /data-code="sso_failed"/, name)
    t.match(res.body, reason, `${name}: the page says which check failed`)
    t.equal(session, undefined, `${name}: no session`)
  }
  idp.tamper = { claims: (c) => c }
  t.equal((await signIn(app, 'ann')).res.statusCode, 303, 'the same token re-signed by the provider\'s key passes: the cases above fail by their change alone')
  idp.tamper = null

  // the gateway's clock judges the token's expiry too (the token lives two minutes; the sign-in ten)
  const started = await startLogin(app)
  const back = await signInAtIdp(started.authorize.href, 'ann')
  clock.advance(5 * 60_000)
  const late = await callback(app, back, started.loginCookie)
  t.equal(late.statusCode, 400)
  t.match(late.body, /ID token has expired/)
  t.equal(await app.gateway.store.sessions.endSubject('ann'), 1, 'only the one session of the untampered sign-in was ever made')
})

t.test('a callback is taken once, with its own sign-in cookie and state', async (t) => {
  const idp = await startIdp(t, [REDIRECT], ACCOUNTS)
  const app = await gateway(t, idp)
  const started = await startLogin(app)
  const back = await signInAtIdp(started.authorize.href, 'ann')

  const noCookie = await callback(app, back, undefined)
  t.equal(noCookie.statusCode, 400, 'a callback in a browser that did not start the sign-in (a sign-in forced on a victim) is refused')
  t.match(noCookie.body, /data-code="sso_login_expired"/)
  const other = await startLogin(app)
  const swapped = await callback(app, back, other.loginCookie)
  t.equal(swapped.statusCode, 400, 'another sign-in\'s cookie: its state does not match')
  t.match(swapped.body, /data-code="sso_failed".*state/s)
  const tokensBefore = idp.tokens
  const good = await callback(app, back, started.loginCookie)
  t.equal(good.statusCode, 303)
  const replay = await callback(app, back, started.loginCookie)
  t.equal(replay.statusCode, 400, 'replayed: the sign-in was taken')
  t.match(replay.body, /data-code="sso_login_expired"/)
  t.equal(setCookie(replay, 'mg_session'), undefined)
  t.equal(idp.tokens, tokensBefore + 1, 'the replay never reached the token endpoint')

  const denied = await startLogin(app)
  const refusedAtIdp = new URL(REDIRECT)
  refusedAtIdp.search = new URLSearchParams({ error: 'access_denied', error_description: 'the user said no', state: denied.authorize.searchParams.get('state') as string, iss: idp.issuer }).toString()
  const refused = await callback(app, refusedAtIdp, denied.loginCookie)
  t.equal(refused.statusCode, 400)
  t.match(refused.body, /access_denied/, 'the provider\'s refusal is told')
})

t.test('cookies are Secure unless the console is plain HTTP on loopback; a provider that cannot be reached is a 502 page', async (t) => {
  const idp = await startIdp(t, ['https://gw.example.com/console/auth/callback'], ACCOUNTS)
  const app = await gateway(t, idp, undefined, { redirect_url: 'https://gw.example.com/console/auth/callback' })
  const res = await app.inject({ method: 'GET', url: '/console/auth/login' })
  t.equal(res.statusCode, 302)
  t.match(res.headers['set-cookie'], /; Secure$/)

  const down = await buildApp(testConfig({ sso: { ...ssoSection(idp), issuer: 'http://127.0.0.1:9' } }), { logger: false })
  t.teardown(() => down.close())
  const page = await down.inject({ method: 'GET', url: '/console/auth/login' })
  t.equal(page.statusCode, 502)
  t.match(page.body, /data-code="sso_unavailable"/)
  t.equal(page.headers['set-cookie'], undefined)
  t.match((await down.inject({ method: 'GET', url: '/console/auth/status' })).json(), { sso: true })
  t.equal((await down.inject({ method: 'GET', url: '/admin/v1/whoami' })).statusCode, 401, 'single sign-on alone opens the admin API (no admin token)')
})
