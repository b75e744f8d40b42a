import t, { type Test } from 'tap'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import { buildApp } from '../../app.js'
import { chargeOf } from '../../plugins/api/index.js'
import type { Json } from '../../plugins/api/index.js'
import { startMockUpstream, type MockUpstream } from '../mock-upstream.js'
import auth from '../../plugins/auth.js'
import cache from '../../plugins/cache.js'
import { bareGateway, build, FakeClock, KEY_A, KEY_OTHER_ORG, mockCatalog, sqliteOf, testConfig } from '../helper.js'

// The response cache plugin with the official SDKs over a real socket, against the mock upstream:
// misses and hits on chat, Messages and Responses, whole and streamed (an answer stored whole
// replays as a stream and the other way round), the scopes, the request directives, expiry on a
// fake clock, billing (a hit costs nothing, takes no quota or balance, and records what it
// saved), identical calls that miss together, what is never stored, and the metrics.

const KEY_A2 = 'mg-test-key-a2-0123456789abcdef'
const KEY_M = 'mg-test-key-m-0123456789abcdef'
const ADMIN = 'cache-admin-token-0123456789abcdef'

const TENANTS = [
  { org: 'acme', balance_usd: 25, projects: [{ id: 'web', keys: [{ key: KEY_A, name: 'a' }, { key: KEY_A2, name: 'a2' }] }, { id: 'mobile', keys: [{ key: KEY_M }] }] },
  { org: 'zeta', balance_usd: 25, projects: [{ id: 'app', keys: [{ key: KEY_OTHER_ORG }] }] }
]

interface Gw {
  mock: MockUpstream
  base: string
  clock: FakeClock
  app: Awaited<ReturnType<typeof buildApp>>
  /** The headers of the last answer a client made here received. */
  last: () => Headers
  openai: (key?: string, headers?: Record<string, string>) => OpenAI
  anthropic: (key?: string, headers?: Record<string, string>) => Anthropic
  post: (path: string, body: Json, headers?: Record<string, string>, key?: string) => Promise<{ status: number, headers: Headers, text: string, json: () => Json }>
}

const ON = { 'X-SVC-Cache': 'on' }

async function start (t: Test, cache: Record<string, unknown> = {}, opts: { tenants?: unknown[], plugins?: unknown[] } = {}): Promise<Gw> {
  const mock = await startMockUpstream()
  const clock = new FakeClock()
  const plugins = opts.plugins ?? [{ name: 'auth' }, { name: 'idempotency' }, { name: 'cache', options: cache }, { name: 'quota' }, { name: 'balance' }, { name: 'usage' }, { name: 'diagnostics' }]
  const app = await buildApp(testConfig({ ...mockCatalog(mock), admin: { token: ADMIN }, plugins, tenants: opts.tenants ?? TENANTS }), { logger: false, clock })
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { await app.close(); await mock.close() })
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  let lastHeaders = new Headers()
  const recording: typeof fetch = async (input, init) => {
    const res = await fetch(input, init)
    lastHeaders = res.headers
    return res
  }
  return {
    mock,
    base,
    clock,
    app,
    last: () => lastHeaders,
    openai: (key = KEY_A, headers = ON) => new OpenAI({ baseURL: `${base}/v1`, apiKey: key, maxRetries: 0, defaultHeaders: headers, fetch: recording }),
    anthropic: (key = KEY_A, headers = ON) => new Anthropic({ baseURL: base, apiKey: key, maxRetries: 0, defaultHeaders: headers, fetch: recording }),
    post: async (path, body, headers = ON, key = KEY_A) => {
      const res = await fetch(`${base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
      const text = await res.text()
      return { status: res.status, headers: res.headers, text, json: () => JSON.parse(text) as Json }
    }
  }
}

const chatBody = (content: string, extra: Json = {}): Json => ({ model: 'openai/gpt-test', messages: [{ role: 'user', content }], ...extra })

t.test('on a bare Fastify with the test gateway, behind auth: a miss, then the same answer as a hit, on both protocols', async (t) => {
  const gw = await bareGateway(t, [auth, cache])
  for (const [url, payload] of [
    ['/v1/chat/completions', { model: 'test/echo', messages: [{ role: 'user', content: 'hello' }] }],
    ['/v1/messages', { model: 'test/claude', max_tokens: 50, messages: [{ role: 'user', content: 'hello' }] }]
  ] as const) {
    const call = async () => await gw.app.inject({ method: 'POST', url, headers: { ...gw.auth, 'x-svc-cache': 'on' }, payload })
    const first = await call()
    t.equal(first.statusCode, 200)
    t.equal(first.headers['x-svc-cache'], 'miss', url)
    const second = await call()
    t.equal(second.headers['x-svc-cache'], 'hit', url)
    t.equal(second.body, first.body)
  }
})
const weather = { type: 'function' as const, function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer' } }, required: ['city'] } } }

t.test('chat: a whole answer, then a hit whole and replayed as a stream the SDK\'s helper rebuilds; a stream stored, then hit whole', async (t) => {
  const g = await start(t)
  const openai = g.openai()
  const req = { model: 'openai/gpt-test', messages: [{ role: 'user' as const, content: 'Tell me about the herons standing in the shallows at dawn, patient as posts' }] }
  const first = await openai.chat.completions.create(req)
  t.equal(g.last().get('x-svc-cache'), 'miss')
  t.equal(g.last().get('age'), null, 'no Age on a miss')
  const second = await openai.chat.completions.create(req)
  t.equal(g.last().get('x-svc-cache'), 'hit')
  t.equal(g.last().get('age'), '0')
  t.same(second, first, 'the same answer')
  t.equal(g.mock.requests.length, 1, 'the upstream was asked once')
  const streamed = await openai.chat.completions.stream({ ...req, stream_options: { include_usage: true } }).finalChatCompletion()
  t.equal(g.last().get('x-svc-cache'), 'hit', 'a streamed call hits the whole answer')
  t.equal(streamed.choices[0]?.message.content, first.choices[0]?.message.content)
  t.match(streamed.usage, { prompt_tokens: first.usage?.prompt_tokens, completion_tokens: first.usage?.completion_tokens }, 'the usage chunk it asked for')
  t.equal(g.mock.requests.length, 1)

  const tools = { model: 'openai/gpt-test', tools: [weather], messages: [{ role: 'user' as const, content: 'Please use the tool for Lyon' }] }
  const asked = await openai.chat.completions.stream(tools).finalChatCompletion()
  t.equal(g.last().get('x-svc-cache'), 'miss')
  t.equal(asked.choices[0]?.finish_reason, 'tool_calls')
  const whole = await openai.chat.completions.create(tools)
  t.equal(g.last().get('x-svc-cache'), 'hit', 'a whole call hits the answer a stream stored')
  t.equal(whole.choices[0]?.finish_reason, 'tool_calls')
  t.same(whole.choices[0]?.message.tool_calls, asked.choices[0]?.message.tool_calls, 'its tool calls, arguments joined')
  t.match(whole.usage, { prompt_tokens: Number, completion_tokens: Number }, 'and the usage of the call, though the stream did not carry it')
  t.equal(whole.usage?.completion_tokens, (await g.app.gateway.store.usage.page({}, 10)).find((r) => r.cache_hit === 0 && r.stream === 1)?.completion_tokens)
  const again = await openai.chat.completions.stream(tools).finalChatCompletion()
  t.same(again.choices[0]?.message.tool_calls, asked.choices[0]?.message.tool_calls, 'and replayed as a stream again')
  t.equal(g.mock.requests.length, 2, 'the upstream was asked once per distinct call')
})

t.test('Messages: thinking, text and a tool call streamed; hit whole and streamed, finalMessage() rebuilding the same message', async (t) => {
  const g = await start(t)
  const anthropic = g.anthropic()
  const req = {
    model: 'anthropic/claude-test',
    max_tokens: 2048,
    thinking: { type: 'enabled' as const, budget_tokens: 1024 },
    tools: [{ name: 'get_weather', description: 'Weather for a city', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] } }],
    messages: [{ role: 'user' as const, content: 'What is the weather in Lyon? use the tool' }]
  }
  const first = await anthropic.messages.stream(req).finalMessage()
  t.equal(g.last().get('x-svc-cache'), 'miss')
  t.same(first.content.map((b) => b.type), ['thinking', 'text', 'tool_use'], 'every kind of block')
  // what the SDK's stream helper adds to the message it rebuilds
  const plain = ({ parsed_output: _p, stop_details: _s, ...m }: Record<string, unknown>): Record<string, unknown> => m
  const whole = await anthropic.messages.create(req)
  t.equal(g.last().get('x-svc-cache'), 'hit')
  t.same(plain(whole as unknown as Record<string, unknown>), plain(first as unknown as Record<string, unknown>), 'the whole answer is the message the stream made')
  const streamed = await anthropic.messages.stream(req).finalMessage()
  t.equal(g.last().get('x-svc-cache'), 'hit')
  t.same(streamed, first, 'and replayed, the same message, the thinking\'s signature and the usage included')
  t.equal(g.mock.requests.length, 1)
})

t.test('Responses: a whole answer, hit replayed as the Responses stream finalResponse() reads; and the other way', async (t) => {
  const g = await start(t)
  const openai = g.openai()
  const whole = await openai.responses.create({ model: 'anthropic/claude-test', input: 'Name three birds of the marshes' })
  t.equal(g.last().get('x-svc-cache'), 'miss')
  const streamed = await openai.responses.stream({ model: 'anthropic/claude-test', input: 'Name three birds of the marshes' }).finalResponse()
  t.equal(g.last().get('x-svc-cache'), 'hit')
  t.equal(streamed.id, whole.id)
  t.equal(streamed.output_text, whole.output_text)
  const tools = [{ type: 'function' as const, name: 'get_weather', description: 'Weather', strict: false, parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }]
  const s = await openai.responses.stream({ model: 'openai/gpt-test', input: 'use the tool for Lyon', tools }).finalResponse()
  t.equal(g.last().get('x-svc-cache'), 'miss')
  const w = await openai.responses.create({ model: 'openai/gpt-test', input: 'use the tool for Lyon', tools })
  t.equal(g.last().get('x-svc-cache'), 'hit')
  // the SDK adds parsed_arguments to a streamed function call; the wire has none
  const wire = s.output.map((item) => {
    if (item.type !== 'function_call') return item
    const { parsed_arguments: _parsed, ...call } = item
    return call
  })
  t.same(w.output, wire, 'the function call the stream stored')
  t.equal(g.mock.requests.length, 2)
})

t.test('the key: the body in any key order, stream fields aside; another endpoint, model or body misses', async (t) => {
  const g = await start(t)
  const a = await g.post('/v1/chat/completions', { model: 'openai/gpt-test', max_tokens: 50, messages: [{ role: 'user', content: 'order' }] })
  t.equal(a.headers.get('x-svc-cache'), 'miss')
  const b = await g.post('/v1/chat/completions', { messages: [{ content: 'order', role: 'user' }], max_tokens: 50, model: 'openai/gpt-test', stream: false, stream_options: undefined })
  t.equal(b.headers.get('x-svc-cache'), 'hit', 'keys in another order')
  t.equal((await g.post('/v1/chat/completions', { model: 'openai/gpt-test', max_tokens: 51, messages: [{ role: 'user', content: 'order' }] })).headers.get('x-svc-cache'), 'miss', 'another parameter')
  t.equal((await g.post('/v1/chat/completions', { model: 'anthropic/claude-test', max_tokens: 50, messages: [{ role: 'user', content: 'order' }] })).headers.get('x-svc-cache'), 'miss', 'another model')
  t.equal((await g.post('/v1/messages', { model: 'openai/gpt-test', max_tokens: 50, messages: [{ role: 'user', content: 'order' }] })).headers.get('x-svc-cache'), 'miss', 'another endpoint')
  t.equal(g.mock.requests.length, 4)
})

t.test('a hit never crosses its scope: keys, projects and organizations', async (t) => {
  // acme/web holds KEY_A and KEY_A2; acme/mobile KEY_M; zeta/app KEY_OTHER_ORG
  const cases: Array<[string, Record<string, boolean>]> = [
    ['key', { [KEY_A2]: false, [KEY_M]: false, [KEY_OTHER_ORG]: false }],
    ['project', { [KEY_A2]: true, [KEY_M]: false, [KEY_OTHER_ORG]: false }],
    ['org', { [KEY_A2]: true, [KEY_M]: true, [KEY_OTHER_ORG]: false }]
  ]
  for (const [scope, hits] of cases) {
    const g = await start(t, { scope })
    const body = chatBody(`scoped ${scope}`)
    t.equal((await g.post('/v1/chat/completions', body, ON, KEY_A)).headers.get('x-svc-cache'), 'miss')
    t.equal((await g.post('/v1/chat/completions', body, ON, KEY_A)).headers.get('x-svc-cache'), 'hit', `${scope}: the same key hits`)
    for (const [key, hit] of Object.entries(hits)) {
      const res = await g.post('/v1/chat/completions', body, ON, key)
      t.equal(res.status, 200)
      t.equal(res.headers.get('x-svc-cache'), hit ? 'hit' : 'miss', `${scope} scope: ${key.slice(0, 13)}… ${hit ? 'hits' : 'misses'}`)
    }
    // each key that missed stored its own answer: it hits now, the others' answers untouched
    for (const key of Object.keys(hits)) t.equal((await g.post('/v1/chat/completions', body, ON, key)).headers.get('x-svc-cache'), 'hit')
    t.equal(g.mock.requests.length, 1 + Object.values(hits).filter((h) => !h).length, `${scope}: upstream once per scope`)
  }
})

t.test('opting in and out: the header, max-age, no-cache, no-store, off; opt_in false; a bad header value', async (t) => {
  const g = await start(t)
  const body = chatBody('directives')
  const res = await g.post('/v1/chat/completions', body, {})
  t.equal(res.headers.get('x-svc-cache'), 'bypass', 'opt-in: a call that does not ask is not cached')
  t.equal((await g.post('/v1/chat/completions', body, {})).headers.get('x-svc-cache'), 'bypass', 'nor looked up')
  t.equal((await g.post('/v1/chat/completions', body, { 'cache-control': 'max-age=60' })).headers.get('x-svc-cache'), 'miss', 'max-age opts in')
  t.equal((await g.post('/v1/chat/completions', body, { 'x-svc-cache': 'ON' })).headers.get('x-svc-cache'), 'hit', 'as does the header (any case)')
  t.equal((await g.post('/v1/chat/completions', body, { 'x-svc-cache': 'off', 'cache-control': 'max-age=60' })).headers.get('x-svc-cache'), 'bypass', 'off wins')
  t.equal((await g.post('/v1/chat/completions', body, { ...ON, 'cache-control': 'no-cache' })).headers.get('x-svc-cache'), 'bypass', 'no-cache: not looked up')
  t.equal(g.mock.requests.length, 5, 'the bypasses and the miss went upstream')
  t.equal((await g.post('/v1/chat/completions', body, ON)).headers.get('x-svc-cache'), 'hit', 'no-cache stored its answer anew')

  const other = chatBody('not stored')
  t.equal((await g.post('/v1/chat/completions', other, { ...ON, 'cache-control': 'no-store' })).headers.get('x-svc-cache'), 'miss', 'no-store: looked up')
  t.equal((await g.post('/v1/chat/completions', other, ON)).headers.get('x-svc-cache'), 'miss', 'and not stored')
  t.equal((await g.post('/v1/chat/completions', other, { ...ON, 'cache-control': 'no-cache, no-store' })).headers.get('x-svc-cache'), 'bypass')

  const bad = await g.post('/v1/chat/completions', body, { 'x-svc-cache': 'maybe' })
  t.equal(bad.status, 400)
  t.match(bad.json(), { error: { code: 'invalid_header', message: /X-SVC-Cache header must be "on" or "off"/ } })
  const badMessages = await g.post('/v1/messages', { model: 'anthropic/claude-test', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, { 'x-svc-cache': 'yes' })
  t.equal(badMessages.status, 400)
  t.match(badMessages.json(), { type: 'error', error: { type: 'invalid_request_error' } }, 'in the Messages shape on /v1/messages')

  const all = await start(t, { opt_in: false })
  t.equal((await all.post('/v1/chat/completions', body, {})).headers.get('x-svc-cache'), 'miss', 'opt_in false: every call')
  t.equal((await all.post('/v1/chat/completions', body, {})).headers.get('x-svc-cache'), 'hit')
  t.equal((await all.post('/v1/chat/completions', body, { 'x-svc-cache': 'off' })).headers.get('x-svc-cache'), 'bypass', 'but off')
  t.equal(all.mock.requests.length, 2)
})

for (const memory of [{}, { memory_mb: 0 }]) {
  t.test(`expiry on the gateway's clock: ttl_s, and max-age bounding both the time to live and the age taken (${memory.memory_mb === 0 ? 'no in-memory copy' : 'with the in-memory copy'})`, async (t) => {
    const g = await start(t, { ttl_s: 60, ...memory })
    const body = chatBody('expiring')
    t.equal((await g.post('/v1/chat/completions', body)).headers.get('x-svc-cache'), 'miss')
    g.clock.advance(59_000)
    const aged = await g.post('/v1/chat/completions', body)
    t.equal(aged.headers.get('x-svc-cache'), 'hit')
    t.equal(aged.headers.get('age'), '59', 'Age: seconds since it was stored')
    g.clock.advance(1_000)
    t.equal((await g.post('/v1/chat/completions', body)).headers.get('x-svc-cache'), 'miss', 'gone after ttl_s')
    t.equal(g.mock.requests.length, 2)

    const short = chatBody('max-age')
    t.equal((await g.post('/v1/chat/completions', short, { 'cache-control': 'max-age=10' })).headers.get('x-svc-cache'), 'miss')
    g.clock.advance(6_000)
    t.equal((await g.post('/v1/chat/completions', short, { 'cache-control': 'max-age=5' })).headers.get('x-svc-cache'), 'miss', 'too old for max-age=5: fetched again (and stored for 5 s)')
    g.clock.advance(4_000)
    t.equal((await g.post('/v1/chat/completions', short, ON)).headers.get('x-svc-cache'), 'hit', 'the new one, 4 s old')
    g.clock.advance(1_000)
    t.equal((await g.post('/v1/chat/completions', short, ON)).headers.get('x-svc-cache'), 'miss', 'stored for max-age=5 only')
    const long = chatBody('max-age above ttl_s')
    await g.post('/v1/chat/completions', long, { 'cache-control': 'max-age=3600' })
    g.clock.advance(60_000)
    t.equal((await g.post('/v1/chat/completions', long, { 'cache-control': 'max-age=3600' })).headers.get('x-svc-cache'), 'miss', 'never kept past ttl_s')
  })
}

t.test('the in-memory copy in front of the store: a hot answer is not read from the store again, until it expires; memory_mb 0 turns it off', async (t) => {
  const counted = (g: Gw): { n: number } => {
    const seen = { n: 0 }
    const cacheStore = g.app.gateway.store.cache
    const lookup = cacheStore.lookup.bind(cacheStore)
    cacheStore.lookup = (key, o) => { seen.n++; return lookup(key, o) }
    return seen
  }
  const g = await start(t, { ttl_s: 60 })
  const body = chatBody('hot answer')
  t.equal((await g.post('/v1/chat/completions', body)).headers.get('x-svc-cache'), 'miss')
  const lookups = counted(g)
  for (let i = 0; i < 3; i++) t.equal((await g.post('/v1/chat/completions', body)).headers.get('x-svc-cache'), 'hit')
  t.equal(lookups.n, 0, 'answered from this process\'s copy: the store was not asked')
  // gone from the store (as another process's eviction would do): this process's copy still
  // answers, as the answer it is, until its time to live ends
  sqliteOf(g.app).db.prepare('DELETE FROM response_cache').run()
  g.clock.advance(59_000)
  const aged = await g.post('/v1/chat/completions', body)
  t.same([aged.headers.get('x-svc-cache'), aged.headers.get('age')], ['hit', '59'])
  g.clock.advance(1_000)
  t.equal((await g.post('/v1/chat/completions', body)).headers.get('x-svc-cache'), 'miss', 'expired in memory as in the store')
  t.equal(lookups.n, 1)
  t.equal(g.mock.requests.length, 2)

  const off = await start(t, { memory_mb: 0 })
  await off.post('/v1/chat/completions', body)
  const offLookups = counted(off)
  t.equal((await off.post('/v1/chat/completions', body)).headers.get('x-svc-cache'), 'hit')
  t.equal((await off.post('/v1/chat/completions', body)).headers.get('x-svc-cache'), 'hit')
  t.equal(offLookups.n, 2, 'every hit read from the store')
  sqliteOf(off.app).db.prepare('DELETE FROM response_cache').run()
  t.equal((await off.post('/v1/chat/completions', body)).headers.get('x-svc-cache'), 'miss', 'gone from the store: gone')
})

t.test('billing: a hit costs nothing, takes no quota or balance, and is recorded with its tokens and what it saved', async (t) => {
  const tenants = [{ org: 'acme', balance_usd: 1, quota: { tokens: 40, per: 'day' }, projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
  const g = await start(t, {}, { tenants })
  const body = chatBody('A question whose answer is long enough to use up the quota of this organization today', { max_tokens: 40 })
  const miss = await g.post('/v1/chat/completions', body)
  t.equal(miss.status, 200)
  await g.app.gateway.store.flush()
  const [missRow] = await g.app.gateway.store.usage.page({}, 10)
  t.ok((missRow?.total_tokens ?? 0) > 40, `the miss used ${missRow?.total_tokens} tokens of a quota of 40`)
  const over = await g.post('/v1/chat/completions', chatBody('another question', { max_tokens: 40 }))
  t.equal(over.status, 429, 'the quota is used up for calls that go upstream')
  await g.app.gateway.store.flush()
  const org = await g.app.gateway.store.orgs.get('acme')
  for (let i = 0; i < 3; i++) {
    const hit = await g.post('/v1/chat/completions', body)
    t.equal(hit.status, 200, 'a hit is not refused by the quota it does not take')
    t.equal(hit.headers.get('x-svc-cache'), 'hit')
    t.equal(hit.text, miss.text)
  }
  await g.app.gateway.store.flush()
  t.same(await g.app.gateway.store.orgs.get('acme'), org, 'the balance: nothing held, nothing spent')
  const res = await fetch(`${g.base}/admin/v1/usage?limit=10`, { headers: { authorization: `Bearer ${ADMIN}` } })
  const records = (await res.json() as { data: Json[] }).data
  const hits = records.filter((r) => r.cache_hit === true)
  t.equal(hits.length, 3, 'each hit has its usage record')
  const price = g.app.gateway.catalog.get('openai/gpt-test')?.price ?? null
  const saved = chargeOf({ prompt_tokens: missRow?.prompt_tokens ?? 0, cached_input_tokens: missRow?.cached_input_tokens ?? 0, completion_tokens: missRow?.completion_tokens ?? 0, cache_creation_input_tokens: 0 }, price)
  t.equal(saved, missRow?.cost_nano, 'what the miss cost…')
  for (const r of hits) {
    t.match(r, { cost_usd: '0', status: 'ok', provider: null, prompt_tokens: missRow?.prompt_tokens, completion_tokens: missRow?.completion_tokens })
    t.equal(r.saved_usd, (saved / 1e9).toFixed(9).replace(/\.?0+$/, ''), '…is what each hit saved')
  }
  t.equal(g.mock.requests.length, 1)
})

t.test('a hit is a success: its Idempotency-Key refuses a repeat, as after any answer', async (t) => {
  const g = await start(t)
  const body = chatBody('answered once')
  t.equal((await g.post('/v1/chat/completions', body, { ...ON, 'idempotency-key': 'first' })).status, 200)
  const hit = await g.post('/v1/chat/completions', body, { ...ON, 'idempotency-key': 'second' })
  t.equal(hit.headers.get('x-svc-cache'), 'hit')
  const repeat = await g.post('/v1/chat/completions', body, { ...ON, 'idempotency-key': 'second' })
  t.equal(repeat.status, 409, 'the hit kept its key')
  t.match(repeat.json(), { error: { code: 'duplicate_request' } })
})

t.test('identical calls that miss together reach the provider once; when that one fails, the others go upstream', async (t) => {
  const g = await start(t)
  let release: () => void = () => {}
  const gate = new Promise<void>((resolve) => { release = resolve })
  g.mock.script(async () => { await gate; return undefined })
  const cache = sqliteOf(g.app).cache
  const body = chatBody('all at once')
  const calls = Array.from({ length: 6 }, async (_, i) => await g.post('/v1/chat/completions', i % 2 === 0 ? body : { ...body, stream: true }))
  await g.mock.waitForRequests(1)
  // every other call is waiting for the first one's answer
  for (let i = 0; i < 200 && cache.fills.waiters() < 5; i++) await new Promise((resolve) => setTimeout(resolve, 10))
  t.equal(cache.fills.waiters(), 5, 'five calls wait')
  release()
  const answers = await Promise.all(calls)
  t.same(answers.map((a) => a.status), [200, 200, 200, 200, 200, 200])
  t.equal(answers.filter((a) => a.headers.get('x-svc-cache') === 'hit').length, 5, 'five hits')
  t.equal(g.mock.requests.length, 1, 'one request upstream')
  const texts = answers.map((a, i) => i % 2 === 0 ? (a.json().choices as Json[])[0]?.message : null).filter((m) => m !== null)
  t.same(new Set(texts.map((m) => JSON.stringify(m))).size, 1, 'the same answer for all, streamed or not')

  g.mock.reset()
  let fail: () => void = () => {}
  const failGate = new Promise<void>((resolve) => { fail = resolve })
  g.mock.enqueue(async () => { await failGate; return { status: 400, body: { error: { message: 'bad luck', type: 'invalid_request_error', code: null } } } })
  const failing = chatBody('the first one fails')
  const more = Array.from({ length: 4 }, async () => await g.post('/v1/chat/completions', failing))
  await g.mock.waitForRequests(1)
  for (let i = 0; i < 200 && cache.fills.waiters() < 3; i++) await new Promise((resolve) => setTimeout(resolve, 10))
  t.equal(cache.fills.waiters(), 3)
  fail()
  const after = await Promise.all(more)
  t.same(after.map((a) => a.status).sort(), [200, 200, 200, 400], 'the one that filled failed; the others went upstream themselves')
  t.equal(g.mock.requests.length, 4)
})

t.test('never stored: failed, cut and refused calls, answers above max_entry_kb', async (t) => {
  const g = await start(t, { max_entry_kb: 1 })
  const cut = chatBody('cut short')
  g.mock.faults = { resetMidStream: { afterFrames: 2, times: 1 } }
  const broken = await g.post('/v1/chat/completions', { ...cut, stream: true })
  t.equal(broken.status, 200)
  t.match(broken.text, /"error"/, 'the stream ended with an error')
  t.equal((await g.post('/v1/chat/completions', cut)).headers.get('x-svc-cache'), 'miss', 'a cut stream was not stored')
  g.mock.faults = { status: { status: 500, times: 1 } }
  const failed = chatBody('failing')
  t.equal((await g.post('/v1/chat/completions', failed)).status, 502)
  t.equal((await g.post('/v1/chat/completions', failed)).headers.get('x-svc-cache'), 'miss', 'a failed call was not stored')
  const big = chatBody('word '.repeat(400), { max_tokens: 400 })
  const bigAnswer = { body: { id: 'chatcmpl-big', object: 'chat.completion', created: 1, model: 'x', choices: [{ index: 0, message: { role: 'assistant', content: 'long '.repeat(400) }, finish_reason: 'stop' }], usage: { prompt_tokens: 5, completion_tokens: 400, total_tokens: 405 } } }
  g.mock.enqueue(bigAnswer, bigAnswer)
  t.equal((await g.post('/v1/chat/completions', big)).headers.get('x-svc-cache'), 'miss')
  t.equal((await g.post('/v1/chat/completions', big)).headers.get('x-svc-cache'), 'miss', 'above max_entry_kb: not stored')
  t.equal(sqliteOf(g.app).cache.size(), 2, 'only the two complete answers that fit')
  const text = await g.app.gateway.metrics.getSingleMetricAsString('modelgate_cache_stores_total')
  t.match(text, /modelgate_cache_stores_total\{result="too_large"\} 2/)

  const tenants = [{ org: 'acme', balance_usd: 10, quota: { tokens: 1, per: 'day' }, projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
  const q = await start(t, {}, { tenants })
  t.equal((await q.post('/v1/chat/completions', chatBody('over quota'))).status, 200, 'this call uses the quota up')
  const refused = chatBody('refused by the quota after the lookup')
  t.equal((await q.post('/v1/chat/completions', refused)).status, 429)
  const fills = sqliteOf(q.app).db.prepare('SELECT count(*) AS n FROM response_cache_fills').get() as { n: number }
  t.equal(fills.n, 0, 'a call refused after it claimed the fill gave it up: nobody waits for it')
  t.equal(sqliteOf(q.app).cache.size(), 1, 'and nothing was stored for it')
})

t.test('bounded by max_entries; metrics count hits, misses and savings', async (t) => {
  const g = await start(t, { max_entries: 3 })
  for (let i = 0; i < 5; i++) await g.post('/v1/chat/completions', chatBody(`entry ${i}`))
  const kept = sqliteOf(g.app).cache
  t.equal(kept.size(), 3, 'at most max_entries')
  t.equal(kept.counted(), 3, 'the count the store keeps agrees')
  t.equal((await g.post('/v1/chat/completions', chatBody('entry 0'))).headers.get('x-svc-cache'), 'miss', 'the oldest went first')
  t.equal((await g.post('/v1/chat/completions', chatBody('entry 4'))).headers.get('x-svc-cache'), 'hit')
  t.equal((await g.post('/v1/chat/completions', chatBody('entry 4'))).headers.get('x-svc-cache'), 'hit')
  const metrics = g.app.gateway.metrics
  t.match(await metrics.getSingleMetricAsString('modelgate_cache_hits_total'), /modelgate_cache_hits_total\{model="openai\/gpt-test"\} 2/)
  t.match(await metrics.getSingleMetricAsString('modelgate_cache_misses_total'), /modelgate_cache_misses_total\{model="openai\/gpt-test"\} 6/)
  await g.app.gateway.store.flush()
  const saved = (await g.app.gateway.store.usage.page({}, 20)).filter((r) => r.cache_hit === 1).reduce((a, r) => a + r.saved_nano, 0)
  t.ok(saved > 0)
  const line = /modelgate_cache_saved_usd_total\{org="acme"\} ([\d.e-]+)/.exec(await metrics.getSingleMetricAsString('modelgate_cache_saved_usd_total'))
  t.ok(line !== null && Math.abs(Number(line[1]) - saved / 1e9) < 1e-12, 'savings in USD')
  t.equal(kept.sweep(g.clock.now() + 300_000), 3, 'the store\'s maintenance sweeps the expired ones')
  t.same([kept.size(), kept.counted()], [0, 0])
})

t.test('a cache listed after the quota and balance still answers, and the chain without auth is refused', async (t) => {
  const g = await start(t, {}, { plugins: [{ name: 'auth' }, { name: 'quota' }, { name: 'balance' }, { name: 'cache' }, { name: 'usage' }] })
  const body = chatBody('late in the chain')
  await g.post('/v1/chat/completions', body)
  t.equal((await g.post('/v1/chat/completions', body)).headers.get('x-svc-cache'), 'hit')
  await g.app.gateway.store.flush()
  t.equal((await g.app.gateway.store.orgs.get('acme'))?.held_nano, 0, 'the hold taken before the hit was released')
  await t.rejects(build(t, { plugins: [{ name: 'cache' }] }), { name: 'ConfigError', problems: ['plugins[0]: cache needs auth enabled before it'] })
})
