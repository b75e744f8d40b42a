import t from 'tap'
import { bearer, build, KEY_A, settled, sqliteOf } from '../helper.js'

const ADMIN = 'admin-secret-token'
const admin = { authorization: `Bearer ${ADMIN}` }
const withUsage = { admin: { token: ADMIN }, plugins: [{ name: 'auth' }, { name: 'usage' }, { name: 'diagnostics' }] }

async function chat (app: Awaited<ReturnType<typeof build>>, model = 'demo/gpt'): Promise<void> {
  const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: { model, messages: [{ role: 'user', content: 'Say hello to the admin test' }] } })
  if (res.statusCode !== 200) throw new Error(`chat failed: ${res.statusCode} ${res.body}`)
  await settled()
}

t.test('without admin.token the admin API does not exist', async (t) => {
  const app = await build(t)
  const res = await app.inject({ method: 'GET', url: '/admin/v1/keys', headers: admin })
  t.equal(res.statusCode, 404)
})

t.test('a wrong admin token is 401', async (t) => {
  const app = await build(t, withUsage)
  for (const headers of [{}, { authorization: 'Bearer nope' }, bearer(KEY_A)]) {
    t.equal((await app.inject({ method: 'GET', url: '/admin/v1/keys', headers })).statusCode, 401)
  }
})

t.test('keys: create, list, revoke; the revoked key answers 401', async (t) => {
  const app = await build(t, withUsage)
  const created = await app.inject({ method: 'POST', url: '/admin/v1/keys', headers: admin, payload: { org: 'acme', project: 'web', models: ['demo/*'], name: 'svc' } })
  t.equal(created.statusCode, 201)
  const k = created.json()
  t.match(k, { org: 'acme', project: 'web', models: ['demo/*'], name: 'svc' })
  t.match(k.key, /^mg-/)
  const models = await app.inject({ method: 'GET', url: '/v1/models', headers: bearer(k.key) })
  t.same(models.json().data.map((m: { id: string }) => m.id), ['demo/gpt', 'demo/claude'])

  const list = await app.inject({ method: 'GET', url: '/admin/v1/keys?org=acme&project=web', headers: admin })
  t.ok(list.json().data.some((x: { id: string }) => x.id === k.id))
  t.notOk(list.body.includes(k.key), 'the secret is never listed')

  const del = await app.inject({ method: 'DELETE', url: `/admin/v1/keys/${k.id}`, headers: admin })
  t.same(del.json(), { id: k.id, revoked: true })
  t.equal((await app.inject({ method: 'GET', url: '/v1/models', headers: bearer(k.key) })).statusCode, 401)
  t.equal((await app.inject({ method: 'DELETE', url: '/admin/v1/keys/key_nope', headers: admin })).statusCode, 404)

  const bad = await app.inject({ method: 'POST', url: '/admin/v1/keys', headers: admin, payload: { org: 'acme' } })
  t.equal(bad.statusCode, 400)
  t.match(bad.json().error.message, /project/)
  t.equal((await app.inject({ method: 'POST', url: '/admin/v1/keys', headers: admin, payload: { org: 'ghost', project: 'web' } })).statusCode, 404)
})

t.test('orgs: view and credits top-up, exact decimals', async (t) => {
  const app = await build(t, withUsage)
  const org = await app.inject({ method: 'GET', url: '/admin/v1/orgs/acme', headers: admin })
  t.match(org.json(), { id: 'acme', balance_usd: '25', held_usd: '0', spent_usd: '0', quota: null, projects: [{ id: 'web', quota: null }] })
  const top = await app.inject({ method: 'POST', url: '/admin/v1/orgs/acme/credits', headers: admin, payload: { amount_usd: '0.000000001' } })
  t.equal(top.json().balance_usd, '25.000000001')
  const top2 = await app.inject({ method: 'POST', url: '/admin/v1/orgs/acme/credits', headers: admin, payload: { amount_usd: 4.5 } })
  t.equal(top2.json().balance_usd, '29.500000001')
  for (const amount of [-1, 0, 'x', null]) {
    t.equal((await app.inject({ method: 'POST', url: '/admin/v1/orgs/acme/credits', headers: admin, payload: { amount_usd: amount } })).statusCode, 400, String(amount))
  }
  t.equal((await app.inject({ method: 'GET', url: '/admin/v1/orgs/ghost', headers: admin })).statusCode, 404)
})

t.test('orgs: once a call has ended, held_usd is back to 0 and spent_usd is its charge', async (t) => {
  const app = await build(t, { ...withUsage, plugins: [{ name: 'auth' }, { name: 'balance' }, { name: 'usage' }] })
  // the lease's give-back is a write the store delays (it joins other writes a few ms later):
  // the admin API commits the delayed writes before it reads
  const store = sqliteOf(app)
  const flush = store.flush.bind(store)
  let flushed = 0
  store.flush = () => { flushed++; flush() }
  await chat(app)
  const org = (await app.inject({ method: 'GET', url: '/admin/v1/orgs/acme', headers: admin })).json()
  t.ok(flushed > 0, 'the admin API committed the delayed writes before it read')
  t.equal(org.held_usd, '0', 'the lease was given back')
  t.ok(Number(org.spent_usd) > 0, `spent ${org.spent_usd}`)
  t.equal(Number(org.balance_usd) + Number(org.spent_usd), 25)
})

t.test('usage: records of real calls, filters and cursor', async (t) => {
  const app = await build(t, withUsage)
  for (let i = 0; i < 5; i++) await chat(app)
  await chat(app, 'demo/claude')
  const all = await app.inject({ method: 'GET', url: '/admin/v1/usage', headers: admin })
  const body = all.json()
  t.equal(body.object, 'list')
  t.equal(body.data.length, 6)
  const r = body.data[0]
  t.match(r, { org: 'acme', project: 'web', endpoint: 'chat.completions', status: 'ok', stream: false })
  t.type(r.cost_usd, 'string')
  t.ok(r.prompt_tokens > 0 && r.completion_tokens > 0)
  t.equal(r.total_tokens, r.prompt_tokens + r.completion_tokens)
  t.type(r.trace_id, 'string')

  const claude = await app.inject({ method: 'GET', url: '/admin/v1/usage?model=demo/claude', headers: admin })
  t.equal(claude.json().data.length, 1)
  t.equal(claude.json().data[0].provider, 'demo-messages')

  const seen = new Set<string>()
  let cursor: string | null = null
  do {
    const page: { data: Array<{ id: string }>, next_cursor: string | null } = (await app.inject({ method: 'GET', url: `/admin/v1/usage?limit=4${cursor === null ? '' : `&cursor=${cursor}`}`, headers: admin })).json()
    page.data.forEach((x) => seen.add(x.id))
    cursor = page.next_cursor
  } while (cursor !== null)
  t.equal(seen.size, 6, 'pages cover every record once')
  t.equal((await app.inject({ method: 'GET', url: '/admin/v1/usage?limit=0', headers: admin })).statusCode, 400)
  t.equal((await app.inject({ method: 'GET', url: '/admin/v1/usage?since=yesterday', headers: admin })).statusCode, 400)
  t.equal((await app.inject({ method: 'GET', url: '/admin/v1/usage?cursor=%%%', headers: admin })).statusCode, 400)
  const future = await app.inject({ method: 'GET', url: '/admin/v1/usage?since=2999-01-01T00:00:00Z', headers: admin })
  t.equal(future.json().data.length, 0)
})
