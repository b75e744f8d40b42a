import t, { type Test } from 'tap'
import { join } from 'node:path'
import { startMockUpstream, type MockUpstream } from '../mock-upstream.js'
import { eventually, mockCatalog, spawnGateway } from '../helper.js'
import { tempDir } from '../temp-dir.js'
import { REDIS_URL, scratchDatabase, scratchRedisPrefix, servicesMissing } from '../scratch-services.js'

// The tenancy at runtime, through the real HTTP API of the built gateway, as it is served: by
// `modelgate serve --workers 2` on one SQLite file, and by two instances on one PostgreSQL and
// Redis. An organization, a project and keys made through the admin API; a key narrowed on one
// process and refused on the others; rpm, tpm and a budget reached exactly by sequential calls
// that take the processes in turn; a rotation, an expiry and a deletion refused everywhere; the
// summary against the records; the audit log.

const ADMIN = 'tenancy-e2e-admin-token-0123456789'
const PLUGINS = [{ name: 'auth', options: { cache_ttl_s: 60 } }, { name: 'quota' }, { name: 'usage' }]
// what a call to openai/gpt-test with the prompt 'x' costs on the mock: 8 prompt tokens at $3
// and 2 completion tokens at $15 per million
const CALL_NANO = 54_000
const CALL_TOKENS = 10

interface Served {
  /** The base URL the i-th call goes to (the processes in turn). */
  base: (i: number) => string
  /** How many processes serve. */
  processes: number
  mock: MockUpstream
}

async function admin (base: string, method: string, path: string, body?: unknown): Promise<{ status: number, body: any, text: string }> {
  const res = await fetch(`${base}/admin/v1${path}`, {
    method,
    headers: { authorization: `Bearer ${ADMIN}`, connection: 'close', ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body)
  })
  const text = await res.text()
  return { status: res.status, body: text === '' ? null : JSON.parse(text), text }
}

async function call (base: string, key: string, model = 'openai/gpt-test', path = '/v1/chat/completions'): Promise<{ status: number, body: any, retryAfter: string | null }> {
  const res = await fetch(`${base}${path}`, {
    method: 'POST',
    signal: AbortSignal.timeout(5000),
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', connection: 'close' },
    body: JSON.stringify(path === '/v1/messages'
      ? { model, max_tokens: 200, messages: [{ role: 'user', content: 'x' }] }
      : { model, max_tokens: 200, messages: [{ role: 'user', content: 'x' }] })
  })
  const text = await res.text()
  return { status: res.status, body: JSON.parse(text), retryAfter: res.headers.get('retry-after') }
}

/** Waits out the last seconds of a UTC minute, so that a sequence of calls stays in one minute's window (it does not judge anything). */
async function awayFromMinuteEnd (): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000)
  if (left < 12_000) await new Promise((resolve) => setTimeout(resolve, left + 50))
}

/** `n` sequential calls of `key`, taking the processes in turn. */
async function sequence (s: Served, key: string, n: number, path?: string): Promise<Array<Awaited<ReturnType<typeof call>>>> {
  const out = []
  for (let i = 0; i < n; i++) out.push(await call(s.base(i), key, 'openai/gpt-test', path))
  return out
}

/** One call of `key` on each process (twice as many with workers: the primary hands connections to them in turn). */
async function everywhere (s: Served, key: string, model?: string): Promise<number[]> {
  return await Promise.all(Array.from({ length: 2 * s.processes }, async (_, i) => (await call(s.base(i), key, model)).status))
}

const nano = (usd: string): bigint => {
  const [whole, frac = ''] = usd.split('.')
  return BigInt(whole as string) * 1_000_000_000n + BigInt(frac.padEnd(9, '0'))
}

async function scenario (t: Test, s: Served): Promise<void> {
  const a = s.base(0)
  const b = s.base(1)
  t.equal((await admin(a, 'POST', '/orgs', { id: 'tenant', balance_usd: 100 })).status, 201, 'an organization made')
  t.equal((await admin(b, 'POST', '/orgs/tenant/projects', { id: 'app' })).status, 201, 'a project made (on the other process)')
  const k = (await admin(a, 'POST', '/keys', { org: 'tenant', project: 'app', models: ['openai/*', 'anthropic/*'], name: 'svc' })).body as { id: string, key: string }
  t.same(await everywhere(s, k.key), Array(2 * s.processes).fill(200), 'a key of the new project calls a model on every process')
  t.same(await everywhere(s, k.key, 'anthropic/claude-test'), Array(2 * s.processes).fill(200), 'and another model (the key is cached everywhere now)')

  t.equal((await admin(a, 'PATCH', `/keys/${k.id}`, { models: ['openai/*'] })).status, 200)
  const narrowed = await eventually(1000, async () => await everywhere(s, k.key, 'anthropic/claude-test'), (v) => v.every((c) => c === 404))
  t.same(narrowed, Array(2 * s.processes).fill(404), 'models narrowed on one process: 404 on the others within a second')
  t.same(await everywhere(s, k.key), Array(2 * s.processes).fill(200), 'the granted model still answers')

  await awayFromMinuteEnd()
  const limited = (await admin(b, 'POST', '/keys', { org: 'tenant', project: 'app', limits: { rpm: 4 } })).body as { id: string, key: string }
  const rpm = await sequence(s, limited.key, 7)
  t.same(rpm.map((r) => r.status), [200, 200, 200, 200, 429, 429, 429], 'rpm 4: refused from the fifth call, whichever process serves it')
  t.ok(rpm.slice(4).every((r) => Number(r.retryAfter) >= 1 && Number(r.retryAfter) <= 60), `with Retry-After (${rpm[4]?.retryAfter ?? ''})`)
  t.match(rpm[4]?.body.error, { code: 429, type: 'rate_limit_error' })
  const m = await call(b, limited.key, 'anthropic/claude-test', '/v1/messages')
  t.equal(m.status, 429)
  t.match(m.body, { type: 'error', error: { type: 'rate_limit_error' } }, 'in the Messages shape on /v1/messages')

  const tpm = (await admin(a, 'POST', '/keys', { org: 'tenant', project: 'app', limits: { tpm: 2.5 * CALL_TOKENS } })).body as { key: string }
  await awayFromMinuteEnd()
  t.same((await sequence(s, tpm.key, 5)).map((r) => r.status), [200, 200, 200, 429, 429], 'tpm 25: the third call takes the minute to 30, the fourth is refused')

  const budgeted = (await admin(b, 'POST', '/keys', { org: 'tenant', project: 'app', budget: { usd: String(2.5 * CALL_NANO / 1e9), per: 'month' } })).body as { id: string, key: string }
  const spent = await sequence(s, budgeted.key, 6)
  t.same(spent.map((r) => r.status), [200, 200, 200, 429, 429, 429], 'a budget of 2.5 calls: refused from the call after the one that reached it')
  t.match(spent[3]?.body.error, { code: 429, type: 'quota_exceeded', message: /key/ })
  t.match((await admin(a, 'GET', `/keys/${budgeted.id}`)).body.budget, { limit: '0.000135', used: '0.000162', per: 'month' }, 'three calls spent, to the nano-dollar')

  const rotated = await admin(b, 'POST', `/keys/${k.id}/rotate`, { grace_s: 0 })
  t.equal(rotated.status, 201)
  const old = await eventually(1000, async () => await everywhere(s, k.key), (v) => v.every((c) => c === 401))
  t.same(old, Array(2 * s.processes).fill(401), 'rotated with no grace: the old secret answers 401 everywhere within a second')
  t.match((await call(a, k.key)).body.error.message, /expired/)
  t.same(await everywhere(s, rotated.body.key), Array(2 * s.processes).fill(200), 'the new secret works everywhere')
  t.equal((await call(a, rotated.body.key, 'anthropic/claude-test')).status, 404, 'with the old key\'s grants')

  t.equal((await admin(a, 'PATCH', `/keys/${rotated.body.id as string}`, { expires_at: new Date(Date.now() - 1000).toISOString() })).status, 200)
  const expired = await eventually(1000, async () => await everywhere(s, rotated.body.key), (v) => v.every((c) => c === 401))
  t.same(expired, Array(2 * s.processes).fill(401), 'expired: 401 everywhere within a second')

  const records: any[] = (await admin(b, 'GET', '/usage?org=tenant&limit=10000')).body.data
  const summary = (await admin(a, 'GET', '/usage/summary?org=tenant&group_by=key_id,model&bucket=day')).body.data as any[]
  t.equal(summary.reduce((n, r) => n + (r.calls as number), 0), records.length, 'the summary counts every record')
  for (const row of summary) {
    const mine = records.filter((r) => r.key_id === row.key_id && r.model === row.model)
    t.equal(row.calls, mine.length)
    t.equal(nano(row.cost_usd), mine.reduce((sum, r) => sum + nano(r.cost_usd), 0n), `${row.key_id as string} ${row.model as string}: the cost is the sum of its records, to the nano-dollar`)
  }

  t.same((await admin(b, 'DELETE', '/orgs/tenant')).body, { id: 'tenant', deleted: true })
  const gone = await eventually(1000, async () => await everywhere(s, limited.key), (v) => v.every((c) => c === 401))
  t.same(gone, Array(2 * s.processes).fill(401), 'the organization deleted: its keys answer 401 everywhere within a second')
  t.ok((await admin(a, 'GET', '/usage?org=tenant&limit=1')).body.data.length === 1, 'its usage records stay')

  const audit = await admin(a, 'GET', '/audit?limit=1000')
  const actions = (audit.body.data as any[]).map((e) => e.action as string).reverse()
  t.same(actions, ['org.create', 'project.create', 'key.create', 'key.update', 'key.create', 'key.create', 'key.create', 'key.rotate', 'key.update', 'org.delete'], 'the audit log: every change, from either process')
  for (const secret of [k.key, limited.key, rotated.body.key as string, ADMIN]) t.notOk(audit.text.includes(secret), 'never a secret')
}

t.test('serve --workers 2 on one SQLite file', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const c = mockCatalog(mock)
  const gw = await spawnGateway(t, {
    store: { sqlite: join(tempDir('tenancy'), 'gw.db') },
    admin: { token: ADMIN },
    plugins: PLUGINS,
    providers: c.providers,
    models: c.models,
    tenants: []
  }, ['--workers', '2'])
  const base = `http://127.0.0.1:${gw.port}`
  await scenario(t, { base: () => base, processes: 2, mock })
  gw.kill('SIGTERM')
  t.equal(await gw.exited, 0)
})

t.test('two instances on one PostgreSQL and Redis', async (t) => {
  const missing = await servicesMissing()
  if (missing !== null) { t.plan(0, `PostgreSQL or Redis not reachable (${missing})`); return }
  const url = await scratchDatabase(t)
  const prefix = scratchRedisPrefix(t)
  const mock = await startMockUpstream()
  t.teardown(async () => { await mock.close() })
  const c = mockCatalog(mock)
  const config = {
    store: { postgres: url, redis: REDIS_URL, redis_prefix: prefix },
    admin: { token: ADMIN },
    plugins: PLUGINS,
    providers: c.providers,
    models: c.models,
    tenants: []
  }
  // the first one migrates
  const first = await spawnGateway(t, config, ['--workers', '1'])
  const second = await spawnGateway(t, config, ['--workers', '1'])
  const bases = [first, second].map((g) => `http://127.0.0.1:${g.port}`)
  await scenario(t, { base: (i) => bases[i % 2] as string, processes: 2, mock })
})
