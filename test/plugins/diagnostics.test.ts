import t from 'tap'
import { Writable } from 'node:stream'
import { bearer, build, KEY_A } from '../helper.js'

t.test('the trace header is on every response: 200, 401, 404, 501, health', async (t) => {
  const app = await build(t)
  const seen = new Set<string>()
  const cases = [
    { method: 'GET', url: '/v1/models', headers: bearer(KEY_A), status: 200 },
    { method: 'GET', url: '/v1/models', headers: {}, status: 401 },
    { method: 'GET', url: '/v1/models/none/such', headers: bearer(KEY_A), status: 404 },
    { method: 'GET', url: '/not-a-route', headers: {}, status: 404 },
    { method: 'POST', url: '/v1/embeddings', headers: bearer(KEY_A), status: 501 },
    { method: 'GET', url: '/healthz', headers: {}, status: 200 }
  ] as const
  for (const c of cases) {
    const res = await app.inject({ method: c.method, url: c.url, headers: c.headers, payload: c.method === 'POST' ? {} : undefined })
    t.equal(res.statusCode, c.status, c.url)
    const id = res.headers['x-svc-trace-id']
    t.type(id, 'string', `${c.url} has a trace id`)
    t.notOk(seen.has(id as string), 'unique per request')
    seen.add(id as string)
  }
})

t.test('HEAD / and GET / answer without a key (Claude Code probes the base URL first)', async (t) => {
  const app = await build(t)
  const head = await app.inject({ method: 'HEAD', url: '/' })
  t.equal(head.statusCode, 200)
  t.ok(head.headers['x-svc-trace-id'])
  t.equal((await app.inject({ method: 'GET', url: '/' })).json().api, '/v1')
})

t.test('the client cannot choose the trace id', async (t) => {
  const app = await build(t)
  const res = await app.inject({ method: 'GET', url: '/v1/models', headers: { ...bearer(KEY_A), 'x-svc-trace-id': 'mine', 'request-id': 'mine' } })
  t.not(res.headers['x-svc-trace-id'], 'mine')
})

t.test('a custom header_prefix is used everywhere', async (t) => {
  const app = await build(t, { server: { header_prefix: 'X-Acme-' } })
  const res = await app.inject({ method: 'GET', url: '/v1/models', headers: {} })
  t.ok(res.headers['x-acme-trace-id'])
  t.notOk(res.headers['x-svc-trace-id'])
})

t.test('every log line of a request carries its trace id', async (t) => {
  const lines: Array<Record<string, unknown>> = []
  const stream = new Writable({
    write (chunk, _enc, cb) { for (const l of String(chunk).split('\n')) if (l !== '') lines.push(JSON.parse(l)); cb() }
  })
  const app = await build(t, {}, { logger: { level: 'info', stream } })
  const res = await app.inject({ method: 'GET', url: '/v1/models', headers: bearer(KEY_A) })
  const id = res.headers['x-svc-trace-id']
  const mine = lines.filter((l) => l.trace_id === id)
  t.ok(mine.length >= 2, 'request and response lines')
  t.ok(lines.filter((l) => 'req' in l || 'res' in l).every((l) => typeof l.trace_id === 'string'))
})
