import t from 'tap'
import { bearer, build, KEY_A, settled, sqliteOf } from '../helper.js'

// The console's JSON API without a browser (test/e2e/console.test.ts drives the page).

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
