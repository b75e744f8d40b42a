import t, { type Test } from 'tap'
import OpenAI from 'openai'
import { nanoToUsd } from '../../engine/kernel/money.js'
import { promptTokens } from '../mock-upstream.js'
import { KEY_A, listeningGateway, mockCatalog } from '../helper.js'

// POST /v1/responses with the official openai SDK, over a real socket, against the mock upstream:
// a model of each upstream protocol, plain text, function calls (streamed and not), a tool round
// trip, max_output_tokens reached, exact usage and its record; native pass-through to a provider
// that serves the Responses API; the stateless refusals.

async function start (t: Test) {
  const gw = await listeningGateway(t, (mock) => {
    const catalog = mockCatalog(mock, [
      { id: 'openai/native', name: 'native', provider: 'mock-native', upstream_model: 'gpt-native', context_length: 100000, architecture: { input_modalities: ['text', 'image'], output_modalities: ['text'] }, supported_parameters: ['temperature', 'max_tokens', 'tools', 'tool_choice'], pricing: { input: 3, cached_input: 0.3, output: 15 } }
    ])
    const providers = [...(catalog.providers as unknown[]), { id: 'mock-native', protocol: 'openai', base_url: mock.openaiBaseUrl, api_key: 'sk-native', responses: true }]
    return { ...catalog, providers, plugins: [{ name: 'auth' }, { name: 'usage' }, { name: 'diagnostics' }] }
  })
  return { ...gw, openai: new OpenAI({ baseURL: `${gw.base}/v1`, apiKey: KEY_A, maxRetries: 0 }) }
}

const weather = { type: 'function' as const, name: 'get_weather', description: 'Weather for a city', strict: false, parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } }
const MODELS = ['openai/gpt-test', 'anthropic/claude-test']

t.test('responses.create: plain text from both upstream protocols, exact usage, its record and cost', async (t) => {
  const { openai, mock, rows } = await start(t)
  for (const model of MODELS) {
    mock.reset()
    mock.cachedTokens = 4
    const res = await openai.responses.create({ model, input: 'Hello there gateway', instructions: 'Be brief.' })
    t.equal(res.object, 'response')
    t.match(res.id, /^resp_/)
    t.equal(res.status, 'completed')
    t.equal(res.model, model, 'the catalog id')
    t.equal(res.output_text, 'Echo: Hello there gateway')
    t.hasStrict(res, { store: false }, 'nothing is stored')
    const up = mock.body()
    const input = promptTokens(up) + 4
    t.equal(res.usage?.input_tokens, input, `${model}: input counts cached tokens too`)
    t.equal(res.usage?.input_tokens_details.cached_tokens, 4)
    t.equal(res.usage?.output_tokens, 4, 'one token a word of the echo')
    t.equal(res.usage?.total_tokens, input + 4)
    if (model.startsWith('anthropic/')) t.equal(up.system, 'Be brief.', 'instructions → system')
    else t.same((up.messages as unknown[])[0], { role: 'system', content: 'Be brief.' }, 'instructions → a system message')
  }
  const records = (await rows()).reverse()
  t.equal(records.length, 2)
  for (const r of records) {
    t.equal(r.endpoint, 'responses')
    t.equal(r.status, 'ok')
    // (input − cached) × $3 + cached × $0.30 + output × $15 per million
    t.equal(r.cost_nano, (r.prompt_tokens - 4) * 3000 + 4 * 300 + r.completion_tokens * 15_000)
  }
  t.ok(records.every((r) => nanoToUsd(r.cost_nano) !== '0'))
})

t.test('responses.stream().finalResponse() accepts the stream from both upstream protocols', async (t) => {
  const { openai, rows } = await start(t)
  for (const model of MODELS) {
    const events: string[] = []
    const stream = openai.responses.stream({ model, input: [{ role: 'user', content: [{ type: 'input_text', text: 'stream me a few words' }] }] })
    stream.on('event', (e) => { events.push(e.type) })
    const final = await stream.finalResponse()
    t.equal(final.status, 'completed', model)
    t.equal(final.output_text, 'Echo: stream me a few words')
    t.equal(events[0], 'response.created')
    t.equal(events.at(-1), 'response.completed')
    t.ok(events.includes('response.output_text.delta'))
    t.ok((final.usage?.output_tokens ?? 0) > 0, 'usage in response.completed')
  }
  t.same((await rows()).map((r) => [r.endpoint, r.stream, r.status]), [['responses', 1, 'ok'], ['responses', 1, 'ok']])
})

t.test('function calls, streamed and not, and a tool round trip, on both upstream protocols', async (t) => {
  const { openai, mock } = await start(t)
  for (const model of MODELS) {
    const call = await openai.responses.create({ model, input: 'What is the weather in Paris? use the tool', tools: [weather] })
    const fc = call.output.find((o) => o.type === 'function_call')
    t.ok(fc !== undefined, `${model}: a function_call item`)
    if (fc?.type !== 'function_call') continue
    t.equal(fc.name, 'get_weather')
    t.match(fc.call_id, /\S/)
    t.type(JSON.parse(fc.arguments), 'object', 'arguments as a JSON string')

    const streamed = await openai.responses.stream({ model, input: 'Weather? use the tool', tools: [weather] }).finalResponse()
    const sfc = streamed.output.find((o) => o.type === 'function_call')
    t.ok(sfc?.type === 'function_call' && sfc.name === 'get_weather', `${model}: streamed function call`)

    const done = await openai.responses.create({
      model,
      tools: [weather],
      input: [
        { role: 'user', content: 'What is the weather in Paris?' },
        { type: 'function_call', call_id: fc.call_id, name: fc.name, arguments: fc.arguments },
        { type: 'function_call_output', call_id: fc.call_id, output: 'sunny and mild' }
      ]
    })
    t.equal(done.output_text, 'The tool returned: sunny and mild', `${model}: the result reached the upstream as a tool result`)
    const up = mock.body()
    if (model.startsWith('anthropic/')) t.match(JSON.stringify(up.messages), /"tool_result"/)
    else t.match(JSON.stringify(up.messages), /"role":"tool"/)
  }
})

t.test('max_output_tokens reached: status incomplete with the reason, streamed and not', async (t) => {
  const { openai } = await start(t)
  for (const model of MODELS) {
    const res = await openai.responses.create({ model, input: 'one two three four five six seven', max_output_tokens: 3 })
    t.equal(res.status, 'incomplete', model)
    t.same(res.incomplete_details, { reason: 'max_output_tokens' })
    const streamed = await openai.responses.stream({ model, input: 'one two three four five six seven', max_output_tokens: 3 }).finalResponse()
    t.equal(streamed.status, 'incomplete')
  }
})

t.test('a provider with native Responses support gets the body with only the model renamed', async (t) => {
  const { openai, mock, rows } = await start(t)
  const res = await openai.responses.create({ model: 'openai/native', input: 'Hello native' })
  t.equal(mock.requests.at(-1)?.path, '/v1/responses')
  t.equal(mock.body().model, 'gpt-native')
  t.equal(mock.body().input, 'Hello native')
  t.equal(mock.requests.at(-1)?.apiKey, 'sk-native', 'the provider\'s own key')
  t.equal(res.output_text, 'Echo: Hello native')
  const streamed = await openai.responses.stream({ model: 'openai/native', input: 'Hello native stream' }).finalResponse()
  t.equal(streamed.output_text, 'Echo: Hello native stream')
  const records = await rows()
  t.same(records.map((r) => [r.endpoint, r.provider]), [['responses', 'mock-native'], ['responses', 'mock-native']])
  t.ok(records.every((r) => r.prompt_tokens > 0 && r.completion_tokens > 0), 'usage read from the provider\'s answer')
})

t.test('stateless: no history, no background, nothing to retrieve; built-in tools dropped and listed', async (t) => {
  const { base, mock } = await start(t)
  const post = async (body: Record<string, unknown>) => await fetch(`${base}/v1/responses`, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
  for (const extra of [{ previous_response_id: 'resp_123' }, { conversation: 'conv_1' }, { background: true }]) {
    const res = await post({ model: 'openai/gpt-test', input: 'hi', ...extra })
    t.equal(res.status, 400, JSON.stringify(extra))
    const body = await res.json() as { error: { code: unknown, type: string, message: string } }
    t.equal(body.error.type, 'invalid_request_error')
    t.ok(body.error.code !== undefined && body.error.code !== null)
  }
  const hist = await post({ model: 'openai/gpt-test', input: 'hi', previous_response_id: 'resp_1' })
  t.match(((await hist.json()) as { error: { message: string } }).error.message, /input/, 'the message says to send the whole input')
  const get = await fetch(`${base}/v1/responses/resp_abc`, { headers: { authorization: `Bearer ${KEY_A}` } })
  t.equal(get.status, 404)
  t.match(await get.json(), { error: { code: 'response_not_found' } })
  t.equal(mock.requests.length, 0)
  const tools = await post({ model: 'openai/gpt-test', input: 'hi', tools: [{ type: 'web_search' }, weather], store: true })
  t.equal(tools.status, 200)
  t.match(tools.headers.get('x-svc-dropped-params'), /tools\.web_search/)
  t.equal(tools.headers.get('x-svc-model'), 'openai/gpt-test')
  t.equal(tools.headers.get('x-svc-provider'), 'mock-openai')
  t.same((mock.body().tools as Array<{ function: { name: string } }>).map((x) => x.function.name), ['get_weather'])
  const bad = await post({ model: 'openai/gpt-test' })
  t.equal(bad.status, 400)
  t.match(await bad.json(), { error: { message: /input/ } })
})
