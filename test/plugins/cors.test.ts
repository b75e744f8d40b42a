import t from 'tap'
import auth from '../../plugins/auth.js'
import cors from '../../plugins/cors.js'
import { bareGateway } from '../helper.js'

// The cors plugin on a bare Fastify with the test gateway (auth after it, as in a chain):
// preflights answered before auth with the headers the official SDKs send, the diagnostic
// headers exposed, exact origins, the configured header prefix.

const preflight = (origin: string, headers: string, url = '/v1/chat/completions') => ({
  method: 'OPTIONS' as const, url, headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': headers }
})

t.test('a browser preflight is answered before auth, with the allowed headers', async (t) => {
  const gw = await bareGateway(t, [cors, auth])
  for (const url of ['/v1/chat/completions', '/v1/models/test/claude', '/v1/messages']) {
    const res = await gw.app.inject(preflight('https://app.example', 'authorization,content-type,x-stainless-arch,x-stainless-retry-count,idempotency-key', url))
    t.equal(res.statusCode, 204, url)
    t.equal(res.headers['access-control-allow-origin'], '*')
    t.equal(res.headers['access-control-max-age'], '600')
    const allowed = String(res.headers['access-control-allow-headers']).split(', ')
    for (const h of ['authorization', 'content-type', 'accept-language', 'x-locale', 'idempotency-key', 'x-api-key', 'anthropic-version', 'anthropic-beta', 'x-stainless-arch', 'x-stainless-retry-count', 'x-svc-trace-id', 'x-svc-cache', 'cache-control']) {
      t.ok(allowed.includes(h), `${h} allowed`)
    }
  }
  const other = await gw.app.inject(preflight('https://app.example', 'x-stainless-os'))
  t.match(other.headers['access-control-allow-headers'], /x-stainless-os/, 'any X-Stainless-* header the browser asks for')
  t.notMatch(other.headers['access-control-allow-headers'], /x-stainless-arch/, 'and only those it asks for')
  const odd = await gw.app.inject(preflight('https://app.example', 'x-stainless-a b,x-stainless-é,x-stainless-"q",x-stainless-ok'))
  t.same(String(odd.headers['access-control-allow-headers']).split(', ').filter((h) => h.startsWith('x-stainless-')), ['x-stainless-ok'], 'a name that is no header name is not echoed')
  const bare = await gw.app.inject({ method: 'OPTIONS', url: '/v1/chat/completions' })
  t.equal(bare.statusCode, 204, 'an OPTIONS without Origin is answered like a preflight, not with a 400')
})

t.test('responses expose the diagnostic headers and Retry-After; a browser can read a 401', async (t) => {
  const gw = await bareGateway(t, [cors, auth])
  const res = await gw.app.inject({ method: 'GET', url: '/v1/models', headers: { ...gw.auth, origin: 'https://app.example' } })
  t.equal(res.statusCode, 200)
  const exposed = String(res.headers['access-control-expose-headers'])
  for (const h of ['X-SVC-Trace-ID', 'X-SVC-Model', 'X-SVC-Provider', 'X-SVC-Dropped-Params', 'X-SVC-Overhead-Ms', 'X-SVC-Cache', 'Age', 'Retry-After', 'x-should-retry']) t.match(exposed, h)
  const unauth = await gw.app.inject({ method: 'GET', url: '/v1/models', headers: { origin: 'https://app.example' } })
  t.equal(unauth.statusCode, 401)
  t.equal(unauth.headers['access-control-allow-origin'], '*')
})

t.test('exact origins; credentials; a custom header_prefix', async (t) => {
  const gw = await bareGateway(t, [[cors, { origins: ['https://a.example', 'https://b.example'], credentials: true, max_age_s: 60 }], auth], { config: { server: { header_prefix: 'X-Acme-' } } })
  const ok = await gw.app.inject(preflight('https://b.example', 'x-acme-trace-id'))
  t.equal(ok.headers['access-control-allow-origin'], 'https://b.example')
  t.equal(ok.headers['access-control-allow-credentials'], 'true')
  t.equal(ok.headers['access-control-max-age'], '60')
  t.match(String(ok.headers['access-control-allow-headers']), 'x-acme-trace-id')
  const no = await gw.app.inject(preflight('https://evil.example', 'authorization'))
  t.notOk(no.headers['access-control-allow-origin'], 'an origin not listed gets no grant')
  const res = await gw.app.inject({ method: 'GET', url: '/v1/models', headers: { ...gw.auth, origin: 'https://a.example' } })
  t.match(String(res.headers['access-control-expose-headers']), 'X-Acme-Model')
})
