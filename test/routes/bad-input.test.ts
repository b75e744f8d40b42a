import t from 'tap'
import { MAX_JSON_DEPTH } from '../../engine/gateway/validation.js'
import { bearer, build, KEY_A } from '../helper.js'

// Bad input gets a 400 in the route family's shape, never a 500: bodies nested too deep, and
// query parameters given more than once.

const ADMIN = 'admin-token-0123456789abcdef'

// JSON text of `depth` levels of objects and arrays (JSON.stringify itself overflows on the deep ones)
const nested = (depth: number): string => {
  const open: string[] = []
  const close: string[] = []
  for (let i = 0; i < depth; i++) {
    open.push(i % 2 === 0 ? '{"a":' : '[')
    close.push(i % 2 === 0 ? '}' : ']')
  }
  return open.join('') + '"leaf"' + close.reverse().join('')
}

t.test('a body nested deeper than MAX_JSON_DEPTH is a 400 in the family\'s shape', async (t) => {
  const app = await build(t, { admin: { token: ADMIN } })
  // `metadata` is a member of the top-level object, so its value may nest MAX_JSON_DEPTH - 1 levels
  const chat = (metadata: string): string => `{"model":"demo/gpt","messages":[{"role":"user","content":"hi"}],"metadata":${metadata}}`
  for (const depth of [MAX_JSON_DEPTH, 10_000, 100_000]) {
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat(nested(depth)) })
    t.equal(res.statusCode, 400, `chat, depth ${depth}`)
    t.same(res.json().error, { code: 400, type: 'invalid_request_error', message: `The request body nests JSON values more than ${MAX_JSON_DEPTH} levels deep.` })
    const m = await app.inject({ method: 'POST', url: '/v1/messages', headers: { 'x-api-key': KEY_A }, payload: `{"model":"demo/claude","max_tokens":5,"messages":[{"role":"user","content":"hi"}],"metadata":${nested(depth)}}` })
    t.equal(m.statusCode, 400, `messages, depth ${depth}`)
    t.equal(m.json().type, 'error')
    t.equal(m.json().error.type, 'invalid_request_error')
    const admin = await app.inject({ method: 'POST', url: '/admin/v1/keys', headers: bearer(ADMIN), payload: `{"org":"acme","project":"web","name":${nested(depth)}}` })
    t.equal(admin.statusCode, 400, `admin, depth ${depth}`)
    t.equal(admin.json().error.code, 400)
  }
  const ok = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat(nested(MAX_JSON_DEPTH - 1)) })
  t.equal(ok.statusCode, 200, 'a body exactly MAX_JSON_DEPTH deep is accepted')
  const top = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: nested(MAX_JSON_DEPTH + 1) })
  t.equal(top.statusCode, 400)
})

t.test('a repeated query parameter is a 400 on every route that reads the query', async (t) => {
  const app = await build(t, { admin: { token: ADMIN } })
  const cases: Array<[string, Record<string, string>, string]> = [
    ['/admin/v1/usage?org=acme&org=zeta', bearer(ADMIN), 'org'],
    ['/admin/v1/usage?project=web&project=app', bearer(ADMIN), 'project'],
    ['/admin/v1/usage?model=a&model=b', bearer(ADMIN), 'model'],
    ['/admin/v1/usage?key_id=a&key_id=b', bearer(ADMIN), 'key_id'],
    ['/admin/v1/usage?since=2026-01-01&since=2026-01-02', bearer(ADMIN), 'since'],
    ['/admin/v1/usage?until=2026-01-01&until=2026-01-02', bearer(ADMIN), 'until'],
    ['/admin/v1/usage?cursor=a&cursor=b', bearer(ADMIN), 'cursor'],
    ['/admin/v1/usage?limit=1&limit=2', bearer(ADMIN), 'limit'],
    ['/admin/v1/keys?org=acme&org=zeta', bearer(ADMIN), 'org'],
    ['/admin/v1/keys?project=web&project=app', bearer(ADMIN), 'project'],
    ['/console/api/usage?range=24h&range=7d', bearer(KEY_A), 'range'],
    ['/console/api/calls?limit=1&limit=2', bearer(KEY_A), 'limit'],
    ['/v1/models?limit=1&limit=2', bearer(KEY_A), 'limit']
  ]
  for (const [url, headers, param] of cases) {
    const res = await app.inject({ method: 'GET', url, headers })
    t.equal(res.statusCode, 400, url)
    t.equal(res.json().error.code, 400, url)
    t.equal(res.json().error.type, 'invalid_request_error', url)
    t.equal(res.json().error.message, `Invalid query parameter ${param}: must be given once`, url)
  }
  const once = await app.inject({ method: 'GET', url: '/admin/v1/usage?org=acme&limit=5', headers: bearer(ADMIN) })
  t.equal(once.statusCode, 200, 'one value each is fine')
})
