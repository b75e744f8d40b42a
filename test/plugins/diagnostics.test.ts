import t from 'tap'
import diagnostics from '../../plugins/diagnostics.js'
import { bareGateway, mockCatalog } from '../helper.js'
import { startMockUpstream } from '../mock-upstream.js'

// The diagnostics plugin on a bare Fastify with the test gateway: {prefix}Model, {prefix}Provider
// and {prefix}Dropped-Params on the answers of metered calls, errors included once the model is
// known. (The trace id header, which the gateway sets on every answer: test/app.test.ts.)

const chat = (extra: Record<string, unknown> = {}) => ({ model: 'test/echo', messages: [{ role: 'user', content: 'hello' }], ...extra })

t.test('a call\'s answer names its model, provider and the parameters dropped for it, both endpoints', async (t) => {
  const gw = await bareGateway(t, [diagnostics])
  const res = await gw.app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat({ seed: 1, logit_bias: {} }) })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['x-svc-model'], 'test/echo')
  t.equal(res.headers['x-svc-provider'], 'test-openai')
  t.same(String(res.headers['x-svc-dropped-params']).split(',').sort(), ['logit_bias', 'seed'])
  const clean = await gw.app.inject({ method: 'POST', url: '/v1/messages', payload: { model: 'test/claude', max_tokens: 10, stream: true, messages: [{ role: 'user', content: 'hi' }] } })
  t.equal(clean.headers['x-svc-model'], 'test/claude', 'a stream too')
  t.equal(clean.headers['x-svc-provider'], 'test-messages')
  t.notOk(clean.headers['x-svc-dropped-params'], 'nothing dropped: no header')
})

t.test('errors: the headers once the model is known, none before', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const gw = await bareGateway(t, [diagnostics], { config: { ...mockCatalog(mock), upstream: { retry: { attempts: 0 } } } })
  mock.faults = { status: { status: 500, times: 1 } }
  const failed = await gw.app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat({ model: 'openai/gpt-test' }) })
  t.equal(failed.statusCode, 502)
  t.equal(failed.headers['x-svc-model'], 'openai/gpt-test')
  t.equal(failed.headers['x-svc-provider'], 'mock-openai')
  const unknown = await gw.app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat({ model: 'openai/none' }) })
  t.equal(unknown.statusCode, 404)
  t.notOk(unknown.headers['x-svc-model'], 'no model, no model header')
  t.notOk(unknown.headers['x-svc-provider'])
  const list = await gw.app.inject({ method: 'GET', url: '/v1/models' })
  t.notOk(list.headers['x-svc-model'], 'not a call: no headers')
  t.ok(list.headers['x-svc-trace-id'], 'only the trace id the gateway always sets')
})

t.test('the headers follow server.header_prefix', async (t) => {
  const gw = await bareGateway(t, [diagnostics], { config: { server: { header_prefix: 'X-Acme-' } } })
  const res = await gw.app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat({ seed: 1 }) })
  t.equal(res.headers['x-acme-model'], 'test/echo')
  t.equal(res.headers['x-acme-provider'], 'test-openai')
  t.equal(res.headers['x-acme-dropped-params'], 'seed')
  t.notOk(res.headers['x-svc-model'])
})
