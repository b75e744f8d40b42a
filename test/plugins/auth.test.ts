import t from 'tap'
import { bearer, build, KEY_A, sqliteOf } from '../helper.js'

t.test('missing, malformed and unknown keys get 401 in the numeric-code shape', async (t) => {
  const app = await build(t)
  for (const headers of [{}, { authorization: 'Basic abc' }, { authorization: 'Bearer' }, bearer('mg-not-a-real-key-000000000000')]) {
    const res = await app.inject({ method: 'GET', url: '/v1/models', headers })
    t.equal(res.statusCode, 401, JSON.stringify(headers))
    t.same(Object.keys(res.json().error).sort(), ['code', 'message', 'type'])
    t.equal(res.json().error.type, 'authentication_error')
    t.equal(res.headers['x-should-retry'], 'false')
  }
})

t.test('x-api-key is not accepted on the numeric-code routes', async (t) => {
  const app = await build(t)
  const res = await app.inject({ method: 'GET', url: '/v1/models', headers: { 'x-api-key': KEY_A } })
  t.equal(res.statusCode, 401)
})

t.test('unknown /v1 paths need a key before their 404', async (t) => {
  const app = await build(t)
  t.equal((await app.inject({ method: 'GET', url: '/v1/nothing-here' })).statusCode, 401)
  const res = await app.inject({ method: 'GET', url: '/v1/nothing-here', headers: bearer(KEY_A) })
  t.equal(res.statusCode, 404)
  t.match(res.json().error.message, /GET \/v1\/nothing-here/)
})

t.test('a revoked key gets 401 at once, cached or not', async (t) => {
  const app = await build(t)
  const first = await app.inject({ method: 'GET', url: '/v1/models', headers: bearer(KEY_A) })
  t.equal(first.statusCode, 200, 'the key works and is now cached')
  const key = await app.gateway.store.keys.verify(KEY_A)
  t.ok(key)
  await app.gateway.store.keys.revoke(key!.id, Date.now())
  const after = await app.inject({ method: 'GET', url: '/v1/models', headers: bearer(KEY_A) })
  t.equal(after.statusCode, 401)
})

t.test('keys are stored only as SHA-256 hashes', async (t) => {
  const app = await build(t)
  const rows = sqliteOf(app).db.prepare('SELECT * FROM api_keys').all() as Array<Record<string, unknown>>
  t.ok(rows.length >= 3)
  const dump = JSON.stringify(rows)
  t.notOk(dump.includes(KEY_A), 'the key itself is not in the table')
  t.ok(rows.every((r) => /^[0-9a-f]{64}$/.test(String(r.hash))))
})
