import t from 'tap'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { bearer, build, FakeClock, type BuildExtras, KEY_A, KEY_B, KEY_OTHER_ORG, mockCatalog, settled, sqliteOf } from '../helper.js'
import { startMockUpstream } from '../mock-upstream.js'
import { tempDir } from '../temp-dir.js'

/** Two apps (two workers) sharing a fresh SQLite file. */
async function twoWorkers (t: Parameters<typeof build>[0], overrides: Record<string, unknown>, extras: BuildExtras = {}): Promise<[FastifyInstance, FastifyInstance]> {
  const sqlite = join(tempDir('policies'), 'gw.db')
  return [await build(t, { ...overrides, store: { sqlite } }, extras), await build(t, { ...overrides, store: { sqlite } }, extras)]
}

const chatBody = (model = 'demo/gpt', extra: Record<string, unknown> = {}) => ({ model, messages: [{ role: 'user', content: 'Count to three' }], ...extra })

t.test('rate limit: per IP, before auth, 429 with Retry-After in both shapes', async (t) => {
  const clock = new FakeClock()
  const app = await build(t, { plugins: [{ name: 'rate-limit', options: { max: 3, window_s: 60 } }, { name: 'auth' }] }, { clock })
  for (let i = 0; i < 3; i++) t.equal((await app.inject({ method: 'GET', url: '/v1/models' })).statusCode, 401, 'counted without a key')
  const limited = await app.inject({ method: 'GET', url: '/v1/models', headers: bearer(KEY_A) })
  t.equal(limited.statusCode, 429)
  t.same(limited.json().error.code, 429)
  t.equal(limited.json().error.message, 'You are being rate limited.')
  t.equal(limited.headers['retry-after'], '60')
  const messages = await app.inject({ method: 'POST', url: '/v1/messages', headers: bearer(KEY_A), payload: {} })
  t.equal(messages.statusCode, 429)
  t.same(messages.json(), { type: 'error', error: { type: 'rate_limit_error', message: 'You are being rate limited.' } })
  const other = await app.inject({ method: 'GET', url: '/v1/models', headers: bearer(KEY_A), remoteAddress: '10.0.0.9' })
  t.equal(other.statusCode, 200, 'another IP has its own count')
  clock.advance(60_000)
  t.equal((await app.inject({ method: 'GET', url: '/v1/models', headers: bearer(KEY_A) })).statusCode, 200, 'a new window')
})

t.test('rate limit: trust_proxy takes the client IP from X-Forwarded-For', async (t) => {
  const app = await build(t, { server: { trust_proxy: true }, plugins: [{ name: 'rate-limit', options: { max: 1, window_s: 60 } }, { name: 'auth' }] })
  const h = (ip: string) => ({ ...bearer(KEY_A), 'x-forwarded-for': ip })
  t.equal((await app.inject({ method: 'GET', url: '/v1/models', headers: h('203.0.113.1') })).statusCode, 200)
  t.equal((await app.inject({ method: 'GET', url: '/v1/models', headers: h('203.0.113.1') })).statusCode, 429)
  t.equal((await app.inject({ method: 'GET', url: '/v1/models', headers: h('203.0.113.2') })).statusCode, 200)
})

t.test('rate limit: concurrent hits on two workers, near the limit one hit a take, admit exactly max', async (t) => {
  const max = 25
  const [a, b] = await twoWorkers(t, { plugins: [{ name: 'rate-limit', options: { max, window_s: 600 } }] })
  // all 60 in flight at once: each app takes one hit at a time (max / 16 < 2), the others wait for it
  const all = await Promise.all(Array.from({ length: 60 }, (_, i) => (i % 2 === 0 ? a : b).inject({ method: 'GET', url: '/v1/models' })))
  const codes = all.map((r) => r.statusCode)
  t.equal(codes.filter((c) => c === 200).length, max, 'exactly max admitted')
  t.equal(codes.filter((c) => c === 429).length, 60 - max, 'the rest refused')
  const counted = (sqliteOf(a).db.prepare('SELECT count FROM rate_limits').get() as { count: number }).count
  t.ok(counted >= max && counted <= max + 2, `counted ${counted}: once a worker saw the counter at the limit, it refused the window's later hits without a write`)
})

t.test('rate limit: a high limit is taken 64 hits a write, and two workers alternating are refused right at it', async (t) => {
  const max = 1100
  const [a, b] = await twoWorkers(t, { plugins: [{ name: 'rate-limit', options: { max, window_s: 600 } }] })
  const counted = (): number => (sqliteOf(a).db.prepare('SELECT count FROM rate_limits').get() as { count: number }).count
  const first = await a.inject({ method: 'GET', url: '/v1/models' })
  t.equal(first.statusCode, 200)
  t.equal(counted(), 64, 'one write counted 64 hits ahead')
  t.equal(first.headers['x-ratelimit-remaining'], String(max - 1), 'the client sees its own hit only')
  let admitted = 1
  let refused = 0
  for (let i = 1; i < 1200; i++) {
    const res = await (i % 2 === 0 ? a : b).inject({ method: 'GET', url: '/v1/models' })
    if (res.statusCode === 200) admitted++
    else if (res.statusCode === 429) refused++
  }
  // near the limit the takes shrink to one hit, so no worker is left holding hits the other needs
  t.equal(admitted, max, 'exactly max admitted')
  t.equal(refused, 1200 - max, 'every later hit refused')
})

t.test('idempotency: duplicates 409, per API key, failures release the key, trace-id fallback', async (t) => {
  const app = await build(t, { plugins: [{ name: 'auth' }, { name: 'idempotency' }] })
  const post = (key: string, headers: Record<string, string>, body = chatBody()) =>
    app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(key), ...headers }, payload: body })
  t.equal((await post(KEY_A, { 'idempotency-key': 'k1' })).statusCode, 200)
  const dup = await post(KEY_A, { 'idempotency-key': 'k1' })
  t.equal(dup.statusCode, 409)
  t.equal(dup.json().error.code, 'duplicate_request')
  t.equal(dup.headers['x-should-retry'], 'false')
  t.equal((await post(KEY_OTHER_ORG, { 'idempotency-key': 'k1' })).statusCode, 200, 'the same key under another API key is another request')

  const failed = await post(KEY_A, { 'idempotency-key': 'k2' }, { model: 'demo/gpt' } as never)
  t.equal(failed.statusCode, 400)
  t.equal((await post(KEY_A, { 'idempotency-key': 'k2' })).statusCode, 200, 'a failed request released its key')

  t.equal((await post(KEY_A, { 'x-svc-trace-id': 'client-trace-1' })).statusCode, 200)
  t.equal((await post(KEY_A, { 'x-svc-trace-id': 'client-trace-1' })).statusCode, 409, 'the client trace id serves as the key')
  const m = await app.inject({ method: 'POST', url: '/v1/messages', headers: { ...bearer(KEY_A), 'idempotency-key': 'k1' }, payload: { model: 'demo/claude', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] } })
  t.equal(m.statusCode, 409, 'shared by both endpoints')
  t.equal(m.json().type, 'error')
})

t.test('idempotency: a key refuses repeats for ttl_s after the answer, then is taken again', async (t) => {
  const clock = new FakeClock()
  const app = await build(t, { plugins: [{ name: 'auth' }, { name: 'idempotency', options: { ttl_s: 10 } }] }, { clock })
  const post = () => app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(KEY_A), 'idempotency-key': 'e' }, payload: chatBody() })
  const row = () => sqliteOf(app).db.prepare("SELECT created_at, expires_at FROM idempotency_keys WHERE idem_key = 'e'").get() as { created_at: number, expires_at: number }
  // the key's first use is noted (when it was last used): a write of its own, done with before
  t.equal((await app.inject({ method: 'GET', url: '/v1/models', headers: bearer(KEY_A) })).statusCode, 200)
  await app.gateway.store.flush()
  t.equal((await post()).statusCode, 200)
  await settled()
  t.equal(sqliteOf(app).commit.pending, 0, 'and costs no second write')
  await app.gateway.store.flush()
  t.equal(row().expires_at - row().created_at, 10_100, 'a quick call keeps the expiry it was taken with: ttl plus 1% slack')
  clock.advance(10_000)
  t.equal((await post()).statusCode, 409, 'still refused ttl_s after the answer')
  clock.advance(100)
  t.equal((await post()).statusCode, 200, 'taken again once the slack is over too')
  t.equal(sqliteOf(app).idempotency.sweep(clock.now() + 20_000), 1, 'swept once expired')
})

t.test('idempotency: a call that outlasts the slack keeps its key ttl_s after its answer', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const clock = new FakeClock()
  const app = await build(t, { ...mockCatalog(mock), plugins: [{ name: 'auth' }, { name: 'idempotency', options: { ttl_s: 10 } }] }, { clock })
  mock.script(() => { clock.advance(5_000); return undefined }) // the upstream takes 5 s of the gateway's time
  const post = () => app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(KEY_A), 'idempotency-key': 'long' }, payload: chatBody('openai/gpt-test') })
  t.equal((await post()).statusCode, 200)
  await settled()
  await app.gateway.store.flush()
  const row = sqliteOf(app).db.prepare("SELECT created_at, expires_at FROM idempotency_keys WHERE idem_key = 'long'").get() as { created_at: number, expires_at: number }
  t.equal(row.expires_at - row.created_at, 15_000, 'moved to ttl_s after the answer')
  mock.script(null)
  clock.advance(9_999)
  t.equal((await post()).statusCode, 409)
  clock.advance(1)
  t.equal((await post()).statusCode, 200)
})

t.test('quota: tokens per minute per project, usd per day per org, UTC windows, Retry-After', async (t) => {
  const clock = new FakeClock(Date.UTC(2026, 0, 15, 12, 0, 30))
  const tenants = [
    { org: 'acme', quota: { usd: 1, per: 'day' }, projects: [{ id: 'web', quota: { tokens: 50, per: 'minute' }, keys: [{ key: KEY_A }] }] },
    { org: 'zeta', projects: [{ id: 'app', keys: [{ key: KEY_OTHER_ORG }] }] }
  ]
  const app = await build(t, { tenants, plugins: [{ name: 'auth' }, { name: 'quota' }] }, { clock })
  const post = (key = KEY_A) => app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(key), payload: chatBody() })
  let admitted = 0
  let res = await post()
  while (res.statusCode === 200 && admitted < 100) { admitted++; await new Promise((r) => setImmediate(r)); res = await post() }
  t.ok(admitted >= 1 && admitted < 100, `admitted ${admitted} calls before the token quota`)
  t.equal(res.statusCode, 429)
  t.equal(res.json().error.code, 429)
  t.equal(res.headers['retry-after'], '30', 'seconds to the minute\'s end')
  t.match(res.json().error.message, /acme\/web/)
  t.equal((await post(KEY_OTHER_ORG)).statusCode, 200, 'other tenants are not affected')
  const m = await app.inject({ method: 'POST', url: '/v1/messages', headers: bearer(KEY_A), payload: { model: 'demo/claude', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] } })
  t.equal(m.statusCode, 429, 'the messages endpoint shares the quota')
  t.equal(m.json().error.type, 'rate_limit_error')
  clock.advance(30_000)
  t.equal((await post()).statusCode, 200, 'the next minute starts afresh')
})

t.test('balance: 402 when the org cannot pay, then success after a top-up; 403 without an org', async (t) => {
  const tenants = [{ org: 'acme', balance_usd: 0, projects: [{ id: 'web', keys: [{ key: KEY_A }, { key: KEY_B, models: ['anthropic/*'] }] }] }]
  const app = await build(t, { tenants, plugins: [{ name: 'auth' }, { name: 'balance' }] })
  const post = () => app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chatBody('demo/gpt', { max_tokens: 100 }) })
  const refused = await post()
  t.equal(refused.statusCode, 402)
  t.equal(refused.json().error.code, 402)
  t.equal(refused.headers['x-should-retry'], 'false')
  const m = await app.inject({ method: 'POST', url: '/v1/messages', headers: bearer(KEY_A), payload: { model: 'demo/claude', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] } })
  t.equal(m.statusCode, 402)
  t.equal(m.json().error.type, 'billing_error')
  await app.gateway.store.orgs.credit('acme', 1_000_000_000)
  const ok = await post()
  t.equal(ok.statusCode, 200)
  await app.gateway.store.flush()
  const org = (await app.gateway.store.orgs.get('acme'))!
  t.equal(org.held_nano, 0, 'the hold was settled')
  t.ok(org.spent_nano > 0 && org.balance_nano === 1_000_000_000 - org.spent_nano, 'the real charge was debited')

  // without auth no call has an organization to charge: the config says so before anything runs
  await t.rejects(build(t, { tenants, plugins: [{ name: 'balance' }] }), { problems: ['plugins[0]: balance needs auth enabled before it'] })
})

t.test('every plugin on a streamed call: one close listener for all end-of-response work, no listener warning', async (t) => {
  const warnings: Error[] = []
  const onWarning = (w: Error): void => { warnings.push(w) }
  process.on('warning', onWarning)
  t.teardown(() => { process.off('warning', onWarning) })
  const tenants = [{ org: 'acme', balance_usd: 10, quota: { tokens: 1_000_000, per: 'day' }, projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
  const plugins = ['cors', 'rate-limit', 'auth', 'idempotency', 'quota', 'balance', 'usage', 'diagnostics'].map((name) => ({ name }))
  const app = await build(t, { tenants, plugins })
  for (let i = 0; i < 3; i++) {
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(KEY_A), 'idempotency-key': `w${i}`, origin: 'https://app.example' }, payload: chatBody('demo/gpt', { stream: true }) })
    t.equal(res.statusCode, 200)
    t.match(res.body, /\[DONE\]/)
  }
  await new Promise((resolve) => setImmediate(resolve))
  t.same(warnings.filter((w) => w.name === 'MaxListenersExceededWarning').map((w) => w.message), [])
})

t.test('quota across workers: once a call has ended, the other worker refuses the next at once', async (t) => {
  const clock = new FakeClock(Date.UTC(2026, 0, 15, 12, 0, 0))
  const tenants = [{ org: 'acme', projects: [{ id: 'web', quota: { tokens: 1, per: 'hour' }, keys: [{ key: KEY_A }] }] }]
  const [a, b] = await twoWorkers(t, { tenants, plugins: [{ name: 'auth' }, { name: 'quota' }] }, { clock })
  const post = (app: typeof a, model = 'demo/gpt') => app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chatBody(model) })
  t.equal((await post(b, 'demo/missing')).statusCode, 404, 'b reads the quota (nothing used yet) on a call that counts nothing')
  t.equal((await post(a)).statusCode, 200)
  t.equal((await post(b)).statusCode, 429, 'the answer came after its usage was counted: b refuses the next call')
  t.equal((await post(a)).statusCode, 429, 'and so does a')
})

t.test('rate limit: wrong admin tokens and guessed console keys are counted, 429 from the sixth', async (t) => {
  const app = await build(t, { admin: { token: 'the-real-admin-token-0123456789' }, plugins: [{ name: 'rate-limit', options: { max: 5, window_s: 60 } }, { name: 'auth' }] })
  for (const [url, label] of [['/admin/v1/usage', 'admin token'], ['/console/api/me', 'console key']] as const) {
    const codes: number[] = []
    let limited: Awaited<ReturnType<typeof app.inject>> | undefined
    for (let i = 0; i < 20; i++) {
      const res = await app.inject({ method: 'GET', url, headers: bearer(`mg-guess-${i}-0123456789abcdef`), remoteAddress: label === 'admin token' ? '198.51.100.7' : '198.51.100.8' })
      codes.push(res.statusCode)
      if (res.statusCode === 429) limited ??= res
    }
    t.same(codes.slice(0, 5), [401, 401, 401, 401, 401], `${label}: the first five guesses get 401`)
    t.same(codes.slice(5), Array(15).fill(429), `${label}: every later guess gets 429`)
    t.equal(limited?.headers['retry-after'], '60', `${label}: with Retry-After`)
    t.equal(limited?.json().error.code, 429, `${label}: in the numeric-code shape`)
  }
})
