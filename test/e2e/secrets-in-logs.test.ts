import t from 'tap'
import { Writable } from 'node:stream'
import type { InjectOptions } from 'fastify'
import { buildApp } from '../../app.js'
import { startMockUpstream } from '../mock-upstream.js'
import { KEY_A, KEY_B, mockCatalog, mockCatalogWithGemini, settled, testConfig, UPSTREAM_ANTHROPIC_KEY, UPSTREAM_GEMINI_KEY, UPSTREAM_OPENAI_KEY } from '../helper.js'

// Keys and tokens never reach the logs: a run of calls at the `info` level (every request is
// logged), good and bad keys, the admin token, upstream failures and errors, and the log text is
// searched for every secret involved.

const ADMIN = 'admin-secret-token-0123456789'
const BAD_KEY = 'mg-not-a-real-key-0123456789abcdef'

t.test('no key or token appears in the logs', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  let logs = ''
  const stream = new Writable({ write (chunk: Buffer, _enc, cb) { logs += chunk.toString(); cb() } })
  const app = await buildApp(testConfig({ ...mockCatalog(mock), admin: { token: ADMIN }, plugins: [{ name: 'cors' }, { name: 'auth' }, { name: 'idempotency' }, { name: 'usage' }, { name: 'diagnostics' }] }), { logger: { level: 'info', stream } })
  t.teardown(() => app.close())
  const chat = { model: 'openai/gpt-test', messages: [{ role: 'user', content: 'hello' }] }
  const calls: InjectOptions[] = [
    { method: 'POST', url: '/v1/chat/completions', headers: { authorization: `Bearer ${KEY_A}` }, payload: chat },
    { method: 'POST', url: '/v1/chat/completions', headers: { authorization: `Bearer ${KEY_A}` }, payload: { ...chat, stream: true } },
    { method: 'POST', url: '/v1/chat/completions', headers: { authorization: `Bearer ${BAD_KEY}` }, payload: chat },
    { method: 'POST', url: '/v1/chat/completions', headers: { authorization: `Bearer ${KEY_A}`, 'idempotency-key': 'idem-1' }, payload: { ...chat, model: 'openai/failover' } },
    { method: 'POST', url: '/v1/chat/completions', headers: { authorization: `Bearer ${KEY_A}` }, payload: '{not json' },
    { method: 'POST', url: `/v1/chat/completions?api_key=${KEY_B}`, headers: { authorization: `Bearer ${KEY_B}` }, payload: chat },
    { method: 'POST', url: '/v1/messages', headers: { 'x-api-key': KEY_A }, payload: { model: 'anthropic/claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] } },
    { method: 'POST', url: '/v1/messages', headers: { 'x-api-key': BAD_KEY }, payload: { model: 'anthropic/claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] } },
    { method: 'POST', url: '/v1/messages/count_tokens', headers: { 'x-api-key': KEY_A }, payload: { model: 'anthropic/claude-test', messages: [{ role: 'user', content: 'hi' }] } },
    { method: 'GET', url: '/v1/models', headers: { authorization: `Bearer ${KEY_A}` } },
    { method: 'OPTIONS', url: '/v1/chat/completions', headers: { origin: 'https://x.example', 'access-control-request-method': 'POST', authorization: `Bearer ${KEY_A}` } },
    { method: 'GET', url: '/admin/v1/orgs/acme', headers: { authorization: `Bearer ${ADMIN}` } },
    { method: 'GET', url: '/admin/v1/orgs/acme', headers: { authorization: `Bearer ${ADMIN}x` } },
    { method: 'POST', url: '/admin/v1/keys', headers: { authorization: `Bearer ${ADMIN}` }, payload: { org: 'acme', project: 'web' } },
    { method: 'GET', url: '/console/api/me', headers: { authorization: `Bearer ${KEY_A}` } },
    { method: 'GET', url: '/console/api/me', headers: { authorization: `Bearer ${BAD_KEY}` } }
  ]
  const created: string[] = []
  for (const call of calls) {
    const res = await app.inject(call)
    if (call.url === '/admin/v1/keys') created.push(res.json().key)
  }
  // an upstream that fails, then one that refuses, with its own key in its error body
  mock.faults = { status: { status: 500, times: 1 } }
  await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { authorization: `Bearer ${KEY_A}` }, payload: chat })
  mock.faults = { status: { status: 401, times: 1, message: 'bad upstream key' } }
  await app.inject({ method: 'POST', url: '/v1/messages', headers: { 'x-api-key': KEY_A }, payload: { model: 'anthropic/claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] } })
  await settled()
  await app.close()

  t.ok(logs.split('\n').length > calls.length, 'the requests were logged')
  t.match(logs, /"level":30/, 'at info')
  for (const secret of [KEY_A, KEY_B, BAD_KEY, ADMIN, UPSTREAM_OPENAI_KEY, UPSTREAM_ANTHROPIC_KEY, ...created]) {
    t.notOk(logs.includes(secret), `${secret.slice(0, 12)}… is not in the logs`)
    // nor a long piece of it
    t.notOk(logs.includes(secret.slice(0, 20)), `no 20-character prefix of ${secret.slice(0, 12)}…`)
  }
})

t.test('a Gemini client\'s ?key= is never logged, whatever the key looks like and however the call ends', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  // not shaped like a gateway or provider key: only the parameter's name can give it away
  const plain = 'GeminiClientSecret0123456789xyz'
  const wrong = 'NotAKeyOfThisGateway9876543210'
  let logs = ''
  const stream = new Writable({ write (chunk: Buffer, _enc, cb) { logs += chunk.toString(); cb() } })
  const app = await buildApp(testConfig({
    ...mockCatalogWithGemini(mock),
    plugins: [{ name: 'rate-limit', options: { max: 8 } }, { name: 'auth' }, { name: 'usage' }],
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: plain }] }] }]
  }), { logger: { level: 'info', stream } })
  t.teardown(() => app.close())
  const contents = [{ role: 'user', parts: [{ text: 'hello' }] }]
  const urls = [
    `/v1beta/models/google/gemini-test:generateContent?key=${plain}`,
    `/v1beta/models/openai/gpt-test:streamGenerateContent?alt=sse&key=${plain}`,
    `/v1/models/anthropic/claude-test:countTokens?key=${plain}`,
    `/v1beta/models/nope/x:generateContent?key=${plain}`,
    `/v1beta/models/google/gemini-test:generateContent?key=${wrong}`,
    `/v1beta/nothing?key=${plain}`,
    `/v1beta/models?pageToken=zz&key=${plain}`
  ]
  const statuses: number[] = []
  for (const url of urls) statuses.push((await app.inject({ method: url.includes('pageToken') ? 'GET' : 'POST', url, payload: { contents } })).statusCode)
  mock.faults = { status: { status: 500, times: 5 } }
  statuses.push((await app.inject({ method: 'POST', url: urls[0] as string, payload: { contents } })).statusCode)
  statuses.push((await app.inject({ method: 'POST', url: urls[0] as string, payload: { contents } })).statusCode)
  await settled()
  await app.close()
  t.same(statuses, [200, 200, 200, 404, 401, 404, 400, 502, 429], 'successes, refusals, an upstream failure and the rate limit')
  t.match(logs, /key=\[redacted\]/, 'the requests were logged, their key redacted')
  for (const secret of [plain, wrong, UPSTREAM_GEMINI_KEY]) {
    t.notOk(logs.includes(secret), `${secret.slice(0, 8)}… is not in the logs`)
    t.notOk(logs.includes(secret.slice(0, 16)), 'nor a long piece of it')
  }
})

t.test('redactUrl keeps what is not a secret', async (t) => {
  const { redactUrl } = await import('../../engine/ops/log-redaction.js')
  const cases: Array<[string, string]> = [
    ['/v1/messages?beta=true', '/v1/messages?beta=true'],
    ['/admin/v1/usage?org=acme&limit=5', '/admin/v1/usage?org=acme&limit=5'],
    [`/v1/chat/completions?api_key=${KEY_A}&x=1`, '/v1/chat/completions?api_key=[redacted]&x=1'],
    ['/v1/models?access_token=abc&Authorization=Bearer%20x&sig=1', '/v1/models?access_token=[redacted]&Authorization=[redacted]&sig=[redacted]'],
    [`/v1/models?${KEY_A}`, '/v1/models?[redacted]'],
    [`/v1/${KEY_B}/chat`, '/v1/[redacted]/chat'],
    [`/x?q=${UPSTREAM_OPENAI_KEY}`, '/x?q=[redacted]'],
    ['/v1beta/models/x:streamGenerateContent?alt=sse&key=AnyKey123', '/v1beta/models/x:streamGenerateContent?alt=sse&key=[redacted]']
  ]
  for (const [url, want] of cases) t.equal(redactUrl(url), want, url)
})
