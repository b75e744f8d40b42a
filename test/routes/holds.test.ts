import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { nanoToUsd } from '../../engine/kernel/money.js'
import { startMockUpstream, type MockUpstream, type RecordedRequest } from '../mock-upstream.js'
import { KEY_A, mockCatalogWithGemini, settled, testConfig } from '../helper.js'

// The balance's hold against what the upstream bills for the body it was sent, through the
// routes: output-limit fields, candidates, documents and inline media, server tools, and what
// an upstream reports. Prices of the mock catalog: $3 in, $15 out per million tokens (the hold
// takes every token at $15), context windows of 200,000 tokens.

type Json = Record<string, unknown>

const PARAMS = ['temperature', 'max_tokens', 'max_completion_tokens', 'n', 'tools', 'thinking', 'web_search_options']
const EXTRA = [
  { id: 'openai/gpt-wide', name: 'wide', provider: 'mock-openai', upstream_model: 'gpt-wide-up', context_length: 200000, architecture: { input_modalities: ['text'], output_modalities: ['text'] }, supported_parameters: PARAMS, pricing: { input: 3, output: 15 } },
  { id: 'google/gemini-wide', name: 'gwide', provider: 'mock-gemini', upstream_model: 'gemini-wide-up', context_length: 200000, architecture: { input_modalities: ['text'], output_modalities: ['text'] }, supported_parameters: PARAMS, pricing: { input: 3, output: 15 } },
  { id: 'openai/gpt-search', name: 'gsearch', provider: 'mock-openai', upstream_model: 'gpt-search-up', context_length: 200000, architecture: { input_modalities: ['text'], output_modalities: ['text'] }, supported_parameters: PARAMS, pricing: { input: 3, output: 15, server_tools: { web_search: 0.025 } } },
  { id: 'anthropic/claude-search', name: 'search', provider: 'mock-messages', upstream_model: 'claude-search-up', context_length: 200000, architecture: { input_modalities: ['text'], output_modalities: ['text'] }, supported_parameters: PARAMS, pricing: { input: 3, output: 15, server_tools: { web_search: 0.01 } } }
]

async function start (t: Test, balanceUsd: number, extra: Record<string, unknown> = {}) {
  const mock: MockUpstream = await startMockUpstream()
  const catalog = mockCatalogWithGemini(mock, EXTRA)
  const providers = (catalog.providers as Json[]).map((p) => ({ ...p, passthrough: true }))
  const tenants = [{ org: 'acme', balance_usd: balanceUsd, projects: [{ id: 'web', keys: [{ key: KEY_A, passthrough: ['mock-openai', 'mock-messages', 'mock-gemini'] }] }] }]
  const app: FastifyInstance = await buildApp(testConfig({ ...catalog, providers, tenants, plugins: [{ name: 'auth' }, { name: 'balance' }, { name: 'usage' }], ...extra }))
  t.teardown(async () => { await app.close(); await mock.close() })
  const post = async (url: string, body: unknown) => await app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, payload: JSON.stringify(body) })
  const org = async () => { await settled(); await app.gateway.store.flush(); return (await app.gateway.store.orgs.get('acme'))! }
  return { app, mock, post, org }
}

/** A chat answer whose usage is the most the request let the upstream bill: every candidate at its output limit. */
const billsTheMost = (req: RecordedRequest) => {
  const b = req.body as Json
  const out = Math.max(Number(b.max_tokens ?? 0), Number(b.max_completion_tokens ?? 0)) * Number(b.n ?? 1)
  return { body: { id: 'c', object: 'chat.completion', created: 1, model: 'x', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'length' }], usage: { prompt_tokens: 10, completion_tokens: out, total_tokens: out + 10 } } }
}

t.test('ten parallel calls with max_completion_tokens 64000 and max_tokens 1 on $1: no spend left uncollected', async (t) => {
  const { mock, post, org } = await start(t, 1)
  mock.faults = { delayMs: 100 }
  mock.script(billsTheMost)
  const body = { model: 'openai/gpt-wide', max_tokens: 1, max_completion_tokens: 64000, messages: [{ role: 'user', content: 'write at length' }] }
  const results = await Promise.all(Array.from({ length: 10 }, async () => await post('/v1/chat/completions', body)))
  const ok = results.filter((r) => r.statusCode === 200).length
  t.equal(ok, 1, 'the balance covers one such call, held whole')
  t.equal(results.filter((r) => r.statusCode === 402).length, 9)
  const sent = mock.requests.map((r) => (r.body as Json).max_completion_tokens)
  t.same(sent, [64000], 'what was held for is what went upstream')
  const o = await org()
  t.equal(o.uncollected_nano, 0, 'nothing charged beyond what the balance held')
  t.ok(o.balance_nano >= 0)
})

t.test('n: 128 on pass-through and candidateCount: 8 on Gemini are held for every answer', async (t) => {
  const { mock, post } = await start(t, 1)
  mock.script(billsTheMost)
  // 128 answers of 1,000 tokens: $1.92
  const pt = await post('/passthrough/mock-openai/chat/completions', { model: 'gpt-wide-up', n: 128, max_tokens: 1000, messages: [{ role: 'user', content: 'hi' }] })
  t.equal(pt.statusCode, 402, pt.body)
  t.equal((await post('/passthrough/mock-openai/chat/completions', { model: 'gpt-wide-up', n: 2, max_tokens: 1000, messages: [{ role: 'user', content: 'hi' }] })).statusCode, 200, 'two fit')
  mock.script(null)
  // 8 candidates of 10,000 tokens: $1.20
  const g = await post('/v1beta/models/google/gemini-wide:generateContent', { contents: [{ role: 'user', parts: [{ text: 'hi' }] }], generationConfig: { candidateCount: 8, maxOutputTokens: 10000 } })
  t.equal(g.statusCode, 402, g.body)
  t.equal(mock.requests.filter((r) => r.path.includes('gemini')).length, 0, 'nothing reached Gemini')
  t.equal((await post('/v1beta/models/google/gemini-wide:generateContent', { contents: [{ role: 'user', parts: [{ text: 'hi' }] }], generationConfig: { candidateCount: 2, maxOutputTokens: 10000 } })).statusCode, 200, 'two fit')
  t.equal(((mock.requests.at(-1)?.body as Json).generationConfig as Json).candidateCount, 2, 'and two were asked for upstream')
})

t.test('documents, PDFs and inline media are held for what they can cost', async (t) => {
  const { mock, post } = await start(t, 1)
  // 1.08M characters of a plain-text document: held up to the context window, $3
  const doc = { type: 'document', source: { type: 'text', media_type: 'text/plain', data: 'word '.repeat(216_000) } }
  const m = await post('/v1/messages', { model: 'anthropic/claude-test', max_tokens: 10, messages: [{ role: 'user', content: [doc, { type: 'text', text: 'summarize' }] }] })
  t.equal(m.statusCode, 402, m.body)
  t.equal(m.json().error.type, 'billing_error')
  const pdf = { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0xLjQKJcfs' } }
  t.equal((await post('/v1/messages', { model: 'anthropic/claude-test', max_tokens: 10, messages: [{ role: 'user', content: [pdf] }] })).statusCode, 402, 'a PDF: its pages cannot be read from its bytes, the context window is held')
  const audio = { inlineData: { mimeType: 'application/pdf', data: 'JVBERi0xLjQKJcfs' } }
  t.equal((await post('/v1beta/models/google/gemini-test:generateContent', { contents: [{ role: 'user', parts: [audio] }], generationConfig: { maxOutputTokens: 10 } })).statusCode, 402, 'Gemini inline data that is no image')
  t.equal(mock.requests.length, 0, 'none reached a provider')
  // dense script: 60,000 CJK characters are 180,000 bytes, $2.70 at most
  const cjk = await post('/v1/chat/completions', { model: 'openai/gpt-wide', max_tokens: 10, messages: [{ role: 'user', content: '鬱'.repeat(60_000) }] })
  t.equal(cjk.statusCode, 402, 'CJK held by its bytes')
  t.equal((await post('/v1/chat/completions', { model: 'openai/gpt-wide', max_tokens: 10, messages: [{ role: 'user', content: '鬱'.repeat(1000) }] })).statusCode, 200)
})

t.test('server tools: refused unless priced; held at max_uses × price and billed from the reported uses', async (t) => {
  const { app, mock, post, org } = await start(t, 1)
  const search = { type: 'web_search_20250305', name: 'web_search', max_uses: 100 }
  const unpriced = await post('/v1/messages', { model: 'anthropic/claude-test', max_tokens: 10, tools: [search], messages: [{ role: 'user', content: 'news?' }] })
  t.equal(unpriced.statusCode, 400)
  t.match(unpriced.json(), { type: 'error', error: { type: 'invalid_request_error' } })
  t.match(unpriced.json().error.message, /web_search/)
  const pt = await post('/passthrough/mock-messages/v1/messages', { model: 'claude-upstream-name', max_tokens: 10, tools: [search], messages: [{ role: 'user', content: 'news?' }] })
  t.equal(pt.statusCode, 400, 'on pass-through too')
  const gemini = await post('/v1beta/models/google/gemini-test:generateContent', { contents: [{ role: 'user', parts: [{ text: 'news?' }] }], tools: [{ googleSearch: {} }] })
  t.equal(gemini.statusCode, 400, 'Gemini\'s googleSearch')
  t.equal(gemini.json().error.code, 400)
  t.equal(mock.requests.length, 0, 'nothing was sent')

  // priced at $0.01 a search: 100 searches hold $1 besides the tokens, more than the balance
  t.equal((await post('/v1/messages', { model: 'anthropic/claude-search', max_tokens: 10, tools: [search], messages: [{ role: 'user', content: 'news?' }] })).statusCode, 402)
  await app.gateway.store.orgs.credit('acme', 10_000_000_000)
  mock.script(() => ({ body: { id: 'msg_1', type: 'message', role: 'assistant', model: 'claude-search-up', content: [{ type: 'text', text: 'found' }], stop_reason: 'end_turn', usage: { input_tokens: 100, output_tokens: 10, server_tool_use: { web_search_requests: 100 } } } }))
  const res = await post('/v1/messages', { model: 'anthropic/claude-search', max_tokens: 10, tools: [search], messages: [{ role: 'user', content: 'news?' }] })
  t.equal(res.statusCode, 200, res.body)
  t.match((mock.requests.at(-1)?.body as Json).tools, [search], 'the tool went upstream')
  const o = await org()
  const [row] = await app.gateway.store.usage.page({}, 1)
  t.equal(row?.cost_detail?.tool_call, 1_000_000_000, 'the 100 searches at $0.01')
  t.equal(row?.cost_nano, 100 * 3000 + 10 * 15000 + 1_000_000_000, 'in the record\'s cost')
  t.equal(o.uncollected_nano, 0)
  const market = (await app.inject({ method: 'GET', url: '/console/api/models' })).json().data as Array<{ id: string, pricing: Json | null }>
  t.same(market.find((m) => m.id === 'anthropic/claude-search')?.pricing?.server_tools, { web_search: '0.01' }, 'the marketplace shows the price per search')
  // a search without max_uses goes up capped at the uses the hold counts
  await post('/v1/messages', { model: 'anthropic/claude-search', max_tokens: 10, tools: [{ type: 'web_search_20250305', name: 'web_search' }], messages: [{ role: 'user', content: 'news?' }] })
  t.match((mock.requests.at(-1)?.body as Json).tools, [{ type: 'web_search_20250305', max_uses: 20 }], 'capped at 20 uses')
})

t.test('Chat Completions\' web_search_options: one search a call, at an OpenAI provider', async (t) => {
  const { app, post } = await start(t, 5)
  const res = await post('/v1/chat/completions', { model: 'openai/gpt-search', max_tokens: 10, web_search_options: {}, messages: [{ role: 'user', content: 'news?' }] })
  t.equal(res.statusCode, 200, res.body)
  await settled()
  await app.gateway.store.flush()
  const [row] = await app.gateway.store.usage.page({}, 1)
  t.equal(row?.cost_detail?.tool_call, 25_000_000, 'the search at $0.025')
  const unpriced = await post('/v1/chat/completions', { model: 'openai/gpt-wide', max_tokens: 10, web_search_options: {}, messages: [{ role: 'user', content: 'news?' }] })
  t.equal(unpriced.statusCode, 400)
  t.equal(unpriced.json().error.code, 'server_tool_unpriced')
})

t.test('an upstream reporting 1e300 tokens is billed at the ceiling: every cost a finite decimal', async (t) => {
  const { app, mock, post, org } = await start(t, 1, { metrics: { enabled: true, auth: 'open' } })
  mock.script(() => ({ body: { id: 'c', object: 'chat.completion', created: 1, model: 'x', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 1e300, completion_tokens: 1e300, total_tokens: 2e300 } } }))
  const res = await post('/v1/chat/completions', { model: 'openai/gpt-wide', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
  t.equal(res.statusCode, 200)
  const o = await org()
  const [row] = await app.gateway.store.usage.page({}, 1)
  t.equal(row?.prompt_tokens, 100_000_000, 'the ceiling recorded')
  t.ok(Number.isSafeInteger(row?.cost_nano), `an exact cost: ${String(row?.cost_nano)}`)
  t.match(nanoToUsd(row?.cost_nano ?? 0), /^\d+(\.\d+)?$/)
  for (const v of [o.balance_nano, o.spent_nano, o.uncollected_nano]) t.ok(Number.isSafeInteger(v), `the organization's sums stay exact (${v})`)
  const [sum] = await app.gateway.store.usage.summary({}, ['org'])
  t.match(String(sum?.cost_nano), /^\d+$/, 'and the summary\'s')
  t.equal(sum?.cost_nano, BigInt(row?.cost_nano ?? 0))
  const metrics = await app.inject({ method: 'GET', url: '/metrics' })
  t.match(metrics.body, /modelgate_usage_clamped_total\{provider="mock-openai"\} 1/, 'counted in the metrics')
})
