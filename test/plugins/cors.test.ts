import t from 'tap'
import { bearer, build, KEY_A } from '../helper.js'

const chain = (options: Record<string, unknown> = {}) => ({ plugins: [{ name: 'cors', options }, { name: 'rate-limit', options: { max: 1000 } }, { name: 'auth' }, { name: 'diagnostics' }] })

t.test('a browser preflight is answered before auth, with the allowed headers', async (t) => {
  const app = await build(t, chain())
  for (const url of ['/v1/chat/completions', '/v1/models/anthropic/claude-x', '/v1/messages']) {
    const res = await app.inject({
      method: 'OPTIONS',
      url,
      headers: { origin: 'https://app.example', 'access-control-request-method': 'POST', 'access-control-request-headers': 'authorization,content-type,x-stainless-arch,x-stainless-retry-count,idempotency-key' }
    })
    t.equal(res.statusCode, 204, url)
    t.equal(res.headers['access-control-allow-origin'], '*')
    const allowed = String(res.headers['access-control-allow-headers']).split(', ')
    for (const h of ['authorization', 'content-type', 'accept-language', 'x-locale', 'idempotency-key', 'x-api-key', 'anthropic-version', 'anthropic-beta', 'x-stainless-arch', 'x-stainless-retry-count', 'x-svc-trace-id', 'x-svc-cache', 'cache-control']) {
      t.ok(allowed.includes(h), `${h} allowed`)
    }
  }
})

t.test('responses expose the diagnostic headers and Retry-After', async (t) => {
  const app = await build(t, chain())
  const res = await app.inject({ method: 'GET', url: '/v1/models', headers: { ...bearer(KEY_A), origin: 'https://app.example' } })
  t.equal(res.statusCode, 200)
  const exposed = String(res.headers['access-control-expose-headers'])
  for (const h of ['X-SVC-Trace-ID', 'X-SVC-Model', 'X-SVC-Provider', 'X-SVC-Dropped-Params', 'X-SVC-Overhead-Ms', 'X-SVC-Cache', 'Age', 'Retry-After', 'x-should-retry']) t.match(exposed, h)
  const unauth = await app.inject({ method: 'GET', url: '/v1/models', headers: { origin: 'https://app.example' } })
  t.equal(unauth.statusCode, 401)
  t.equal(unauth.headers['access-control-allow-origin'], '*', 'a browser can read the 401 too')
})

t.test('exact origins; a custom header_prefix', async (t) => {
  const app = await build(t, { ...chain({ origins: ['https://a.example', 'https://b.example'] }), server: { header_prefix: 'X-Acme-' } })
  const pre = (origin: string) => app.inject({ method: 'OPTIONS', url: '/v1/chat/completions', headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'x-acme-trace-id' } })
  const ok = await pre('https://b.example')
  t.equal(ok.headers['access-control-allow-origin'], 'https://b.example')
  t.match(String(ok.headers['access-control-allow-headers']), 'x-acme-trace-id')
  const no = await pre('https://evil.example')
  t.notOk(no.headers['access-control-allow-origin'])
  const res = await app.inject({ method: 'GET', url: '/v1/models', headers: { ...bearer(KEY_A), origin: 'https://a.example' } })
  t.match(String(res.headers['access-control-expose-headers']), 'X-Acme-Model')
})
