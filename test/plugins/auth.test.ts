import t from 'tap'
import auth from '../../plugins/auth.js'
import { TEST_KEY } from '../../engine/host/testing.js'
import type { SqliteStore } from '../../engine/store/sqlite/index.js'
import { bareGateway, bearer } from '../helper.js'

// The auth plugin on a bare Fastify with the test gateway: API keys in Authorization: Bearer
// (and x-api-key on the Messages routes), 401 otherwise; verified keys cached, a revoked key
// dropped from the cache at once.

const chat = { model: 'test/echo', messages: [{ role: 'user', content: 'hello' }] }
const messages = { model: 'test/claude', max_tokens: 10, messages: [{ role: 'user', content: 'hello' }] }

t.test('missing, malformed and unknown keys get 401 in the numeric-code shape', async (t) => {
  const gw = await bareGateway(t, [auth])
  for (const headers of [{}, { authorization: 'Basic abc' }, { authorization: 'Bearer' }, bearer('mg-not-a-real-key-000000000000')]) {
    const res = await gw.app.inject({ method: 'GET', url: '/v1/models', headers })
    t.equal(res.statusCode, 401, JSON.stringify(headers))
    t.same(Object.keys(res.json().error).sort(), ['code', 'message', 'type'])
    t.equal(res.json().error.type, 'authentication_error')
    t.equal(res.headers['x-should-retry'], 'false')
  }
  t.equal((await gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: gw.auth, payload: chat })).statusCode, 200, 'the tenant\'s key is served')
  t.equal((await gw.app.inject({ method: 'GET', url: '/v1/models', headers: { authorization: `bearer   ${TEST_KEY}  ` } })).statusCode, 200, 'the scheme in any case, spaces around the key')
})

t.test('x-api-key: accepted on the Messages routes only; 401 there in the Messages shape', async (t) => {
  const gw = await bareGateway(t, [auth])
  t.equal((await gw.app.inject({ method: 'POST', url: '/v1/messages', headers: { 'x-api-key': TEST_KEY }, payload: messages })).statusCode, 200)
  t.equal((await gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { 'x-api-key': TEST_KEY }, payload: chat })).statusCode, 401)
  t.equal((await gw.app.inject({ method: 'GET', url: '/v1/models', headers: { 'x-api-key': TEST_KEY } })).statusCode, 401)
  const unknown = await gw.app.inject({ method: 'POST', url: '/v1/messages', headers: { 'x-api-key': 'mg-not-a-real-key-000000000000' }, payload: messages })
  t.equal(unknown.statusCode, 401)
  t.same(unknown.json().type, 'error')
  t.same(unknown.json().error.type, 'authentication_error')
})

t.test('a browser preflight (OPTIONS) and a route marked auth: false need no key', async (t) => {
  const gw = await bareGateway(t, [auth])
  gw.app.get('/open', { config: { auth: false } }, async () => ({ ok: true }))
  t.equal((await gw.app.inject({ method: 'GET', url: '/open' })).statusCode, 200)
  t.not((await gw.app.inject({ method: 'OPTIONS', url: '/v1/chat/completions' })).statusCode, 401)
})

t.test('a revoked key gets 401 at once, cached or not', async (t) => {
  for (const options of [{}, { cache_size: 0 }, { cache_ttl_s: 0 }]) {
    const gw = await bareGateway(t, [[auth, options]])
    const first = await gw.app.inject({ method: 'GET', url: '/v1/models', headers: gw.auth })
    t.equal(first.statusCode, 200, `${JSON.stringify(options)}: the key works (and is cached when the cache is on)`)
    const key = await gw.gateway.store.keys.verify(TEST_KEY)
    await gw.gateway.store.keys.revoke(key!.id, Date.now())
    t.equal((await gw.app.inject({ method: 'GET', url: '/v1/models', headers: gw.auth })).statusCode, 401, `${JSON.stringify(options)}: refused right after`)
  }
})

t.test('a verified key is cached: the store is asked once', async (t) => {
  const gw = await bareGateway(t, [auth])
  const keys = gw.gateway.store.keys
  const verify = keys.verify.bind(keys)
  let asked = 0
  keys.verify = (key: string) => { asked++; return verify(key) }
  for (let i = 0; i < 5; i++) t.equal((await gw.app.inject({ method: 'GET', url: '/v1/models', headers: gw.auth })).statusCode, 200)
  t.equal(asked, 1)
  const uncached = await bareGateway(t, [[auth, { cache_size: 0 }]])
  const k2 = uncached.gateway.store.keys
  const verify2 = k2.verify.bind(k2)
  let asked2 = 0
  k2.verify = (key: string) => { asked2++; return verify2(key) }
  for (let i = 0; i < 3; i++) await uncached.app.inject({ method: 'GET', url: '/v1/models', headers: uncached.auth })
  t.equal(asked2, 3, 'cache_size 0: every request asks the store')
})

t.test('keys are stored only as SHA-256 hashes', async (t) => {
  const gw = await bareGateway(t, [auth])
  const rows = (gw.gateway.store as SqliteStore).db.prepare('SELECT * FROM api_keys').all() as Array<Record<string, unknown>>
  t.equal(rows.length, 1)
  t.notOk(JSON.stringify(rows).includes(TEST_KEY), 'the key itself is not in the table')
  t.ok(rows.every((r) => /^[0-9a-f]{64}$/.test(String(r.hash))))
})
