import t, { type Test } from 'tap'
import { request as httpRequest } from 'node:http'
import { buildApp } from '../../app.js'
import { targetProblem } from '../../engine/gateway/passthrough-target.js'
import { startMockUpstream, type MockUpstream } from '../mock-upstream.js'
import { KEY_A, KEY_B, mockCatalog, mockCatalogWithGemini, testConfig, UPSTREAM_ANTHROPIC_KEY, UPSTREAM_GEMINI_KEY, UPSTREAM_OPENAI_KEY } from '../helper.js'
import type { FastifyInstance } from 'fastify'
import type { UsageRow } from '../../engine/store/types.js'

// /passthrough/{provider}/*: the providers' own APIs behind gateway keys, through
// the same call pipeline as /v1, with the chain's limits and the usage ledger.

interface Gw { app: FastifyInstance, mock: MockUpstream, base: string, rows: () => Promise<UsageRow[]> }

async function gateway (t: Test, plugins: Array<Record<string, unknown>> = [{ name: 'auth' }, { name: 'balance' }, { name: 'usage' }, { name: 'diagnostics' }], extra: Record<string, unknown> = {}): Promise<Gw> {
  const mock = await startMockUpstream()
  const c = mockCatalog(mock)
  const providers = (c.providers as Array<Record<string, unknown>>).map((p) => (p.id === 'mock-openai' || p.id === 'mock-messages' ? { ...p, passthrough: true } : p))
  const app = await buildApp(testConfig({
    ...c,
    providers,
    plugins,
    tenants: [{ org: 'acme', balance_usd: 25, projects: [{ id: 'web', keys: [{ key: KEY_A, passthrough: ['mock-openai', 'mock-messages'] }, { key: KEY_B }] }] }],
    ...extra
  }), { logger: false })
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { await app.close(); await mock.close() })
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  return { app, mock, base, rows: async () => await app.gateway.store.usage.page({}, 100) }
}

const chatBody = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({ model: 'gpt-upstream-name', messages: [{ role: 'user', content: 'Tell me about herons please' }], ...extra })
const post = async (url: string, body: unknown, headers: Record<string, string> = { authorization: `Bearer ${KEY_A}` }): Promise<Response> =>
  await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })

t.test('a pass-through chat call: the provider\'s key upstream, the answer as it is, metered like a translated call', async (t) => {
  const g = await gateway(t)
  const res = await post(`${g.base}/passthrough/mock-openai/chat/completions`, chatBody(), { authorization: `Bearer ${KEY_A}`, 'x-svc-trace-id': 'client-made', cookie: 'a=b', 'idempotency-key': 'k-1' })
  t.equal(res.status, 200)
  const body = await res.json() as { object: string, model: string, usage: { prompt_tokens: number, completion_tokens: number } }
  t.equal(body.object, 'chat.completion')
  t.equal(body.model, 'gpt-upstream-name', 'the provider\'s own answer, model name included')
  t.equal(res.headers.get('x-svc-provider'), 'mock-openai')
  t.equal(res.headers.get('x-svc-model'), 'openai/gpt-test', 'priced as the catalog model with that upstream name')
  const up = g.mock.requests.at(-1)
  t.equal(up?.path, '/v1/chat/completions', 'under the provider\'s base path')
  t.equal(up?.apiKey, UPSTREAM_OPENAI_KEY, 'the provider\'s key, not the client\'s')
  for (const h of ['cookie', 'idempotency-key', 'x-svc-trace-id']) t.equal(up?.headers[h], undefined, `${h} not forwarded`)
  t.notOk(JSON.stringify(up?.headers).includes(KEY_A), 'the gateway key appears nowhere upstream')

  const translated = await post(`${g.base}/v1/chat/completions`, { ...chatBody(), model: 'openai/gpt-test' })
  t.equal(translated.status, 200)
  const rows = await g.rows()
  t.equal(rows.length, 2, 'one record per call: the chain\'s gateway hooks are registered once, whatever the scopes')
  const [viaTranslation, viaPassthrough] = rows
  t.match(viaPassthrough, { endpoint: 'passthrough', model: 'openai/gpt-test', provider: 'mock-openai', status: 'ok', stream: 0 })
  t.equal(viaPassthrough?.prompt_tokens, body.usage.prompt_tokens, 'the provider\'s own usage')
  for (const k of ['prompt_tokens', 'completion_tokens', 'cached_input_tokens', 'cost_nano'] as const) t.equal(viaPassthrough?.[k], viaTranslation?.[k], `${k} as for the translated call`)
  t.ok((viaPassthrough?.cost_nano ?? 0) > 0)
  const org = await g.app.gateway.store.orgs.get('acme')
  await g.app.gateway.store.flush()
  t.equal((org?.spent_nano ?? 0) + (org?.balance_nano ?? 0), 25e9, 'charged through the ledger')
})

t.test('a streamed pass-through call is relayed chunk by chunk and metered from its usage chunk', async (t) => {
  const g = await gateway(t)
  g.mock.faults = { slowFramesMs: 30 }
  const res = await post(`${g.base}/passthrough/mock-openai/chat/completions`, chatBody({ stream: true }))
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /text\/event-stream/)
  const reader = (res.body as ReadableStream<Uint8Array>).getReader()
  const first = await reader.read()
  t.match(new TextDecoder().decode(first.value), /^data: /, 'the first frame arrived')
  t.equal(g.mock.requests.at(-1)?.closed, false, 'while the provider was still sending')
  let rest = ''
  for (let r = await reader.read(); !r.done; r = await reader.read()) rest += new TextDecoder().decode(r.value)
  t.match(rest, /data: \[DONE\]/)
  t.match(g.mock.body(), { stream_options: { include_usage: true } }, 'usage asked for, so every stream is metered')
  const [row] = await g.rows()
  t.match(row, { endpoint: 'passthrough', stream: 1, status: 'ok' })
  t.ok((row?.completion_tokens ?? 0) > 0 && (row?.cost_nano ?? 0) > 0, 'metered from the usage chunk')
})

t.test('Messages pass-through: x-api-key accepted from the client, the provider\'s x-api-key sent; a snapshot of a catalog model billed at its prices', async (t) => {
  const g = await gateway(t)
  const res = await post(`${g.base}/passthrough/mock-messages/v1/messages`, { model: 'claude-upstream-name-20250929', max_tokens: 20, messages: [{ role: 'user', content: 'hello' }] }, { 'x-api-key': KEY_A })
  t.equal(res.status, 200)
  t.equal((await res.json() as { type: string }).type, 'message')
  const up = g.mock.requests.at(-1)
  t.equal(up?.apiKey, UPSTREAM_ANTHROPIC_KEY)
  t.equal(up?.headers['anthropic-version'], '2023-06-01')
  t.equal((up?.body as { model?: string } | undefined)?.model, 'claude-upstream-name-20250929', 'the snapshot the client named is the one sent')
  const [row] = await g.rows()
  t.match(row, { endpoint: 'passthrough', model: 'anthropic/claude-test' }, 'the catalog model of which it is a snapshot')
  t.ok((row?.prompt_tokens ?? 0) > 0 && (row?.cost_nano ?? 0) > 0, 'billed at that model\'s prices')
})

t.test('a pass-through call naming a model that is no catalog model of the provider is refused before anything is sent', async (t) => {
  const g = await gateway(t)
  for (const model of ['some-new-claude', 'claude-upstream-name-preview', 'anthropic/claude-test', 'gpt-upstream-name']) {
    const res = await post(`${g.base}/passthrough/mock-messages/v1/messages`, { model, max_tokens: 20, messages: [{ role: 'user', content: 'hello' }] }, { 'x-api-key': KEY_A })
    t.equal(res.status, 404, model)
    t.match(await res.json(), { type: 'error', error: { type: 'not_found_error' } })
  }
  const noModel = await post(`${g.base}/passthrough/mock-openai/chat/completions`, { messages: [{ role: 'user', content: 'hi' }] })
  t.equal(noModel.status, 400, 'a metered endpoint must name its model')
  t.equal(g.mock.requests.length, 0, 'nothing reached the provider')
  const rows = await g.rows()
  t.same(rows.filter((r) => r.status !== 'refused'), [], 'and nothing was recorded but the refusals')
  t.ok(rows.every((r) => r.cost_nano === 0 && r.attempts.length === 0 && r.error !== null), 'each with its code, nothing spent')
})

t.test('a key without the grant is refused, in the provider family\'s shape', async (t) => {
  const g = await gateway(t)
  const openai = await post(`${g.base}/passthrough/mock-openai/chat/completions`, chatBody(), { authorization: `Bearer ${KEY_B}` })
  t.equal(openai.status, 403)
  t.match(await openai.json(), { error: { code: 403, type: 'permission_error' } })
  const messages = await post(`${g.base}/passthrough/mock-messages/v1/messages`, { model: 'x', max_tokens: 5, messages: [] }, { 'x-api-key': KEY_B })
  t.equal(messages.status, 403)
  t.match(await messages.json(), { type: 'error', error: { type: 'permission_error' } })
  const none = await post(`${g.base}/passthrough/mock-openai/chat/completions`, chatBody(), {})
  t.equal(none.status, 401)
  t.equal(g.mock.requests.length, 0, 'nothing reached the provider')
  const unknown = await post(`${g.base}/passthrough/mock-nokey/chat/completions`, chatBody())
  t.equal(unknown.status, 404, 'a provider without pass-through has no such routes')
})

t.test('Gemini pass-through: the gateway key from x-goog-api-key or ?key= never sent on; generateContent and both stream forms metered', async (t) => {
  const mock = await startMockUpstream()
  const c = mockCatalogWithGemini(mock)
  const providers = (c.providers as Array<Record<string, unknown>>).map((p) => (p.id === 'mock-gemini' ? { ...p, passthrough: true } : p))
  const app = await buildApp(testConfig({
    ...c,
    providers,
    plugins: [{ name: 'auth' }, { name: 'usage' }, { name: 'diagnostics' }],
    tenants: [{ org: 'acme', balance_usd: 25, projects: [{ id: 'web', keys: [{ key: KEY_A, passthrough: ['mock-gemini'] }, { key: KEY_B }] }] }]
  }), { logger: false })
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { await app.close(); await mock.close() })
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}/passthrough/mock-gemini/v1beta/models/gemini-upstream-name`
  const body = { contents: [{ role: 'user', parts: [{ text: 'Tell me about herons please' }] }] }

  const whole = await post(`${base}:generateContent?key=${KEY_A}`, body, {})
  t.equal(whole.status, 200)
  const answer = await whole.json() as { responseId: string, usageMetadata: { promptTokenCount: number, candidatesTokenCount: number } }
  t.match(answer.responseId, /^mock/, 'the provider\'s own answer')
  const up = mock.requests.at(-1)
  t.equal(up?.path, '/v1beta/models/gemini-upstream-name:generateContent')
  t.same(up?.query, {}, 'the client\'s ?key= is not sent on')
  t.equal(up?.apiKey, UPSTREAM_GEMINI_KEY, 'the provider\'s key')
  t.equal(whole.headers.get('x-svc-model'), 'google/gemini-test', 'priced as the catalog model with that upstream name')

  const sse = await post(`${base}:streamGenerateContent?alt=sse`, body, { 'x-goog-api-key': KEY_A })
  t.equal(sse.status, 200)
  t.match(await sse.text(), /^data: \{"candidates"/)
  t.same(mock.requests.at(-1)?.query, { alt: 'sse' }, 'the other parameters are')
  t.equal(mock.requests.at(-1)?.headers['x-goog-api-key'], UPSTREAM_GEMINI_KEY, 'the client\'s x-goog-api-key is replaced')

  const chunk = (text: string, usage: Record<string, number>, finishReason?: string): Record<string, unknown> => ({ candidates: [{ content: { role: 'model', parts: [{ text }] }, index: 0, ...(finishReason === undefined ? {} : { finishReason }) }], usageMetadata: usage })
  mock.enqueue({ body: [chunk('Herons ', { promptTokenCount: 9, totalTokenCount: 9 }), chunk('wade.', { promptTokenCount: 9, candidatesTokenCount: 4, totalTokenCount: 13 }, 'STOP')] })
  const array = await post(`${base}:streamGenerateContent?key=${KEY_A}`, body, {})
  t.equal(array.status, 200)
  t.equal((await array.json() as unknown[]).length, 2, 'a stream without alt=sse: Google\'s JSON array, as it is')

  await new Promise((resolve) => setImmediate(resolve))
  const rows = await app.gateway.store.usage.page({}, 10)
  t.equal(rows.length, 3)
  const [fromArray, fromSse, fromWhole] = rows
  t.match(fromWhole, { endpoint: 'passthrough', model: 'google/gemini-test', provider: 'mock-gemini', stream: 0, status: 'ok', prompt_tokens: answer.usageMetadata.promptTokenCount, completion_tokens: answer.usageMetadata.candidatesTokenCount })
  t.match(fromSse, { stream: 1, status: 'ok' })
  t.ok((fromSse?.completion_tokens ?? 0) > 0, 'a stream read for its usage')
  t.match(fromArray, { stream: 1, status: 'ok', prompt_tokens: 9, completion_tokens: 4 }, 'the array\'s last count')
  t.ok(rows.every((r) => r.cost_nano > 0))

  const other = await post(`${base}:generateContent`, body, { 'x-goog-api-key': KEY_B })
  t.equal(other.status, 403)
  t.match(await other.json(), { error: { code: 403, status: 'PERMISSION_DENIED' } }, 'Google\'s shape')
  const none = await post(`${base}:generateContent`, body, {})
  t.equal(none.status, 401)
  t.match(await none.json(), { error: { status: 'UNAUTHENTICATED' } })
  const list = await fetch(`${base.replace(/\/models\/.*$/, '/models')}?pageSize=5&key=${KEY_A}`)
  t.equal(list.status, 404, 'any other path reaches the provider, whose answer comes back as it is')
  t.same(mock.requests.at(-1)?.query, { pageSize: '5' })
  for (const r of mock.requests) t.notOk(JSON.stringify([r.headers, r.query]).includes(KEY_A), 'the gateway key never reached the provider')
})

t.test('paths that would leave the provider\'s base path are refused with 400', async (t) => {
  const forms = ['/../v1/chat/completions', '/%2e%2e/admin', '/files/%2E%2E/%2e%2e/x', '/a%2fb', '/a%2Fb', '/a%5cb', '/a\\b', '//evil.example/x', '/http://evil.example/x', '/./models', '/%ff']
  for (const f of forms) t.not(targetProblem(f), null, `${f} is an escape`)
  for (const ok of ['/models', '/chat/completions', '/files/file-abc/content', '/v1/messages/batches/msgbatch_01']) t.equal(targetProblem(ok), null, `${ok} is fine`)
  const g = await gateway(t)
  const { port } = new URL(g.base)
  for (const f of forms) {
    // a raw request line, as a client could send it (fetch would normalize it)
    const status = await new Promise<number>((resolve, reject) => {
      const req = httpRequest({ host: '127.0.0.1', port, method: 'GET', path: `/passthrough/mock-openai${f}`, headers: { authorization: `Bearer ${KEY_A}` } }, (res) => { res.resume(); resolve(res.statusCode ?? 0) })
      req.on('error', reject)
      req.end()
    })
    t.ok(status === 400 || status === 404, `${f}: ${status}`)
  }
  t.equal(g.mock.requests.length, 0, 'none reached the provider')
})

t.test('the rate limit and idempotency apply; upstream 4xx and 5xx come back as they are', async (t) => {
  const g = await gateway(t, [{ name: 'rate-limit', options: { max: 5, window_s: 60 } }, { name: 'auth' }, { name: 'idempotency' }, { name: 'usage' }])
  const url = `${g.base}/passthrough/mock-openai/chat/completions`
  t.equal((await post(url, chatBody(), { authorization: `Bearer ${KEY_A}`, 'idempotency-key': 'once' })).status, 200)
  const dup = await post(url, chatBody(), { authorization: `Bearer ${KEY_A}`, 'idempotency-key': 'once' })
  t.equal(dup.status, 409)
  t.match(await dup.json(), { error: { code: 'duplicate_request' } })
  g.mock.faults = { status: 429 }
  const limited = await post(url, chatBody())
  t.equal(limited.status, 429)
  t.same(await limited.json(), { error: { message: 'Simulated upstream error 429.', type: 'requests', param: null, code: 'rate_limit_exceeded' } }, 'the provider\'s own body, untouched')
  g.mock.faults = { status: 500 }
  const failed = await post(url, chatBody())
  t.equal(failed.status, 500, 'a provider 5xx keeps its status (no failover here)')
  t.match(await failed.json(), { error: { message: /Simulated upstream error 500/ } })
  g.mock.faults = {}
  const models = await fetch(`${g.base}/passthrough/mock-openai/models`, { headers: { authorization: `Bearer ${KEY_A}` } })
  t.equal(models.status, 404, 'whatever the provider answers')
  await models.text()
  const rows = await g.rows()
  t.match(rows[0], { endpoint: 'passthrough', prompt_tokens: 0, completion_tokens: 0, cost_nano: 0 }, 'another endpoint: a record with zero tokens')
  t.equal((await post(url, chatBody())).status, 429, 'the IP rate limit counts pass-through calls')
})

t.test('guardrails see the pass-through calls the gateway reads: requests blocked, answers redacted, streams included', async (t) => {
  const rules = [
    { name: 'bird', pattern: 'herons', action: 'redact', on: ['response'] },
    { name: 'card', pattern: '\\b\\d{4}-\\d{4}-\\d{4}-\\d{4}\\b', action: 'block', on: ['request'] }
  ]
  const g = await gateway(t, [{ name: 'auth' }, { name: 'usage' }, { name: 'guardrails', options: { rules } }])
  const url = `${g.base}/passthrough/mock-openai/chat/completions`
  const whole = await post(url, chatBody())
  t.equal(whole.status, 200)
  const text = (await whole.json() as { choices: Array<{ message: { content: string } }> }).choices[0]?.message.content ?? ''
  t.match(text, /\[REDACTED\]/, 'the answer is redacted')
  t.notMatch(text, /herons/)
  t.match(g.mock.body(), { messages: [{ content: /herons/ }] }, 'a response rule leaves the request as it is')

  const streamed = await post(url, chatBody({ stream: true }))
  const sse = await streamed.text()
  t.match(sse, /\[REDACTED\]/, 'the stream is redacted')
  t.notMatch(sse, /herons/)
  t.match(sse, /data: \[DONE\]/)

  const before = g.mock.requests.length
  const blocked = await post(url, chatBody({ messages: [{ role: 'user', content: 'my card is 4111-1111-1111-1111' }] }))
  t.equal(blocked.status, 400)
  t.match(await blocked.json(), { error: { code: 'content_blocked' } })
  t.equal(g.mock.requests.length, before, 'nothing reached the provider')
})

t.test('an answer the gateway reads comes unencoded; others keep the client\'s accept-encoding', async (t) => {
  const g = await gateway(t)
  const res = await post(`${g.base}/passthrough/mock-openai/chat/completions`, chatBody(), { authorization: `Bearer ${KEY_A}`, 'accept-encoding': 'gzip, br' })
  t.equal(res.status, 200)
  await res.json()
  t.equal(g.mock.requests.at(-1)?.headers['accept-encoding'], undefined, 'not asked of the provider: its usage must be readable')
  const [row] = await g.rows()
  t.ok((row?.prompt_tokens ?? 0) > 0, 'metered')
  const models = await fetch(`${g.base}/passthrough/mock-openai/models`, { headers: { authorization: `Bearer ${KEY_A}`, 'accept-encoding': 'gzip' } })
  await models.text()
  t.equal(g.mock.requests.at(-1)?.headers['accept-encoding'], 'gzip', 'an answer passed unread: the client\'s own')
})

t.test('pass-through spends nothing past an empty balance or a spent budget: a snapshot is priced as its model, an unknown name refused', async (t) => {
  const g = await gateway(t, [{ name: 'auth' }, { name: 'quota' }, { name: 'balance' }, { name: 'usage' }], {
    tenants: [
      { org: 'acme', balance_usd: 0, projects: [{ id: 'web', keys: [{ key: KEY_A, passthrough: ['mock-openai', 'mock-messages'] }] }] },
      { org: 'rich', balance_usd: 100, projects: [{ id: 'app', keys: [{ key: KEY_B, passthrough: ['mock-openai'], budget: { usd: 0.01, per: 'day' } }] }] }
    ]
  })
  const url = `${g.base}/passthrough/mock-openai/chat/completions`
  for (const model of ['gpt-upstream-name', 'gpt-upstream-name-2025-01-01', 'gpt-upstream-name-20250101']) {
    const res = await post(url, chatBody({ model }))
    t.equal(res.status, 402, `${model} on a balance of 0: refused`)
  }
  t.equal((await post(url, chatBody({ model: 'gpt-x-2025-01-01' }))).status, 404, 'a snapshot of no catalog model: unknown')
  t.equal((await post(url, { messages: [{ role: 'user', content: 'hi' }] })).status, 400, 'a metered endpoint must name its model')
  // the batch's input file is the organization's own: it is the batch that is refused
  await g.app.gateway.store.objects.claim('mock-openai', [{ kind: 'files', id: 'file-f' }], { org: 'acme', project: 'web' }, 1)
  const batch = await post(`${g.base}/passthrough/mock-openai/batches`, { input_file_id: 'file-f', endpoint: '/v1/chat/completions', completion_window: '24h' })
  t.equal(batch.status, 403, 'an endpoint that spends without reporting what: refused under a balance')
  t.match(await batch.json(), { error: { code: 'unmetered_endpoint', type: 'permission_error' } })
  t.equal(g.mock.requests.length, 0, 'nothing reached the provider')

  // a budget: the first call goes (its worst case is held), then the window is spent
  const big = { authorization: `Bearer ${KEY_B}` }
  g.mock.script(() => ({ body: { id: 'c', object: 'chat.completion', created: 1, model: 'gpt-upstream-name', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 2_000_000, completion_tokens: 1_000_000, total_tokens: 3_000_000 } } }))
  const first = await post(url, chatBody({ model: 'gpt-upstream-name-2025-01-01' }), big)
  t.equal(first.status, 200)
  const [row] = await g.rows()
  t.match(row, { model: 'openai/gpt-test', prompt_tokens: 2_000_000, completion_tokens: 1_000_000 }, 'billed as the catalog model: millions of tokens, all charged')
  t.equal(row?.cost_nano, 2_000_000 * 3_000 + 1_000_000 * 15_000, 'at its prices')
  const second = await post(url, chatBody({ model: 'gpt-upstream-name-2025-01-01' }), big)
  t.equal(second.status, 429, 'the budget is spent: refused')
  t.equal(g.mock.requests.length, 1, 'only the first reached the provider')
})

t.test('pass-through holds the key\'s model grants: a key limited to some models reaches no other through the provider\'s API', async (t) => {
  const g = await gateway(t, undefined, {
    tenants: [{ org: 'acme', balance_usd: 25, projects: [{ id: 'web', keys: [{ key: KEY_A, models: ['anthropic/*'], passthrough: ['mock-openai', 'mock-messages'] }] }] }]
  })
  const refused = await post(`${g.base}/passthrough/mock-openai/chat/completions`, chatBody())
  t.equal(refused.status, 404, 'openai/gpt-test is not granted: as /v1/chat/completions answers')
  t.equal((await post(`${g.base}/v1/chat/completions`, { ...chatBody(), model: 'openai/gpt-test' })).status, 404)
  const granted = await post(`${g.base}/passthrough/mock-messages/v1/messages`, { model: 'claude-upstream-name', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': KEY_A })
  t.equal(granted.status, 200, 'anthropic/claude-test is')
  t.equal(g.mock.requests.length, 1)
})

t.test('headers: the provider\'s own win whatever the case; the client\'s cookies, organization, project and forwarding headers stay; the provider\'s cookies stay', async (t) => {
  const mock = await startMockUpstream()
  const c = mockCatalog(mock)
  const providers = (c.providers as Array<Record<string, unknown>>).map((p) => p.id === 'mock-openai' ? { ...p, passthrough: true, headers: { 'X-Org-Secret': 'the-configured-secret-value' } } : p)
  const app = await buildApp(testConfig({ ...c, providers, plugins: [{ name: 'auth' }], tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, passthrough: ['mock-openai'] }] }] }] }), { logger: false })
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { await app.close(); await mock.close() })
  const port = (app.server.address() as { port: number }).port
  mock.script(() => ({ body: { id: 'c', object: 'chat.completion', created: 1, model: 'gpt-upstream-name', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }, headers: { 'set-cookie': 'session=provider-session; Path=/' } }))
  const res = await post(`http://127.0.0.1:${port}/passthrough/mock-openai/chat/completions`, chatBody(), {
    authorization: `Bearer ${KEY_A}`, 'x-org-secret': 'from-the-client', 'openai-organization': 'org-client', 'openai-project': 'proj-client', cookie: 'a=b', 'x-forwarded-for': '6.6.6.6', forwarded: 'for=6.6.6.6'
  })
  t.equal(res.status, 200)
  t.equal(res.headers.get('set-cookie'), null, 'the provider\'s cookie does not reach the client')
  const up = mock.requests.at(-1)
  t.equal(up?.headers['x-org-secret'], 'the-configured-secret-value', 'the configured header, and only it')
  for (const h of ['openai-organization', 'openai-project', 'cookie', 'x-forwarded-for', 'forwarded']) t.equal(up?.headers[h], undefined, `${h} not forwarded`)

  // an absolute-form request target is routed by its path, like the origin form
  const status = await new Promise<number>((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: `http://127.0.0.1:${port}/passthrough/mock-openai/chat/completions`, headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' } }, (r) => { r.resume(); resolve(r.statusCode ?? 0) })
    req.on('error', reject)
    req.end(JSON.stringify(chatBody()))
  })
  t.equal(status, 200)
  t.equal(mock.requests.at(-1)?.path, '/v1/chat/completions', 'under the provider\'s base path, as an origin-form target')
})

t.test('a provider\'s key echoed in its error never reaches the client, on any route', async (t) => {
  const g = await gateway(t)
  const echo = (status: number): void => {
    g.mock.script((rec) => ({ status, body: rec.path.startsWith('/v1/messages') ? { type: 'error', error: { type: 'authentication_error', message: `invalid x-api-key: ${UPSTREAM_ANTHROPIC_KEY}` } } : { error: { message: `Incorrect API key provided: ${UPSTREAM_OPENAI_KEY}.`, type: 'invalid_request_error', code: 'invalid_api_key' } }, headers: { 'x-debug-key': rec.path.startsWith('/v1/messages') ? UPSTREAM_ANTHROPIC_KEY : UPSTREAM_OPENAI_KEY } }))
  }
  echo(401)
  const answers = [
    await post(`${g.base}/v1/chat/completions`, { ...chatBody(), model: 'openai/gpt-test' }),
    await post(`${g.base}/v1/messages`, { model: 'anthropic/claude-test', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }),
    await post(`${g.base}/passthrough/mock-openai/chat/completions`, chatBody()),
    await post(`${g.base}/passthrough/mock-messages/v1/messages`, { model: 'claude-upstream-name', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }, { 'x-api-key': KEY_A })
  ]
  for (const res of answers) {
    t.equal(res.status, 401, 'the provider\'s status kept')
    const text = await res.text()
    t.notOk(text.includes(UPSTREAM_OPENAI_KEY) || text.includes(UPSTREAM_ANTHROPIC_KEY), `masked: ${text}`)
    t.match(text, /\[REDACTED\]/)
    t.notOk(JSON.stringify([...res.headers]).includes(UPSTREAM_OPENAI_KEY) || JSON.stringify([...res.headers]).includes(UPSTREAM_ANTHROPIC_KEY), 'nor in its headers')
  }
})
