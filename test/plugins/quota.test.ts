import t from 'tap'
import { join } from 'node:path'
import auth from '../../plugins/auth.js'
import quota from '../../plugins/quota.js'
import { bareGateway, bearer, build, FakeClock, KEY_A } from '../helper.js'
import { tempDir } from '../temp-dir.js'

// The quota plugin, with auth, on a bare Fastify with the test gateway: token or USD quotas per
// organization and per project (set in the tenants), per UTC window, 429 with Retry-After to the
// window's end. Then two apps sharing one SQLite file.

const KEY = 'mg-test-gateway-key-0123456789abcdef'
const OTHER_KEY = 'mg-test-other-key-0123456789abcdef'
const chat = (model = 'test/echo') => ({ model, messages: [{ role: 'user', content: 'Count to three' }] })

t.test('tokens per minute per project: refused once reached, Retry-After to the minute\'s end, both endpoints; the next minute starts afresh', async (t) => {
  const clock = new FakeClock(Date.UTC(2026, 0, 15, 12, 0, 30))
  const tenants = [
    { org: 'acme', projects: [{ id: 'web', quota: { tokens: 50, per: 'minute' }, keys: [{ key: KEY }] }] },
    { org: 'zeta', projects: [{ id: 'app', keys: [{ key: OTHER_KEY }] }] }
  ]
  const gw = await bareGateway(t, [auth, quota], { clock, config: { tenants } })
  const post = (key = KEY) => gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(key), payload: chat() })
  let admitted = 0
  let res = await post()
  while (res.statusCode === 200 && admitted < 100) { admitted++; res = await post() }
  t.ok(admitted >= 1 && admitted < 100, `admitted ${admitted} calls before the token quota`)
  const used = (await gw.gateway.store.quota.used('project:acme/web', Date.UTC(2026, 0, 15, 12, 0, 0)))
  t.ok(used.tokens >= 50, `refused once the calls that ended used ${used.tokens} tokens of 50`)
  t.equal(res.statusCode, 429)
  t.equal(res.json().error.code, 429)
  t.equal(res.json().error.type, 'quota_exceeded')
  t.equal(res.headers['retry-after'], '30', 'seconds to the minute\'s end')
  t.match(res.json().error.message, /project acme\/web: \d+ of 50 tokens this minute/)
  t.equal((await post(OTHER_KEY)).statusCode, 200, 'other tenants are not affected')
  const m = await gw.app.inject({ method: 'POST', url: '/v1/messages', headers: bearer(KEY), payload: { model: 'test/claude', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] } })
  t.equal(m.statusCode, 429, 'the Messages endpoint shares the quota')
  t.equal(m.json().error.type, 'rate_limit_error')
  clock.advance(30_000)
  t.equal((await post()).statusCode, 200, 'the next minute starts afresh')
})

t.test('USD per day per organization: every project of the org counts; Retry-After to UTC midnight', async (t) => {
  const clock = new FakeClock(Date.UTC(2026, 0, 15, 23, 0, 0))
  const tenants = [{ org: 'acme', quota: { usd: 0.0001, per: 'day' }, projects: [{ id: 'web', keys: [{ key: KEY }] }, { id: 'api', keys: [{ key: OTHER_KEY }] }] }]
  const gw = await bareGateway(t, [auth, quota], { clock, config: { tenants } })
  const post = (key: string) => gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(key), payload: chat() })
  let admitted = 0
  let res = await post(KEY)
  while (res.statusCode === 200 && admitted < 200) { admitted++; res = await post(admitted % 2 === 0 ? KEY : OTHER_KEY) }
  t.ok(admitted >= 2 && admitted < 200, `admitted ${admitted} calls, from both projects, before $0.0001`)
  t.equal(res.statusCode, 429)
  t.match(res.json().error.message, /organization acme: [\d.]+ of 0\.0001 USD this day/)
  t.equal(res.headers['retry-after'], '3600', 'an hour to UTC midnight')
  t.equal((await post(KEY)).statusCode, 429, 'both projects are refused')
  t.equal((await post(OTHER_KEY)).statusCode, 429)
  clock.advance(3_600_000)
  t.equal((await post(KEY)).statusCode, 200, 'a new UTC day')
})

t.test('a refused or failed call counts nothing', async (t) => {
  const tenants = [{ org: 'acme', projects: [{ id: 'web', quota: { tokens: 1, per: 'hour' }, keys: [{ key: KEY }] }] }]
  const gw = await bareGateway(t, [auth, quota], { config: { tenants } })
  const post = (body: Record<string, unknown>) => gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY), payload: body })
  t.equal((await post({ model: 'test/echo' })).statusCode, 400, 'a body without messages')
  t.equal((await post(chat('test/missing'))).statusCode, 404, 'an unknown model')
  t.equal((await post(chat())).statusCode, 200, 'so the quota is untouched for the first real call')
  t.equal((await post(chat())).statusCode, 429, 'which reaches it')
})

t.test('without quotas in the tenants the plugin refuses nothing', async (t) => {
  const gw = await bareGateway(t, [auth, quota])
  const codes = []
  for (let i = 0; i < 5; i++) codes.push((await gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: gw.auth, payload: chat() })).statusCode)
  t.same(codes, [200, 200, 200, 200, 200])
})

t.test('quota needs auth before it: a config without it is refused', async (t) => {
  await t.rejects(build(t, { plugins: [{ name: 'quota' }, { name: 'auth' }] }), { name: 'ConfigError', problems: ['plugins[0]: quota needs auth enabled before it'] })
})

t.test('two workers: once a call has ended, the other worker refuses the next at once', async (t) => {
  const clock = new FakeClock(Date.UTC(2026, 0, 15, 12, 0, 0))
  const sqlite = join(tempDir('quota'), 'gw.db')
  const config = { store: { sqlite }, tenants: [{ org: 'acme', projects: [{ id: 'web', quota: { tokens: 1, per: 'hour' }, keys: [{ key: KEY_A }] }] }], plugins: [{ name: 'auth' }, { name: 'quota' }] }
  const a = await build(t, config, { clock })
  const b = await build(t, config, { clock })
  const post = (app: typeof a, model = 'demo/gpt') => app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat(model) })
  t.equal((await post(b, 'demo/missing')).statusCode, 404, 'b reads the quota (nothing used yet) on a call that counts nothing')
  t.equal((await post(a)).statusCode, 200)
  t.equal((await post(b)).statusCode, 429, 'the answer came after its usage was counted: b refuses the next call')
  t.equal((await post(a)).statusCode, 429, 'and so does a')
})
