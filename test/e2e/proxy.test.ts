import t, { type Test } from 'tap'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { startMockUpstream, type MockUpstream } from '../mock-upstream.js'
import { eventually, KEY_A, KEY_B, mockCatalog, settled, testConfig, UPSTREAM_ANTHROPIC_KEY, UPSTREAM_OPENAI_KEY } from '../helper.js'

// The gateway and the mock upstream on real sockets, driven by the official SDKs.

interface Env { app: FastifyInstance, mock: MockUpstream, base: string, openai: OpenAI, anthropic: Anthropic }

async function start (t: Test, overrides: Record<string, unknown> = {}): Promise<Env> {
  const mock = await startMockUpstream()
  const app = await buildApp(testConfig({ ...mockCatalog(mock), plugins: [{ name: 'auth' }, { name: 'usage' }, { name: 'diagnostics' }], ...overrides }))
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  const base = `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}`
  t.teardown(async () => { await app.close(); await mock.close() })
  return {
    app,
    mock,
    base,
    openai: new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY_A, maxRetries: 0 }),
    anthropic: new Anthropic({ baseURL: base, apiKey: KEY_A, maxRetries: 0 })
  }
}

const records = async (app: FastifyInstance) => { await app.gateway.store.flush(); return await app.gateway.store.usage.page({}, 100) }

t.test('openai SDK: create, stream, and the strict stream helper, through an OpenAI upstream', async (t) => {
  const { openai, mock, app } = await start(t)
  const { data, response } = await openai.chat.completions.create({ model: 'openai/gpt-test', messages: [{ role: 'user', content: 'Hello there gateway' }] }).withResponse()
  t.match(data.choices[0]?.message.content, /Echo: Hello there gateway/)
  t.equal(response.headers.get('x-svc-model'), 'openai/gpt-test')
  t.equal(response.headers.get('x-svc-provider'), 'mock-openai')
  t.ok(response.headers.get('x-svc-trace-id'))

  const up = mock.body()
  t.equal(up.model, 'gpt-upstream-name', 'upstream_model replaces the model id')
  t.equal(up.temperature, 0.25, 'default_parameters fill an omitted field')
  t.equal(mock.requests[0]?.apiKey, UPSTREAM_OPENAI_KEY, 'the provider\'s own credentials')
  t.notOk(JSON.stringify(mock.requests[0]?.headers).includes(KEY_A), 'the client key never goes upstream')

  const stream = await openai.chat.completions.create({ model: 'openai/gpt-test', messages: [{ role: 'user', content: 'Stream it' }], stream: true })
  let text = ''
  let sawUsage = false
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? ''
    if (chunk.usage !== null && chunk.usage !== undefined) sawUsage = true
  }
  t.match(text, /Echo: Stream it/)
  t.notOk(sawUsage, 'the usage chunk is hidden when the client did not ask')
  t.same(mock.body().stream_options, { include_usage: true }, 'but always asked upstream')

  const final = await openai.chat.completions.stream({ model: 'openai/gpt-test', messages: [{ role: 'user', content: 'Final please' }], stream_options: { include_usage: true } }).finalChatCompletion()
  t.match(final.choices[0]?.message.content, /Final please/)
  t.ok((final.usage?.prompt_tokens ?? 0) > 0, 'usage reaches the client that asked')
  await settled()
  const rows = await records(app)
  t.equal(rows.length, 3)
  t.ok(rows.every((r) => r.status === 'ok' && r.prompt_tokens > 0 && r.completion_tokens > 0 && r.provider === 'mock-openai'))
})

t.test('anthropic SDK: apiKey and authToken, create and the strict stream helper, through a Messages upstream', async (t) => {
  const { anthropic, mock, base } = await start(t)
  const msg = await anthropic.messages.create({ model: 'anthropic/claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'Hi from the SDK' }] }, { headers: { 'anthropic-beta': 'tools-2024-04-04' } })
  t.equal(msg.type, 'message')
  t.match((msg.content[0] as { text: string }).text, /Hi from the SDK/)
  const rec = mock.requests[0]!
  t.equal(rec.apiKey, UPSTREAM_ANTHROPIC_KEY)
  t.ok(rec.headers['anthropic-version'], 'anthropic-version forwarded')
  t.equal(rec.headers['anthropic-beta'], 'tools-2024-04-04')
  t.equal((rec.body as { model: string }).model, 'claude-upstream-name')

  const viaToken = new Anthropic({ baseURL: base, authToken: KEY_A, apiKey: null, maxRetries: 0 })
  const m2 = await viaToken.messages.create({ model: 'anthropic/claude-test', max_tokens: 50, messages: [{ role: 'user', content: 'token auth' }] })
  t.equal(m2.role, 'assistant')

  const xApiKey = await fetch(`${base}/v1/messages?beta=true`, { method: 'POST', headers: { 'x-api-key': KEY_A, 'content-type': 'application/json', 'anthropic-version': '2099-01-01' }, body: JSON.stringify({ model: 'anthropic/claude-test', max_tokens: 20, messages: [{ role: 'user', content: 'x' }] }) })
  t.equal(xApiKey.status, 200, 'x-api-key, ?beta=true and any anthropic-version are accepted')
  t.equal(mock.requests.at(-1)?.headers['anthropic-version'], '2099-01-01')

  const final = await anthropic.messages.stream({ model: 'anthropic/claude-test', max_tokens: 100, messages: [{ role: 'user', content: 'Stream me' }] }).finalMessage()
  t.match((final.content[0] as { text: string }).text, /Stream me/)
  t.ok(final.usage.output_tokens > 0)
})

t.test('parameters: unsupported fields dropped and named; defaults filled', async (t) => {
  const { base, mock } = await start(t)
  const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'openai/gpt-test', messages: [{ role: 'user', content: 'x' }], frequency_penalty: 1, logit_bias: {}, temperature: 0.9 }) })
  t.equal(res.status, 200)
  t.equal(res.headers.get('x-svc-dropped-params'), 'frequency_penalty,logit_bias')
  const up = mock.body()
  t.notOk('frequency_penalty' in up || 'logit_bias' in up)
  t.equal(up.temperature, 0.9, 'the client overrides a default')
})

t.test('failover order, 502 when none is left, 503 when none is usable, 408 on timeout', async (t) => {
  const { openai, mock, app, base } = await start(t, { server: { request_timeout_s: 0.5 } })
  const { response } = await openai.chat.completions.create({ model: 'openai/failover', messages: [{ role: 'user', content: 'failover' }] }).withResponse()
  t.equal(response.headers.get('x-svc-provider'), 'mock-openai', 'the refused provider was skipped for the next')

  mock.faults = { status: { status: 503, times: 1 } }
  const err502 = await openai.chat.completions.create({ model: 'openai/gpt-test', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)
  t.equal((err502 as { status: number }).status, 502)

  const err503 = await openai.chat.completions.create({ model: 'openai/unusable', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)
  t.equal((err503 as { status: number }).status, 503)

  mock.faults = { hang: { times: 1 } }
  const timeout = await fetch(`${base}/v1/messages`, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'openai/gpt-test', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }) })
  t.equal(timeout.status, 408)
  t.equal((await timeout.json() as { error: { type: string } }).error.type, 'timeout_error')

  // a reset before the first byte is repeated once on the same provider (upstream.retry): two fail the call
  mock.faults = { resetBeforeResponse: { times: 2 } }
  const reset = await openai.chat.completions.create({ model: 'openai/gpt-test', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)
  t.equal((reset as { status: number }).status, 502)
  await settled()
  const statuses = (await records(app)).map((r) => r.status)
  t.ok(statuses.includes('upstream_error') && statuses.includes('timeout'), 'failed calls are metered too')
})

t.test('an upstream 4xx keeps its status, re-shaped into the client\'s error shape', async (t) => {
  const { openai, anthropic, mock } = await start(t)
  mock.faults = { status: { status: 400, message: 'bad thing upstream', times: 2 } }
  const e1 = await anthropic.messages.create({ model: 'openai/gpt-test', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e) as { status: number, error: { type: string, error: { type: string, message: string } } }
  t.equal(e1.status, 400)
  t.equal(e1.error.type, 'error')
  t.equal(e1.error.error.type, 'invalid_request_error')
  t.match(e1.error.error.message, 'bad thing upstream')
  const e2 = await openai.chat.completions.create({ model: 'anthropic/claude-test', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e) as { status: number, error: { message: string } }
  t.equal(e2.status, 400)
  t.match(e2.error.message, 'bad thing upstream')
})

t.test('validation before anything is forwarded', async (t) => {
  const { base, mock } = await start(t)
  const post = (path: string, body: unknown, raw?: string) => fetch(`${base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: raw ?? JSON.stringify(body) })
  const cases: Array<[string, unknown, number, string?]> = [
    ['/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }] }, 400],
    ['/v1/chat/completions', { model: 'openai/gpt-test' }, 400],
    ['/v1/chat/completions', null, 400, '{"model": '],
    ['/v1/messages', { model: 'anthropic/claude-test', messages: [{ role: 'user', content: 'x' }] }, 400],
    ['/v1/chat/completions', { model: 'nope/nothing', messages: [{ role: 'user', content: 'x' }] }, 404],
    ['/v1/messages', { model: 'anthropic/claude-gone', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] }, 404],
    ['/v1/chat/completions', { model: 'openai/text-only', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }] }, 400]
  ]
  for (const [path, body, status, raw] of cases) {
    const res = await post(path, body, raw)
    t.equal(res.status, status, `${path} ${raw ?? JSON.stringify(body)}`)
    const json = await res.json() as Record<string, unknown>
    if (path === '/v1/messages') t.equal(json.type, 'error')
    else t.ok((json.error as Record<string, unknown>).message)
  }
  for (const url of ['data:video/mp4;base64,AAAA', 'file:///etc/passwd', 'blob:https://x/1', 'http://127.0.0.1/v.mp4', 'http://10.0.0.1/v.mp4', 'http://169.254.169.254/latest', 'http://[::1]/v', 'http://localhost/v', 'file-abc123', 'gs://bucket/v.mp4']) {
    const res = await post('/v1/chat/completions', { model: 'openai/video', messages: [{ role: 'user', content: [{ type: 'video_url', video_url: { url } }] }] })
    t.equal(res.status, 400, url)
  }
  t.equal(mock.requests.length, 0, 'nothing reached the upstream')
  const ok = await post('/v1/chat/completions', { model: 'openai/video', messages: [{ role: 'user', content: [{ type: 'video_url', video_url: { url: 'https://cdn.example.com/v.mp4', fps: 2 } }] }] })
  t.equal(ok.status, 200, 'a public https video passes, with its extra fields')
  t.same(((mock.body().messages as Array<{ content: Array<{ video_url: unknown }> }>)[0]!.content[0]!.video_url), { url: 'https://cdn.example.com/v.mp4', fps: 2 })
})

t.test('body over the limit is 413 request_too_large', async (t) => {
  const { base } = await start(t, { server: { body_limit_mb: 0.01 } })
  const big = JSON.stringify({ model: 'openai/gpt-test', messages: [{ role: 'user', content: 'x'.repeat(20_000) }] })
  const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: big })
  t.equal(res.status, 413)
  t.equal((await res.json() as { error: { code: string } }).error.code, 'request_too_large')
  const m = await fetch(`${base}/v1/messages`, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: big })
  t.equal((await m.json() as { error: { type: string } }).error.type, 'request_too_large')
})

t.test('a client abort closes the upstream request and is metered as client_aborted', async (t) => {
  const { base, mock, app } = await start(t)
  mock.faults = { slowFramesMs: 50 }
  const controller = new AbortController()
  const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', signal: controller.signal, headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'openai/gpt-test', stream: true, messages: [{ role: 'user', content: 'one two three four five six seven eight nine ten eleven twelve' }] }) })
  const reader = res.body!.getReader()
  await reader.read()
  await reader.read()
  controller.abort()
  const closed = await mock.waitForClose(1, 3000)
  t.equal(closed.length, 1, 'the upstream request was closed early')
  // the call ends when the gateway hears the client go, in its own time: its record says so
  const [row] = await eventually(3000, async () => await records(app), (rows) => rows.length > 0)
  t.equal(row?.status, 'client_aborted')
  t.ok((row?.completion_tokens ?? 0) > 0, 'output counted from what was relayed')
  t.ok((row?.prompt_tokens ?? 0) > 0, 'input estimated from the request')
})

t.test('a client that gives up on count_tokens closes its upstream request', async (t) => {
  const { base, mock, app } = await start(t)
  mock.faults = { hang: true }
  const controller = new AbortController()
  const pending = fetch(`${base}/v1/messages/count_tokens`, { method: 'POST', signal: controller.signal, headers: { 'x-api-key': KEY_A, 'anthropic-version': '2023-06-01', 'content-type': 'application/json' }, body: JSON.stringify({ model: 'anthropic/claude-test', messages: [{ role: 'user', content: 'how many tokens is this' }] }) })
  await mock.waitForRequests(1)
  t.equal(mock.requests[0]?.path, '/v1/messages/count_tokens', 'forwarded to the Messages upstream, which never answers')
  controller.abort()
  await t.rejects(pending)
  const closed = await mock.waitForClose(1, 3000)
  t.match(closed, [{ path: '/v1/messages/count_tokens', closedEarly: true, status: null }], 'the upstream request was closed, not left hanging')
  t.equal((await records(app)).length, 0, 'count_tokens is not metered')
})

t.test('an idle upstream stream ends with an error event in the client\'s format', async (t) => {
  const { base, mock, app } = await start(t, { server: { request_timeout_s: 0.3 } })
  mock.faults = { idleMidStreamMs: { ms: 1500, afterFrames: 2 } }
  const res = await fetch(`${base}/v1/messages`, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'anthropic/claude-test', stream: true, max_tokens: 50, messages: [{ role: 'user', content: 'a b c d e f' }] }) })
  t.equal(res.status, 200)
  const text = await res.text()
  t.match(text, /event: error\ndata: \{"type":"error","error":\{"type":"timeout_error"/)
  await settled()
  t.equal((await records(app))[0]?.status, 'timeout')
})

t.test('a key only calls the models its globs allow', async (t) => {
  const { base } = await start(t)
  const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEY_B}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'openai/gpt-test', messages: [{ role: 'user', content: 'x' }] }) })
  t.equal(res.status, 404)
})
