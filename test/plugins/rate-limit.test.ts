import t from 'tap'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import auth from '../../plugins/auth.js'
import rateLimit from '../../plugins/rate-limit.js'
import { bareGateway, bearer, build, FakeClock, sqliteOf } from '../helper.js'
import { tempDir } from '../temp-dir.js'

// The rate-limit plugin: `max` requests per `window_s` per client IP, on every route, counted
// before auth. Alone on a bare Fastify with the test gateway; then across two apps sharing one
// SQLite file, and on the admin and console routes of the whole app.

t.test('per client IP, before auth, on every route: 429 with Retry-After in both shapes; a new window', async (t) => {
  const clock = new FakeClock()
  const gw = await bareGateway(t, [[rateLimit, { max: 3, window_s: 60 }], auth], { clock })
  gw.app.get('/elsewhere', { config: { auth: false } }, async () => ({ ok: true }))
  t.equal((await gw.app.inject({ method: 'GET', url: '/elsewhere' })).statusCode, 200)
  for (let i = 0; i < 2; i++) t.equal((await gw.app.inject({ method: 'GET', url: '/v1/models' })).statusCode, 401, 'counted without a key')
  const limited = await gw.app.inject({ method: 'GET', url: '/v1/models', headers: gw.auth })
  t.equal(limited.statusCode, 429, 'the fourth request of the window, with a good key')
  t.same(limited.json(), { error: { code: 429, type: 'rate_limit_error', message: 'You are being rate limited.' } })
  t.equal(limited.headers['retry-after'], '60')
  t.equal((await gw.app.inject({ method: 'GET', url: '/elsewhere' })).statusCode, 429, 'a route outside /v1 too')
  const messages = await gw.app.inject({ method: 'POST', url: '/v1/messages', headers: gw.auth, payload: {} })
  t.equal(messages.statusCode, 429)
  t.same(messages.json(), { type: 'error', error: { type: 'rate_limit_error', message: 'You are being rate limited.' } })
  const other = await gw.app.inject({ method: 'GET', url: '/v1/models', headers: gw.auth, remoteAddress: '10.0.0.9' })
  t.equal(other.statusCode, 200, 'another IP has its own count')
  clock.advance(59_000)
  t.equal((await gw.app.inject({ method: 'GET', url: '/v1/models', headers: gw.auth })).headers['retry-after'], '1', 'Retry-After counts down to the window\'s end')
  clock.advance(1_000)
  t.equal((await gw.app.inject({ method: 'GET', url: '/v1/models', headers: gw.auth })).statusCode, 200, 'a new window')
})

t.test('behind a trusted proxy the client IP comes from X-Forwarded-For', async (t) => {
  const gw = await bareGateway(t, [[rateLimit, { max: 1, window_s: 60 }]], { fastify: { trustProxy: true } })
  const from = (ip: string) => gw.app.inject({ method: 'GET', url: '/v1/models', headers: { 'x-forwarded-for': ip } })
  t.equal((await from('203.0.113.1')).statusCode, 200)
  t.equal((await from('203.0.113.1')).statusCode, 429)
  t.equal((await from('203.0.113.2')).statusCode, 200, 'another client behind the same proxy')
})

t.test('allow_list: the listed addresses are never limited', async (t) => {
  const gw = await bareGateway(t, [[rateLimit, { max: 1, window_s: 60, allow_list: ['10.1.1.1'] }]])
  const from = (ip: string) => gw.app.inject({ method: 'GET', url: '/v1/models', remoteAddress: ip })
  const allowed = []
  for (let i = 0; i < 5; i++) allowed.push((await from('10.1.1.1')).statusCode)
  t.same(allowed, [200, 200, 200, 200, 200])
  t.same([(await from('10.1.1.2')).statusCode, (await from('10.1.1.2')).statusCode], [200, 429], 'the others are')
})

t.test('bad options are refused when the plugin is registered', async (t) => {
  await t.rejects(bareGateway(t, [[rateLimit, { max: 0 }]]), /plugin rate-limit\.options\.max: must be >= 1/)
  await t.rejects(bareGateway(t, [[rateLimit, { window_s: 0 }]]), /options\.window_s/)
  await t.rejects(bareGateway(t, [[rateLimit, { per_key: true }]]), /options\.per_key/)
})

/** Two apps (two workers) sharing a fresh SQLite file. */
async function twoWorkers (t: Parameters<typeof build>[0], overrides: Record<string, unknown>): Promise<[FastifyInstance, FastifyInstance]> {
  const sqlite = join(tempDir('rate-limit'), 'gw.db')
  return [await build(t, { ...overrides, store: { sqlite } }), await build(t, { ...overrides, store: { sqlite } })]
}

t.test('two workers: concurrent hits, near the limit one hit a take, admit exactly max', async (t) => {
  const max = 25
  const [a, b] = await twoWorkers(t, { plugins: [{ name: 'rate-limit', options: { max, window_s: 600 } }] })
  // all 60 in flight at once: each app takes one hit at a time (max / 16 < 2), the others wait for it
  const all = await Promise.all(Array.from({ length: 60 }, (_, i) => (i % 2 === 0 ? a : b).inject({ method: 'GET', url: '/v1/models' })))
  const codes = all.map((r) => r.statusCode)
  t.equal(codes.filter((c) => c === 200).length, max, 'exactly max admitted')
  t.equal(codes.filter((c) => c === 429).length, 60 - max, 'the rest refused')
  const counted = (sqliteOf(a).db.prepare('SELECT count FROM rate_limits').get() as { count: number }).count
  t.ok(counted >= max && counted <= max + 2, `counted ${counted}: once a worker saw the counter at the limit, it refused the window's later hits without a write`)
})

t.test('two workers: a high limit is taken 64 hits a write, and two workers alternating are refused right at it', async (t) => {
  const max = 1100
  const [a, b] = await twoWorkers(t, { plugins: [{ name: 'rate-limit', options: { max, window_s: 600 } }] })
  const counted = (): number => (sqliteOf(a).db.prepare('SELECT count FROM rate_limits').get() as { count: number }).count
  const first = await a.inject({ method: 'GET', url: '/v1/models' })
  t.equal(first.statusCode, 200)
  t.equal(counted(), 64, 'one write counted 64 hits ahead')
  t.equal(first.headers['x-ratelimit-remaining'], String(max - 1), 'the client sees its own hit only')
  let admitted = 1
  let refused = 0
  for (let i = 1; i < 1200; i++) {
    const res = await (i % 2 === 0 ? a : b).inject({ method: 'GET', url: '/v1/models' })
    if (res.statusCode === 200) admitted++
    else if (res.statusCode === 429) refused++
  }
  // near the limit the takes shrink to one hit, so no worker is left holding hits the other needs
  t.equal(admitted, max, 'exactly max admitted')
  t.equal(refused, 1200 - max, 'every later hit refused')
})

t.test('the whole app: wrong admin tokens and guessed console keys are counted, 429 from the sixth', async (t) => {
  const app = await build(t, { admin: { token: 'the-real-admin-token-0123456789' }, plugins: [{ name: 'rate-limit', options: { max: 5, window_s: 60 } }, { name: 'auth' }] })
  for (const [url, label] of [['/admin/v1/usage', 'admin token'], ['/console/api/me', 'console key']] as const) {
    const codes: number[] = []
    let limited: Awaited<ReturnType<typeof app.inject>> | undefined
    for (let i = 0; i < 20; i++) {
      const res = await app.inject({ method: 'GET', url, headers: bearer(`mg-guess-${i}-0123456789abcdef`), remoteAddress: label === 'admin token' ? '198.51.100.7' : '198.51.100.8' })
      codes.push(res.statusCode)
      if (res.statusCode === 429) limited ??= res
    }
    t.same(codes.slice(0, 5), [401, 401, 401, 401, 401], `${label}: the first five guesses get 401`)
    t.same(codes.slice(5), Array(15).fill(429), `${label}: every later guess gets 429`)
    t.equal(limited?.headers['retry-after'], '60', `${label}: with Retry-After`)
    t.equal(limited?.json().error.code, 429, `${label}: in the numeric-code shape`)
  }
})
