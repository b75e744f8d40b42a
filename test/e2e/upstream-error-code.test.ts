import t from 'tap'
import { startMockUpstream } from '../mock-upstream.js'
import { bearer, build, KEY_A, mockCatalog } from '../helper.js'

// error.code is always present in the numeric-code shape: an upstream 4xx relayed on the OpenAI
// pass-through path (an OpenAI client, an OpenAI-protocol model) keeps a code the upstream gave
// and takes the HTTP status where the upstream gave none (code null or missing).

t.test('a relayed OpenAI upstream 4xx with code null carries the status as its code', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const app = await build(t, mockCatalog(mock))
  const chat = { model: 'openai/gpt-test', messages: [{ role: 'user', content: 'hi' }] }
  for (const status of [429, 400, 404, 422]) {
    mock.faults = { status: { status, code: null, message: `upstream says ${status}`, times: 1 } }
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat })
    t.equal(res.statusCode, status, 'the upstream status is kept')
    const error = res.json().error
    t.equal(error.message, `upstream says ${status}`, 'and its message')
    t.equal(error.code, status, `code null becomes ${status}`)
  }
  t.equal(mock.requests.length, 4)
})

t.test('a code the upstream gave is kept', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const app = await build(t, mockCatalog(mock))
  mock.faults = { status: { status: 429, code: 'rate_limit_exceeded', times: 1 } }
  const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: { model: 'openai/gpt-test', messages: [{ role: 'user', content: 'hi' }] } })
  t.equal(res.statusCode, 429)
  t.equal(res.json().error.code, 'rate_limit_exceeded')
})
