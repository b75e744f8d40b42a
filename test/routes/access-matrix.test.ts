import t, { type Test } from 'tap'
import type { FastifyInstance, LightMyRequestResponse } from 'fastify'
import { buildApp } from '../../app.js'
import { standaloneRuntime } from '../../engine/ops/operations.js'
import { ACCESS } from '../../routes/access.js'
import type { Role } from '../../engine/store/types.js'
import { bearer, KEY_A, settled, testConfig, watchAnswers } from '../helper.js'
import { CLIENT_ID, CLIENT_SECRET, startIdp, type Idp } from '../oidc-idp.js'

// Every admin API route and console action against every kind of caller: an admin, a viewer, an
// org_admin of another organization (zeta; the targets are acme's), each holding a console
// session (with its CSRF token) and, apart, an admin token of that role; nobody; and an admin
// session that does not send its CSRF token. A cell is the status the call must get; a refused
// change leaves the tenants, keys, console sessions and audit log as they were.
//
// The table is complete by construction: every route the app registers under /admin/v1,
// /console/api and /console/auth must be a row here (and the app itself refuses to build with a
// route that has no row in routes/access.ts), so a route added without saying who may call it
// fails this test by itself.

const ADMIN_TOKEN = 'matrix-admin-token-0123456789ab'
const TOKENS: Record<Role, string> = { admin: ADMIN_TOKEN, viewer: 'matrix-viewer-token-0123456789a', org_admin: 'matrix-zeta-token-0123456789abc' }
const REDIRECT = 'http://127.0.0.1:8080/console/auth/callback'

interface Targets { key: string, trace: string, session: string }

interface Row {
  route: string
  url: (x: Targets) => string
  body?: Record<string, unknown>
  /** admin, viewer, org_admin of zeta. */
  expect: [number, number, number]
  /** The status without any credential (default 401). */
  none?: number
  /** What the org_admin of zeta may see of a list it is given: nothing of acme. */
  zetaOnly?: boolean
}

const acme = 'org=acme&project=web'

// in an order where the admin's changes leave the targets of the rows after them in place
const ROWS: Row[] = [
  { route: 'GET /admin/v1/whoami', url: () => '/admin/v1/whoami', expect: [200, 200, 200] },
  { route: 'GET /admin/v1/orgs', url: () => '/admin/v1/orgs', expect: [200, 200, 200], zetaOnly: true },
  { route: 'POST /admin/v1/orgs', url: () => '/admin/v1/orgs', body: { id: 'neworg' }, expect: [201, 403, 403] },
  { route: 'GET /admin/v1/orgs/:org', url: () => '/admin/v1/orgs/acme', expect: [200, 200, 404] },
  { route: 'PATCH /admin/v1/orgs/:org', url: () => '/admin/v1/orgs/acme', body: { quota: { tokens: 1000, per: 'day' } }, expect: [200, 403, 403] },
  { route: 'POST /admin/v1/orgs/:org/credits', url: () => '/admin/v1/orgs/acme/credits', body: { amount_usd: '1' }, expect: [200, 403, 403] },
  { route: 'POST /admin/v1/orgs/:org/projects', url: () => '/admin/v1/orgs/acme/projects', body: { id: 'p2' }, expect: [201, 403, 404] },
  { route: 'PATCH /admin/v1/orgs/:org/projects/:project', url: () => '/admin/v1/orgs/acme/projects/p2', body: { quota: null }, expect: [200, 403, 404] },
  { route: 'POST /admin/v1/keys', url: () => '/admin/v1/keys', body: { org: 'acme', project: 'web' }, expect: [201, 403, 404] },
  { route: 'GET /admin/v1/keys', url: () => '/admin/v1/keys', expect: [200, 200, 200], zetaOnly: true },
  { route: 'GET /admin/v1/keys/:id', url: (x) => `/admin/v1/keys/${x.key}`, expect: [200, 200, 404] },
  { route: 'PATCH /admin/v1/keys/:id', url: (x) => `/admin/v1/keys/${x.key}`, body: { name: 'renamed' }, expect: [200, 403, 404] },
  { route: 'POST /admin/v1/keys/:id/rotate', url: (x) => `/admin/v1/keys/${x.key}/rotate`, body: { grace_s: 60 }, expect: [201, 403, 404] },
  { route: 'GET /admin/v1/usage', url: () => '/admin/v1/usage', expect: [200, 200, 200], zetaOnly: true },
  { route: 'GET /admin/v1/usage/summary', url: () => '/admin/v1/usage/summary?org=acme', expect: [200, 200, 404] },
  { route: 'GET /admin/v1/usage/:trace_id', url: (x) => `/admin/v1/usage/${x.trace}`, expect: [200, 200, 404] },
  { route: 'GET /admin/v1/audit', url: () => '/admin/v1/audit', expect: [200, 200, 200], zetaOnly: true },
  { route: 'GET /admin/v1/sessions', url: () => '/admin/v1/sessions', expect: [200, 403, 403] },
  { route: 'DELETE /admin/v1/sessions/:id', url: (x) => `/admin/v1/sessions/${x.session}`, expect: [200, 403, 403] },
  { route: 'DELETE /admin/v1/sessions', url: () => '/admin/v1/sessions?sub=u-other', expect: [200, 403, 403] },
  { route: 'POST /admin/v1/reload', url: () => '/admin/v1/reload', expect: [200, 403, 403] },
  { route: 'GET /admin/v1/providers', url: () => '/admin/v1/providers', expect: [200, 200, 403] },
  { route: 'GET /admin/v1/mcp/servers', url: () => '/admin/v1/mcp/servers', expect: [200, 200, 403] },
  { route: 'GET /admin/v1/plugins', url: () => '/admin/v1/plugins', expect: [200, 200, 403] },
  { route: 'GET /admin/v1/prices/check', url: () => '/admin/v1/prices/check', expect: [200, 200, 403] },
  { route: 'GET /admin/v1/alerts/deliveries', url: () => '/admin/v1/alerts/deliveries', expect: [200, 200, 403] },
  { route: 'GET /console/api/models', url: () => '/console/api/models', expect: [200, 200, 200], none: 200 },
  { route: 'GET /console/api/endpoints', url: () => '/console/api/endpoints', expect: [200, 200, 200], none: 200 },
  { route: 'GET /console/api/projects', url: () => '/console/api/projects', expect: [200, 200, 200], zetaOnly: true },
  { route: 'GET /console/api/me', url: () => `/console/api/me?${acme}`, expect: [200, 200, 404] },
  { route: 'GET /console/api/usage', url: () => `/console/api/usage?${acme}`, expect: [200, 200, 404] },
  { route: 'GET /console/api/calls', url: () => `/console/api/calls?${acme}`, expect: [200, 200, 404] },
  { route: 'GET /console/auth/status', url: () => '/console/auth/status', expect: [200, 200, 200], none: 200 },
  { route: 'GET /console/auth/login', url: () => '/console/auth/login?to=admin', expect: [302, 302, 302], none: 302 },
  { route: 'GET /console/auth/callback', url: () => '/console/auth/callback?code=x&state=y', expect: [400, 400, 400], none: 400 },
  { route: 'DELETE /admin/v1/keys/:id', url: (x) => `/admin/v1/keys/${x.key}`, expect: [200, 403, 404] },
  { route: 'DELETE /admin/v1/orgs/:org/projects/:project', url: () => '/admin/v1/orgs/acme/projects/p2', expect: [200, 403, 404] },
  { route: 'DELETE /admin/v1/orgs/:org', url: () => '/admin/v1/orgs/acme', expect: [200, 403, 403] },
  { route: 'POST /console/auth/logout', url: () => '/console/auth/logout', expect: [200, 200, 200] }
]

type Caller = { kind: 'session', role: Role, csrf: boolean } | { kind: 'token', role: Role } | { kind: 'none' }

const ROLES: Role[] = ['admin', 'viewer', 'org_admin']

async function gateway (t: Test, idp: Idp): Promise<{ app: FastifyInstance, targets: Targets }> {
  const config = testConfig({
    plugins: [{ name: 'auth' }, { name: 'usage' }],
    admin: { token: ADMIN_TOKEN, tokens: [{ token: TOKENS.viewer, role: 'viewer', name: 'finance' }, { token: TOKENS.org_admin, role: 'org_admin', org: 'zeta', name: 'zeta-ci' }] },
    sso: { issuer: idp.issuer, client_id: CLIENT_ID, client_secret: CLIENT_SECRET, redirect_url: REDIRECT, roles: [{ group: 'admins', role: 'admin' }] }
  })
  const runtime = { ...standaloneRuntime(), reload: async () => ({ ok: true as const, changes: [], generation: 2 }) }
  const app = await buildApp(config, { logger: false, runtime })
  t.teardown(() => app.close())
  // every answer held to its response schema: one that lost a field is a 500, which no cell expects
  watchAnswers(app)
  // an API key of acme made through the admin API (config keys are the file's), and a call of acme
  const key = (await app.inject({ method: 'POST', url: '/admin/v1/keys', headers: bearer(ADMIN_TOKEN), payload: { org: 'acme', project: 'web' } })).json().id as string
  const call = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: { model: 'demo/gpt', messages: [{ role: 'user', content: 'hi' }] } })
  if (call.statusCode !== 200) throw new Error(`the call answered ${call.statusCode}: ${call.body}`)
  await settled()
  await app.gateway.store.flush()
  // another operator with two sessions: one to end by its handle, the other with all of the user's
  const now = app.gateway.clock.now()
  const other = { sub: 'u-other', email: 'other@example.com', name: null, role: 'viewer' as const, org: null, created_at: now, expires_at: now + 3_600_000, id_token: null }
  await app.gateway.store.sessions.create('matrix-other-session-one-0123456789', { ...other, csrf: 'csrf-other-1' })
  await app.gateway.store.sessions.create('matrix-other-session-two-0123456789', { ...other, csrf: 'csrf-other-2' })
  const session = (await app.gateway.store.sessions.list(now))[0]?.handle as string
  return { app, targets: { key, trace: call.headers['x-svc-trace-id'] as string, session } }
}

async function headersOf (app: FastifyInstance, caller: Caller): Promise<Record<string, string>> {
  if (caller.kind === 'none') return {}
  if (caller.kind === 'token') return bearer(TOKENS[caller.role])
  const id = `matrix-session-${caller.role}-0123456789abcdef`
  const now = app.gateway.clock.now()
  await app.gateway.store.sessions.create(id, { sub: `u-${caller.role}`, email: `${caller.role}@example.com`, name: null, role: caller.role, org: caller.role === 'org_admin' ? 'zeta' : null, csrf: `csrf-${caller.role}`, created_at: now, expires_at: now + 3_600_000, id_token: null })
  return { cookie: `mg_session=${id}`, ...(caller.csrf ? { 'x-csrf-token': `csrf-${caller.role}` } : {}) }
}

/** What a refused change must leave as it was. */
async function snapshot (app: FastifyInstance): Promise<string> {
  const { store } = app.gateway
  await store.flush()
  const orgs = await store.orgs.list()
  return JSON.stringify({ orgs, projects: await Promise.all(orgs.map(async (o) => await store.orgs.projects(o.id))), keys: await store.keys.list(), sessions: await store.sessions.list(app.gateway.clock.now()), audit: await store.audit.page(1000) })
}

const expected = (row: Row, caller: Caller): number => {
  if (caller.kind === 'none') return row.none ?? 401
  const cell = row.expect[ROLES.indexOf(caller.role)] as number
  // a session's change without its CSRF token: refused before anything else is looked at
  if (caller.kind === 'session' && !caller.csrf && !row.route.startsWith('GET ') && row.none === undefined) return 403
  return cell
}

const name = (c: Caller): string => c.kind === 'none' ? 'nobody' : c.kind === 'token' ? `${c.role} token` : `${c.role} session${c.csrf ? '' : ' without its CSRF token'}`

t.test('every admin and console route against every role', async (t) => {
  const idp = await startIdp(t, [REDIRECT], {})
  const callers: Caller[] = [
    ...ROLES.map((role): Caller => ({ kind: 'session', role, csrf: true })),
    ...ROLES.map((role): Caller => ({ kind: 'token', role })),
    { kind: 'none' },
    { kind: 'session', role: 'admin', csrf: false }
  ]
  for (const caller of callers) {
    await t.test(name(caller), async (t) => {
      const { app, targets } = await gateway(t, idp)
      const headers = await headersOf(app, caller)
      for (const row of ROWS) {
        const before = await snapshot(app)
        const res: LightMyRequestResponse = await app.inject({ method: row.route.split(' ')[0] as 'GET', url: row.url(targets), headers, ...(row.body === undefined ? {} : { payload: row.body }) })
        const want = expected(row, caller)
        t.equal(res.statusCode, want, `${row.route}: ${res.statusCode === want ? '' : res.body.slice(0, 200)}`)
        if (res.statusCode === 403 && !row.route.startsWith('GET /console/auth')) t.match(res.json().error.code, caller.kind === 'session' && !caller.csrf ? 'csrf_failed' : 'permission_denied', `${row.route}: the code says why`)
        if (want >= 400 && !row.route.startsWith('GET ')) t.equal(await snapshot(app), before, `${row.route}: refused, nothing changed`)
        if (caller.kind !== 'none' && caller.role === 'org_admin' && row.zetaOnly === true) t.notMatch(res.body, /acme/, `${row.route}: nothing of another organization`)
        if (row.route.includes('/admin/v1/sessions')) t.notMatch(res.body, /matrix-|csrf-/, `${row.route}: never a session's id or CSRF token`)
        if (caller.kind !== 'none' && caller.role === 'viewer') t.notMatch(res.body, /mg-[A-Za-z0-9_-]{20,}/, `${row.route}: no key secret`)
      }
    })
  }
})

t.test('the table has a row for every admin and console route, and routes/access.ts one for each row', async (t) => {
  const idp = await startIdp(t, [REDIRECT], {})
  const { app } = await gateway(t, idp)
  const registered = new Set(app.operatorRoutes.filter((r) => r.method !== 'HEAD').map((r) => `${r.method} ${r.url}`))
  const rows = new Set(ROWS.map((r) => r.route))
  for (const route of registered) t.ok(rows.has(route), `${route} has a row in this test`)
  for (const route of rows) t.ok(registered.has(route), `${route} is registered`)
  t.same(Object.keys(ACCESS).sort(), [...rows].sort(), 'the access table has exactly these routes')
})

t.test('a route without a row in the access table stops the app from being built', async (t) => {
  const { default: Fastify } = await import('fastify')
  const { accessGate } = await import('../../routes/access.js')
  const app = Fastify()
  t.teardown(() => app.close())
  app.decorate('gateway', { config: testConfig(), store: {}, clock: { now: Date.now } } as never)
  await t.rejects(async () => {
    await app.register(async (scope) => {
      accessGate(scope, [])
      scope.get('/admin/v1/something-new', async () => ({}))
    })
    await app.ready()
  }, /GET \/admin\/v1\/something-new has no row in the access table/)
})

t.test('/metrics takes the admin tokens whose role reads every organization', async (t) => {
  const idp = await startIdp(t, [REDIRECT], {})
  const { app } = await gateway(t, idp)
  const status = async (headers: Record<string, string>): Promise<number> => (await app.inject({ method: 'GET', url: '/metrics', headers })).statusCode
  t.equal(await status(bearer(TOKENS.admin)), 200)
  t.equal(await status(bearer(TOKENS.viewer)), 200)
  t.equal(await status(bearer(TOKENS.org_admin)), 403, 'an org_admin\'s token: the figures span other organizations')
  t.equal(await status({}), 401)
})
