import t from 'tap'
import { join } from 'node:path'
import { Client } from 'undici'
import { eventually, spawnGateway, type SpawnedGateway } from '../helper.js'
import { CLIENT_ID, CLIENT_SECRET, signInAtIdp, startIdp, type Idp } from '../oidc-idp.js'
import { REDIS_URL, scratchDatabase, scratchRedisPrefix, servicesMissing } from '../scratch-services.js'
import { tempDir } from '../temp-dir.js'

// A console session is the store's, not a process's: signed in through one worker or instance,
// it is valid on every other, and a logout through one ends it on all. Served by real gateway
// processes (`serve --workers 2` on one SQLite file; two instances on one PostgreSQL and Redis),
// signed in at a real OpenID provider. The sign-in itself may start on one process and end on
// another: what it keeps between the two is in the store too. A session an admin ends through one
// process is refused by every other at once.

// the callback the provider is told of; the tests carry its answer to whichever process they choose
const REDIRECT = 'http://127.0.0.1:8080/console/auth/callback'
const ADMIN = 'sso-shared-admin-token-0123456789'

const sso = (idp: Idp): Record<string, unknown> => ({
  issuer: idp.issuer, client_id: CLIENT_ID, client_secret: CLIENT_SECRET, redirect_url: REDIRECT, scopes: ['openid', 'email', 'groups'], roles: [{ group: 'ops', role: 'admin' }]
})

const cookieIn = (res: Response, name: string): string | undefined =>
  res.headers.getSetCookie().map((l) => l.split(';')[0] as string).find((p) => p.startsWith(`${name}=`))?.slice(name.length + 1)

/** Starts a sign-in at `startBase`, signs in at the provider, ends it at `endBase`; the session id. */
async function signIn (startBase: string, endBase: string): Promise<string> {
  const start = await fetch(`${startBase}/console/auth/login?to=admin`, { redirect: 'manual', headers: { connection: 'close' } })
  const back = await signInAtIdp(start.headers.get('location') as string, 'ann')
  const end = await fetch(`${endBase}/console/auth/callback${back.search}`, { redirect: 'manual', headers: { cookie: `mg_login=${cookieIn(start, 'mg_login') as string}`, connection: 'close' } })
  if (end.status !== 303) throw new Error(`the callback answered ${end.status}: ${await end.text()}`)
  return cookieIn(end, 'mg_session') as string
}

/** One kept-alive connection: every request on it reaches the same worker. */
async function ask (c: Client, method: 'GET' | 'POST' | 'DELETE', path: string, headers: Record<string, string>): Promise<{ status: number, body: Record<string, unknown> }> {
  const res = await c.request({ method, path, headers })
  return { status: res.statusCode, body: await res.body.json() as Record<string, unknown> }
}

t.test('two workers on one SQLite file see one session, and its end', async (t) => {
  const idp = await startIdp(t, [REDIRECT], { ann: { email: 'ann@example.com', groups: ['ops'] } })
  const gw: SpawnedGateway = await spawnGateway(t, { store: { sqlite: join(tempDir('sso-workers'), 'gw.db') }, sso: sso(idp) }, ['--workers', '2'])
  const base = `http://127.0.0.1:${gw.port}`
  const session = await signIn(base, base)
  const headers = { cookie: `mg_session=${session}` }

  // connections until two reach different workers (the kernel spreads new connections over them)
  const clients: Client[] = []
  t.teardown(async () => { for (const c of clients) await c.close() })
  const byPid = new Map<number, Client>()
  await eventually(10_000, async () => {
    const c = new Client(base)
    clients.push(c)
    const r = await ask(c, 'GET', '/admin/v1/providers', headers)
    if (r.status !== 200) throw new Error(`a worker refused the session: ${r.status}`)
    if (!byPid.has(r.body.pid as number)) byPid.set(r.body.pid as number, c)
    return byPid.size
  }, (n) => n >= 2, 0)
  t.equal(byPid.size, 2, 'the session is valid on both workers')
  const [a, b] = [...byPid.values()] as [Client, Client]
  const who = await ask(b, 'GET', '/admin/v1/whoami', headers)
  t.match(who.body, { kind: 'sso', sub: 'ann', role: 'admin' })

  // a second sign-in ends the first session through one worker: the other refuses it at once
  const second = { cookie: `mg_session=${await signIn(base, base)}` }
  const csrf = (await ask(a, 'GET', '/admin/v1/whoami', second)).body.csrf_token as string
  const listed = (await ask(a, 'GET', '/admin/v1/sessions', second)).body.data as Array<{ id: string, current: boolean }>
  t.equal(listed.length, 2)
  const first = listed.find((s) => !s.current)
  t.equal((await ask(a, 'DELETE', `/admin/v1/sessions/${first?.id ?? ''}`, { ...second, 'x-csrf-token': csrf })).status, 200, 'ended through one worker')
  t.equal((await ask(b, 'GET', '/admin/v1/providers', headers)).status, 401, 'the other refuses it at once')
  t.equal((await ask(b, 'GET', '/admin/v1/providers', second)).status, 200, 'and takes the session that was not ended')

  const out = await ask(b, 'POST', '/console/auth/logout', { ...second, 'x-csrf-token': csrf })
  t.equal(out.status, 200, 'signed out through one worker')
  t.equal((await ask(a, 'GET', '/admin/v1/providers', second)).status, 401, 'the other refuses it at once')
  t.equal((await ask(b, 'GET', '/admin/v1/providers', second)).status, 401)
})

t.test('two instances on one PostgreSQL and Redis see one session, and its end', async (t) => {
  const missing = await servicesMissing()
  if (missing !== null) { t.plan(0, `PostgreSQL or Redis not reachable (${missing})`); return }
  const idp = await startIdp(t, [REDIRECT], { ann: { email: 'ann@example.com', groups: ['ops'] } })
  const store = { postgres: await scratchDatabase(t), redis: REDIS_URL, redis_prefix: scratchRedisPrefix(t, 'mgs') }
  const first = await spawnGateway(t, { store, sso: sso(idp), admin: { token: ADMIN } }, ['--workers', '1'])
  const second = await spawnGateway(t, { store, sso: sso(idp), admin: { token: ADMIN } }, ['--workers', '1'])
  const [one, two] = [first, second].map((g) => `http://127.0.0.1:${g.port}`) as [string, string]

  // started on one instance, ended on the other: the sign-in under way is in Redis
  const session = await signIn(one, two)
  const headers = { cookie: `mg_session=${session}`, connection: 'close' }
  const whoOn = async (base: string): Promise<Response> => await fetch(`${base}/admin/v1/whoami`, { headers })
  const onOne = await whoOn(one)
  t.equal(onOne.status, 200, 'valid on the instance that did not make it')
  const who = await onOne.json() as { csrf_token: string, sub: string }
  t.equal(who.sub, 'ann')
  t.equal((await whoOn(two)).status, 200, 'and on the one that did')
  const made = await fetch(`${two}/admin/v1/orgs`, { method: 'POST', headers: { ...headers, 'content-type': 'application/json', 'x-csrf-token': who.csrf_token }, body: JSON.stringify({ id: 'made-by-ann' }) })
  t.equal(made.status, 201, 'its CSRF token, read on one instance, holds on the other')
  const audit = await (await fetch(`${one}/admin/v1/audit`, { headers })).json() as { data: Array<{ action: string, identity: unknown }> }
  t.match(audit.data.find((a) => a.action === 'org.create'), { identity: { kind: 'sso', sub: 'ann', email: 'ann@example.com' } })
  const out = await fetch(`${two}/console/auth/logout`, { method: 'POST', headers: { ...headers, 'x-csrf-token': who.csrf_token } })
  t.equal(out.status, 200, 'signed out on one instance')
  t.equal((await whoOn(one)).status, 401, 'refused on the other at once')
  t.equal((await whoOn(two)).status, 401)

  // an admin token ends every session of the user through one instance: the other refuses them at once
  const again = { cookie: `mg_session=${await signIn(one, one)}`, connection: 'close' }
  t.equal((await fetch(`${two}/admin/v1/whoami`, { headers: again })).status, 200)
  const ended = await fetch(`${one}/admin/v1/sessions?sub=ann`, { method: 'DELETE', headers: { authorization: `Bearer ${ADMIN}`, connection: 'close' } })
  t.same(await ended.json(), { sub: 'ann', ended: 1 })
  t.equal((await fetch(`${two}/admin/v1/whoami`, { headers: again })).status, 401, 'refused on the other instance at once')
})
