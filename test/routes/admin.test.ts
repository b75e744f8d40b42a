import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { bearer, build as baseBuild, FakeClock, KEY_A, mockCatalog, settled, sqliteOf, testConfig, watchAnswers } from '../helper.js'
import { startMockUpstream } from '../mock-upstream.js'
import { tempDir } from '../temp-dir.js'

const ADMIN = 'admin-secret-token'
const admin = { authorization: `Bearer ${ADMIN}` }
const withUsage = { admin: { token: ADMIN }, plugins: [{ name: 'auth' }, { name: 'usage' }, { name: 'diagnostics' }] }

/** The app, each admin answer held to its response schema (an answer that lost a field is a 500). */
const build: typeof baseBuild = async (t, overrides, extras) => {
  const app = await baseBuild(t, overrides, extras)
  watchAnswers(app)
  return app
}

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

t.test('usage: filtered by status (one or a list), endpoint and provider; records carry their attempts and dropped parameters', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const app = await build(t, { ...withUsage, ...mockCatalog(mock), upstream: { retry: { attempts: 0 } } })
  const call = async (url: string, payload: Record<string, unknown>): Promise<number> => {
    const res = await app.inject({ method: 'POST', url, headers: bearer(KEY_A), payload })
    await settled()
    return res.statusCode
  }
  t.equal(await call('/v1/chat/completions', { model: 'openai/gpt-test', seed: 7, messages: [{ role: 'user', content: 'hi' }] }), 200)
  t.equal(await call('/v1/messages', { model: 'anthropic/claude-test', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] }), 200)
  mock.faults = { status: { status: 500, times: 1 } }
  t.equal(await call('/v1/chat/completions', { model: 'openai/gpt-test', messages: [{ role: 'user', content: 'hi' }] }), 502)
  t.equal(await call('/v1/chat/completions', { model: 'openai/failover', messages: [{ role: 'user', content: 'hi' }] }), 200)

  const list = async (query: string): Promise<Array<Record<string, any>>> => {
    const res = await app.inject({ method: 'GET', url: `/admin/v1/usage?${query}`, headers: admin })
    t.equal(res.statusCode, 200, `${query}: ${res.body}`)
    return res.json().data
  }
  const failed = await list('status=upstream_error')
  t.equal(failed.length, 1)
  t.match(failed[0], { status: 'upstream_error', provider: 'mock-openai', attempts: [{ provider: 'mock-openai', upstream_model: 'gpt-upstream-name', outcome: 'server_error', status: 500, error: 'server_error' }], dropped_params: [] })
  t.equal((await list('status=ok')).length, 3)
  t.equal((await list('status=ok,upstream_error')).length, 4, 'a comma list: any of them')
  t.equal((await list('status=timeout,client_aborted')).length, 0)
  t.match(await list('endpoint=messages'), [{ endpoint: 'messages', model: 'anthropic/claude-test', provider: 'mock-messages' }])
  t.equal((await list('endpoint=messages')).length, 1)
  t.equal((await list('provider=mock-openai&endpoint=chat.completions&status=ok')).length, 2)
  const seeded = (await list('provider=mock-openai&status=ok')).find((r) => r.dropped_params.length > 0)
  t.same(seeded?.dropped_params, ['seed'], 'the parameter the model does not list')
  const failover = (await list('model=openai/failover'))[0]
  t.same(failover?.attempts.map((a: Record<string, unknown>) => [a.provider, a.outcome, a.status, a.error]), [['mock-dead', 'network_error', null, 'ECONNREFUSED'], ['mock-openai', 'ok', 200, null]], 'a call that went on to a second provider: two attempts')

  const summary = await app.inject({ method: 'GET', url: '/admin/v1/usage/summary?status=upstream_error,timeout&group_by=provider', headers: admin })
  t.match(summary.json().data, [{ provider: 'mock-openai', calls: 1, errors: 1 }], 'the summary takes the same filters')

  for (const [query, param] of [['status=bogus', 'status'], ['status=ok,', 'status'], ['status=OK', 'status'], ['endpoint=chat', 'endpoint']]) {
    const bad = await app.inject({ method: 'GET', url: `/admin/v1/usage?${query}`, headers: admin })
    t.equal(bad.statusCode, 400, query)
    t.equal(bad.json().error.code, 400)
    t.match(bad.json().error.message, new RegExp(`query parameter ${param}\\b`), `${query}: the message names ${param}`)
  }
})

t.test('usage/{trace_id}: the call\'s record, attempts, dropped parameters and stored content; 404 for no such call', async (t) => {
  for (const storeContent of [true, false]) {
    const app = await build(t, { ...withUsage, plugins: [{ name: 'auth' }, { name: 'usage', options: { store_content: storeContent } }] })
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: { model: 'demo/gpt', seed: 3, messages: [{ role: 'user', content: 'Remember this sentence' }] } })
    t.equal(res.statusCode, 200)
    await settled()
    const trace = String(res.headers['x-svc-trace-id'])
    const one = await app.inject({ method: 'GET', url: `/admin/v1/usage/${trace}`, headers: admin })
    t.equal(one.statusCode, 200)
    const r = one.json()
    t.match(r, { trace_id: trace, org: 'acme', project: 'web', endpoint: 'chat.completions', model: 'demo/gpt', provider: 'demo', status: 'ok', dropped_params: ['seed'] })
    t.match(r.attempts, [{ provider: 'demo', upstream_model: 'gpt-sim', outcome: 'ok', status: 200, error: null }])
    const listed = (await app.inject({ method: 'GET', url: '/admin/v1/usage', headers: admin })).json().data[0]
    t.same({ ...r, content: undefined }, { ...listed, content: undefined }, 'the record as the list shows it, plus its content')
    if (storeContent) {
      t.type(r.content.request, 'string')
      t.same(JSON.parse(r.content.request).messages, [{ role: 'user', content: 'Remember this sentence' }], 'the request as the usage plugin kept it')
      t.equal(JSON.parse(r.content.response).id, res.json().id, 'and the answer')
    } else {
      t.equal(r.content, null, 'no content stored: null')
    }
  }
  const app = await build(t, withUsage)
  const missing = await app.inject({ method: 'GET', url: '/admin/v1/usage/0190a1b2-c3d4-7e5f-8a9b-000000000000', headers: admin })
  t.equal(missing.statusCode, 404)
  t.match(missing.json(), { error: { code: 'usage_not_found', message: /0190a1b2-c3d4-7e5f-8a9b-000000000000/ } })
  t.equal((await app.inject({ method: 'GET', url: `/admin/v1/usage/${'x'.repeat(201)}`, headers: admin })).statusCode, 400)
  t.equal((await app.inject({ method: 'GET', url: '/admin/v1/usage/anything' })).statusCode, 401, 'behind the admin token')
})

t.test('providers: configured or not, breaker, latency average, last failures newest first; a failing provider opens its breaker', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const clock = new FakeClock()
  const c = mockCatalog(mock)
  const app = await build(t, {
    ...withUsage,
    ...c,
    providers: [...c.providers as object[], { id: 'mock-userinfo', protocol: 'openai', base_url: 'http://user:pw@127.0.0.1:9/v1', api_key: 'k' }],
    upstream: { retry: { attempts: 0 }, breaker: { failures: 2, open_s: 60 } }
  }, { clock })
  const chat = async (model: string): Promise<number> => (await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: { model, messages: [{ role: 'user', content: 'hi' }] } })).statusCode
  const providers = async (): Promise<Record<string, Record<string, any>>> => {
    const res = await app.inject({ method: 'GET', url: '/admin/v1/providers', headers: admin })
    t.equal(res.statusCode, 200)
    t.equal(res.json().object, 'list')
    return Object.fromEntries(res.json().data.map((p: { id: string }) => [p.id, p]))
  }

  t.equal(await chat('openai/gpt-test'), 200)
  let p = await providers()
  t.same(Object.keys(p), ['mock-openai', 'mock-messages', 'mock-dead', 'mock-nokey', 'mock-userinfo'], 'every configured provider, in config order')
  t.match(p['mock-openai'], { protocol: 'openai', base_url: mock.openaiBaseUrl, configured: true, breaker: 'closed', healthy: true, recent_failures: [] })
  t.type(p['mock-openai']?.avg_latency_ms, 'number', 'the time-to-first-byte average of its answers')
  t.same(p['mock-messages'], { id: 'mock-messages', protocol: 'messages', platform: null, base_url: mock.messagesBaseUrl, configured: true, breaker: 'closed', healthy: true, avg_latency_ms: null, recent_failures: [], workers: [{ pid: process.pid, breaker: 'closed', avg_latency_ms: null }] }, 'never called: no average; one process: its own view')
  t.match(p['mock-nokey'], { configured: false, healthy: false, breaker: 'closed' }, 'no credentials: never tried')
  t.equal(p['mock-userinfo']?.base_url, '••••••', 'a base URL with credentials is masked')

  mock.faults = { status: { status: 503, times: 1 } }
  t.equal(await chat('openai/gpt-test'), 502)
  p = await providers()
  t.match(p['mock-openai'], { breaker: 'closed', healthy: true, recent_failures: [{ at: new Date(clock.now()).toISOString(), status: 503, error: 'server_error' }] }, 'one failure: still closed')
  clock.advance(1000)
  t.equal(await chat('openai/failover'), 200, 'mock-dead refuses, mock-openai answers (its failures in a row start again)')
  clock.advance(1000)
  mock.faults = { status: { status: 500, times: 2 } }
  t.equal(await chat('openai/gpt-test'), 502)
  t.equal(await chat('openai/gpt-test'), 502)
  t.equal(await chat('openai/failover'), 502, 'mock-dead refuses, mock-openai is open')
  p = await providers()
  t.match(p['mock-openai'], { breaker: 'open', healthy: false }, 'two failures in a row: open')
  const now = new Date(clock.now()).toISOString()
  const pid = process.pid
  t.same(p['mock-openai']?.recent_failures, [
    { at: now, status: 500, error: 'server_error', pid },
    { at: now, status: 500, error: 'server_error', pid },
    { at: new Date(clock.now() - 2000).toISOString(), status: 503, error: 'server_error', pid }
  ], 'newest first, each with the process that saw it')
  t.match(p['mock-dead'], { breaker: 'open', healthy: false, avg_latency_ms: null, recent_failures: [{ status: null, error: 'ECONNREFUSED' }, { status: null, error: 'ECONNREFUSED' }] })
  t.equal((await app.inject({ method: 'GET', url: '/admin/v1/providers' })).statusCode, 401, 'behind the admin token')
})

t.test('plugins: the chain as it applies, in order, with the metrics and tracing sections; secrets in options masked', async (t) => {
  const dir = tempDir('admin-plugins')
  const file = join(dir, 'vault.mjs')
  writeFileSync(file, "export default { name: 'vault', options: { type: 'object' }, async plugin () {} }\n")
  const { resolveGatewayConfig: resolveConfig } = await import('../../engine/host/index.js')
  const { buildApp } = await import('../../app.js')
  const base = JSON.parse(JSON.stringify(testConfig())) as Record<string, unknown>
  const config = await resolveConfig({
    ...base,
    admin: { token: ADMIN },
    plugins: [
      { name: 'auth' },
      { name: 'guardrails', enabled: false },
      { name: 'vault', module: './vault.mjs', options: { api_key: 'sk-live-1', endpoint: 'https://svc:hunter2@vault.example/v1', public_url: 'https://vault.example/v1', nested: { password: 'p', keep: 1, list: [{ secretToken: 't' }, 'postgres://u:p@db/x'] }, headers: { 'x-team': 'abc' }, region: null } },
      { name: 'usage', options: { store_content: true } }
    ],
    tracing: { otlp_endpoint: 'http://127.0.0.1:9/v1/traces?api_key=otlp-query-secret&region=eu', headers: { authorization: 'Bearer otlp-secret' } }
  }, { baseDir: dir })
  const app = await buildApp(config, { logger: false })
  t.teardown(() => app.close())
  watchAnswers(app)
  const res = await app.inject({ method: 'GET', url: '/admin/v1/plugins', headers: admin })
  t.equal(res.statusCode, 200)
  const body = res.json()
  t.equal(body.object, 'list')
  t.equal(body.generation, null, 'an app built on its own has no generation')
  t.same(body.data.map((p: { name: string }) => p.name), ['auth', 'vault', 'usage', 'metrics', 'tracing'], 'enabled entries in config order, then metrics and tracing')
  t.match(body.data[0], { name: 'auth', module: null, enabled: true, options: { cache_ttl_s: 10 } }, 'a built-in: module null, its options with their defaults')
  t.match(body.data[1], { name: 'vault', enabled: true })
  t.match(body.data[1].module, /vault\.mjs$/, 'an outside plugin names its module')
  t.same(body.data[1].options, {
    api_key: '••••••',
    endpoint: '••••••',
    public_url: 'https://vault.example/v1',
    nested: { password: '••••••', keep: 1, list: [{ secretToken: '••••••' }, '••••••'] },
    headers: { 'x-team': '••••••' },
    region: null
  })
  t.match(body.data[2].options, { store_content: true, retention_days: 30 })
  t.same(body.data[3], { name: 'metrics', module: null, enabled: true, options: { enabled: true, auth: 'admin' } })
  t.match(body.data[4], { name: 'tracing', module: null, enabled: true, options: { otlp_endpoint: 'http://127.0.0.1:9/v1/traces?api_key=••••••&region=eu', headers: { authorization: '••••••' } } }, 'a URL\'s query secret masked, the rest shown')
  t.notMatch(res.body, /sk-live-1|hunter2|otlp-secret|otlp-query-secret|secretToken":"t"/, 'no secret anywhere in the answer')
  t.equal((await app.inject({ method: 'GET', url: '/admin/v1/plugins' })).statusCode, 401, 'behind the admin token')
})

t.test('GET /admin/v1/plugins shows CORS\'s credentials switch as it is set', async (t) => {
  const app = await build(t, { admin: { token: ADMIN }, plugins: [{ name: 'cors' }, { name: 'auth' }] })
  const cors = (await app.inject({ method: 'GET', url: '/admin/v1/plugins', headers: admin })).json().data[0]
  t.same(cors, { name: 'cors', module: null, enabled: true, options: { origins: ['*'], credentials: false, max_age_s: 600 } })
})

t.test('the audit log for an org_admin: its own organization\'s lines only, selected before paging (full pages, cursors that hold); another organization answers 404', async (t) => {
  const ACME = 'an-acme-admin-token-0123456789'
  const app = await build(t, { ...withUsage, admin: { token: ADMIN, tokens: [{ token: ACME, role: 'org_admin', org: 'acme', name: 'acme-ci' }] } })
  // changes of both organizations, interleaved, the newest ones zeta's: a page filtered after it was read would come up short
  for (let i = 0; i < 4; i++) {
    for (const [org, project] of [['acme', 'web'], ['zeta', 'app']]) {
      t.equal((await app.inject({ method: 'POST', url: '/admin/v1/keys', headers: admin, payload: { org, project, name: `${org}-${i}` } })).statusCode, 201)
    }
  }
  for (let i = 0; i < 3; i++) t.equal((await app.inject({ method: 'POST', url: '/admin/v1/orgs/zeta/credits', headers: admin, payload: { amount_usd: '1' } })).statusCode, 200)
  type Line = { id: string, action: string, target: string, org: string | null, detail: Record<string, unknown> }
  const everything = (await app.inject({ method: 'GET', url: '/admin/v1/audit?limit=1000', headers: admin })).json().data as Line[]
  t.same([...new Set(everything.map((l) => l.org))].sort(), ['acme', 'zeta'], 'an admin reads every organization\'s lines, each naming its own')
  t.equal(everything[0]?.org, 'zeta')

  const seen: Line[] = []
  let cursor: string | null = null
  do {
    const res = await app.inject({ method: 'GET', url: `/admin/v1/audit?limit=2${cursor === null ? '' : `&cursor=${cursor}`}`, headers: bearer(ACME) })
    t.equal(res.statusCode, 200)
    const page = res.json() as { data: Line[], next_cursor: string | null }
    if (page.next_cursor !== null) t.equal(page.data.length, 2, 'every page but the last is full')
    seen.push(...page.data)
    cursor = page.next_cursor
  } while (cursor !== null)
  t.same(seen.map((l) => l.id), everything.filter((l) => l.org === 'acme').map((l) => l.id), 'every line of acme, once each, newest first')
  t.ok(seen.length >= 6, `acme's lines: the config's and the four keys (${seen.length})`)
  t.notMatch(JSON.stringify(seen), /zeta/, 'nothing of another organization')

  const own = await app.inject({ method: 'GET', url: '/admin/v1/audit?org=acme&limit=1000', headers: bearer(ACME) })
  t.same(own.json().data.map((l: Line) => l.id), seen.map((l) => l.id), 'naming its own organization is the same')
  const other = await app.inject({ method: 'GET', url: '/admin/v1/audit?org=zeta', headers: bearer(ACME) })
  t.equal(other.statusCode, 404, 'another organization answers as if it did not exist')
  t.equal(other.json().error.code, 'org_not_found')
  const zeta = (await app.inject({ method: 'GET', url: '/admin/v1/audit?org=zeta&limit=1000', headers: admin })).json().data as Line[]
  t.same(zeta.map((l) => l.id), everything.filter((l) => l.org === 'zeta').map((l) => l.id), 'an admin may select one organization too')
})

t.test('every admin answer has its response schema: a route without one stops the build, and a field a schema leaves out is caught', async (t) => {
  const { default: Fastify } = await import('fastify')
  const { Type } = await import('@sinclair/typebox')
  const { answerSchemaRequired } = await import('../../routes/admin/index.js')
  const bare = Fastify()
  t.teardown(() => bare.close())
  await t.rejects(async () => {
    await bare.register(async (scope) => {
      scope.addHook('onRoute', answerSchemaRequired)
      scope.get('/something-new', { schema: { response: { 404: Type.Object({}) } } }, async () => ({}))
    })
    await bare.ready()
  }, /GET \/something-new has no response schema/)

  // the watcher the admin tests run under: a schema that drops a field answers 500 and says which
  const lossy = Fastify()
  t.teardown(() => lossy.close())
  const changed = watchAnswers(lossy, '/')
  lossy.get('/thin', { schema: { response: { 200: Type.Object({ id: Type.String() }) } } }, async () => ({ id: 'a', kept: false }))
  lossy.get('/whole', { schema: { response: { 200: Type.Object({ id: Type.String(), kept: Type.Boolean() }) } } }, async () => ({ id: 'a', kept: true }))
  t.equal((await lossy.inject('/whole')).statusCode, 200)
  t.equal((await lossy.inject('/thin')).statusCode, 500)
  t.match(changed, [/GET \/thin: the handler returned \{"id":"a","kept":false\}; the schema sent \{"id":"a"\}/])
})
