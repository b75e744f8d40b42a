import t from 'tap'
import { bearer, build, KEY_A, settled } from '../helper.js'

// The console's JSON API without a browser (test/e2e/console.test.ts drives the page).

t.test('/console/api/me: once a call has ended, held_usd is back to 0 and spent_usd is its charge', async (t) => {
  const app = await build(t, { plugins: [{ name: 'auth' }, { name: 'balance' }, { name: 'usage', options: { flush_interval_ms: 60_000 } }] })
  const call = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: { model: 'demo/gpt', messages: [{ role: 'user', content: 'hello' }] } })
  t.equal(call.statusCode, 200)
  await settled()
  // the batch of writes is a minute away: the console commits it before it reads
  const me = (await app.inject({ method: 'GET', url: '/console/api/me', headers: bearer(KEY_A) })).json()
  t.equal(me.held_usd, '0', 'the lease was given back')
  t.ok(Number(me.spent_usd) > 0, `spent ${me.spent_usd}`)
  t.equal(Number(me.balance_usd) + Number(me.spent_usd), 25)
})
