import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { bearer, build as baseBuild, FakeClock, KEY_A, settled, watchAnswers } from '../helper.js'

// The tenancy at runtime through the admin API, in-process on SQLite with a fake clock:
// organizations and projects made, changed and deleted; keys with an expiry, limits and a
// budget, changed and rotated; the usage summary; the audit log; bad input on every new route.
// (The same behaviour across workers and instances, and on PostgreSQL: test/e2e/tenancy.test.ts.)

const ADMIN = 'tenancy-admin-token-0123456789'
const admin = { authorization: `Bearer ${ADMIN}` }
const plugins = [{ name: 'auth', options: { cache_ttl_s: 600 } }, { name: 'quota' }, { name: 'usage' }]

/** The app, each admin answer held to its response schema (an answer that lost a field is a 500). */
const build: typeof baseBuild = async (t, overrides, extras) => {
  const app = await baseBuild(t, overrides, extras)
  watchAnswers(app)
  return app
}

type App = FastifyInstance

async function api (app: App, method: string, url: string, payload?: unknown): Promise<{ status: number, body: any, headers: Record<string, unknown>, text: string }> {
  const res = await app.inject({ method: method as 'GET', url: `/admin/v1${url}`, headers: admin, ...(payload === undefined ? {} : { payload: payload as object }) })
  return { status: res.statusCode, body: res.body === '' ? null : res.json(), headers: res.headers, text: res.body }
}

async function chat (app: App, key: string, model = 'demo/gpt', content = 'Say hello'): Promise<{ status: number, body: any, headers: Record<string, unknown> }> {
  const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(key), payload: { model, messages: [{ role: 'user', content }] } })
  await settled()
  return { status: res.statusCode, body: res.json(), headers: res.headers }
}

async function messages (app: App, key: string, url = '/v1/messages'): Promise<{ status: number, body: any, headers: Record<string, unknown> }> {
  const res = await app.inject({ method: 'POST', url, headers: { 'x-api-key': key }, payload: { model: 'demo/claude', max_tokens: 16, messages: [{ role: 'user', content: 'Hi' }] } })
  await settled()
  return { status: res.statusCode, body: res.json(), headers: res.headers }
}

async function newKey (app: App, spec: Record<string, unknown>): Promise<{ id: string, key: string }> {
  const res = await api(app, 'POST', '/keys', { org: 'acme', project: 'web', ...spec })
  if (res.status !== 201) throw new Error(`key not created: ${res.status} ${res.text}`)
  return res.body
}

t.test('organizations and projects: created, listed, given a quota, deleted; their keys answer 401 at once and their usage records stay', async (t) => {
  const app = await build(t, { admin: { token: ADMIN }, plugins })
  const created = await api(app, 'POST', '/orgs', { id: 'globex', balance_usd: '12.000000001', quota: { tokens: 1000, per: 'day' } })
  t.equal(created.status, 201)
  t.match(created.body, { id: 'globex', balance_usd: '12.000000001', held_usd: '0', spent_usd: '0', quota: { limit: '1000', used: '0', unit: 'tokens', per: 'day' }, projects: [] })
  t.equal((await api(app, 'POST', '/orgs', { id: 'globex' })).status, 409, 'an id is taken once')
  t.equal((await api(app, 'POST', '/orgs', { id: 'acme' })).body.error.code, 'org_exists', 'a config org too')
  t.same((await api(app, 'GET', '/orgs')).body.data.map((o: { id: string }) => o.id), ['acme', 'globex', 'zeta'])

  const project = await api(app, 'POST', '/orgs/globex/projects', { id: 'shop', quota: { usd: '0.5', per: 'month' } })
  t.equal(project.status, 201)
  t.match(project.body, { id: 'shop', quota: { limit: '0.5', used: '0', unit: 'usd', per: 'month' } })
  t.equal((await api(app, 'POST', '/orgs/globex/projects', { id: 'shop' })).status, 409)
  t.equal((await api(app, 'POST', '/orgs/ghost/projects', { id: 'shop' })).status, 404)

  const key = await newKey(app, { org: 'globex', project: 'shop', name: 'shop-prod' })
  t.equal((await chat(app, key.key)).status, 200, 'a key of the new project calls a model')

  const patched = await api(app, 'PATCH', '/orgs/globex', { quota: { tokens: 1, per: 'day' } })
  t.match(patched.body.quota, { limit: '1', per: 'day' })
  t.ok(Number(patched.body.quota.used) > 0, 'the call counted against the quota it now has')
  const refused = await chat(app, key.key)
  t.equal(refused.status, 429, 'the new quota holds at once')
  t.match(refused.body.error.message, /organization globex/)
  t.same((await api(app, 'PATCH', '/orgs/globex', { quota: null })).body.quota, null)
  t.equal((await chat(app, key.key)).status, 200, 'without the quota the key calls again')
  t.same((await api(app, 'PATCH', '/orgs/globex/projects/shop', { quota: null })).body, { id: 'shop', quota: null })
  t.equal((await api(app, 'PATCH', '/orgs/globex/projects/nope', { quota: null })).body.error.code, 'project_not_found')
  t.equal((await api(app, 'PATCH', '/orgs/ghost/projects/shop', { quota: null })).body.error.code, 'org_not_found')

  t.same((await api(app, 'DELETE', '/orgs/globex/projects/shop')).body, { id: 'shop', deleted: true })
  t.equal((await chat(app, key.key)).status, 401, 'a key of a deleted project answers 401 at once')
  t.equal((await api(app, 'DELETE', '/orgs/globex/projects/shop')).status, 404)
  t.equal((await api(app, 'POST', '/orgs/globex/projects', { id: 'shop' })).status, 409, 'a deleted project keeps its id')
  t.equal((await api(app, 'POST', '/keys', { org: 'globex', project: 'shop' })).body.error.code, 'project_not_found')

  t.equal((await api(app, 'POST', '/orgs/globex/projects', { id: 'blog' })).status, 201)
  const other = await newKey(app, { org: 'globex', project: 'blog' })
  t.equal((await chat(app, other.key)).status, 200)
  t.same((await api(app, 'DELETE', '/orgs/globex')).body, { id: 'globex', deleted: true })
  t.equal((await chat(app, other.key)).status, 401, 'a key of a deleted organization answers 401 at once')
  t.equal((await api(app, 'GET', '/orgs/globex')).status, 404)
  t.equal((await api(app, 'POST', '/orgs/globex/credits', { amount_usd: 1 })).status, 404)
  t.same((await api(app, 'GET', '/orgs')).body.data.map((o: { id: string }) => o.id), ['acme', 'zeta'])
  t.equal((await api(app, 'GET', '/usage?org=globex&status=ok')).body.data.length, 3, 'its usage records stay')
})

t.test('keys: created with an expiry, limits and a budget; read; changed; models narrowed at once', async (t) => {
  const clock = new FakeClock()
  const app = await build(t, { admin: { token: ADMIN }, plugins }, { clock })
  const k = await newKey(app, { name: 'svc', models: ['demo/*'], expires_at: '2026-02-01T00:00:00Z', limits: { rpm: 100, tpm: 100_000 }, budget: { usd: '2.5', per: 'month' } })
  const got = await api(app, 'GET', `/keys/${k.id}`)
  t.match(got.body, {
    id: k.id,
    org: 'acme',
    project: 'web',
    name: 'svc',
    models: ['demo/*'],
    passthrough: [],
    expires_at: '2026-02-01T00:00:00.000Z',
    limits: { rpm: 100, tpm: 100_000 },
    budget: { limit: '2.5', used: '0', per: 'month', resets_at: '2026-02-01T00:00:00.000Z' },
    last_used_at: null,
    revoked: false
  })
  t.notOk(got.text.includes(k.key), 'the secret is never shown again')
  t.equal((await chat(app, k.key)).status, 200)
  const used = await api(app, 'GET', `/keys/${k.id}`)
  t.equal(used.body.last_used_at, new Date(clock.now()).toISOString(), 'when it was last used')
  t.ok(Number(used.body.budget.used) > 0, 'what it spent this month')

  t.equal((await chat(app, k.key, 'demo/claude')).status, 200)
  const narrowed = await api(app, 'PATCH', `/keys/${k.id}`, { models: ['demo/gpt'], limits: { tpm: null }, name: 'svc-2' })
  t.match(narrowed.body, { models: ['demo/gpt'], limits: { rpm: 100, tpm: null }, name: 'svc-2', budget: { limit: '2.5' } })
  const other = await chat(app, k.key, 'demo/claude')
  t.equal(other.status, 404, 'a model no longer granted: at once, though the key was cached')
  t.equal(other.body.error.code, 'model_not_found')
  t.equal((await app.inject({ method: 'GET', url: '/v1/models/demo/claude', headers: bearer(k.key) })).statusCode, 404)
  t.equal((await chat(app, k.key, 'demo/gpt')).status, 200)
  t.same((await api(app, 'PATCH', `/keys/${k.id}`, { limits: { rpm: null }, budget: null, expires_at: null })).body.limits, null)

  clock.set(Date.parse('2026-03-01T00:00:00Z'))
  t.equal((await chat(app, k.key)).status, 200, 'no expiry any more')
  t.same((await api(app, 'GET', '/keys?org=acme&project=web')).body.data.map((x: { id: string }) => x.id).includes(k.id), true)
  t.equal((await api(app, 'DELETE', `/keys/${k.id}`)).status, 200)
  t.equal((await api(app, 'PATCH', `/keys/${k.id}`, { name: 'x' })).body.error.code, 'key_revoked', 'a revoked key is not changed')
  t.equal((await api(app, 'POST', `/keys/${k.id}/rotate`, {})).status, 409)
  t.equal((await api(app, 'GET', '/keys/key_nope')).status, 404)
  t.equal((await api(app, 'PATCH', '/keys/key_nope', { name: 'x' })).status, 404)
})

t.test('expiry: 401 saying the key expired, on every route family; extended, it works again', async (t) => {
  const clock = new FakeClock()
  const app = await build(t, { admin: { token: ADMIN }, plugins }, { clock })
  const k = await newKey(app, { expires_at: new Date(clock.now() + 60_000).toISOString() })
  t.equal((await chat(app, k.key)).status, 200)
  clock.advance(60_000)
  const expired = await chat(app, k.key)
  t.equal(expired.status, 401)
  t.match(expired.body.error, { code: 'key_expired', type: 'authentication_error', message: /expired at 2026-01-15T12:01:00.000Z/ })
  const m = await messages(app, k.key)
  t.equal(m.status, 401)
  t.match(m.body, { type: 'error', error: { type: 'authentication_error', message: /expired/ } })
  t.equal((await api(app, 'POST', `/keys/${k.id}/rotate`, { grace_s: 60 })).body.error.code, 'key_expired', 'an expired key is not rotated')
  await api(app, 'PATCH', `/keys/${k.id}`, { expires_at: '2027-01-01' })
  t.equal((await chat(app, k.key)).status, 200)
})

t.test('rotation: a new secret with the same grants, limits and budget; both work during the grace, then only the new one', async (t) => {
  const clock = new FakeClock()
  const app = await build(t, { admin: { token: ADMIN }, plugins }, { clock })
  const old = await newKey(app, { models: ['demo/gpt'], limits: { rpm: 50 }, budget: { usd: 1, per: 'day' }, name: 'rot' })
  t.equal((await chat(app, old.key)).status, 200, 'the old key, cached')
  const rotated = await api(app, 'POST', `/keys/${old.id}/rotate`, { grace_s: 300 })
  t.equal(rotated.status, 201)
  t.match(rotated.body, { replaces: old.id, old_valid_until: new Date(clock.now() + 300_000).toISOString() })
  t.match(rotated.body.key, /^mg-/)
  t.not(rotated.body.id, old.id)
  const fresh = await api(app, 'GET', `/keys/${rotated.body.id as string}`)
  t.match(fresh.body, { models: ['demo/gpt'], limits: { rpm: 50, tpm: null }, name: 'rot', replaces: old.id, expires_at: null })
  t.ok(Number(fresh.body.budget.used) > 0, 'the new key spends the same budget: a rotation does not reset it')
  t.equal((await chat(app, old.key)).status, 200, 'the old secret works during the grace')
  t.equal((await chat(app, rotated.body.key)).status, 200, 'and the new one')
  t.equal((await chat(app, rotated.body.key, 'demo/claude')).status, 404, 'with the old grants')
  clock.advance(300_000)
  const late = await chat(app, old.key)
  t.equal(late.status, 401, 'the old secret after the grace')
  t.match(late.body.error.message, /expired/)
  t.equal((await chat(app, rotated.body.key)).status, 200, 'the new one still')

  const again = await api(app, 'POST', `/keys/${rotated.body.id as string}/rotate`)
  t.equal(again.status, 201, 'no body: no grace')
  t.equal(again.body.old_valid_until, new Date(clock.now()).toISOString())
  t.equal((await chat(app, rotated.body.key)).status, 401, 'grace 0: the old secret answers 401 at once')
  t.equal((await chat(app, again.body.key)).status, 200)
})

t.test('rpm: every call counts (count_tokens too); 429 with Retry-After, in the Messages shape on /v1/messages; the next minute admits again', async (t) => {
  const clock = new FakeClock(Date.UTC(2026, 0, 15, 12, 0, 0))
  const app = await build(t, { admin: { token: ADMIN }, plugins }, { clock })
  const k = await newKey(app, { limits: { rpm: 3 } })
  t.equal((await chat(app, k.key)).status, 200)
  t.equal((await messages(app, k.key, '/v1/messages/count_tokens')).status, 200, 'a free call')
  t.equal((await messages(app, k.key)).status, 200)
  clock.advance(15_000)
  const over = await chat(app, k.key)
  t.equal(over.status, 429)
  t.equal(over.headers['retry-after'], '45', 'seconds until the minute ends')
  t.match(over.body.error, { code: 429, type: 'rate_limit_error', message: new RegExp(`API key ${k.id} is over its limit of 3 requests per minute`) })
  const m = await messages(app, k.key)
  t.equal(m.status, 429)
  t.match(m.body, { type: 'error', error: { type: 'rate_limit_error' } })
  t.ok(m.headers['retry-after'])
  t.equal((await messages(app, k.key, '/v1/messages/count_tokens')).status, 429, 'count_tokens is refused too')
  clock.advance(45_000)
  t.equal((await chat(app, k.key)).status, 200, 'the next minute')
  t.equal((await chat(app, KEY_A)).status, 200, 'other keys are apart')
})

t.test('budget and tpm: refused from the call after the one that reached them; free calls spend none', async (t) => {
  const clock = new FakeClock(Date.UTC(2026, 0, 15, 12, 0, 0))
  const app = await build(t, { admin: { token: ADMIN }, plugins }, { clock })
  const probe = await newKey(app, {})
  await chat(app, probe.key)
  const cost = Number((await api(app, 'GET', `/usage?key_id=${probe.id}`)).body.data[0].cost_usd)
  t.ok(cost > 0)
  // a budget of two and a half calls: the third call takes it over, the fourth is refused
  const budgeted = await newKey(app, { budget: { usd: (cost * 2.5).toFixed(9), per: 'day' } })
  const statuses: number[] = []
  for (let i = 0; i < 4; i++) statuses.push((await chat(app, budgeted.key)).status)
  t.same(statuses, [200, 200, 200, 429])
  const refused = await chat(app, budgeted.key)
  t.match(refused.body.error, { code: 429, type: 'quota_exceeded', message: new RegExp(`key ${budgeted.id}: .* of ${(cost * 2.5).toFixed(9).replace(/0+$/, '')} USD this day`) })
  t.equal(refused.headers['retry-after'], String(12 * 3600), 'until the UTC day ends')
  t.equal((await messages(app, budgeted.key, '/v1/messages/count_tokens')).status, 200, 'a free call is not refused by a budget')
  const view = await api(app, 'GET', `/keys/${budgeted.id}`)
  t.equal(view.body.budget.used, (cost * 3).toFixed(9).replace(/0+$/, ''), 'three calls spent, to the nano-dollar')
  await api(app, 'PATCH', `/keys/${budgeted.id}`, { budget: { usd: 1, per: 'day' } })
  t.equal((await chat(app, budgeted.key)).status, 200, 'a higher budget admits again at once')

  const tokens = (await api(app, 'GET', `/usage?key_id=${probe.id}`)).body.data[0].total_tokens as number
  const tpm = await newKey(app, { limits: { tpm: tokens * 2 } })
  const calls: number[] = []
  for (let i = 0; i < 3; i++) calls.push((await chat(app, tpm.key)).status)
  t.same(calls, [200, 200, 429], 'tpm: refused once the minute\'s ended calls reached it')
  clock.advance(60_000)
  t.equal((await chat(app, tpm.key)).status, 200, 'the next minute')
})

t.test('usage summary: grouped and bucketed by the store; its totals are the sums of the records, to the nano-dollar', async (t) => {
  const clock = new FakeClock(Date.UTC(2026, 0, 15, 10, 30, 0))
  const app = await build(t, { admin: { token: ADMIN }, plugins }, { clock })
  const other = await newKey(app, { name: 'other' })
  for (let i = 0; i < 12; i++) {
    await chat(app, i % 3 === 0 ? other.key : KEY_A, i % 2 === 0 ? 'demo/gpt' : 'demo/claude', 'x'.repeat(1 + i * 7))
    clock.advance(17 * 60_000)
  }
  const records: any[] = (await api(app, 'GET', '/usage?limit=1000')).body.data
  t.equal(records.length, 12)
  const nano = (usd: string): bigint => BigInt(usd.replace('.', '').padEnd(usd.includes('.') ? usd.indexOf('.') + 1 + 9 : usd.length + 9, '0'))

  const summary = await api(app, 'GET', '/usage/summary?group_by=key_id,model&bucket=hour')
  t.equal(summary.status, 200)
  const groups = new Map<string, { calls: number, prompt: number, completion: number, cost: bigint }>()
  for (const r of records) {
    const k = `${r.key_id as string} ${r.model as string} ${new Date(Math.floor(Date.parse(r.created_at) / 3_600_000) * 3_600_000).toISOString()}`
    const g = groups.get(k) ?? { calls: 0, prompt: 0, completion: 0, cost: 0n }
    g.calls++
    g.prompt += r.prompt_tokens
    g.completion += r.completion_tokens
    g.cost += nano(r.cost_usd)
    groups.set(k, g)
  }
  t.equal(summary.body.data.length, groups.size, 'one row per key, model and hour')
  for (const row of summary.body.data) {
    const g = groups.get(`${row.key_id as string} ${row.model as string} ${row.bucket_start as string}`)
    t.ok(g, `${row.key_id as string} ${row.model as string} ${row.bucket_start as string}`)
    t.match(row, { calls: g?.calls, errors: 0, prompt_tokens: g?.prompt, completion_tokens: g?.completion, saved_usd: '0' })
    t.equal(nano(row.cost_usd), g?.cost, 'its cost is the sum of its records\' costs')
  }
  const total = await api(app, 'GET', '/usage/summary')
  t.equal(total.body.data.length, 1, 'no group: one row of totals')
  t.equal(nano(total.body.data[0].cost_usd), records.reduce((s, r) => s + nano(r.cost_usd), 0n))
  t.equal(total.body.data[0].calls, 12)
  const byOrg = await api(app, 'GET', `/usage/summary?group_by=org,org&key_id=${other.id}&bucket=day`)
  t.same(byOrg.body.data.map((r: any) => [r.org, r.bucket_start, r.calls]), [['acme', '2026-01-15T00:00:00.000Z', 4]])
  t.same((await api(app, 'GET', '/usage/summary?group_by=provider&since=2999-01-01')).body.data, [], 'nothing selected: no group')
})

t.test('audit log: every change through the API, newest first, paged, never a secret', async (t) => {
  const app = await build(t, { admin: { token: ADMIN }, plugins })
  await api(app, 'POST', '/orgs', { id: 'initech', balance_usd: 3 })
  await api(app, 'PATCH', '/orgs/initech', { quota: { usd: 2, per: 'month' } })
  await api(app, 'POST', '/orgs/initech/projects', { id: 'tps' })
  await api(app, 'PATCH', '/orgs/initech/projects/tps', { quota: { tokens: 10, per: 'minute' } })
  await api(app, 'POST', '/orgs/initech/credits', { amount_usd: '0.25' })
  const k = await newKey(app, { org: 'initech', project: 'tps', budget: { usd: 1, per: 'month' } })
  await api(app, 'PATCH', `/keys/${k.id}`, { limits: { rpm: 5 } })
  const r = await api(app, 'POST', `/keys/${k.id}/rotate`, { grace_s: 10 })
  await api(app, 'DELETE', `/keys/${r.body.id as string}`)
  await api(app, 'DELETE', '/orgs/initech/projects/tps')
  await api(app, 'DELETE', '/orgs/initech')
  await api(app, 'PATCH', '/orgs/initech', { quota: null }) // a 404 changes nothing

  const log = await api(app, 'GET', '/audit?limit=100')
  const byConfig = log.body.data.filter((e: any) => e.actor === 'config')
  t.same(byConfig.map((e: any) => e.action).sort(), ['key.create', 'key.create', 'key.create', 'org.create', 'org.create', 'project.create', 'project.create'], 'what the config made when the app started, as the config\'s')
  t.same(log.body.data.filter((e: any) => e.actor !== 'config').map((e: any) => `${e.action as string} ${e.target as string}`), [
    'org.delete initech', 'project.delete initech/tps', `key.revoke ${r.body.id as string}`, `key.rotate ${k.id}`, `key.update ${k.id}`, `key.create ${k.id}`,
    'credits.add initech', 'project.update initech/tps', 'project.create initech/tps', 'org.update initech', 'org.create initech'
  ])
  t.same([...new Set(log.body.data.filter((e: any) => e.actor !== 'config').map((e: any) => e.org))], ['initech'], 'each line names the organization it is about, a key\'s and a project\'s included')
  t.match(log.body.data.find((e: any) => e.action === 'key.rotate').detail, { key_id: r.body.id })
  t.match(log.body.data.find((e: any) => e.action === 'credits.add').detail, { amount_usd: '0.25' })
  t.match(log.body.data.find((e: any) => e.action === 'key.create').detail, { org: 'initech', project: 'tps', budget: { usd: '1', per: 'month' } })
  t.ok(log.body.data.every((e: any) => (e.actor === 'admin' || e.actor === 'config') && typeof e.at === 'string' && e.id.startsWith('aud_')))
  for (const secret of [k.key, r.body.key as string, ADMIN, k.key.slice(3, 20)]) t.notOk(log.text.includes(secret), 'no secret in the audit log')

  const seen: string[] = []
  let cursor: string | null = null
  do {
    const page: any = (await api(app, 'GET', `/audit?limit=4${cursor === null ? '' : `&cursor=${cursor}`}`)).body
    seen.push(...page.data.map((e: any) => e.id as string))
    cursor = page.next_cursor
  } while (cursor !== null)
  t.same(seen, log.body.data.map((e: any) => e.id), 'pages cover the log once, in order')
})

t.test('bad input on the admin routes: 400 naming the field, in the numeric-code shape', async (t) => {
  const app = await build(t, { admin: { token: ADMIN }, plugins })
  const k = await newKey(app, {})
  const cases: Array<[string, string, unknown, RegExp]> = [
    ['GET', '/usage?limit=Infinity', undefined, /limit/],
    ['GET', '/usage?limit=1e400', undefined, /limit/],
    ['GET', '/usage?limit=-Infinity', undefined, /limit/],
    ['GET', '/usage/summary?group_by=org,color', undefined, /group_by/],
    ['GET', '/usage/summary?bucket=week', undefined, /bucket/],
    ['GET', '/usage/summary?since=soon', undefined, /since/],
    ['GET', '/audit?limit=0', undefined, /limit/],
    ['GET', '/audit?cursor=%%%', undefined, /cursor/],
    ['POST', '/orgs', { id: 'bad id' }, /id/],
    ['POST', '/orgs', {}, /id/],
    ['POST', '/orgs', { id: 'x1', balance_usd: '1.0000000001' }, /balance_usd/],
    ['POST', '/orgs', { id: 'x2', quota: { per: 'day' } }, /quota/],
    ['POST', '/orgs', { id: 'x3', quota: { tokens: 5, usd: 1, per: 'day' } }, /quota/],
    ['POST', '/orgs', { id: 'x4', quota: { tokens: 'Infinity', per: 'day' } }, /quota.tokens/],
    ['POST', '/orgs', { id: 'x5', quota: { tokens: 5, per: 'week' } }, /quota.per/],
    ['POST', '/orgs', { id: 'x6', quota: { usd: -1, per: 'day' } }, /quota.usd/],
    ['PATCH', '/orgs/acme', {}, /quota/],
    ['PATCH', '/orgs/acme', { quota: 5 }, /quota/],
    ['POST', '/orgs/acme/projects', { id: '' }, /id/],
    ['POST', '/keys', { org: 'acme', project: 'web', expires_at: 'tomorrow' }, /expires_at/],
    ['POST', '/keys', { org: 'acme', project: 'web', expires_at: '2026-02-30' }, /expires_at/],
    ['POST', '/keys', { org: 'acme', project: 'web', limits: { rpm: 0 } }, /limits.rpm/],
    ['POST', '/keys', { org: 'acme', project: 'web', limits: { tpm: '1e400' } }, /limits.tpm/],
    ['POST', '/keys', { org: 'acme', project: 'web', budget: { usd: 1 } }, /budget.per/],
    ['POST', '/keys', { org: 'acme', project: 'web', budget: { usd: 'lots', per: 'day' } }, /budget.usd/],
    ['POST', '/keys', { org: 'acme', project: 'web', models: { a: 1 } }, /models/],
    ['PATCH', `/keys/${k.id}`, { models: [{}] }, /models\[0\]/],
    ['PATCH', `/keys/${k.id}`, { expires_at: 5 }, /expires_at/],
    ['PATCH', `/keys/${k.id}`, { limits: { rpm: 1.5 } }, /limits.rpm/],
    ['POST', `/keys/${k.id}/rotate`, { grace_s: -1 }, /grace_s/],
    ['POST', `/keys/${k.id}/rotate`, { grace_s: 'Infinity' }, /grace_s/],
    ['POST', `/keys/${k.id}/rotate`, { grace_s: 99_999_999 }, /grace_s/]
  ]
  for (const [method, url, payload, field] of cases) {
    const res = await api(app, method, url, payload)
    t.equal(res.status, 400, `${method} ${url} ${JSON.stringify(payload) ?? ''}: ${res.text}`)
    t.equal(typeof res.body?.error?.code, method === 'GET' ? 'number' : 'number', 'numeric-code shape')
    t.match(res.body?.error?.message, field, `names the field: ${res.body?.error?.message as string}`)
  }
  t.equal((await api(app, 'GET', '/audit')).body.data.filter((e: any) => e.actor !== 'config').length, 1, 'nothing changed but the key made first')
})

t.test('a key\'s models name at least one glob: an empty list is refused, never taken for every model', async (t) => {
  const app = await build(t, { admin: { token: ADMIN }, plugins })
  const created = await api(app, 'POST', '/keys', { org: 'acme', project: 'web', models: [] })
  t.equal(created.status, 400)
  t.match(created.body, { error: { code: 400, message: /models/ } })
  const k = await newKey(app, { models: ['demo/*'] })
  const patched = await api(app, 'PATCH', `/keys/${k.id}`, { models: [] })
  t.equal(patched.status, 400, 'nor set by a change')
  t.same((await api(app, 'GET', `/keys/${k.id}`)).body.models, ['demo/*'], 'the key keeps its grants')
  t.equal((await chat(app, k.key, 'anthropic/claude-x')).status, 404, 'and reaches only them')
})

t.test('the quota a config file names belongs to the file: 409 config_owned; one it does not name is the API\'s', async (t) => {
  const app = await build(t, { admin: { token: ADMIN }, plugins, tenants: [{ org: 'acme', quota: { tokens: 1000, per: 'day' }, projects: [{ id: 'web', quota: { usd: 1, per: 'month' } }, { id: 'free' }] }] })
  const org = await api(app, 'PATCH', '/orgs/acme', { quota: null })
  t.equal(org.status, 409)
  t.match(org.body, { error: { code: 'config_owned' } })
  t.equal((await api(app, 'PATCH', '/orgs/acme/projects/web', { quota: null })).status, 409)
  t.equal((await api(app, 'PATCH', '/orgs/acme/projects/free', { quota: { tokens: 5, per: 'day' } })).status, 200, 'a quota the file does not name')
  t.match((await api(app, 'GET', '/orgs/acme')).body, { quota: { limit: '1000' } }, 'unchanged')
})
