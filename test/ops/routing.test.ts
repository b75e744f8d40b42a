import t from 'tap'
import type { FastifyRequest } from 'fastify'
import { Readable } from 'node:stream'
import { errors } from 'undici'
import { buildApp } from '../../app.js'
import { attemptError } from '../../engine/upstream/attempt-error.js'
import { dispatch, type Attempt } from '../../engine/upstream/dispatch.js'
import { HealthBook } from '../../engine/upstream/health.js'
import { CallAbort, Upstreams, type AttemptReport, type UpstreamClient } from '../../engine/upstream/index.js'
import { orderProviders } from '../../engine/upstream/routing.js'
import { startMockUpstream } from '../mock-upstream.js'
import { bearer, FakeClock, KEY_A, mockCatalog, testConfig } from '../helper.js'
import { sample } from './prom.js'

// Routing among a model's providers (failover, weighted, latency), the circuit breaker, and
// retries of failures that are safe to repeat.

const chat = (model: string): Record<string, unknown> => ({ model, messages: [{ role: 'user', content: 'hello' }] })

t.test('a provider keeps its last 10 failures, newest first; a success writes nothing there; attemptError says how an attempt failed', async (t) => {
  const clock = new FakeClock()
  const book = new HealthBook(clock, { failures: 100, openMs: 10_000, smoothing: 0.5 })
  t.same(book.recentFailures('p'), [], 'none yet (and no entry made by asking)')
  for (let i = 0; i < 13; i++) {
    clock.advance(1000)
    book.failure('p', { status: 500 + i, error: `e${i}` })
    book.success('p', 10)
  }
  book.failure('p')
  const recent = book.recentFailures('p')
  t.equal(recent.length, 10, 'at most 10')
  t.same(recent.map((f) => f.status), [512, 511, 510, 509, 508, 507, 506, 505, 504, 503], 'newest first, the oldest gone')
  t.same(recent[0], { at: clock.now(), status: 512, error: 'e12' })
  t.same(book.recentFailures('q'), [], 'another provider\'s are its own')
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:9'), { code: 'ECONNREFUSED' })
  t.equal(attemptError({ outcome: 'ok', error: undefined }), null)
  t.equal(attemptError({ outcome: 'network_error', error: refused }), 'ECONNREFUSED', 'the error\'s code')
  t.equal(attemptError({ outcome: 'network_error', error: new Error('fetch failed', { cause: refused }) }), 'ECONNREFUSED', 'found along its causes')
  t.equal(attemptError({ outcome: 'network_error', error: new Error('x'.repeat(500)) }), 'x'.repeat(200), 'else its message, cut short')
  t.equal(attemptError({ outcome: 'server_error', error: undefined }), 'server_error', 'else how it went')
})

t.test('the breaker opens after N failures, lets one probe through once open_s is over, and closes on its success', async (t) => {
  const clock = new FakeClock()
  const book = new HealthBook(clock, { failures: 3, openMs: 10_000, smoothing: 0.5 })
  const seen: string[] = []
  book.onState((id, to, from) => { seen.push(`${id}: ${from} → ${to}`) })
  book.failure('p')
  book.failure('p')
  t.ok(book.admit('p'), 'two failures: still closed')
  book.success('p', 20)
  book.failure('p'); book.failure('p')
  t.equal(book.of('p').state, 'closed', 'a success in between starts the count again')
  book.failure('p')
  t.equal(book.of('p').state, 'open')
  t.notOk(book.usable('p'))
  t.notOk(book.admit('p'), 'no call while open')
  clock.advance(9_999)
  t.notOk(book.admit('p'))
  clock.advance(1)
  t.ok(book.admit('p'), 'the probe')
  t.equal(book.of('p').state, 'half_open')
  t.notOk(book.admit('p'), 'one probe at a time')
  book.failure('p')
  t.equal(book.of('p').state, 'open', 'a failed probe opens it again')
  clock.advance(10_000)
  t.ok(book.admit('p'))
  book.release('p')
  t.ok(book.admit('p'), 'a probe whose client left passes its turn to the next call')
  book.success('p', 40)
  t.equal(book.of('p').state, 'closed')
  t.equal(book.of('p').ttfbMs, 30, 'the time to first byte is averaged')
  t.same(seen, ['p: closed → open', 'p: open → half_open', 'p: half_open → open', 'p: open → half_open', 'p: half_open → closed'])
})

t.test('the breaker in the gateway: open, refused without calling, probed, closed (fake clock); state in /readyz and the metrics', async (t) => {
  const mock = await startMockUpstream()
  const clock = new FakeClock()
  const app = await buildApp(testConfig({
    ...mockCatalog(mock),
    metrics: { auth: 'open' },
    upstream: { breaker: { failures: 2, open_s: 10 }, retry: { attempts: 0 } }
  }), { clock })
  t.teardown(async () => { await app.close(); await mock.close() })
  const call = async (): Promise<number> => (await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat('openai/gpt-test') })).statusCode
  const state = async (): Promise<string> => ((await app.inject('/readyz')).json() as { providers: Record<string, { state: string }> }).providers['mock-openai']?.state ?? ''

  mock.faults = { status: { status: 503, times: 2 } }
  t.same([await call(), await call()], [502, 502])
  t.equal(await state(), 'open')
  const ready = await app.inject('/readyz')
  t.equal(ready.statusCode, 200, 'an open breaker does not make the gateway unready')
  t.equal(ready.json().status, 'ready')
  t.equal(await call(), 503, 'every provider of the model is out: 503')
  t.equal(mock.requests.length, 2, 'the open provider was not called')

  clock.advance(10_000)
  mock.faults = { status: { status: 503, times: 1 } }
  t.equal(await call(), 502, 'the probe fails')
  t.equal(mock.requests.length, 3)
  t.equal(await state(), 'open', 'and opens the breaker again')
  t.equal(await call(), 503)
  t.equal(mock.requests.length, 3)

  clock.advance(10_000)
  t.equal(await call(), 200, 'the probe succeeds')
  t.equal(await state(), 'closed')
  t.equal(await call(), 200)
  const text = (await app.inject('/metrics')).body
  t.equal(sample(text, 'modelgate_breaker_transitions_total', { provider: 'mock-openai', state: 'open' }), 2)
  t.equal(sample(text, 'modelgate_breaker_transitions_total', { provider: 'mock-openai', state: 'closed' }), 1)
  t.equal(sample(text, 'modelgate_breaker_state', { provider: 'mock-openai', state: 'closed' }), 1)
})

t.test('weighted routing splits the calls by weight', async (t) => {
  const app = await buildApp(testConfig({
    providers: [{ id: 'demo-a', protocol: 'openai', builtin: 'demo' }, { id: 'demo-b', protocol: 'openai', builtin: 'demo' }],
    models: [{ id: 'demo/weighted', name: 'w', context_length: 1000, provider: [{ id: 'demo-a', weight: 3 }, { id: 'demo-b', weight: 1 }], routing: 'weighted' }]
  }))
  t.teardown(() => app.close())
  const n = 400
  const by: Record<string, number> = {}
  for (let i = 0; i < n; i++) {
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat('demo/weighted') })
    const p = String(res.headers['x-svc-provider'])
    by[p] = (by[p] ?? 0) + 1
  }
  // 300 expected; the standard deviation of the count is sqrt(400 · 3/4 · 1/4) ≈ 8.7
  t.ok(Math.abs((by['demo-a'] ?? 0) - 300) <= 45, `demo-a answered ${by['demo-a'] ?? 0} of ${n} (3:1 expects 300)`)
  t.equal((by['demo-a'] ?? 0) + (by['demo-b'] ?? 0), n)
})

t.test('the weighted and latency orders', async (t) => {
  const clock = new FakeClock()
  const health = new HealthBook(clock)
  const seq = (xs: number[]): () => number => { let i = 0; return () => xs[i++ % xs.length] as number }
  t.same(orderProviders(['a', 'b', 'c'], undefined, { health, random: Math.random, explore: 0 }), ['a', 'b', 'c'], 'failover: as listed')
  t.same(orderProviders(['a', 'b'], { routing: 'weighted', weights: [0, 1] }, { health, random: Math.random, explore: 0 }), ['b', 'a'], 'a weight of 0 comes last')
  health.success('a', 50)
  health.success('b', 10)
  t.same(orderProviders(['a', 'b', 'c'], { routing: 'latency' }, { health, random: Math.random, explore: 0 }), ['c', 'b', 'a'], 'never measured first, then the fastest')
  health.success('c', 30)
  t.same(orderProviders(['a', 'b', 'c'], { routing: 'latency' }, { health, random: seq([0.5]), explore: 0.1 }), ['b', 'c', 'a'], 'no exploration this time')
  t.same(orderProviders(['a', 'b', 'c'], { routing: 'latency' }, { health, random: seq([0.05, 0.9]), explore: 0.1 }), ['a', 'b', 'c'], 'exploring: another provider first')
})

t.test('latency routing sends calls to the provider that answers first', async (t) => {
  const mock = await startMockUpstream()
  mock.faults = { delayMs: 40 }
  const c = mockCatalog(mock)
  const app = await buildApp(testConfig({
    providers: [...(c.providers as object[]), { id: 'demo-fast', protocol: 'openai', builtin: 'demo' }],
    models: [{ id: 'x/latency', name: 'l', context_length: 1000, provider: ['mock-openai', 'demo-fast'], routing: 'latency' }],
    upstream: { latency: { explore: 0 } }
  }))
  t.teardown(async () => { await app.close(); await mock.close() })
  const by: string[] = []
  for (let i = 0; i < 10; i++) by.push(String((await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat('x/latency') })).headers['x-svc-provider']))
  t.same(by.slice(0, 2), ['mock-openai', 'demo-fast'], 'each is measured once')
  t.same(by.slice(2), Array(8).fill('demo-fast'), 'then the faster one gets the calls')
})

t.test('a refused connection is tried again on the same provider, then the next provider; a 5xx is not repeated', async (t) => {
  const mock = await startMockUpstream()
  const app = await buildApp(testConfig({ ...mockCatalog(mock), metrics: { auth: 'open' }, upstream: { retry: { attempts: 2, backoff_ms: 1 } } }))
  t.teardown(async () => { await app.close(); await mock.close() })
  const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat('openai/failover') })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['x-svc-provider'], 'mock-openai')
  mock.faults = { status: { status: 500, times: 1 } }
  t.equal((await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat('openai/gpt-test') })).statusCode, 502)
  t.equal(mock.requests.length, 2, 'the 500 was not sent again')
  mock.faults = { resetBeforeResponse: { times: 1 } }
  t.equal((await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat('openai/gpt-test') })).statusCode, 200, 'a reset before the first byte is repeated')
  const text = (await app.inject('/metrics')).body
  t.equal(sample(text, 'modelgate_upstream_attempts_total', { provider: 'mock-dead', outcome: 'network_error' }), 3, 'the first try and two repeats')
  t.equal(sample(text, 'modelgate_upstream_retries_total', { provider: 'mock-dead' }), 2)
  t.equal(sample(text, 'modelgate_upstream_retries_total', { provider: 'mock-openai' }), 1)
  t.equal(sample(text, 'modelgate_upstream_failovers_total', { model: 'openai/failover', provider: 'mock-openai' }), 1)
})

t.test('a request that cannot be sent as it is never counts against the provider, nor does a turn that ended before anything was sent', async (t) => {
  const clock = new FakeClock()
  const config = testConfig({ providers: [{ id: 'p', protocol: 'openai', base_url: 'http://127.0.0.1:9/v1', api_key: 'k' }], models: [], upstream: { breaker: { failures: 2, open_s: 10 }, retry: { attempts: 0 } } })
  const upstreams = new Upstreams(config, clock)
  t.teardown(async () => { await upstreams.close() })
  const client = upstreams.get('p') as UpstreamClient
  const reports: AttemptReport[] = []
  const call = { abort: new CallAbort(), attemptStarted: () => {}, attemptEnded: (r: AttemptReport) => { reports.push(r) }, waited: () => {} }
  const request = { log: { warn: () => {} } } as unknown as FastifyRequest
  const plain = (): Attempt => ({ path: '/x', protocol: 'openai' })
  const go = async (plan = plain, beforeAttempt?: () => void): Promise<unknown> => await dispatch(upstreams, { request, providers: ['p'], call, timeoutS: 5, plan, beforeAttempt })
  const state = (): unknown => upstreams.status().p

  // what undici refuses of a client's request: an Expect header, an Upgrade, a body short of its length
  for (const err of [new errors.NotSupportedError('expect header not supported'), new errors.InvalidArgumentError('invalid upgrade header'), new errors.RequestContentLengthMismatchError()]) {
    client.request = async () => { throw err }
    await t.rejects(go(), { statusCode: 400, code: 'MG_UNFORWARDABLE_REQUEST' }, `${err.message}: the client's 400`)
  }
  client.request = async () => { throw new Error('never sent') }
  await t.rejects(go(() => ({ path: '/x', protocol: 'openai', body: { n: 10n } as never })), { statusCode: 400, code: 'MG_UNFORWARDABLE_REQUEST' }, 'a body JSON cannot hold: 400')
  t.same(reports.map((r) => r.outcome), ['request_error', 'request_error', 'request_error'], 'each attempt recorded as the request\'s own error')
  t.match(state(), { state: 'closed', failures: 0 }, 'and none counted against the provider')

  // the provider's own failures still count; a probe whose turn ends before anything is sent passes it on
  client.request = async () => { throw Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) }
  await t.rejects(go())
  await t.rejects(go())
  t.match(state(), { state: 'open' }, 'two refused connections open the breaker')
  clock.advance(10_000)
  await t.rejects(go(plain, () => { throw new Error('a hook refused the call') }), /a hook refused/)
  t.ok(upstreams.health.usable('p'), 'the probe\'s turn passed: the next call may probe')
  await t.rejects(go(() => { throw new Error('no plan') }), /no plan/)
  client.request = async () => { throw new errors.NotSupportedError('expect header not supported') }
  await t.rejects(go(), { statusCode: 400, code: 'MG_UNFORWARDABLE_REQUEST' }, 'a request that cannot be sent')
  t.ok(upstreams.health.usable('p'), 'as it does when the request cannot be sent')
  client.request = async () => await Promise.resolve({ statusCode: 200, headers: {}, body: Readable.from([]) })
  await go()
  t.match(state(), { state: 'closed' }, 'a real answer closes it')
})
