import t from 'tap'
import { bearer, build, KEY_A, settled, sqliteOf } from '../helper.js'

// The console's JSON API without a browser (test/e2e/console.slow.test.ts drives the page).

t.test('/console/api/me: once a call has ended, held_usd is back to 0 and spent_usd is its charge', async (t) => {
  const app = await build(t, { plugins: [{ name: 'auth' }, { name: 'balance' }, { name: 'usage' }] })
  // the lease's give-back is a write the store delays (it joins other writes a few ms later):
  // the console commits the delayed writes before it reads
  const store = sqliteOf(app)
  const flush = store.flush.bind(store)
  let flushed = 0
  store.flush = () => { flushed++; flush() }
  const call = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: { model: 'demo/gpt', messages: [{ role: 'user', content: 'hello' }] } })
  t.equal(call.statusCode, 200)
  await settled()
  const me = (await app.inject({ method: 'GET', url: '/console/api/me', headers: bearer(KEY_A) })).json()
  t.ok(flushed > 0, 'the console committed the delayed writes before it read')
  t.equal(me.held_usd, '0', 'the lease was given back')
  t.ok(Number(me.spent_usd) > 0, `spent ${me.spent_usd}`)
  t.equal(Number(me.balance_usd) + Number(me.spent_usd), 25)
})

t.test('/console/api/usage and /calls: what the cache saved, beside the spend', async (t) => {
  const app = await build(t, { plugins: [{ name: 'auth' }, { name: 'cache' }, { name: 'usage' }] })
  const call = async (): Promise<void> => {
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(KEY_A), 'x-svc-cache': 'on' }, payload: { model: 'demo/gpt', messages: [{ role: 'user', content: 'hello again' }] } })
    t.equal(res.statusCode, 200)
  }
  await call()
  await call()
  await call()
  await settled()
  const usage = (await app.inject({ method: 'GET', url: '/console/api/usage', headers: bearer(KEY_A) })).json()
  const [miss] = (await app.gateway.store.usage.page({}, 10)).filter((r) => r.cache_hit === 0)
  t.equal(usage.totals.calls, 3)
  t.equal(usage.totals.cost_usd, String((miss?.cost_nano ?? 0) / 1e9), 'the spend: the one call that went upstream')
  t.equal(usage.totals.saved_usd, String(2 * (miss?.cost_nano ?? 0) / 1e9), 'the savings: the two hits')
  t.equal(usage.buckets.reduce((a: number, b: { saved_usd: string }) => a + Number(b.saved_usd), 0), Number(usage.totals.saved_usd), 'in the buckets too')
  const calls = (await app.inject({ method: 'GET', url: '/console/api/calls', headers: bearer(KEY_A) })).json()
  t.same(calls.data.map((c: { cache_hit: boolean }) => c.cache_hit).sort(), [false, true, true])
})

t.test('both consoles and their APIs are served with a Content-Security-Policy of this origin only, nosniff and no referrer', async (t) => {
  const app = await build(t, { admin: { token: 'console-headers-admin-0123456789' } })
  for (const url of ['/console', '/console/', '/console/api/models', '/console/admin', '/console/admin/', '/console/api/me']) {
    const res = await app.inject({ method: 'GET', url })
    const csp = String(res.headers['content-security-policy'] ?? '')
    t.match(csp, /default-src 'self'/, `${url}: a CSP`)
    t.match(csp, /script-src 'self'(;|$)/, `${url}: scripts of this origin only`)
    t.notMatch(csp, /unsafe-inline|unsafe-eval/, `${url}: no inline script`)
    t.equal(res.headers['x-content-type-options'], 'nosniff', `${url}: nosniff`)
    t.equal(res.headers['referrer-policy'], 'no-referrer', `${url}: no referrer`)
  }
})
