import t from 'tap'
import auth from '../../plugins/auth.js'
import idempotency from '../../plugins/idempotency.js'
import { SqliteStore } from '../../engine/store/sqlite/index.js'
import type { TestGateway } from '../../engine/host/testing.js'
import { bareGateway, FakeClock, mockCatalog, settled } from '../helper.js'
import { startMockUpstream } from '../mock-upstream.js'

// The idempotency plugin, with auth, on a bare Fastify with the test gateway: an Idempotency-Key
// per API key, 409 duplicate_request on a repeat, released by a call that failed unbilled, kept
// ttl_s after the answer. (Concurrent duplicates over sockets: test/e2e/billing.test.ts.)

const OTHER_KEY = 'mg-test-other-key-0123456789abcdef'
const tenants = [
  { org: 'acme', projects: [{ id: 'web', keys: [{ key: 'mg-test-gateway-key-0123456789abcdef' }] }] },
  { org: 'zeta', projects: [{ id: 'app', keys: [{ key: OTHER_KEY }] }] }
]
const chat = (model = 'test/echo') => ({ model, messages: [{ role: 'user', content: 'Count to three' }] })

const storeOf = (gw: TestGateway): SqliteStore => gw.gateway.store as SqliteStore

t.test('a repeat is 409 duplicate_request, per API key, on both endpoints; a failed call releases its key', async (t) => {
  const gw = await bareGateway(t, [auth, idempotency], { config: { tenants } })
  const post = (headers: Record<string, string>, body: Record<string, unknown> = chat()) =>
    gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...gw.auth, ...headers }, payload: body })
  t.equal((await post({ 'idempotency-key': 'k1' })).statusCode, 200)
  const dup = await post({ 'idempotency-key': 'k1' })
  t.equal(dup.statusCode, 409)
  t.equal(dup.json().error.code, 'duplicate_request')
  t.equal(dup.headers['x-should-retry'], 'false')
  t.equal((await post({ 'idempotency-key': 'k1', authorization: `Bearer ${OTHER_KEY}` })).statusCode, 200, 'the same key under another API key is another request')
  const m = await gw.app.inject({ method: 'POST', url: '/v1/messages', headers: { ...gw.auth, 'idempotency-key': 'k1' }, payload: { model: 'test/claude', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] } })
  t.equal(m.statusCode, 409, 'shared by both endpoints')
  t.equal(m.json().type, 'error', 'in the Messages shape there')

  t.equal((await post({ 'idempotency-key': 'k2' }, { model: 'test/echo' })).statusCode, 400, 'a call refused for its body')
  t.equal((await post({ 'idempotency-key': 'k2' })).statusCode, 200, 'released its key: the retry goes through')
  t.equal((await post({ 'idempotency-key': 'k2' })).statusCode, 409, 'and then holds it')
})

t.test('without the header the client\'s trace id serves as the key; trace_fallback: false turns that off', async (t) => {
  const on = await bareGateway(t, [auth, idempotency])
  const post = (gw: TestGateway) => gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...gw.auth, 'x-svc-trace-id': 'client-trace-1' }, payload: chat() })
  t.equal((await post(on)).statusCode, 200)
  t.equal((await post(on)).statusCode, 409, 'the trace id was taken as the key')
  const off = await bareGateway(t, [auth, [idempotency, { trace_fallback: false }]])
  t.equal((await post(off)).statusCode, 200)
  t.equal((await post(off)).statusCode, 200, 'trace_fallback off: no key, no refusal')
  const plain = () => on.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: on.auth, payload: chat() })
  t.same([(await plain()).statusCode, (await plain()).statusCode], [200, 200], 'no header at all: every call goes through')
})

t.test('a key refuses repeats for ttl_s after the answer, then is taken again', async (t) => {
  const clock = new FakeClock()
  const gw = await bareGateway(t, [auth, [idempotency, { ttl_s: 10 }]], { clock })
  const store = storeOf(gw)
  const post = () => gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...gw.auth, 'idempotency-key': 'e' }, payload: chat() })
  const row = () => store.db.prepare("SELECT created_at, expires_at FROM idempotency_keys WHERE idem_key = 'e'").get() as { created_at: number, expires_at: number }
  // the key's first use is noted (when it was last used): a write of its own, done with before
  t.equal((await gw.app.inject({ method: 'GET', url: '/v1/models', headers: gw.auth })).statusCode, 200)
  store.flush()
  t.equal((await post()).statusCode, 200)
  await settled()
  t.equal(store.commit.pending, 0, 'a quick call costs no second write')
  t.equal(row().expires_at - row().created_at, 10_100, 'it keeps the expiry it was taken with: ttl plus 1% slack')
  clock.advance(10_000)
  t.equal((await post()).statusCode, 409, 'still refused ttl_s after the answer')
  clock.advance(100)
  t.equal((await post()).statusCode, 200, 'taken again once the slack is over too')
  t.equal(store.idempotency.sweep(clock.now() + 20_000), 1, 'swept once expired')
})

t.test('a call that outlasts the slack keeps its key ttl_s after its answer', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const clock = new FakeClock()
  const gw = await bareGateway(t, [auth, [idempotency, { ttl_s: 10 }]], { clock, config: mockCatalog(mock) })
  mock.script(() => { clock.advance(5_000); return undefined }) // the upstream takes 5 s of the gateway's time
  const post = () => gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...gw.auth, 'idempotency-key': 'long' }, payload: chat('openai/gpt-test') })
  t.equal((await post()).statusCode, 200)
  await settled()
  await gw.gateway.store.flush()
  const row = storeOf(gw).db.prepare("SELECT created_at, expires_at FROM idempotency_keys WHERE idem_key = 'long'").get() as { created_at: number, expires_at: number }
  t.equal(row.expires_at - row.created_at, 15_000, 'moved to ttl_s after the answer')
  mock.script(null)
  clock.advance(9_999)
  t.equal((await post()).statusCode, 409)
  clock.advance(1)
  t.equal((await post()).statusCode, 200)
})

t.test('a call whose upstream failed before answering releases its key', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const gw = await bareGateway(t, [auth, idempotency], { config: { ...mockCatalog(mock), upstream: { retry: { attempts: 0 } } } })
  const post = () => gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...gw.auth, 'idempotency-key': 'flaky' }, payload: chat('openai/gpt-test') })
  mock.faults = { status: { status: 500, times: 1 } }
  t.equal((await post()).statusCode, 502, 'the upstream failed')
  t.equal((await post()).statusCode, 200, 'the retry with the same key is served')
  t.equal(mock.requests.length, 2)
})
