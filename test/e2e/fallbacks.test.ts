import t, { type Test } from 'tap'
import { FakeClock, mockCatalogWithGemini, testConfig, UPSTREAM_OPENAI_KEY } from '../helper.js'
import { startMockUpstream, type CannedAnswer, type MockUpstream, type RecordedRequest } from '../mock-upstream.js'
import type { UsageRow } from '../../engine/store/types.js'
import type { FastifyInstance } from 'fastify'

// Aliases and fallbacks across models (docs/configuration.md): on every client protocol, streamed
// and not, each class of failure moves the call to the next model before the client has a byte;
// a key never reaches a model it is not granted (an alias's targets aside); the charge is at the
// answering model's prices; a prompt the gateway counts past a model's context goes to the bigger
// model without the smaller one being called; retries honour Retry-After on a fake clock.

const KEY_ALL = 'mg-test-key-all-0123456789abcdef'
const KEY_SMALL = 'mg-test-key-small-0123456789abcd'
const ADMIN = 'admin-token-for-the-fallback-tests'

const ALL = ['rate_limited', 'unavailable', 'timeout', 'content_filtered'] as const

function models (mock: MockUpstream): Record<string, unknown> {
  const base = mockCatalogWithGemini(mock)
  const m = (id: string, provider: string | string[], upstream: string, input: number, output: number, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    id,
    name: id,
    provider,
    upstream_model: upstream,
    context_length: 200000,
    architecture: { input_modalities: ['text'], output_modalities: ['text'] },
    supported_parameters: ['temperature', 'max_tokens', 'stop'],
    pricing: { input, output },
    ...extra
  })
  return {
    providers: [...base.providers as unknown[], { id: 'mock-openai-b', protocol: 'openai', base_url: mock.openaiBaseUrl, api_key: 'sk-second-account' }],
    models: [
      // the small models: a context of 100 tokens (400 characters), fallbacks by class
      m('small/chat', 'mock-openai', 'small-up', 1, 2, {
        context_length: 100,
        fallbacks: [{ models: ['big/claude'], on: [...ALL] }, { models: ['big/chat'], on: ['context_length'] }]
      }),
      m('small/claude', 'mock-messages', 'small-claude-up', 1, 2, { context_length: 100, fallbacks: [{ models: ['big/chat'], on: ['context_length', 'rate_limited'] }] }),
      m('small/gemini', 'mock-gemini', 'small-gemini-up', 1, 2, { context_length: 100, fallbacks: [{ models: ['big/chat'], on: ['context_length', 'unavailable'] }] }),
      m('big/claude', 'mock-messages', 'big-claude-up', 3, 15),
      m('big/chat', 'mock-openai', 'big-up', 5, 20),
      // two accounts of one model: a 429 of the first moves on to the second
      m('two/chat', ['mock-openai', 'mock-openai-b'], 'two-up', 1, 2),
      { id: 'smart', name: 'Smart', alias_of: ['small/chat', 'big/chat'] }
    ]
  }
}

interface Gw { app: FastifyInstance, mock: MockUpstream, base: string, clock: FakeClock, rows: () => Promise<UsageRow[]> }

async function gateway (t: Test, extra: Record<string, unknown> = {}): Promise<Gw> {
  const mock = await startMockUpstream()
  const clock = new FakeClock(Date.now())
  const { buildApp } = await import('../../app.js')
  const app = await buildApp(testConfig({
    ...models(mock),
    server: { request_timeout_s: 0.5 },
    plugins: [{ name: 'auth' }, { name: 'balance' }, { name: 'usage' }, { name: 'diagnostics' }],
    admin: { token: ADMIN },
    upstream: { breaker: { failures: 1_000_000 }, retry: { attempts: 0, backoff_ms: 1 } },
    tenants: [{
      org: 'acme',
      balance_usd: 25,
      projects: [{ id: 'web', keys: [{ key: KEY_ALL, models: ['*'] }, { key: KEY_SMALL, models: ['small/*', 'two/*', 'smart'] }] }]
    }],
    ...extra
  }), { logger: false, clock })
  await app.listen({ host: '127.0.0.1', port: 0 })
  const port = (app.server.address() as { port: number }).port
  t.teardown(async () => { await app.close(); await mock.close() })
  return { app, mock, clock, base: `http://127.0.0.1:${port}`, rows: async () => await app.gateway.store.usage.page({}, 100) }
}

const upstreamModelOf = (req: RecordedRequest): string => {
  const gem = /^\/v1beta\/models\/([^:]+):/.exec(req.path)
  if (gem !== null) return gem[1] as string
  return typeof req.body === 'object' ? String(req.body.model) : ''
}

/** The upstream models the mock was asked for, in order. */
const asked = (mock: MockUpstream): string[] => mock.requests.map(upstreamModelOf)

type Client = 'chat' | 'messages' | 'responses' | 'gemini'
const CLIENTS: Client[] = ['chat', 'messages', 'responses', 'gemini']

async function call (gw: Gw, client: Client, model: string, stream: boolean, opts: { key?: string, prompt?: string } = {}): Promise<{ status: number, text: string, headers: Headers }> {
  const prompt = opts.prompt ?? 'say hello'
  const key = opts.key ?? KEY_ALL
  let url: string
  let body: unknown
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (client === 'gemini') {
    url = `${gw.base}/v1beta/models/${model}:${stream ? 'streamGenerateContent?alt=sse' : 'generateContent'}`
    body = { contents: [{ role: 'user', parts: [{ text: prompt }] }], generationConfig: { maxOutputTokens: 64 } }
    headers['x-goog-api-key'] = key
  } else {
    headers.authorization = `Bearer ${key}`
    if (client === 'chat') { url = `${gw.base}/v1/chat/completions`; body = { model, stream, max_tokens: 64, messages: [{ role: 'user', content: prompt }] } } else if (client === 'messages') { url = `${gw.base}/v1/messages`; body = { model, stream, max_tokens: 64, messages: [{ role: 'user', content: prompt }] } } else { url = `${gw.base}/v1/responses`; body = { model, stream, max_output_tokens: 64, input: prompt } }
  }
  const res = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) })
  return { status: res.status, text: await res.text(), headers: res.headers }
}

const rowOf = async (gw: Gw, trace: string | null): Promise<UsageRow | undefined> => (await gw.rows()).find((r) => r.trace_id === trace)

// how the small openai model fails, for each class
const FAILURES: Record<typeof ALL[number], CannedAnswer> = {
  rate_limited: { status: 429, body: { error: { message: 'Rate limit reached', type: 'requests', code: 'rate_limit_exceeded' } } },
  unavailable: { status: 503, body: { error: { message: 'overloaded', type: 'server_error', code: null } } },
  timeout: { status: 200 },
  content_filtered: { status: 400, body: { error: { message: 'The response was filtered', type: null, code: 'content_filter', param: 'prompt' } } }
}

t.test('each class moves the call on to the next model, on every client protocol, streamed and not, at the answering model\'s prices', async (t) => {
  const gw = await gateway(t)
  const combos = CLIENTS.flatMap((client) => [false, true].map((stream) => ({ client, stream })))
  for (const why of ALL) {
    gw.mock.reset()
    if (why === 'timeout') gw.mock.faults = { hang: { path: '/v1/chat/completions' } }
    else gw.mock.script((req) => upstreamModelOf(req) === 'small-up' ? FAILURES[why] : undefined)
    // the eight calls of a class at once (a timeout's wait is then paid once), each with a prompt
    // of its own by which its upstream requests are told from the others'
    const answers = await Promise.all(combos.map(async ({ client, stream }) => await call(gw, client, 'small/chat', stream, { prompt: `say hello (${why} ${client} ${String(stream)})` })))
    for (const [i, { client, stream }] of combos.entries()) {
      const what = `${why}, ${client}${stream ? ', streamed' : ''}`
      const res = answers[i] as Awaited<ReturnType<typeof call>>
      const marker = `(${why} ${client} ${String(stream)})`
      t.equal(res.status, 200, `${what}: answered (${res.text.slice(0, 200)})`)
      t.same(gw.mock.requests.filter((r) => JSON.stringify(r.body).includes(marker)).map(upstreamModelOf), ['small-up', 'big-claude-up'], `${what}: the small model, then its fallback`)
      t.equal(res.headers.get('x-svc-model'), 'big/claude', `${what}: {prefix}Model names the model that answered`)
      t.equal(res.headers.get('x-svc-fallback'), `small/chat:${why}`, `${what}: {prefix}Fallback says what was tried and why`)
      // a Messages answer from a Messages provider comes back as the provider wrote it: its own name of the model
      if (!stream && client !== 'gemini') t.equal(JSON.parse(res.text).model, client === 'messages' ? 'big-claude-up' : 'big/claude', `${what}: the answer's model is the answering one`)
      const row = await rowOf(gw, res.headers.get('x-svc-trace-id'))
      t.ok(row, `${what}: recorded`)
      if (row === undefined) continue
      t.equal(row.model, 'big/claude', `${what}: the record names the answering model`)
      t.equal(row.requested_model, 'small/chat', `${what}: and the requested one`)
      t.ok(row.prompt_tokens > 0 && row.completion_tokens > 0, `${what}: tokens billed`)
      t.equal(row.cost_nano, row.prompt_tokens * 3000 + row.completion_tokens * 15000, `${what}: charged at big/claude's prices ($3 / $15 per million)`)
      t.same(row.attempts.map((a) => [a.provider, a.upstream_model]), [['mock-openai', 'small-up'], ['mock-messages', 'big-claude-up']], `${what}: each tried model's attempts recorded`)
      t.same(row.fallbacks, [{ model: 'small/chat', why }], `${what}: the chain recorded`)
    }
    t.equal(gw.mock.requests.length, 16, `${why}: two upstream requests a call, no more`)
  }
  const metrics = await gw.app.gateway.metrics.getSingleMetricAsString('modelgate_model_fallbacks_total')
  for (const why of ALL) {
    t.match(metrics, new RegExp(`modelgate_model_fallbacks_total\\{requested_model="small/chat",answering_model="big/claude",class="${why}"\\} 8`), `metrics count the ${why} fallbacks by requested and answering model`)
  }
  // the admin API's usage records name both models and the chain
  const last = (await gw.rows())[0] as UsageRow
  const answer = await gw.app.inject({ method: 'GET', url: `/admin/v1/usage/${last.trace_id}`, headers: { authorization: `Bearer ${ADMIN}` } })
  t.match(answer.json(), { model: 'big/claude', requested_model: 'small/chat', fallbacks: [{ model: 'small/chat', why: 'content_filtered' }] }, 'GET /admin/v1/usage/{trace_id}')
  const list = await gw.app.inject({ method: 'GET', url: '/admin/v1/usage?limit=1', headers: { authorization: `Bearer ${ADMIN}` } })
  t.match(list.json(), { data: [{ model: 'big/claude', requested_model: 'small/chat' }] }, 'GET /admin/v1/usage')
})

t.test('no fallback once the client has a byte: the stream breaks, the next model is not called', async (t) => {
  const gw = await gateway(t)
  for (const client of CLIENTS) {
    gw.mock.reset()
    gw.mock.faults = { resetMidStream: { afterFrames: 1, path: '/v1/chat/completions' } }
    const res = await call(gw, client, 'small/chat', true)
    t.equal(res.status, 200, `${client}: the stream had begun`)
    t.same(asked(gw.mock), ['small-up'], `${client}: the fallback was never called`)
    t.equal(res.headers.get('x-svc-fallback'), null, `${client}: no fallback header`)
    const row = await rowOf(gw, res.headers.get('x-svc-trace-id'))
    t.equal(row?.model, 'small/chat', `${client}: recorded for the model that answered`)
    t.equal(row?.requested_model ?? null, null, `${client}: no other model requested`)
  }
})

t.test('a key without a fallback\'s grant never reaches it; an alias grants its own targets', async (t) => {
  const gw = await gateway(t)
  gw.mock.script((req) => upstreamModelOf(req) === 'small-up' ? FAILURES.rate_limited : undefined)
  for (const client of CLIENTS) {
    gw.mock.reset()
    gw.mock.script((req) => upstreamModelOf(req) === 'small-up' ? FAILURES.rate_limited : undefined)
    const res = await call(gw, client, 'small/chat', false, { key: KEY_SMALL })
    t.equal(res.status, 429, `${client}: the small model's 429 is the answer`)
    t.same(asked(gw.mock), ['small-up'], `${client}: big/claude (not granted) was never called`)
    gw.mock.reset()
    gw.mock.script((req) => upstreamModelOf(req) === 'small-up' ? FAILURES.unavailable : undefined)
    const alias = await call(gw, client, 'smart', false, { key: KEY_SMALL })
    t.equal(alias.status, 200, `${client}: the alias answered`)
    t.same(asked(gw.mock), ['small-up', 'big-up'], `${client}: through the alias, its second target (not granted by the key's globs)`)
    t.equal(alias.headers.get('x-svc-model'), 'big/chat', `${client}: the answering model`)
    const row = await rowOf(gw, alias.headers.get('x-svc-trace-id'))
    t.equal(row?.requested_model, 'smart', `${client}: the record names the alias`)
    t.equal(row?.model, 'big/chat', `${client}: and the model that answered`)
    if (row !== undefined) t.equal(row.cost_nano, row.prompt_tokens * 5000 + row.completion_tokens * 20000, `${client}: at big/chat's prices`)
  }
  // listed as its own entry, with its first target's fields
  const list = await (await fetch(`${gw.base}/v1/models`, { headers: { authorization: `Bearer ${KEY_SMALL}` } })).json() as { data: Array<{ id: string, name: string, context_length: number }> }
  const smart = list.data.find((m) => m.id === 'smart')
  t.same(smart && { name: smart.name, context_length: smart.context_length }, { name: 'Smart', context_length: 100 }, 'GET /v1/models lists the alias under its own id and name')
  t.notOk(list.data.some((m) => m.id === 'big/chat'), 'the alias\'s targets are not listed for a key not granted them')
})

t.test('a prompt the gateway counts past the context goes to the bigger model; the smaller is not called', async (t) => {
  const gw = await gateway(t)
  const long = 'word '.repeat(200)
  for (const client of CLIENTS) {
    for (const stream of [false, true]) {
      gw.mock.reset()
      const res = await call(gw, client, 'small/chat', stream, { prompt: long })
      t.equal(res.status, 200, `${client}${stream ? ' streamed' : ''}: answered`)
      t.same(asked(gw.mock), ['big-up'], `${client}${stream ? ' streamed' : ''}: only the bigger model was called`)
      t.equal(res.headers.get('x-svc-fallback'), 'small/chat:context_length', `${client}: the header says why`)
      const row = await rowOf(gw, res.headers.get('x-svc-trace-id'))
      if (row !== undefined) t.equal(row.cost_nano, row.prompt_tokens * 5000 + row.completion_tokens * 20000, `${client}: at big/chat's prices`)
    }
  }
})

t.test('the upstream\'s own context refusal, in each protocol\'s words, moves the call on', async (t) => {
  const gw = await gateway(t)
  const refusals: Array<[string, string, CannedAnswer]> = [
    ['small/chat', 'small-up', { status: 400, body: { error: { message: 'This model\'s maximum context length is 100 tokens.', type: 'invalid_request_error', code: 'context_length_exceeded', param: 'messages' } } }],
    ['small/claude', 'small-claude-up', { status: 400, body: { type: 'error', error: { type: 'invalid_request_error', message: 'prompt is too long: 210000 tokens > 200000 maximum' } } }],
    ['small/gemini', 'small-gemini-up', { status: 400, body: { error: { code: 400, message: 'The input token count (1200000) exceeds the maximum number of tokens allowed (1048576).', status: 'INVALID_ARGUMENT' } } }]
  ]
  for (const [model, upstream, refusal] of refusals) {
    gw.mock.reset()
    gw.mock.script((req) => upstreamModelOf(req) === upstream ? refusal : undefined)
    const res = await call(gw, 'chat', model, false)
    t.equal(res.status, 200, `${model}: answered`)
    t.same(asked(gw.mock), [upstream, 'big-up'], `${model}: refused for length, then the bigger model`)
    t.equal(res.headers.get('x-svc-fallback'), `${model}:context_length`, `${model}: classed context_length`)
  }
  // a 400 of another kind is the client's answer: no fallback
  gw.mock.reset()
  gw.mock.script((req) => upstreamModelOf(req) === 'small-up' ? { status: 400, body: { error: { message: 'bad temperature', type: 'invalid_request_error', code: 'invalid_value', param: 'temperature' } } } : undefined)
  const bad = await call(gw, 'chat', 'small/chat', false)
  t.equal(bad.status, 400, 'another 400 is kept')
  t.same(asked(gw.mock), ['small-up'], 'and nothing else is tried')
})

t.test('the balance holds the worst case over the candidates before the first is sent', async (t) => {
  // small/chat alone holds about $0.0003 for 64 output tokens; with big/claude and big/chat behind it, about $0.0025
  const gw = await gateway(t, {
    tenants: [{ org: 'acme', balance_usd: 0.001, projects: [{ id: 'web', keys: [{ key: KEY_ALL, models: ['*'] }, { key: KEY_SMALL, models: ['small/*'] }] }] }]
  })
  const all = await call(gw, 'chat', 'small/chat', false)
  t.equal(all.status, 402, 'a key that may reach the dearer fallbacks is held for them')
  t.same(asked(gw.mock), [], 'nothing was sent')
  const small = await call(gw, 'chat', 'small/chat', false, { key: KEY_SMALL })
  t.equal(small.status, 200, 'a key granted the small model alone is held for it alone')
})

t.test('retries: a 429 waits its Retry-After on the same provider (fake clock), then moves to the next provider; past max_wait_s at once', async (t) => {
  const gw = await gateway(t, { upstream: { breaker: { failures: 1_000_000 }, retry: { attempts: 0, backoff_ms: 10 }, retries: { attempts: 2, max_wait_s: 5 } } })
  const limited = (after: string): CannedAnswer => ({ status: 429, headers: { 'retry-after': after }, body: { error: { message: 'slow down', type: 'requests', code: 'rate_limit_exceeded' } } })
  // the first account answers 429 twice, then well
  let n = 0
  gw.mock.script((req) => req.apiKey === UPSTREAM_OPENAI_KEY && upstreamModelOf(req) === 'two-up' && n++ < 2 ? limited('3') : undefined)
  const started = Date.now()
  const res = await call(gw, 'chat', 'two/chat', false)
  t.equal(res.status, 200, 'answered after two retries')
  t.same(gw.clock.slept, [3000, 3000], 'each pause is the Retry-After asked for, on the fake clock')
  t.ok(Date.now() - started < 3000, 'no real seconds waited')
  t.same(gw.mock.requests.map((r) => r.apiKey), [UPSTREAM_OPENAI_KEY, UPSTREAM_OPENAI_KEY, UPSTREAM_OPENAI_KEY], 'all three on the first provider')
  // a 429 on every retry: then the model's next provider
  gw.mock.reset()
  gw.clock.slept.length = 0
  gw.mock.script((req) => req.apiKey === UPSTREAM_OPENAI_KEY ? limited('1') : undefined)
  const moved = await call(gw, 'chat', 'two/chat', false)
  t.equal(moved.status, 200, 'answered by the second provider')
  t.same(gw.mock.requests.map((r) => r.apiKey), [UPSTREAM_OPENAI_KEY, UPSTREAM_OPENAI_KEY, UPSTREAM_OPENAI_KEY, 'sk-second-account'], 'three times on the first (its retries), then the second')
  t.equal(moved.headers.get('x-svc-provider'), 'mock-openai-b', 'the provider that answered')
  // a Retry-After past max_wait_s: no wait, on to the next provider at once
  gw.mock.reset()
  gw.clock.slept.length = 0
  gw.mock.script((req) => req.apiKey === UPSTREAM_OPENAI_KEY ? limited('60') : undefined)
  const far = await call(gw, 'chat', 'two/chat', false)
  t.equal(far.status, 200, 'answered')
  t.same(gw.clock.slept, [], 'nothing waited')
  t.equal(gw.mock.requests.length, 2, 'one try each')
  // every provider answers 429: the model is rate limited, the client gets 429
  gw.mock.reset()
  gw.mock.script((req) => upstreamModelOf(req) === 'two-up' ? limited('60') : undefined)
  const both = await call(gw, 'chat', 'two/chat', false)
  t.equal(both.status, 429, 'a 429 when every provider answered 429')
  // a 503 is retried as well, with the doubling pause
  gw.mock.reset()
  gw.clock.slept.length = 0
  let m = 0
  gw.mock.script((req) => upstreamModelOf(req) === 'two-up' && m++ < 2 ? { status: 503, body: { error: { message: 'busy', type: 'server_error', code: null } } } : undefined)
  const busy = await call(gw, 'chat', 'two/chat', false)
  t.equal(busy.status, 200, 'a 503 retried')
  t.same(gw.clock.slept, [10, 20], 'the pause doubles from retry.backoff_ms')
})
