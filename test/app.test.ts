import t from 'tap'
import { pino } from 'pino'
import { Writable } from 'node:stream'
import { lazyChildLogger } from '../engine/ops/lazy-logger.js'
import { traceId } from '../engine/gateway/core.js'
import { bearer, build, KEY_A } from './helper.js'

// The app as a whole, whatever its plugins: the trace id on every answer and in every log line,
// the root routes, how far the plugin chain reaches, the chain's plugins together on one call.

/** A stream for a pino logger, and the JSON lines written to it. */
function jsonLines (): { lines: Array<Record<string, unknown>>, stream: Writable } {
  const lines: Array<Record<string, unknown>> = []
  const stream = new Writable({
    write (chunk, _enc, cb) { for (const l of String(chunk).split('\n')) if (l !== '') lines.push(JSON.parse(l)); cb() }
  })
  return { lines, stream }
}

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
  const { lines, stream } = jsonLines()
  const app = await build(t, {}, { logger: { level: 'info', stream } })
  const res = await app.inject({ method: 'GET', url: '/v1/models', headers: bearer(KEY_A) })
  const id = res.headers['x-svc-trace-id']
  const mine = lines.filter((l) => l.trace_id === id)
  t.ok(mine.length >= 2, 'request and response lines')
  t.ok(lines.filter((l) => 'req' in l || 'res' in l).every((l) => typeof l.trace_id === 'string'))
})

t.test('at level warn a request logs nothing unless it warns, and then with its trace id', async (t) => {
  const { lines, stream } = jsonLines()
  const app = await build(t, {}, { logger: { level: 'warn', stream } })
  const quiet = await app.inject({ method: 'GET', url: '/v1/models', headers: bearer(KEY_A) })
  t.equal(quiet.statusCode, 200)
  t.equal(lines.length, 0)

  // the factory on its own, over a pino logger whose child() is counted
  const parent = pino({ level: 'warn' }, stream)
  let children = 0
  const child = parent.child
  parent.child = function (this: typeof parent, ...a: Parameters<typeof child>) { children++; return child.apply(this, a) } as typeof child
  const log = lazyChildLogger(parent, { trace_id: 'tr-1' }, {})
  log.info('not shown')
  log.debug('not shown')
  t.equal(children, 0, 'no child made for calls below the level')
  log.warn({ probe: true }, 'shown')
  log.error('also shown')
  t.equal(children, 1, 'one child, made at the first enabled call')
  log.child({ extra: 1 }).warn('from a child')
  t.same(lines.map((l) => l.msg), ['shown', 'also shown', 'from a child'])
  t.ok(lines.every((l) => l.trace_id === 'tr-1'), 'all carry the bindings')
  t.equal(lines[2]?.extra, 1)
  t.equal(log.level, 'warn')
  t.equal(lazyChildLogger(parent, { trace_id: 'tr-2' }, { level: 'debug' }).level, 'debug', 'a child with its own level is made at once')
})

t.test('trace ids are version 7 UUIDs: unique, and ordered by the millisecond they were made in', async (t) => {
  const v7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/
  const ids = Array.from({ length: 10_000 }, (_, i) => traceId(1_700_000_000_000 + Math.floor(i / 100)))
  t.ok(ids.every((id) => v7.test(id)), 'the v7 layout with the RFC 9562 variant')
  t.equal(new Set(ids).size, ids.length, 'no repeats')
  t.equal(parseInt(ids[0]!.replace('-', '').slice(0, 12), 16), 1_700_000_000_000, 'the first 48 bits are the milliseconds')
  t.ok(ids.every((id, i) => i % 100 !== 0 || i === 0 || ids[i - 1]! < id), 'each millisecond sorts after the one before')
  const app = await build(t)
  const res = await app.inject({ method: 'GET', url: '/healthz' })
  t.match(res.headers['x-svc-trace-id'], v7, 'the gateway answers with one')
})

t.test('unknown /v1 paths need a key before their 404', async (t) => {
  const app = await build(t)
  t.equal((await app.inject({ method: 'GET', url: '/v1/nothing-here' })).statusCode, 401)
  const res = await app.inject({ method: 'GET', url: '/v1/nothing-here', headers: bearer(KEY_A) })
  t.equal(res.statusCode, 404)
  t.match(res.json().error.message, /GET \/v1\/nothing-here/)
})

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

t.test('every plugin on a streamed call: one close listener for all end-of-response work, no listener warning', async (t) => {
  const warnings: Error[] = []
  const onWarning = (w: Error): void => { warnings.push(w) }
  process.on('warning', onWarning)
  t.teardown(() => { process.off('warning', onWarning) })
  const tenants = [{ org: 'acme', balance_usd: 10, quota: { tokens: 1_000_000, per: 'day' }, projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
  const plugins = ['cors', 'rate-limit', 'auth', 'idempotency', 'quota', 'balance', 'usage', 'diagnostics'].map((name) => ({ name }))
  const app = await build(t, { tenants, plugins })
  for (let i = 0; i < 3; i++) {
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(KEY_A), 'idempotency-key': `w${i}`, origin: 'https://app.example' }, payload: { model: 'demo/gpt', stream: true, messages: [{ role: 'user', content: 'Count to three' }] } })
    t.equal(res.statusCode, 200)
    t.match(res.body, /\[DONE\]/)
  }
  await new Promise((resolve) => setImmediate(resolve))
  t.same(warnings.filter((w) => w.name === 'MaxListenersExceededWarning').map((w) => w.message), [])
})
