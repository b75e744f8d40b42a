import t from 'tap'
import { build } from '../helper.js'

t.test('a disabled plugin\'s hooks do not run', async (t) => {
  const on = await build(t)
  t.equal((await on.inject({ method: 'GET', url: '/v1/models' })).statusCode, 401, 'auth on: a key is needed')
  const off = await build(t, { plugins: [{ name: 'auth', enabled: false }, { name: 'diagnostics' }] })
  t.equal((await off.inject({ method: 'GET', url: '/v1/models' })).statusCode, 200, 'auth off: its onRequest hook is not there')
})

t.test('the chain covers /v1 only: health and readiness need no key', async (t) => {
  const app = await build(t)
  t.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200)
  t.match((await app.inject({ method: 'GET', url: '/readyz' })).json(), { status: 'ready', providers: { demo: { state: 'closed' } } })
})
