import t from 'tap'
import auth from '../../plugins/auth.js'
import diagnostics from '../../plugins/diagnostics.js'
import usage from '../../plugins/usage.js'
import type { SqliteStore } from '../../engine/store/sqlite/index.js'
import { bareGateway, FakeClock, mockCatalog, testGatewayAlone } from '../helper.js'
import { startMockUpstream } from '../mock-upstream.js'
import { usageRow } from '../usage-row.js'

// The usage plugin, with auth, on a bare Fastify with the test gateway: one record per metered
// call that reached an upstream or was refused once its key was known, committed before the
// answer ends; stored content swept after
// retention_days. (What store_content keeps, byte for byte: test/e2e/billing.test.ts.)

const chat = (extra: Record<string, unknown> = {}) => ({ model: 'test/echo', messages: [{ role: 'user', content: 'Count to three' }], ...extra })

t.test('one record per call, written by the time its answer arrived: who, what, tokens, cost', async (t) => {
  const clock = new FakeClock()
  const gw = await bareGateway(t, [auth, usage], { clock })
  const res = await gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: gw.auth, payload: chat() })
  t.equal(res.statusCode, 200)
  const rows = await gw.gateway.store.usage.page({}, 10)
  t.equal(rows.length, 1, 'recorded before the answer ended')
  const row = rows[0]!
  const answer = res.json()
  t.match(row, {
    created_at: clock.now(),
    trace_id: res.headers['x-svc-trace-id'],
    org_id: 'acme',
    project_id: 'web',
    endpoint: 'chat.completions',
    model: 'test/echo',
    provider: 'test-openai',
    stream: 0,
    status: 'ok',
    prompt_tokens: answer.usage.prompt_tokens,
    completion_tokens: answer.usage.completion_tokens,
    total_tokens: answer.usage.prompt_tokens + answer.usage.completion_tokens
  })
  t.ok(row.key_id?.startsWith('key_'), 'the API key\'s id')
  // $1 per million input tokens, $2 per million output tokens: nano-dollars per token 1000 and 2000
  t.equal(row.cost_nano, row.prompt_tokens * 1000 + row.completion_tokens * 2000, 'the cost at the model\'s prices')

  const streamed = await gw.app.inject({ method: 'POST', url: '/v1/messages', headers: gw.auth, payload: { model: 'test/claude', max_tokens: 20, stream: true, messages: [{ role: 'user', content: 'hi' }] } })
  t.equal(streamed.statusCode, 200)
  t.match((await gw.gateway.store.usage.page({}, 10))[0], { endpoint: 'messages', model: 'test/claude', provider: 'test-messages', stream: 1, status: 'ok' }, 'a streamed Messages call')
})

t.test('a refusal of a known key is a refused record with its code; one before a key is known leaves none; an upstream failure is recorded with no cost', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const clock = new FakeClock()
  const gw = await bareGateway(t, [auth, usage], { clock, config: { ...mockCatalog(mock), upstream: { retry: { attempts: 0 } } } })
  const post = (headers: Record<string, string>, body: Record<string, unknown>) => gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers, payload: body })
  t.equal((await post({}, chat({ model: 'openai/gpt-test' }))).statusCode, 401)
  t.equal((await post({ authorization: 'Bearer mg-not-a-key-0123456789' }, chat({ model: 'openai/gpt-test' }))).statusCode, 401)
  t.equal((await gw.gateway.store.usage.page({}, 10)).length, 0, 'no key, or one that is not a key: nothing recorded')
  const invalid = await post(gw.auth, { model: 'openai/gpt-test' })
  t.equal(invalid.statusCode, 400)
  clock.advance(5)
  const unknown = await post(gw.auth, chat({ model: 'openai/none' }))
  t.equal(unknown.statusCode, 404)
  const refused = await gw.gateway.store.usage.page({}, 10)
  t.equal(refused.length, 2, 'each refusal of the known key is recorded')
  const nothing = { prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cost_nano: 0, attempts: [] }
  t.match(refused[0], { trace_id: unknown.headers['x-svc-trace-id'], org_id: 'acme', project_id: 'web', endpoint: 'chat.completions', model: 'openai/none', provider: null, status: 'refused', error: 'model_not_found', ...nothing }, 'the model the body named, the error\'s code, nothing spent')
  t.match(refused[1], { trace_id: invalid.headers['x-svc-trace-id'], model: 'openai/gpt-test', status: 'refused', error: 'missing_field', cost_nano: 0 })
  t.ok(refused[0]?.key_id?.startsWith('key_'), 'the key\'s id')
  t.same((await gw.gateway.store.usage.summary({}, []))[0], { calls: 2, errors: 2, prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, cost_nano: 0n, saved_nano: 0n }, 'the summary counts them as errors')
  t.same((await gw.gateway.store.usage.page({ status: ['refused'] }, 10)).length, 2, 'and they are found by their status')

  mock.faults = { status: { status: 500, times: 1 } }
  const failed = await post(gw.auth, chat({ model: 'openai/gpt-test' }))
  t.equal(failed.statusCode, 502)
  const rows = await gw.gateway.store.usage.page({ status: ['upstream_error', 'timeout'] }, 10)
  t.equal(rows.length, 1, 'the failed call is recorded')
  t.match(rows[0], { model: 'openai/gpt-test', provider: 'mock-openai', cost_nano: 0, error: null })
})

t.test('a key\'s refusals are recorded up to ten a second; the rest are counted in the metrics', async (t) => {
  const clock = new FakeClock()
  const gw = await bareGateway(t, [auth, usage], { clock })
  const refuse = async (n: number): Promise<void> => {
    for (let i = 0; i < n; i++) t.equal((await gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: gw.auth, payload: chat({ model: 'test/none' }) })).statusCode, 404)
  }
  const unrecorded = async (): Promise<number> => {
    const m = (await gw.gateway.metrics.getSingleMetricAsString('modelgate_refusals_unrecorded_total')).split('\n').find((l) => l.startsWith('modelgate_refusals_unrecorded_total{'))
    return m === undefined ? 0 : Number(m.split(' ').pop())
  }
  await refuse(14)
  t.equal((await gw.gateway.store.usage.page({ status: ['refused'] }, 100)).length, 10, 'ten in the second')
  t.equal(await unrecorded(), 4, 'the four others counted, by code')
  t.match(await gw.gateway.metrics.getSingleMetricAsString('modelgate_refusals_unrecorded_total'), /code="model_not_found"/)
  clock.advance(1000)
  await refuse(3)
  t.equal((await gw.gateway.store.usage.page({ status: ['refused'] }, 100)).length, 13, 'the next second records again')
  t.equal(await unrecorded(), 4)
})

t.test('a record keeps the call\'s attempts and the parameters it dropped (the Dropped-Params header\'s list)', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  // a Messages model that lists presence_penalty: the chat → Messages translation drops it, the model's parameters drop logit_bias
  const translated = {
    id: 'anthropic/claude-pp',
    name: 'claude-pp',
    provider: 'mock-messages',
    upstream_model: 'claude-upstream-name',
    context_length: 200000,
    supported_parameters: ['max_tokens', 'temperature', 'presence_penalty'],
    pricing: { input: 3, output: 15 }
  }
  const gw = await bareGateway(t, [auth, usage, diagnostics], { config: { ...mockCatalog(mock, [translated]), upstream: { retry: { attempts: 0 } } } })
  const post = (body: Record<string, unknown>) => gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: gw.auth, payload: body })
  const recordOf = async (res: { headers: Record<string, unknown> }) => (await gw.gateway.store.usage.byTrace(String(res.headers['x-svc-trace-id'])))?.row

  const dropped = await post(chat({ model: 'anthropic/claude-pp', presence_penalty: 0.5, logit_bias: { 1: 1 } }))
  t.equal(dropped.statusCode, 200, dropped.body)
  const header = String(dropped.headers['x-svc-dropped-params']).split(',')
  t.same(header.slice().sort(), ['logit_bias', 'presence_penalty'], 'one dropped by the model\'s parameters, one by the translation')
  const one = await recordOf(dropped)
  t.same(one?.dropped_params, header, 'the record keeps the header\'s list')
  t.match(one?.attempts, [{ provider: 'mock-messages', upstream_model: 'claude-upstream-name', outcome: 'ok', status: 200, error: null }])
  t.equal(one?.attempts.length, 1)
  t.type(one?.attempts[0]?.latency_ms, 'number')

  // mock-dead refuses the connection; the call goes on to mock-openai
  const failover = await post(chat({ model: 'openai/failover' }))
  t.equal(failover.statusCode, 200, failover.body)
  const two = await recordOf(failover)
  t.match(two, { provider: 'mock-openai', status: 'ok', dropped_params: [] })
  t.match(two?.attempts, [
    { provider: 'mock-dead', upstream_model: 'gpt-upstream-name', outcome: 'network_error', status: null, error: 'ECONNREFUSED' },
    { provider: 'mock-openai', upstream_model: 'gpt-upstream-name', outcome: 'ok', status: 200, error: null }
  ], 'both attempts, in order')
  t.equal(two?.attempts.length, 2)

  mock.faults = { status: { status: 503, times: 1 } }
  const failed = await post(chat({ model: 'openai/gpt-test' }))
  t.equal(failed.statusCode, 502)
  t.same((await recordOf(failed))?.attempts.map((a) => [a.provider, a.outcome, a.status, a.error]), [['mock-openai', 'server_error', 503, 'server_error']], 'a failed call\'s attempt')
})

t.test('store_content: content older than retention_days is swept when the plugin starts', async (t) => {
  const clock = new FakeClock()
  const day = 86_400_000
  const gw = await testGatewayAlone(t, { clock })
  const store = gw.gateway.store as SqliteStore
  const record = (id: string, at: number): void => {
    store.usage.insert(usageRow({ id, created_at: at, key_id: null, model: 'test/echo', provider: 'test-openai', prompt_tokens: 1, completion_tokens: 1, total_tokens: 2, cost_nano: 3 }),
      { usage_id: id, created_at: at, request: '{"secret":1}', response: '{}' })
  }
  record('old', clock.now() - 8 * day)
  record('recent', clock.now() - 6 * day)
  await gw.use(usage, { store_content: true, retention_days: 7 })
  await gw.routes()
  await gw.app.ready()
  const left = () => (store.db.prepare('SELECT usage_id FROM usage_content ORDER BY usage_id').all() as Array<{ usage_id: string }>).map((r) => r.usage_id)
  for (let i = 0; i < 100 && left().length > 1; i++) await new Promise((resolve) => setImmediate(resolve))
  t.same(left(), ['recent'], 'the content older than seven days is gone')
  t.equal((store.usage.page({}, 10)).length, 2, 'the records themselves stay')
})
