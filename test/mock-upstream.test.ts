import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import t from 'tap'
import { request } from 'undici'
import type { Json } from '../engine/translation/types.js'
import { eventually } from './helper.js'
import { promptTokens, startMockUpstream, type MockUpstream } from './mock-upstream.js'

// The mock is only useful if it speaks the real protocols: the official SDKs, pointed straight
// at it, must create, stream and assemble answers with their strict helpers.

const WEATHER_OPENAI = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    description: 'Weather of a city',
    parameters: { type: 'object', properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['city'] }
  }
}
const TIME_OPENAI = { type: 'function' as const, function: { name: 'get_time', parameters: { type: 'object', properties: { zone: { type: 'string' } } } } }
const WEATHER_MESSAGES = {
  name: 'get_weather',
  description: 'Weather of a city',
  input_schema: { type: 'object' as const, properties: { city: { type: 'string' }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] } }, required: ['city'] }
}

let mock: MockUpstream
t.before(async () => { mock = await startMockUpstream() })
t.beforeEach(() => { mock.reset() })
t.teardown(async () => { await mock.close() })

const openai = (opts: { apiKey?: string, maxRetries?: number } = {}): OpenAI =>
  new OpenAI({ baseURL: mock.openaiBaseUrl, apiKey: opts.apiKey ?? 'sk-test-openai', maxRetries: opts.maxRetries ?? 0 })
const anthropic = (opts: { apiKey?: string, maxRetries?: number } = {}): Anthropic =>
  new Anthropic({ baseURL: mock.messagesBaseUrl, apiKey: opts.apiKey ?? 'sk-ant-test', maxRetries: opts.maxRetries ?? 0 })

/** POST raw JSON; answers status, headers and the body text. */
async function post (path: string, body: unknown, headers: Record<string, string> = {}): Promise<{ status: number, headers: Record<string, unknown>, text: string }> {
  const res = await request(mock.url + path, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) })
  return { status: res.statusCode, headers: res.headers, text: await res.body.text() }
}
const OPENAI_AUTH = { authorization: 'Bearer sk-raw' }
const MESSAGES_AUTH = { 'x-api-key': 'sk-ant-raw', 'anthropic-version': '2023-06-01' }

/** SSE text → frames of {event?, data}. */
function frames (text: string): Array<{ event?: string, data: string }> {
  return text.split('\n\n').filter((f) => f.trim() !== '').map((f) => {
    const out: { event?: string, data: string } = { data: '' }
    for (const line of f.split('\n')) {
      if (line.startsWith('event: ')) out.event = line.slice(7)
      if (line.startsWith('data: ')) out.data = line.slice(6)
    }
    return out
  })
}

t.test('openai: non-streaming answer echoes the user and counts usage by the documented formula', async (t) => {
  mock.cachedTokens = 3
  const messages = [{ role: 'system' as const, content: 'Be brief.' }, { role: 'user' as const, content: 'Hello there, mock upstream' }]
  const res = await openai().chat.completions.create({ model: 'gpt-x', messages })
  t.equal(res.object, 'chat.completion')
  t.match(res.id, /^chatcmpl-/)
  t.equal(res.model, 'gpt-x')
  t.equal(res.choices[0]?.message.content, 'Echo: Hello there, mock upstream')
  t.equal(res.choices[0]?.finish_reason, 'stop')
  const p = Math.ceil(JSON.stringify(messages).length / 4)
  t.equal(promptTokens(mock.body()), p)
  t.same(res.usage, {
    prompt_tokens: p + 3,
    completion_tokens: 5,
    total_tokens: p + 3 + 5,
    prompt_tokens_details: { cached_tokens: 3 }
  })
  const rec = mock.requests[0]
  t.equal(rec?.method, 'POST')
  t.equal(rec?.path, '/v1/chat/completions')
  t.equal(rec?.apiKey, 'sk-test-openai')
  t.equal(rec?.headers.authorization, 'Bearer sk-test-openai')
  t.equal(rec?.status, 200)
  t.equal(rec?.closedEarly, false)
})

t.test('openai: a raw stream has one id and created, role first, usage null until the usage chunk, then [DONE]', async (t) => {
  const res = await post('/v1/chat/completions', { model: 'gpt-x', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'one two three' }] }, OPENAI_AUTH)
  t.equal(res.status, 200)
  t.match(res.headers['content-type'], /^text\/event-stream/)
  const fs = frames(res.text)
  t.equal(fs[fs.length - 1]?.data, '[DONE]')
  const chunks = fs.slice(0, -1).map((f) => JSON.parse(f.data) as Json)
  t.equal(new Set(chunks.map((c) => c.id)).size, 1)
  t.equal(new Set(chunks.map((c) => c.created)).size, 1)
  t.ok(chunks.every((c) => c.object === 'chat.completion.chunk' && 'usage' in c))
  const choice = (c: Json): Json => (c.choices as Json[])[0] as Json
  t.same(choice(chunks[0] as Json).delta, { role: 'assistant', content: '' })
  const text = chunks.slice(1, -2).map((c) => (choice(c).delta as Json).content).join('')
  t.equal(text, 'Echo: one two three')
  t.equal(choice(chunks[chunks.length - 2] as Json).finish_reason, 'stop')
  t.ok(chunks.slice(0, -1).every((c) => c.usage === null))
  const last = chunks[chunks.length - 1] as Json
  t.same(last.choices, [])
  t.equal((last.usage as Json).completion_tokens, 4)
})

t.test('openai: without include_usage the chunks carry no usage key', async (t) => {
  const res = await post('/v1/chat/completions', { model: 'gpt-x', stream: true, messages: [{ role: 'user', content: 'hi' }] }, OPENAI_AUTH)
  const chunks = frames(res.text).slice(0, -1).map((f) => JSON.parse(f.data) as Json)
  t.ok(chunks.every((c) => !('usage' in c) && (c.choices as unknown[]).length === 1))
})

t.test('openai SDK: stream iteration and finalChatCompletion()', async (t) => {
  const client = openai()
  const stream = await client.chat.completions.create({ model: 'gpt-x', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'stream me' }] })
  let text = ''
  let usage: OpenAI.CompletionUsage | null | undefined
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? ''
    if (chunk.usage !== null && chunk.usage !== undefined) usage = chunk.usage
  }
  t.equal(text, 'Echo: stream me')
  t.equal(usage?.completion_tokens, 3)

  const final = await client.chat.completions.stream({ model: 'gpt-x', messages: [{ role: 'user', content: 'helper please' }], stream_options: { include_usage: true } }).finalChatCompletion()
  t.equal(final.choices[0]?.message.content, 'Echo: helper please')
  t.equal(final.choices[0]?.message.role, 'assistant')
  t.equal(final.choices[0]?.finish_reason, 'stop')
  t.equal(final.usage?.completion_tokens, 3)
})

t.test('openai SDK: a forced tool call, streamed and not, with JSON arguments from the schema', async (t) => {
  const client = openai()
  const body = { model: 'gpt-x', messages: [{ role: 'user' as const, content: 'weather in Paris?' }], tools: [WEATHER_OPENAI], tool_choice: 'required' as const }
  const res = await client.chat.completions.create(body)
  t.equal(res.choices[0]?.finish_reason, 'tool_calls')
  t.equal(res.choices[0]?.message.content, null)
  const call = res.choices[0]?.message.tool_calls?.[0]
  t.equal(call?.type, 'function')
  t.match(call?.id, /^call_/)
  if (call?.type !== 'function') throw new Error('no function call')
  t.equal(call.function.name, 'get_weather')
  const args = JSON.parse(call.function.arguments) as Json
  t.same(args, { city: 'example city', unit: 'celsius' })
  t.equal(res.usage?.completion_tokens, Math.ceil(call.function.arguments.length / 4))

  const final = await client.chat.completions.stream(body).finalChatCompletion()
  const streamed = final.choices[0]?.message.tool_calls?.[0]
  t.equal(final.choices[0]?.finish_reason, 'tool_calls')
  if (streamed?.type !== 'function') throw new Error('no streamed function call')
  t.equal(streamed.function.name, 'get_weather')
  t.same(JSON.parse(streamed.function.arguments), args)

  // the raw stream: the first fragment carries id, type, name and empty arguments; later ones only arguments
  const raw = await post('/v1/chat/completions', { ...body, stream: true }, OPENAI_AUTH)
  const deltas = frames(raw.text).slice(0, -1).map((f) => ((JSON.parse(f.data) as { choices: Array<{ delta: Json }> }).choices[0]?.delta.tool_calls as Json[] | undefined)?.[0]).filter((d) => d !== undefined)
  t.match(deltas[0], { index: 0, id: /^call_mock\d+_0$/, type: 'function', function: { name: 'get_weather', arguments: '' } })
  t.same(Object.keys(deltas[0] as Json), ['index', 'id', 'type', 'function'])
  t.ok(deltas.length > 2, 'arguments come in several fragments')
  t.ok(deltas.slice(1).every((d) => Object.keys(d as Json).join() === 'index,function'))
})

t.test('openai SDK: "use all tools" makes parallel calls; parallel_tool_calls false makes one; tool_choice none makes none', async (t) => {
  const client = openai()
  const messages = [{ role: 'user' as const, content: 'please use all tools' }]
  const all = await client.chat.completions.stream({ model: 'gpt-x', messages, tools: [WEATHER_OPENAI, TIME_OPENAI] }).finalChatCompletion()
  t.same(all.choices[0]?.message.tool_calls?.map((c) => c.type === 'function' ? c.function.name : ''), ['get_weather', 'get_time'])
  const one = await client.chat.completions.create({ model: 'gpt-x', messages, tools: [WEATHER_OPENAI, TIME_OPENAI], parallel_tool_calls: false })
  t.equal(one.choices[0]?.message.tool_calls?.length, 1)
  const none = await client.chat.completions.create({ model: 'gpt-x', messages, tools: [WEATHER_OPENAI], tool_choice: 'none' })
  t.equal(none.choices[0]?.finish_reason, 'stop')
  const named = await client.chat.completions.create({ model: 'gpt-x', messages: [{ role: 'user', content: 'hi' }], tools: [WEATHER_OPENAI, TIME_OPENAI], tool_choice: { type: 'function', function: { name: 'get_time' } } })
  t.same(named.choices[0]?.message.tool_calls?.map((c) => c.type === 'function' ? c.function.name : ''), ['get_time'])
})

t.test('openai: a tool result is answered with text mentioning it', async (t) => {
  const res = await openai().chat.completions.create({
    model: 'gpt-x',
    tools: [WEATHER_OPENAI],
    messages: [
      { role: 'user', content: 'use the tool' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '21 degrees and sunny' }
    ]
  })
  t.equal(res.choices[0]?.message.content, 'The tool returned: 21 degrees and sunny')
  t.equal(res.choices[0]?.finish_reason, 'stop')
})

t.test('openai: max_tokens cuts with length; stop cuts before the sequence', async (t) => {
  const client = openai()
  const cut = await client.chat.completions.create({ model: 'gpt-x', max_tokens: 2, messages: [{ role: 'user', content: 'alpha beta gamma' }] })
  t.equal(cut.choices[0]?.message.content, 'Echo: alpha')
  t.equal(cut.choices[0]?.finish_reason, 'length')
  t.equal(cut.usage?.completion_tokens, 2)
  const newer = await client.chat.completions.create({ model: 'gpt-x', max_completion_tokens: 1, messages: [{ role: 'user', content: 'alpha beta' }] })
  t.equal(newer.choices[0]?.message.content, 'Echo:')
  const stopped = await client.chat.completions.stream({ model: 'gpt-x', stop: ['STOP', 'never'], messages: [{ role: 'user', content: 'alpha beta STOP gamma' }] }).finalChatCompletion()
  t.equal(stopped.choices[0]?.message.content, 'Echo: alpha beta')
  t.equal(stopped.choices[0]?.finish_reason, 'stop')
  t.equal(stopped.usage, undefined, 'no usage chunk unless asked for')
})

const NAMESPACE_TOOL = {
  type: 'namespace' as const,
  name: 'multi_agent_v1',
  description: 'Sub-agents',
  tools: [{ type: 'function' as const, name: 'spawn_agent', parameters: { type: 'object', properties: { message: { type: 'string' } }, required: ['message'] } }]
}
const WEATHER_RESPONSES = { type: 'function' as const, name: 'get_weather', description: 'Weather of a city', strict: false, parameters: WEATHER_OPENAI.function.parameters }

t.test('responses SDK: responses.create answers text with usage by the documented formula', async (t) => {
  mock.cachedTokens = 3
  const input = [{ role: 'user' as const, content: [{ type: 'input_text' as const, text: 'Hello there, mock upstream' }] }]
  const res = await openai().responses.create({ model: 'gpt-x', instructions: 'Be brief.', input })
  t.equal(res.object, 'response')
  t.match(res.id, /^resp_mock\d+$/)
  t.equal(res.model, 'gpt-x')
  t.equal(res.status, 'completed')
  t.equal(res.output_text, 'Echo: Hello there, mock upstream')
  t.equal(res.instructions, 'Be brief.')
  const p = Math.ceil(JSON.stringify(input).length / 4) + Math.ceil(JSON.stringify('Be brief.').length / 4)
  t.equal(promptTokens(mock.body()), p)
  t.same(res.usage, { input_tokens: p + 3, input_tokens_details: { cached_tokens: 3 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: p + 3 + 5 })
  t.equal(mock.requests[0]?.path, '/v1/responses')
  t.equal(mock.requests[0]?.apiKey, 'sk-test-openai')
})

t.test('responses SDK: stream().finalResponse() for text and for a forced call to a namespaced tool', async (t) => {
  const client = openai()
  const text = await client.responses.stream({ model: 'gpt-x', input: 'stream me please' }).finalResponse()
  t.equal(text.output_text, 'Echo: stream me please')
  t.equal(text.status, 'completed')
  t.equal(text.usage?.output_tokens, 4)

  const body = { model: 'gpt-x', input: 'spawn a helper', tools: [WEATHER_RESPONSES, NAMESPACE_TOOL], tool_choice: 'required' as const }
  const called = await client.responses.stream(body).finalResponse()
  const call = called.output[0]
  if (call?.type !== 'function_call') throw new Error('no function call')
  t.equal(call.name, 'get_weather', 'required: the first tool')
  t.same(JSON.parse(call.arguments), { city: 'example city', unit: 'celsius' })
  t.match(call.call_id, /^call_mock\d+_0$/)

  const spawn = await client.responses.create({ ...body, input: 'use the tool spawn_agent', tool_choice: 'auto' })
  t.match(spawn.output[0], { type: 'function_call', name: 'spawn_agent', namespace: 'multi_agent_v1', arguments: '{"message":"example message"}', status: 'completed' })
  t.same(mock.body().tools, body.tools, 'the mock was sent the namespace as it is')

  // the raw stream: every frame named by its type and numbered from 0, created first, completed last
  const raw = await post('/v1/responses', { model: 'gpt-x', input: 'one two', stream: true }, OPENAI_AUTH)
  t.match(raw.headers['content-type'], /^text\/event-stream/)
  const fs = frames(raw.text)
  const data = fs.map((f) => JSON.parse(f.data) as Json)
  t.ok(fs.every((f, i) => f.event === data[i]?.type && data[i]?.sequence_number === i))
  t.same(data.map((d) => d.type), [
    'response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added',
    'response.output_text.delta', 'response.output_text.delta', 'response.output_text.delta',
    'response.output_text.done', 'response.content_part.done', 'response.output_item.done', 'response.completed'
  ])
})

t.test('responses: a trailing function_call_output is answered with its text; max_output_tokens cuts with status incomplete', async (t) => {
  const client = openai()
  const res = await client.responses.create({
    model: 'gpt-x',
    tools: [WEATHER_RESPONSES],
    input: [
      { role: 'user', content: 'use the tool' },
      { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
      { type: 'function_call_output', call_id: 'call_1', output: [{ type: 'input_text', text: '21 degrees and sunny' }] }
    ]
  })
  t.equal(res.output_text, 'The tool returned: 21 degrees and sunny')

  const cut = await client.responses.create({ model: 'gpt-x', max_output_tokens: 2, input: 'alpha beta gamma' })
  t.equal(cut.status, 'incomplete')
  t.same(cut.incomplete_details, { reason: 'max_output_tokens' })
  t.equal(cut.output_text, 'Echo: alpha')
  t.equal(cut.usage?.output_tokens, 2)
  const streamed = await client.responses.stream({ model: 'gpt-x', max_output_tokens: 2, input: 'alpha beta gamma' }).finalResponse()
  t.equal(streamed.status, 'incomplete')
  t.equal(streamed.output_text, 'Echo: alpha')
})

t.test('responses: refused as OpenAI does (no stored responses, a result without its call, no key)', async (t) => {
  const previous = await openai().responses.create({ model: 'gpt-x', input: 'and then?', previous_response_id: 'resp_old' }).catch((e: unknown) => e)
  t.ok(previous instanceof OpenAI.BadRequestError)
  t.match((previous as InstanceType<typeof OpenAI.BadRequestError>).message, /resp_old/)
  const orphan = await post('/v1/responses', { model: 'm', input: [{ type: 'function_call_output', call_id: 'call_x', output: 'r' }] }, OPENAI_AUTH)
  t.equal(orphan.status, 400)
  t.match(JSON.parse(orphan.text), { error: { type: 'invalid_request_error', message: /call_x/ } })
  t.equal((await post('/v1/responses', { model: 'm' }, OPENAI_AUTH)).status, 400, 'input is required')
  const noKey = await post('/v1/responses', { model: 'm', input: 'x' })
  t.equal(noKey.status, 401)
  t.match(JSON.parse(noKey.text), { error: { message: /API key/ } })
  t.equal(noKey.headers['x-request-id'], `req_mock${mock.requests.length}`, 'OpenAI request-id header')
})

t.test('messages SDK: non-streaming answer with cache counts', async (t) => {
  mock.cachedTokens = 100
  mock.cacheCreationTokens = 7
  const body = { model: 'claude-x', max_tokens: 64, system: 'Be brief.', messages: [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'Hi Claude' }] }] }
  const msg = await anthropic().messages.create(body)
  t.match(msg.id, /^msg_/)
  t.equal(msg.model, 'claude-x')
  t.same(msg.content, [{ type: 'text', text: 'Echo: Hi Claude' }])
  t.equal(msg.stop_reason, 'end_turn')
  t.equal(msg.stop_sequence, null)
  const p = Math.ceil(JSON.stringify(body.messages).length / 4) + Math.ceil(JSON.stringify(body.system).length / 4)
  t.match(msg.usage, { input_tokens: p, cache_read_input_tokens: 100, cache_creation_input_tokens: 7, output_tokens: 3 })
  const rec = mock.requests[0]
  t.equal(rec?.path, '/v1/messages')
  t.equal(rec?.apiKey, 'sk-ant-test')
  t.type(rec?.headers['anthropic-version'], 'string')
})

t.test('messages: a raw stream has event lines equal to the types, usage at start and cumulative at the end', async (t) => {
  mock.cachedTokens = 5
  const res = await post('/v1/messages', { model: 'claude-x', max_tokens: 50, stream: true, messages: [{ role: 'user', content: 'a b c' }] }, MESSAGES_AUTH)
  t.equal(res.status, 200)
  t.match(res.headers['content-type'], /^text\/event-stream/)
  t.type(res.headers['request-id'], 'string')
  const fs = frames(res.text)
  const types = fs.map((f) => f.event)
  t.same(types, ['message_start', 'content_block_start', 'ping', 'content_block_delta', 'content_block_delta', 'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'])
  for (const f of fs) t.equal((JSON.parse(f.data) as Json).type, f.event)
  const start = JSON.parse(fs[0]?.data ?? '{}') as { message: { usage: Json, content: unknown[] } }
  t.same(start.message.content, [])
  t.match(start.message.usage, { cache_read_input_tokens: 5, cache_creation_input_tokens: 0, output_tokens: 1 })
  const delta = JSON.parse(fs[fs.length - 2]?.data ?? '{}') as { usage: Json, delta: Json }
  t.same(delta.delta, { stop_reason: 'end_turn', stop_sequence: null })
  t.same(delta.usage, { input_tokens: start.message.usage.input_tokens, cache_creation_input_tokens: 0, cache_read_input_tokens: 5, output_tokens: 4 })
})

t.test('messages SDK: stream().finalMessage() for text, tool use (with its preamble) and thinking', async (t) => {
  const client = anthropic()
  const text = await client.messages.stream({ model: 'claude-x', max_tokens: 100, messages: [{ role: 'user', content: 'stream this please' }] }).finalMessage()
  t.same(text.content, [{ type: 'text', text: 'Echo: stream this please' }])
  t.equal(text.usage.output_tokens, 4)

  const tool = await client.messages.stream({ model: 'claude-x', max_tokens: 100, tools: [WEATHER_MESSAGES], messages: [{ role: 'user', content: 'use the tool get_weather for Paris' }] }).finalMessage()
  t.equal(tool.stop_reason, 'tool_use')
  t.equal(tool.content.length, 2)
  t.match(tool.content[0], { type: 'text', text: 'I will use get_weather.' })
  const use = tool.content[1]
  if (use?.type !== 'tool_use') throw new Error('no tool_use block')
  t.match(use.id, /^toolu_/)
  t.equal(use.name, 'get_weather')
  t.same(use.input, { city: 'example city', unit: 'celsius' })

  const forced = await client.messages.create({ model: 'claude-x', max_tokens: 100, tools: [WEATHER_MESSAGES], tool_choice: { type: 'any' }, messages: [{ role: 'user', content: 'hi' }] })
  t.same(forced.content.map((b) => b.type), ['tool_use'], 'a forced call has no preamble')

  const thinking = await client.messages.stream({ model: 'claude-x', max_tokens: 2000, thinking: { type: 'enabled', budget_tokens: 1024 }, messages: [{ role: 'user', content: 'think' }] }).finalMessage()
  t.same(thinking.content.map((b) => b.type), ['thinking', 'text'])
  t.match(thinking.content[0], { type: 'thinking', thinking: 'Thinking about: think', signature: /^sig_/ })
})

t.test('messages: a tool result is answered with text; stop_sequences and max_tokens', async (t) => {
  const client = anthropic()
  const res = await client.messages.create({
    model: 'claude-x',
    max_tokens: 100,
    tools: [WEATHER_MESSAGES],
    messages: [
      { role: 'user', content: 'use the tool' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Paris' } }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'rainy, 12 C' }] }] }
    ]
  })
  t.match(res.content[0], { type: 'text', text: 'The tool returned: rainy, 12 C' })

  const stopped = await client.messages.stream({ model: 'claude-x', max_tokens: 100, stop_sequences: ['##'], messages: [{ role: 'user', content: 'one ## two' }] }).finalMessage()
  t.equal(stopped.stop_reason, 'stop_sequence')
  t.equal(stopped.stop_sequence, '##')
  t.match(stopped.content[0], { text: 'Echo: one' })

  const cut = await client.messages.create({ model: 'claude-x', max_tokens: 2, messages: [{ role: 'user', content: 'one two three' }] })
  t.equal(cut.stop_reason, 'max_tokens')
  t.match(cut.content[0], { text: 'Echo: one' })
  t.equal(cut.usage.output_tokens, 2)
})

t.test('messages: count_tokens answers the prompt formula', async (t) => {
  const body = { model: 'claude-x', system: 'sys', messages: [{ role: 'user' as const, content: 'count me' }] }
  const res = await anthropic().messages.countTokens(body)
  t.same(res, { input_tokens: promptTokens(body) })
  t.equal(mock.requests[0]?.path, '/v1/messages/count_tokens')
})

// Gemini: no SDK is installed for it, so raw requests, read the way @google/genai reads them
// (SSE `data:` frames split on a blank line, CRLF or LF).

const GEMINI_AUTH = { 'x-goog-api-key': 'gm-raw' }
const geminiPost = async (model: string, method: string, body: unknown, headers: Record<string, string> = GEMINI_AUTH): ReturnType<typeof post> =>
  await post(`/v1beta/models/${model}:${method}${method === 'streamGenerateContent' ? '?alt=sse' : ''}`, body, headers)
const geminiFrames = (text: string): Json[] => text.split(/\r\n\r\n|\n\n/).filter((f) => f.trim() !== '').map((f) => {
  t.ok(f.startsWith('data: ') && !f.includes('\nevent:'), 'a data-only frame')
  return JSON.parse(f.slice(6)) as Json
})
type GeminiAnswer = { candidates: Array<{ content: { role: string, parts: Json[] }, finishReason?: string, index: number }>, usageMetadata: Json, modelVersion: string }
const WEATHER_GEMINI = { name: 'get_weather', description: 'Weather of a city', parametersJsonSchema: WEATHER_OPENAI.function.parameters }
const TIME_GEMINI = { name: 'get_time', parameters: { type: 'OBJECT', properties: { zone: { type: 'STRING', enum: ['UTC', 'CET'] }, days: { type: 'INTEGER', minimum: 2 } } } }

t.test('gemini: generateContent echoes the user, counts usage by the documented formula, and is recorded with its key and model', async (t) => {
  mock.cachedTokens = 2
  const contents = [{ role: 'user', parts: [{ text: 'Hello there,' }, { text: 'gemini mock' }] }]
  const systemInstruction = { role: 'user', parts: [{ text: 'Be brief.' }] }
  const res = await geminiPost('gemini-x', 'generateContent', { contents, systemInstruction })
  t.equal(res.status, 200)
  const answer = JSON.parse(res.text) as GeminiAnswer
  t.same(answer.candidates, [{ content: { role: 'model', parts: [{ text: 'Echo: Hello there, gemini mock' }] }, finishReason: 'STOP', index: 0 }])
  const p = Math.ceil(JSON.stringify(contents).length / 4) + Math.ceil(JSON.stringify(systemInstruction).length / 4)
  t.equal(promptTokens(mock.body()), p)
  t.same(answer.usageMetadata, { promptTokenCount: p + 2, candidatesTokenCount: 5, totalTokenCount: p + 2 + 5, cachedContentTokenCount: 2 })
  t.equal(answer.modelVersion, 'gemini-x')
  const rec = mock.requests[0]
  t.equal(rec?.path, '/v1beta/models/gemini-x:generateContent')
  t.equal(rec?.apiKey, 'gm-raw')
  t.equal(rec?.status, 200)
})

t.test('gemini: a stream has data-only frames with the new parts, the last with finishReason and the whole usage, and no [DONE]', async (t) => {
  const body = { contents: [{ role: 'user', parts: [{ text: 'one two three' }] }] }
  const whole = JSON.parse((await geminiPost('gemini-x', 'generateContent', body)).text) as GeminiAnswer
  const res = await geminiPost('gemini-x', 'streamGenerateContent', body)
  t.equal(res.status, 200)
  t.match(res.headers['content-type'], /^text\/event-stream/)
  t.notMatch(res.text, /\[DONE\]/)
  t.equal(mock.requests[1]?.query.alt, 'sse')
  const frames = geminiFrames(res.text) as unknown as GeminiAnswer[]
  t.ok(frames.length > 2, 'a frame per word')
  const text = frames.flatMap((f) => f.candidates[0]?.content.parts.map((p) => p.text) ?? []).join('')
  t.equal(text, whole.candidates[0]?.content.parts[0]?.text)
  t.ok(frames.slice(0, -1).every((f) => f.candidates[0]?.finishReason === undefined), 'only the last frame finishes')
  t.equal(frames[frames.length - 1]?.candidates[0]?.finishReason, 'STOP')
  t.same(frames[frames.length - 1]?.usageMetadata, whole.usageMetadata)
  t.same(frames[0]?.usageMetadata, { promptTokenCount: whole.usageMetadata.promptTokenCount, candidatesTokenCount: 0, totalTokenCount: whole.usageMetadata.promptTokenCount }, 'earlier frames count the prompt only')
})

t.test('gemini: calls have no id; ANY with one allowed name forces it, "use the tool" asks, NONE never calls; args follow either schema form', async (t) => {
  const tools = [{ functionDeclarations: [WEATHER_GEMINI, TIME_GEMINI] }]
  const forced = JSON.parse((await geminiPost('g', 'generateContent', { contents: [{ role: 'user', parts: [{ text: 'hi' }] }], tools, toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['get_time'] } } })).text) as GeminiAnswer
  t.same(forced.candidates[0]?.content.parts, [{ functionCall: { name: 'get_time', args: { zone: 'UTC', days: 2 } } }], 'an upper-case OpenAPI schema is sampled')
  t.equal(forced.candidates[0]?.finishReason, 'STOP')
  const asked = await geminiPost('g', 'streamGenerateContent', { contents: [{ role: 'user', parts: [{ text: 'use the tool get_weather' }] }], tools })
  const frames = geminiFrames(asked.text) as unknown as GeminiAnswer[]
  t.same(frames.map((f) => f.candidates[0]?.content.parts), [[{ functionCall: { name: 'get_weather', args: { city: 'example city', unit: 'celsius' } } }]], 'a streamed call comes whole, in the last frame')
  t.equal(frames[0]?.candidates[0]?.finishReason, 'STOP')
  const none = JSON.parse((await geminiPost('g', 'generateContent', { contents: [{ role: 'user', parts: [{ text: 'use the tool' }] }], tools, toolConfig: { functionCallingConfig: { mode: 'NONE' } } })).text) as GeminiAnswer
  t.match(none.candidates[0]?.content.parts[0]?.text, /^Echo:/)
})

t.test('gemini: a function response is answered with its output; maxOutputTokens cuts with MAX_TOKENS; stopSequences cut before the match', async (t) => {
  const contents = [
    { role: 'user', parts: [{ text: 'weather?' }] },
    { role: 'model', parts: [{ functionCall: { name: 'get_weather', args: { city: 'Oslo' } } }] },
    { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { output: 'Rain all day' } } }] }
  ]
  const answered = JSON.parse((await geminiPost('g', 'generateContent', { contents, tools: [{ functionDeclarations: [WEATHER_GEMINI] }] })).text) as GeminiAnswer
  t.equal(answered.candidates[0]?.content.parts[0]?.text, 'The tool returned: Rain all day')
  const cut = JSON.parse((await geminiPost('g', 'generateContent', { contents: [{ role: 'user', parts: [{ text: 'a b c d e' }] }], generationConfig: { maxOutputTokens: 2 } })).text) as GeminiAnswer
  t.same(cut.candidates[0], { content: { role: 'model', parts: [{ text: 'Echo: a' }] }, finishReason: 'MAX_TOKENS', index: 0 })
  const stopped = JSON.parse((await geminiPost('g', 'generateContent', { contents: [{ role: 'user', parts: [{ text: 'a b STOP c' }] }], generationConfig: { stopSequences: ['STOP'] } })).text) as GeminiAnswer
  t.equal(stopped.candidates[0]?.content.parts[0]?.text, 'Echo: a b')
  t.equal(stopped.candidates[0]?.finishReason, 'STOP')
})

t.test('gemini: includeThoughts adds thought parts, counted apart, and their signature rides on the part after them', async (t) => {
  const body = { contents: [{ role: 'user', parts: [{ text: 'use the tool' }] }], tools: [{ functionDeclarations: [WEATHER_GEMINI] }], generationConfig: { thinkingConfig: { includeThoughts: true, thinkingBudget: 1024 } } }
  const whole = JSON.parse((await geminiPost('g', 'generateContent', body)).text) as GeminiAnswer
  const signature = Buffer.from('sig_mock1').toString('base64')
  t.same(whole.candidates[0]?.content.parts, [
    { text: 'Thinking about: use the tool', thought: true },
    { functionCall: { name: 'get_weather', args: { city: 'example city', unit: 'celsius' } }, thoughtSignature: signature }
  ])
  t.equal(whole.usageMetadata.thoughtsTokenCount, 5, 'a token a word: Thinking about: use the tool')
  t.equal(whole.usageMetadata.totalTokenCount, (whole.usageMetadata.promptTokenCount as number) + (whole.usageMetadata.candidatesTokenCount as number) + 5)
  const streamed = geminiFrames((await geminiPost('g', 'streamGenerateContent', { ...body, contents: [{ role: 'user', parts: [{ text: 'hi' }] }] })).text) as unknown as GeminiAnswer[]
  const parts = streamed.flatMap((f) => f.candidates[0]?.content.parts ?? [])
  t.ok(parts.slice(0, 3).every((p) => p.thought === true), 'the thoughts come first')
  t.same(parts[3], { text: 'Echo:', thoughtSignature: Buffer.from('sig_mock2').toString('base64') })
})

t.test('gemini: countTokens answers the prompt formula, for contents or a whole generateContentRequest', async (t) => {
  const contents = [{ role: 'user', parts: [{ text: 'count me' }] }]
  const counted = await geminiPost('g', 'countTokens', { contents })
  t.same(JSON.parse(counted.text), { totalTokens: Math.ceil(JSON.stringify(contents).length / 4) })
  const nested = await geminiPost('g', 'countTokens', { generateContentRequest: { model: 'models/g', contents } })
  t.same(JSON.parse(nested.text), { totalTokens: Math.ceil(JSON.stringify(contents).length / 4) })
})

t.test('gemini: credentials and errors come in Google\'s shape', async (t) => {
  const body = { contents: [{ role: 'user', parts: [{ text: 'x' }] }] }
  const noKey = await geminiPost('g', 'generateContent', body, {})
  t.equal(noKey.status, 403)
  t.match(JSON.parse(noKey.text), { error: { code: 403, status: 'PERMISSION_DENIED', message: /unregistered callers/ } })
  mock.keys = { openai: null, messages: null, gemini: 'gm-right' }
  const wrong = await geminiPost('g', 'generateContent', body, { 'x-goog-api-key': 'gm-wrong' })
  t.equal(wrong.status, 400)
  t.same(JSON.parse(wrong.text), { error: { code: 400, message: 'API key not valid. Please pass a valid API key.', status: 'INVALID_ARGUMENT' } })
  t.equal(mock.requests[1]?.apiKey, 'gm-wrong')
  t.equal((await geminiPost('g', 'generateContent', body, { 'x-goog-api-key': 'gm-right' })).status, 200)
  t.equal((await post('/v1beta/models/g:generateContent?key=gm-right', body)).status, 200, 'a key in the query, as the REST docs show')
  t.equal(mock.requests[3]?.apiKey, 'gm-right')
  mock.faults.status = { status: 429, times: 1 }
  const limited = await geminiPost('g', 'generateContent', body, { 'x-goog-api-key': 'gm-right' })
  t.same(JSON.parse(limited.text), { error: { code: 429, message: 'Simulated upstream error 429.', status: 'RESOURCE_EXHAUSTED' } })
  const unknownPath = await post('/v1beta/models/g:predict', body, { 'x-goog-api-key': 'gm-right' })
  t.equal(unknownPath.status, 404)
  t.match(JSON.parse(unknownPath.text), { error: { code: 404, status: 'NOT_FOUND' } })
  const wrongShape = await post('/v1beta/models/g:embedContent', body, { 'x-goog-api-key': 'gm-right' })
  t.equal(wrongShape.status, 400, 'embedContent is known: a generateContent body is not its shape')
  t.match(JSON.parse(wrongShape.text), { error: { status: 'INVALID_ARGUMENT', message: /Unknown name "contents"/ } })
})

t.test('embeddings and images: OpenAI\'s /embeddings and /images/generations, Gemini\'s embedContent, batchEmbedContents and image generateContent', async (t) => {
  const embedded = await post('/v1/embeddings', { model: 'e', input: ['a b', 'c'] }, { authorization: 'Bearer k' })
  t.equal(embedded.status, 200)
  t.match(JSON.parse(embedded.text), { object: 'list', data: [{ index: 0 }, { index: 1 }], usage: { prompt_tokens: 2 } })
  t.equal((await post('/v1/embeddings', { model: 'e' }, { authorization: 'Bearer k' })).status, 400, 'no input')
  const images = await post('/v1/images/generations', { model: 'i', prompt: 'a fox', n: 2 }, { authorization: 'Bearer k' })
  t.match(JSON.parse(images.text), { data: [{ b64_json: String }, { b64_json: String }], usage: { input_tokens: 2, output_tokens: 200 } })
  const goog = { 'x-goog-api-key': 'gm' }
  const batch = await post('/v1beta/models/g:batchEmbedContents', { requests: [{ model: 'models/g', content: { parts: [{ text: 'x' }] } }] }, goog)
  t.equal(batch.status, 200)
  t.equal((JSON.parse(batch.text) as { embeddings: unknown[] }).embeddings.length, 1)
  const otherModel = await post('/v1beta/models/g:batchEmbedContents', { requests: [{ model: 'models/h', content: { parts: [{ text: 'x' }] } }] }, goog)
  t.equal(otherModel.status, 400, 'every request names the batch\'s model')
  const picture = await post('/v1beta/models/g:generateContent', { contents: [{ role: 'user', parts: [{ text: 'a fox' }] }], generationConfig: { responseModalities: ['TEXT', 'IMAGE'] } }, goog)
  t.match(JSON.parse(picture.text), { candidates: [{ content: { parts: [{ inlineData: { mimeType: 'image/png' } }] }, finishReason: 'STOP' }], usageMetadata: { candidatesTokenCount: 1290 } })
})

t.test('gemini: malformed requests are refused with 400 as Google does, a field of another protocol included', async (t) => {
  const user = { role: 'user', parts: [{ text: 'x' }] }
  const refused = async (body: unknown, message: RegExp): Promise<void> => {
    const res = await geminiPost('g', 'generateContent', body)
    t.equal(res.status, 400, String(message))
    t.match(JSON.parse(res.text), { error: { code: 400, status: 'INVALID_ARGUMENT', message } })
  }
  await refused({ contents: [user], stream: true }, /Unknown name "stream"/)
  await refused({ contents: [user], generationConfig: { max_tokens: 5 } }, /Unknown name "max_tokens" at 'generation_config'/)
  await refused({ contents: [] }, /contents is not specified/)
  await refused({ contents: [{ role: 'user', parts: [] }] }, /parts must not be empty/)
  await refused({ contents: [{ role: 'assistant', parts: [{ text: 'x' }] }] }, /valid role/)
  await refused({ contents: [{ role: 'user', parts: [{ text: 'x', inlineData: { mimeType: 'image/png', data: 'AA' } }] }] }, /oneof field 'data'/)
  await refused({ contents: [user, { role: 'model', parts: [{ functionCall: { name: 'f', args: {} } }, { functionCall: { name: 'g', args: {} } }] }, { role: 'user', parts: [{ functionResponse: { name: 'f', response: {} } }] }] }, /number of function response parts/)
  await refused({ contents: [user], tools: [{ functionDeclarations: [{ name: 'f', parameters: {}, parametersJsonSchema: {} }] }] }, /mutually exclusive/)

  // Gemini 3's rule, when asked for: the first call of each step of the current turn carries a signature
  mock.requireThoughtSignatures = true
  const step = (signature?: string): Json[] => [
    { role: 'model', parts: [{ functionCall: { name: 'f', args: {} }, ...(signature === undefined ? {} : { thoughtSignature: signature }) }, { functionCall: { name: 'g', args: {} } }] },
    { role: 'user', parts: [{ functionResponse: { name: 'f', response: {} } }, { functionResponse: { name: 'g', response: {} } }] }
  ]
  await refused({ contents: [user, ...step('c2ln'), ...step()] }, /missing a thought_signature.*default_api:f.*position 3/)
  t.equal((await geminiPost('g', 'generateContent', { contents: [user, ...step('c2ln'), ...step('skip_thought_signature_validator')] })).status, 200)
  t.equal((await geminiPost('g', 'generateContent', { contents: [user, ...step(), user] })).status, 200, 'a step of an earlier turn is not checked')
  mock.validate = false
  t.equal((await geminiPost('g', 'generateContent', { contents: [user], stream: true })).status, 200, 'validate: false accepts it')
})

t.test('credentials are checked like the providers do', async (t) => {
  const noKey = await post('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'x' }] })
  t.equal(noKey.status, 401)
  t.match(JSON.parse(noKey.text), { error: { type: 'invalid_request_error', param: null, code: null } })

  const noVersion = await post('/v1/messages', { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, { 'x-api-key': 'k' })
  t.equal(noVersion.status, 400)
  t.same(JSON.parse(noVersion.text), { type: 'error', error: { type: 'invalid_request_error', message: 'anthropic-version: header is required' } })

  const noMessagesKey = await post('/v1/messages', { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, { 'anthropic-version': '2023-06-01' })
  t.equal(noMessagesKey.status, 401)
  t.equal((JSON.parse(noMessagesKey.text) as { error: Json }).error.type, 'authentication_error')

  mock.keys = { openai: 'sk-right', messages: 'sk-ant-right', gemini: null }
  const refused = await openai({ apiKey: 'sk-wrong' }).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)
  t.ok(refused instanceof OpenAI.AuthenticationError)
  t.equal(mock.requests[mock.requests.length - 1]?.apiKey, 'sk-wrong', 'a refused key is recorded too')
  await t.resolves(openai({ apiKey: 'sk-right' }).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] }))
  const err = await anthropic({ apiKey: 'sk-wrong' }).messages.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)
  t.ok(err instanceof Anthropic.AuthenticationError)
  // x-api-key (SDK 0.x, Claude Code) and Authorization: Bearer (SDK 1.x) both work
  t.equal((await post('/v1/messages', { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, { 'x-api-key': 'sk-ant-right', 'anthropic-version': '2023-06-01' })).status, 200)
  t.equal((await post('/v1/messages', { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, { authorization: 'Bearer sk-ant-right', 'anthropic-version': '2023-06-01' })).status, 200)
})

t.test('malformed requests are refused with 400 as the providers do', async (t) => {
  const badTool = await post('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'x' }, { role: 'tool', tool_call_id: 'nope', content: 'r' }] }, OPENAI_AUTH)
  t.equal(badTool.status, 400)
  t.match(JSON.parse(badTool.text), { error: { type: 'invalid_request_error', message: /role 'tool'/ } })
  const danglingCall = await post('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'x' }, { role: 'assistant', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{}' } }] }, { role: 'user', content: 'y' }] }, OPENAI_AUTH)
  t.equal(danglingCall.status, 400)
  t.equal((await post('/v1/chat/completions', { model: 'm', stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'x' }] }, OPENAI_AUTH)).status, 400)
  t.equal((await post('/v1/chat/completions', '{not json', OPENAI_AUTH)).status, 400)

  const emptyText = await anthropic().messages.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'text', text: '' }] }] }).catch((e: unknown) => e)
  t.ok(emptyText instanceof Anthropic.BadRequestError)
  t.equal((await post('/v1/messages', { model: 'm', messages: [{ role: 'user', content: 'x' }] }, MESSAGES_AUTH)).status, 400, 'max_tokens is required')
  const orphan = await post('/v1/messages', { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_x', content: 'r' }] }] }, MESSAGES_AUTH)
  t.match(JSON.parse(orphan.text), { type: 'error', error: { type: 'invalid_request_error', message: /unexpected `tool_use_id`/ } })
  const stringInput = await post('/v1/messages', { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: '{}' }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', content: 'r' }] }] }, MESSAGES_AUTH)
  t.equal(stringInput.status, 400)
  const textFirst = await post('/v1/messages', { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }, { role: 'assistant', content: [{ type: 'tool_use', id: 't1', name: 'f', input: {} }] }, { role: 'user', content: [{ type: 'text', text: 'here' }, { type: 'tool_result', tool_use_id: 't1', content: 'r' }] }] }, MESSAGES_AUTH)
  t.equal(textFirst.status, 400)

  mock.validate = false
  t.equal((await post('/v1/chat/completions', { model: 'm', messages: [{ role: 'tool', tool_call_id: 'nope', content: 'r' }] }, OPENAI_AUTH)).status, 200, 'validate: false accepts it')

  t.equal((await post('/v1/nowhere', {}, OPENAI_AUTH)).status, 404)
  const get = await request(mock.openaiBaseUrl + '/chat/completions', { method: 'GET', headers: OPENAI_AUTH })
  await get.body.text()
  t.equal(get.statusCode, 405)
})

t.test('fault: status, in each provider shape, limited by times and path, honoured by the SDK retries', async (t) => {
  mock.faults.status = { status: 503, times: 2, path: '/v1/chat/completions', headers: { 'retry-after-ms': '1' } }
  const ok = await openai({ maxRetries: 2 }).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'retry me' }] })
  t.equal(ok.choices[0]?.message.content, 'Echo: retry me')
  t.same(mock.requests.map((r) => r.status), [503, 503, 200])
  t.same(mock.requests[0]?.faults, ['status'])
  t.equal(mock.faults.status, undefined, 'switched off once used up')

  mock.faults.status = { status: 429, message: 'slow down', path: '/v1/messages' }
  t.equal((await post('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'x' }] }, OPENAI_AUTH)).status, 200, 'another path is not affected')
  const limited = await anthropic().messages.create({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)
  t.ok(limited instanceof Anthropic.RateLimitError)
  t.same((limited as InstanceType<typeof Anthropic.RateLimitError>).error, { type: 'error', error: { type: 'rate_limit_error', message: 'slow down' } })

  mock.faults.status = 529
  const overloaded = await post('/v1/messages', { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, MESSAGES_AUTH)
  t.equal(overloaded.status, 529)
  t.equal((JSON.parse(overloaded.text) as { error: Json }).error.type, 'overloaded_error')
  mock.faults.status = 400
  const bad = await openai().chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e)
  t.ok(bad instanceof OpenAI.BadRequestError)
  t.equal((bad as InstanceType<typeof OpenAI.BadRequestError>).type, 'invalid_request_error')
})

t.test('fault: delayMs holds the status line back', async (t) => {
  mock.faults.delayMs = { ms: 150, times: 1 }
  const started = Date.now()
  await post('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'x' }] }, OPENAI_AUTH)
  t.ok(Date.now() - started >= 140, 'first request delayed')
  await post('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'x' }] }, OPENAI_AUTH)
  t.same(mock.requests.map((r) => r.faults), [['delayMs'], []], 'the second one not (times: 1)')
})

t.test('fault: resetBeforeResponse destroys the socket without an answer', async (t) => {
  mock.faults.resetBeforeResponse = { times: 1 }
  await t.rejects(post('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'x' }] }, OPENAI_AUTH))
  t.match(mock.requests[0], { reset: true, status: null, closedEarly: false, faults: ['resetBeforeResponse'] })
  // the SDK treats it as a connection error and retries it
  const res = await openai({ maxRetries: 1 }).chat.completions.create({ model: 'm', messages: [{ role: 'user', content: 'x' }] })
  t.equal(res.choices[0]?.finish_reason, 'stop')
})

t.test('fault: resetMidStream cuts a stream after K frames, and a JSON body halfway', async (t) => {
  mock.faults.resetMidStream = { afterFrames: 2, times: 1 }
  const stream = await openai().chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'a b c d e f' }] })
  const seen: string[] = []
  await t.rejects((async () => { for await (const c of stream) seen.push(c.choices[0]?.delta.content ?? '') })())
  t.same(seen, ['', 'Echo:'], 'exactly two frames arrived')
  t.equal(mock.requests[0]?.reset, true)

  mock.faults.resetMidStream = 0
  await t.rejects(anthropic().messages.stream({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }).finalMessage(), 'nothing but headers')
  mock.faults.resetMidStream = { afterFrames: 1, times: 1 }
  await t.rejects(post('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'x' }] }, OPENAI_AUTH), 'a JSON body cut halfway')
  mock.faults.resetMidStream = { afterFrames: 1000, times: 1 }
  await t.rejects(post('/v1/chat/completions', { model: 'm', stream: true, messages: [{ role: 'user', content: 'x' }] }, OPENAI_AUTH), 'every frame, then a reset instead of the end')
  t.equal(mock.requests[mock.requests.length - 1]?.reset, true)
})

t.test('fault: hang never answers; a client abort is seen by waitForClose', async (t) => {
  mock.faults.hang = true
  const controller = new AbortController()
  const pending = request(mock.url + '/v1/messages', { method: 'POST', headers: { ...MESSAGES_AUTH, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }), signal: controller.signal })
  await mock.waitForRequests(1)
  t.equal(mock.requests[0]?.status, null)
  t.equal(mock.requests[0]?.closed, false)
  controller.abort()
  await t.rejects(pending)
  const [closed] = await mock.waitForClose()
  t.equal(closed, mock.requests[0])
  t.match(closed, { closed: true, closedEarly: true, reset: false, status: null })
  await t.rejects(mock.waitForClose(2, 50), /timed out/)
})

t.test('a client that aborts mid-stream closes its upstream request', async (t) => {
  mock.faults.slowFramesMs = 30
  const controller = new AbortController()
  const stream = await openai().chat.completions.create({ model: 'm', stream: true, messages: [{ role: 'user', content: 'one two three four five' }] }, { signal: controller.signal })
  let n = 0
  try {
    for await (const _ of stream) { if (++n === 2) controller.abort() }
  } catch {}
  t.equal(n, 2, 'nothing more after the abort')
  const [closed] = await mock.waitForClose()
  t.equal(closed?.status, 200)
  t.equal(closed?.closedEarly, true)
  t.equal(mock.requests.filter((r) => !r.closedEarly).length, 0)
})

t.test('fault: idleMidStreamMs pauses once; slowFramesMs paces every frame', async (t) => {
  const gaps = async (body: Json): Promise<number[]> => {
    const res = await request(mock.url + '/v1/chat/completions', { method: 'POST', headers: { ...OPENAI_AUTH, 'content-type': 'application/json' }, body: JSON.stringify(body) })
    const times: number[] = []
    let last = Date.now()
    for await (const _ of res.body) { const now = Date.now(); times.push(now - last); last = now }
    return times
  }
  const body = { model: 'm', stream: true, messages: [{ role: 'user', content: 'a b c' }] }
  mock.faults.idleMidStreamMs = { ms: 200, afterFrames: 2, times: 1 }
  const idle = await gaps(body)
  t.ok(idle.some((g) => g >= 180), `one long gap: ${idle.join(',')}`)
  t.same(mock.requests[0]?.faults, ['idleMidStreamMs'], 'paused once (a gap of the machine\'s own is not counted)')

  mock.faults.slowFramesMs = { ms: 40 }
  const started = Date.now()
  const slow = await gaps(body)
  t.ok(Date.now() - started >= 40 * 5, `a frame every 40 ms (${slow.join(',')})`)
  t.equal(mock.requests[1]?.faults.join(), 'slowFramesMs')
})

t.test('fault: idleMidStreamMs with until holds the stream after its first frame until the promise settles', async (t) => {
  let release!: () => void
  const held = new Promise<void>((resolve) => { release = resolve })
  mock.faults.idleMidStreamMs = { ms: 0, until: held, times: 1 }
  const res = await request(mock.url + '/v1/chat/completions', { method: 'POST', headers: { ...OPENAI_AUTH, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', stream: true, messages: [{ role: 'user', content: 'a b c' }] }) })
  let text = ''
  let released = false
  const read = (async () => { for await (const part of res.body) { text += String(part); if (text.includes('[DONE]')) t.ok(released, 'the end comes only after the release') } })()
  await eventually(5000, () => text, (v) => v.length > 0)
  // the stream stays open: no more frames while the promise is pending
  const first = text
  await new Promise((resolve) => setImmediate(resolve))
  t.equal(text, first, 'nothing after the first frame yet')
  released = true
  release()
  await read
  t.match(text, /data: \[DONE\]/, 'then the rest, to the end')
})

t.test('enqueue: canned JSON and raw stream answers for the next requests, by path', async (t) => {
  mock.enqueue(
    { status: 200, body: { input_tokens: 42 }, path: '/v1/messages/count_tokens' },
    { status: 418, body: { error: { message: 'teapot', type: 'invalid_request_error', param: null, code: 'teapot' } }, headers: { 'x-custom': 'yes' } },
    {
      stream: [
        'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":"canned"},"finish_reason":null}]}\n\n',
        'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}\n\n',
        'data: [DONE]\n\n'
      ],
      frameDelayMs: 5
    }
  )
  const teapot = await post('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'x' }] }, OPENAI_AUTH)
  t.equal(teapot.status, 418)
  t.equal(teapot.headers['x-custom'], 'yes')
  const final = await openai().chat.completions.stream({ model: 'm', messages: [{ role: 'user', content: 'x' }] }).finalChatCompletion()
  t.equal(final.choices[0]?.message.content, 'canned')
  t.same(await anthropic().messages.countTokens({ model: 'm', messages: [{ role: 'user', content: 'x' }] }), { input_tokens: 42 })
  t.equal((await post('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'back' }] }, OPENAI_AUTH)).text.includes('Echo: back'), true, 'then the default again')
})

t.test('script: a persistent function sees each request and may adapt the default answer', async (t) => {
  mock.script((req) => {
    if (req.path !== '/v1/messages') return undefined
    const answer = mock.defaultAnswer(req)
    return 'body' in answer ? { ...answer, body: { ...(answer.body as Json), model: 'claude-renamed' } } : answer
  })
  const msg = await anthropic().messages.create({ model: 'claude-x', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] })
  t.equal(msg.model, 'claude-renamed')
  const chat = await openai().chat.completions.create({ model: 'gpt-x', messages: [{ role: 'user', content: 'x' }] })
  t.equal(chat.model, 'gpt-x')
  mock.enqueue(() => ({ body: 'plain text', status: 500 }))
  const raw = await post('/v1/messages', { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, MESSAGES_AUTH)
  t.equal(raw.status, 500)
  t.equal(raw.text, 'plain text')
  mock.script(null)
})

t.test('requests are recorded in order with query, headers, parsed or raw body; reset clears them', async (t) => {
  await post('/v1/messages?beta=true', { model: 'm', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] }, { ...MESSAGES_AUTH, 'anthropic-beta': 'flag-1' })
  await post('/v1/chat/completions', 'not json at all', OPENAI_AUTH)
  t.equal(mock.requests.length, 2)
  t.same(mock.requests[0]?.query, { beta: 'true' })
  t.equal(mock.requests[0]?.headers['anthropic-beta'], 'flag-1')
  t.equal(mock.body(0).model, 'm')
  t.equal(mock.requests[1]?.body, 'not json at all')
  t.throws(() => mock.body(-1), /no JSON body/)
  mock.faults.hang = true
  mock.cachedTokens = 9
  mock.reset()
  t.same(mock.requests, [])
  t.same(mock.faults, {})
  t.equal(mock.cachedTokens, 0)
})

t.test('openConnections counts the sockets a client keeps open', async (t) => {
  const m = await startMockUpstream()
  t.equal(m.openConnections(), 0)
  const res = await request(m.openaiBaseUrl + '/chat/completions', { method: 'POST', headers: { ...OPENAI_AUTH, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'x' }] }) })
  await res.body.text()
  t.equal(m.openConnections(), 1, 'kept alive')
  m.faults.hang = true
  void request(m.openaiBaseUrl + '/chat/completions', { method: 'POST', headers: OPENAI_AUTH, body: '{}' }).catch(() => {})
  await m.waitForRequests(2)
  await m.close()
  t.equal(m.openConnections(), 0, 'close() ends even a hanging request')
  t.equal(m.requests[1]?.closedEarly, false, 'closing the mock is not a client abort')
})
