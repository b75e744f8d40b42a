import t, { type Test } from 'tap'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import { GoogleGenAI, type GenerateContentResponse } from '@google/genai'
import { buildApp } from '../../app.js'
import { KEY_A, settled, testConfig } from '../helper.js'
import { EventStreamParser } from '../../engine/protocols/converse/index.js'
import { promptTokensOf, startMockBedrock, TEST_KEYS } from '../mock-bedrock.js'

// The gateway in front of a local Bedrock Runtime (test/mock-bedrock.ts, proved by AWS's own
// SDK in mock-bedrock.test.ts, which verifies every call's SigV4 signature): a Converse model and
// an Anthropic model through InvokeModel, called by the openai, Anthropic and Google SDKs and the
// Responses API, JSON and streamed, billed exactly, cache reads and writes included; Bedrock's
// errors in each client's shape.

const CONVERSE_MODEL = 'amazon.nova-pro-v1:0'
const CLAUDE_MODEL = 'us.anthropic.claude-sonnet-4-5-20250929-v1:0'
const PRICE = { input: 3, cached_input: 0.3, output: 15, cache_write: 3.75, cache_write_1h: 6 }
// nano-dollars per token at PRICE (dollars per million tokens)
const NANO = { input: 3000, cached: 300, output: 15000, write: 3750, write1h: 6000 }

const model = (id: string, provider: string, upstream: string): Record<string, unknown> => ({
  id,
  name: id,
  provider,
  upstream_model: upstream,
  context_length: 200000,
  architecture: { input_modalities: ['text', 'image'], output_modalities: ['text'] },
  supported_parameters: ['temperature', 'top_p', 'max_tokens', 'stop', 'stop_sequences', 'tools', 'tool_choice'],
  pricing: PRICE
})

async function start (t: Test, provider: Record<string, unknown> = {}) {
  const mock = await startMockBedrock({ apiKeys: ['bedrock-api-key-1'] })
  const aws = { access_key_id: 'AKIDTESTBEDROCK1', secret_access_key: TEST_KEYS.AKIDTESTBEDROCK1.secret }
  const app = await buildApp(testConfig({
    plugins: [{ name: 'auth' }, { name: 'usage' }],
    providers: [
      { id: 'bedrock', protocol: 'converse', platform: 'bedrock', region: 'us-east-1', base_url: mock.url, aws, passthrough: true, ...provider },
      { id: 'bedrock-claude', protocol: 'messages', platform: 'bedrock', region: 'us-east-1', base_url: mock.url, aws, ...provider }
    ],
    models: [model('bedrock/nova', 'bedrock', CONVERSE_MODEL), model('bedrock/claude', 'bedrock-claude', CLAUDE_MODEL)],
    tenants: [{ org: 'acme', balance_usd: 25, projects: [{ id: 'web', keys: [{ key: KEY_A, models: ['*'], passthrough: ['bedrock'] }] }] }]
  }))
  await app.listen({ host: '127.0.0.1', port: 0 })
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  t.teardown(async () => { await app.close(); await mock.close() })
  const rows = async () => { await settled(); await app.gateway.store.flush(); return await app.gateway.store.usage.page({}, 100) }
  return {
    app,
    mock,
    base,
    rows,
    openai: new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY_A, maxRetries: 0 }),
    anthropic: new Anthropic({ baseURL: base, apiKey: KEY_A, maxRetries: 0 }),
    google: new GoogleGenAI({ apiKey: KEY_A, httpOptions: { baseUrl: base } })
  }
}

/** The charge of a call with these counts, at PRICE. */
const charge = (input: number, output: number, read = 0, write = 0, write1h = 0): number =>
  input * NANO.input + read * NANO.cached + (write - write1h) * NANO.write + write1h * NANO.write1h + output * NANO.output

/** The newest usage record. */
const lastRow = async (rows: () => Promise<unknown[]>): Promise<Record<string, unknown>> => (await rows())[0] as Record<string, unknown>

t.test('openai SDK → Converse: JSON and streamed, signed, billed exactly with cache reads and 1h writes', async (t) => {
  const { openai, mock, rows } = await start(t)
  mock.cacheRead = 40
  mock.cacheWrite = 30
  mock.cacheWrite1h = 10
  const res = await openai.chat.completions.create({ model: 'bedrock/nova', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello heron' }], temperature: 0.5, stop: ['END'], seed: 3 })
  const up = mock.last()
  t.equal(up.auth, 'AKIDTESTBEDROCK1', 'signed with SigV4 by the provider\'s keys')
  t.equal(up.path, `/model/${encodeURIComponent(CONVERSE_MODEL)}/converse`)
  t.same(up.body.system, [{ text: 'Be brief.' }])
  t.same(up.body.inferenceConfig, { maxTokens: 4096, temperature: 0.5, stopSequences: ['END'] })
  t.equal(res.choices[0]?.message.content, 'Echo: Hello heron')
  const P = promptTokensOf(up.body)
  t.same(res.usage, { prompt_tokens: P + 70, completion_tokens: 3, total_tokens: P + 73, prompt_tokens_details: { cached_tokens: 40 } })
  const row = await lastRow(rows)
  t.match(row, { model: 'bedrock/nova', provider: 'bedrock', status: 'ok', prompt_tokens: P + 70, cached_input_tokens: 40, cache_write_tokens: 30, completion_tokens: 3 })
  t.equal(row.cost_nano, charge(P, 3, 40, 30, 10), 'billed: uncached, reads, 5m and 1h writes, output')
  t.same(row.dropped_params, ['seed'])

  const stream = await openai.chat.completions.create({ model: 'bedrock/nova', messages: [{ role: 'user', content: 'Stream a heron' }], stream: true, stream_options: { include_usage: true } })
  let text = ''
  let usage: OpenAI.CompletionUsage | undefined
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? ''
    if (chunk.usage !== null && chunk.usage !== undefined) usage = chunk.usage
  }
  t.equal(text, 'Echo: Stream a heron')
  t.equal(mock.last().path, `/model/${encodeURIComponent(CONVERSE_MODEL)}/converse-stream`)
  const P2 = promptTokensOf(mock.last().body)
  t.same(usage, { prompt_tokens: P2 + 70, completion_tokens: 4, total_tokens: P2 + 74, prompt_tokens_details: { cached_tokens: 40 } })
  const srow = await lastRow(rows)
  t.match(srow, { stream: 1, status: 'ok', completion_tokens: 4 })
  t.equal(srow.cost_nano, charge(P2, 4, 40, 30, 10))
})

t.test('tools through Converse, from the openai SDK, JSON and streamed', async (t) => {
  const { openai, mock } = await start(t)
  const tools = [{ type: 'function' as const, function: { name: 'get_weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }]
  const first = await openai.chat.completions.create({ model: 'bedrock/nova', messages: [{ role: 'user', content: 'use the tool' }], tools })
  t.equal(first.choices[0]?.finish_reason, 'tool_calls')
  const call = first.choices[0]?.message.tool_calls?.[0]
  t.match(call, { type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } })
  const second = await openai.chat.completions.create({
    model: 'bedrock/nova',
    tools,
    messages: [{ role: 'user', content: 'use the tool' }, first.choices[0]!.message, { role: 'tool', tool_call_id: call!.id, content: '18 C' }]
  })
  t.equal(second.choices[0]?.message.content, 'The tool returned: 18 C')
  t.same((mock.last().body.messages as unknown[]).length, 3)
  const stream = await openai.chat.completions.create({ model: 'bedrock/nova', messages: [{ role: 'user', content: 'use the tool' }], tools, stream: true })
  let args = ''
  let finish: string | null = null
  for await (const chunk of stream) {
    args += chunk.choices[0]?.delta.tool_calls?.[0]?.function?.arguments ?? ''
    finish = chunk.choices[0]?.finish_reason ?? finish
  }
  t.equal(args, '{"city":"Paris"}')
  t.equal(finish, 'tool_calls')
})

t.test('Anthropic SDK → Converse and → InvokeModel, JSON and streamed', async (t) => {
  const { anthropic, mock, rows } = await start(t)
  mock.cacheRead = 6
  mock.cacheWrite = 4
  for (const model of ['bedrock/nova', 'bedrock/claude']) {
    const msg = await anthropic.messages.create({ model, max_tokens: 100, system: [{ type: 'text', text: 'Sys', cache_control: { type: 'ephemeral' } }], messages: [{ role: 'user', content: 'Hi there' }] })
    t.equal((msg.content[0] as { text: string }).text, 'Echo: Hi there', model)
    const up = mock.last()
    const P = promptTokensOf(up.body)
    t.match(msg.usage, { input_tokens: P, cache_read_input_tokens: 6, cache_creation_input_tokens: 4, output_tokens: 3 })
    const row = await lastRow(rows)
    t.equal(row.cost_nano, charge(P, 3, 6, 4, 0), `${model}: billed exactly`)
    if (model === 'bedrock/claude') {
      t.equal(up.path, `/model/${encodeURIComponent(CLAUDE_MODEL)}/invoke`)
      t.equal(up.body.anthropic_version, 'bedrock-2023-05-31')
      t.notOk('model' in up.body, 'no model in an InvokeModel body')
    } else {
      t.same(up.body.system, [{ text: 'Sys' }, { cachePoint: { type: 'default' } }], 'the breakpoint as a cache point')
    }
    const stream = anthropic.messages.stream({ model, max_tokens: 100, messages: [{ role: 'user', content: 'Stream it' }] })
    const final = await stream.finalMessage()
    t.equal((final.content[0] as { text: string }).text, 'Echo: Stream it', `${model} streamed`)
    t.equal(final.stop_reason, 'end_turn')
    if (model === 'bedrock/claude') t.equal(mock.last().path, `/model/${encodeURIComponent(CLAUDE_MODEL)}/invoke-with-response-stream`)
    const srow = await lastRow(rows)
    t.equal(srow.cost_nano, charge(promptTokensOf(mock.last().body), 3, 6, 4, 0), `${model} streamed: billed exactly`)
  }
})

t.test('Google SDK and the Responses API → Converse and InvokeModel', async (t) => {
  const { google, openai } = await start(t)
  const textOf = (r: GenerateContentResponse): string => (r.candidates?.[0]?.content?.parts ?? []).map((p) => p.text ?? '').join('')
  for (const model of ['bedrock/nova', 'bedrock/claude']) {
    const whole = await google.models.generateContent({ model, contents: 'Tell me about herons' })
    t.equal(textOf(whole), 'Echo: Tell me about herons', `${model}: Gemini JSON`)
    const chunks: GenerateContentResponse[] = []
    for await (const c of await google.models.generateContentStream({ model, contents: 'Stream about herons' })) chunks.push(c)
    t.equal(chunks.map(textOf).join(''), 'Echo: Stream about herons', `${model}: Gemini stream`)
    const r = await openai.responses.create({ model, input: 'Respond heron' })
    t.equal(r.output_text, 'Echo: Respond heron', `${model}: Responses JSON`)
    const rs = await openai.responses.create({ model, input: 'Respond stream', stream: true })
    let text = ''
    for await (const ev of rs) if (ev.type === 'response.output_text.delta') text += ev.delta
    t.equal(text, 'Echo: Respond stream', `${model}: Responses stream`)
  }
})

t.test('Bedrock\'s errors in each client\'s shape: throttling 429, validation 400, an exception inside the stream', async (t) => {
  const { openai, anthropic, mock, rows } = await start(t)
  mock.failNext('ThrottlingException', 429, 'Too many requests, please wait before trying again.')
  await t.rejects(openai.chat.completions.create({ model: 'bedrock/nova', messages: [{ role: 'user', content: 'hi' }] }), { status: 429, message: /Too many requests/ })
  mock.failNext('ValidationException', 400, 'The model does not take that.')
  await t.rejects(anthropic.messages.create({ model: 'bedrock/nova', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }), { status: 400, message: /does not take/, error: { type: 'error', error: { type: 'invalid_request_error', message: 'The model does not take that.' } } })
  mock.failNext('ThrottlingException', 429, 'slow down')
  await t.rejects(anthropic.messages.create({ model: 'bedrock/claude', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] }), { status: 429, message: /slow down/, error: { error: { type: 'rate_limit_error' } } })

  mock.exceptionInStream = 'throttlingException'
  const stream = await openai.chat.completions.create({ model: 'bedrock/nova', messages: [{ role: 'user', content: 'stream then fail' }], stream: true })
  const err = await (async () => { for await (const c of stream) void c })().catch((e: unknown) => e)
  t.match(err, { message: /Too many requests/ }, 'the exception ends the stream as an OpenAI error event')
  const row = await lastRow(rows)
  t.equal(row.status, 'upstream_error')
  mock.exceptionInStream = 'modelStreamErrorException'
  const ms = anthropic.messages.stream({ model: 'bedrock/claude', max_tokens: 100, messages: [{ role: 'user', content: 'stream then fail' }] })
  await t.rejects(ms.finalMessage(), /Too many requests/, 'an InvokeModel stream\'s exception as a Messages error event')
})

t.test('the upstream refusing the gateway\'s credentials: 502 naming the provider, never the credential', async (t) => {
  const { openai, mock } = await start(t, { aws: { access_key_id: 'AKIDTESTBEDROCK1', secret_access_key: 'the-wrong-secret-value' } })
  const err = await openai.chat.completions.create({ model: 'bedrock/nova', messages: [{ role: 'user', content: 'hi' }] }).catch((e: unknown) => e) as { status: number, message: string }
  t.equal(err.status, 502)
  t.match(err.message, /bedrock/)
  t.notMatch(err.message, /the-wrong-secret-value|AKIDTESTBEDROCK1/)
  t.equal(mock.last().status, 403, 'the mock refused the signature')
})

t.test('session tokens, the environment\'s keys, a Bedrock API key', async (t) => {
  const session = await start(t, { aws: { access_key_id: 'ASIATESTSESSION1', secret_access_key: TEST_KEYS.ASIATESTSESSION1.secret, session_token: 'test-session-token' } })
  const r1 = await session.openai.chat.completions.create({ model: 'bedrock/nova', messages: [{ role: 'user', content: 'hi' }] })
  t.equal(r1.choices[0]?.message.content, 'Echo: hi')
  t.equal(session.mock.last().headers['x-amz-security-token'], 'test-session-token')

  const keyed = await start(t, { aws: undefined, api_key: 'bedrock-api-key-1' })
  await keyed.openai.chat.completions.create({ model: 'bedrock/nova', messages: [{ role: 'user', content: 'hi' }] })
  t.equal(keyed.mock.last().auth, 'bearer')
  t.equal(keyed.mock.last().headers['x-amz-date'], undefined, 'no signature with an API key')

  const saved = { ...process.env }
  t.teardown(() => { for (const k of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY', 'AWS_SESSION_TOKEN']) { if (saved[k] === undefined) delete process.env[k]; else process.env[k] = saved[k] } })
  process.env.AWS_ACCESS_KEY_ID = 'ASIATESTSESSION1'
  process.env.AWS_SECRET_ACCESS_KEY = TEST_KEYS.ASIATESTSESSION1.secret
  process.env.AWS_SESSION_TOKEN = 'test-session-token'
  const env = await start(t, { aws: undefined })
  await env.openai.chat.completions.create({ model: 'bedrock/nova', messages: [{ role: 'user', content: 'hi' }] })
  t.equal(env.mock.last().auth, 'ASIATESTSESSION1', 'the environment\'s keys, read at start')
})

t.test('pass-through to Bedrock, signed by the gateway; the model in the path granted and billed', async (t) => {
  const { base, mock, rows } = await start(t)
  const res = await fetch(`${base}/passthrough/bedrock/model/${encodeURIComponent(CONVERSE_MODEL)}/converse`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' },
    body: JSON.stringify({ messages: [{ role: 'user', content: [{ text: 'through' }] }] })
  })
  t.equal(res.status, 200, await res.clone().text())
  const body = await res.json() as { output: { message: { content: Array<{ text: string }> } } }
  t.equal(body.output.message.content[0]?.text, 'Echo: through')
  t.equal(mock.last().auth, 'AKIDTESTBEDROCK1', 'signed by the gateway')
  const row = await lastRow(rows)
  t.match(row, { endpoint: 'passthrough', model: 'bedrock/nova', provider: 'bedrock', status: 'ok' })
  t.equal(row.cost_nano, charge(promptTokensOf(mock.last().body), 2))

  // the model id with its colon as sent, and an event stream relayed byte for byte, metered
  mock.cacheRead = 3
  const streamed = await fetch(`${base}/passthrough/bedrock/model/${CONVERSE_MODEL}/converse-stream`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json', 'x-amz-date': '20200101T000000Z', 'x-amz-security-token': 'client-token' },
    body: JSON.stringify({ messages: [{ role: 'user', content: [{ text: 'stream through' }] }] })
  })
  t.equal(streamed.status, 200)
  t.equal(streamed.headers.get('content-type'), 'application/vnd.amazon.eventstream')
  const bytes = Buffer.from(await streamed.arrayBuffer())
  const frames = new EventStreamParser().push(bytes)
  t.same(frames.map((f) => f.event), ['messageStart', 'contentBlockDelta', 'contentBlockDelta', 'contentBlockDelta', 'contentBlockStop', 'messageStop', 'metadata'], 'the event stream as Bedrock sent it')
  t.equal(mock.last().auth, 'AKIDTESTBEDROCK1', 'the client\'s own x-amz headers left out, the gateway\'s signature in')
  const srow = await lastRow(rows)
  t.match(srow, { endpoint: 'passthrough', model: 'bedrock/nova', stream: 1, status: 'ok', cached_input_tokens: 3, completion_tokens: 3 })
  t.equal(srow.cost_nano, charge(promptTokensOf(mock.last().body), 3, 3))

  // a model the key is not granted, or not in the catalog: refused, nothing sent
  const before = mock.requests.length
  const unknown = await fetch(`${base}/passthrough/bedrock/model/meta.llama3-70b-instruct-v1:0/converse`, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: '{"messages":[]}' })
  t.equal(unknown.status, 404)
  const encoded = await fetch(`${base}/passthrough/bedrock/model/amazon.nova-pro-v1%2F0/converse`, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}` }, body: '{}' })
  t.equal(encoded.status, 400, 'percent-encoding other than a colon\'s is refused')
  t.equal(mock.requests.length, before)
})
