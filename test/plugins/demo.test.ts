import Anthropic from '@anthropic-ai/sdk'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { Readable } from 'node:stream'
import OpenAI from 'openai'
import t from 'tap'
import type { Json } from '../../engine/translation/types.js'
import { createDemoClient, readRequest, toolsToCall } from '../../engine/upstream/demo.js'
import { CallAbort, type UpstreamClient, type UpstreamResponse } from '../../engine/upstream/types.js'

// The demo provider must produce what a real upstream would: checked on the raw bytes, and by
// the official SDKs reading them over a tiny HTTP bridge with their strict stream helpers.

const WEATHER_OPENAI = {
  type: 'function' as const,
  function: {
    name: 'get_weather',
    parameters: { type: 'object', properties: { city: { type: 'string' }, days: { type: 'integer', minimum: 1 }, unit: { type: 'string', enum: ['celsius', 'fahrenheit'] }, detailed: { type: 'boolean' } }, required: ['city'] }
  }
}
const WEATHER_MESSAGES = { name: 'get_weather', input_schema: { type: 'object' as const, properties: { city: { type: 'string' }, tags: { type: 'array', items: { type: 'string' } } } } }

async function text (body: Readable): Promise<string> {
  let out = ''
  for await (const chunk of body) out += typeof chunk === 'string' ? chunk : (chunk as Buffer).toString('utf8')
  return out
}

async function call (client: UpstreamClient, body: Json, signal = new CallAbort()): Promise<UpstreamResponse> {
  const path = client.protocol === 'openai' ? '/chat/completions' : '/v1/messages'
  return await client.request({ path, headers: {}, body: JSON.stringify(body), signal })
}

function frames (sse: string): Array<{ event?: string, data: string }> {
  return sse.split('\n\n').filter((f) => f !== '').map((f) => {
    const out: { event?: string, data: string } = { data: '' }
    for (const line of f.split('\n')) {
      if (line.startsWith('event: ')) out.event = line.slice(7)
      else if (line.startsWith('data: ')) out.data = line.slice(6)
    }
    return out
  })
}

const timeouts = (): number => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length

/** An HTTP server that answers with the demo clients, so the SDKs can talk to them. */
async function bridge (t: { teardown: (fn: () => unknown) => void }, delayMs = 0): Promise<string> {
  const clients: Record<'openai' | 'messages', UpstreamClient> = { openai: createDemoClient('demo', 'openai', { chunkDelayMs: delayMs }), messages: createDemoClient('demo-messages', 'messages', { chunkDelayMs: delayMs }) }
  const server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      const protocol = req.url?.startsWith('/v1/messages') === true ? 'messages' : 'openai'
      const controller = new CallAbort()
      res.once('close', () => controller.abort())
      clients[protocol].request({ path: (req.url ?? '').replace(/^\/v1\/chat/, '/chat'), headers: {}, body: Buffer.concat(chunks).toString('utf8'), signal: controller })
        .then((up) => {
          res.writeHead(up.statusCode, up.headers as Record<string, string>)
          up.body.on('error', () => res.destroy())
          up.body.pipe(res)
        })
        .catch(() => res.destroy())
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => {
    await Promise.all([clients.openai.close(), clients.messages.close()])
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
}

t.test('openai protocol: a non-streaming answer with plausible text and usage', async (t) => {
  const client = createDemoClient('demo', 'openai', { chunkDelayMs: 0 })
  t.equal(client.id, 'demo')
  t.equal(client.protocol, 'openai')
  const res = await call(client, { model: 'gpt-sim', messages: [{ role: 'user', content: 'What can you do?' }] })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['content-type'], 'application/json')
  t.type(res.headers['x-request-id'], 'string')
  const body = JSON.parse(await text(res.body)) as { id: string, object: string, model: string, choices: Array<{ message: { role: string, content: string }, finish_reason: string }>, usage: { prompt_tokens: number, completion_tokens: number, total_tokens: number, prompt_tokens_details: { cached_tokens: number } } }
  t.match(body.id, /^chatcmpl-/)
  t.equal(body.object, 'chat.completion')
  t.equal(body.model, 'gpt-sim')
  t.equal(body.choices[0]?.message.role, 'assistant')
  t.match(body.choices[0]?.message.content, /^Hello from gpt-sim\. You said: "What can you do\?"\. /)
  t.equal(body.choices[0]?.finish_reason, 'stop')
  t.ok(body.usage.prompt_tokens > 0)
  t.equal(body.usage.completion_tokens, Math.ceil((body.choices[0]?.message.content.length ?? 0) / 4))
  t.equal(body.usage.total_tokens, body.usage.prompt_tokens + body.usage.completion_tokens)
  t.equal(body.usage.prompt_tokens_details.cached_tokens, 0)

  const again = JSON.parse(await text((await call(client, { model: 'gpt-sim', messages: [{ role: 'user', content: 'What can you do?' }] })).body)) as typeof body
  t.equal(again.choices[0]?.message.content, body.choices[0]?.message.content, 'the same prompt gets the same text')
  t.not(again.id, body.id)
})

t.test('openai protocol: a stream word by word, usage chunk only when asked for', async (t) => {
  const client = createDemoClient('demo', 'openai', { chunkDelayMs: 1 })
  const res = await call(client, { model: 'gpt-sim', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'hi' }] })
  t.match(res.headers['content-type'], /^text\/event-stream/)
  const fs = frames(await text(res.body))
  t.equal(fs[fs.length - 1]?.data, '[DONE]')
  const chunks = fs.slice(0, -1).map((f) => JSON.parse(f.data) as { id: string, created: number, choices: Array<{ delta: Json, finish_reason: string | null }>, usage: Json | null })
  t.equal(new Set(chunks.map((c) => c.id)).size, 1)
  t.equal(new Set(chunks.map((c) => c.created)).size, 1)
  t.equal(chunks[0]?.choices[0]?.delta.role, 'assistant')
  t.ok(chunks.length > 6, 'one chunk a word')
  t.ok(chunks.slice(0, -1).every((c) => c.usage === null))
  const last = chunks[chunks.length - 1]
  t.same(last?.choices, [])
  t.ok(Number(last?.usage?.completion_tokens) > 0)
  t.equal(chunks[chunks.length - 2]?.choices[0]?.finish_reason, 'stop')

  const plain = frames(await text((await call(client, { model: 'gpt-sim', stream: true, messages: [{ role: 'user', content: 'hi' }] })).body))
  t.ok(plain.slice(0, -1).every((f) => !('usage' in (JSON.parse(f.data) as Json))))
})

t.test('messages protocol: JSON and a stream with every event the SDKs expect', async (t) => {
  const client = createDemoClient('demo-messages', 'messages', { chunkDelayMs: 0 })
  const res = await call(client, { model: 'claude-sim', max_tokens: 100, system: 'be nice', messages: [{ role: 'user', content: [{ type: 'text', text: 'Tell me something' }] }] })
  t.type(res.headers['request-id'], 'string')
  const msg = JSON.parse(await text(res.body)) as { id: string, type: string, role: string, model: string, content: Array<{ type: string, text: string }>, stop_reason: string, usage: Json }
  t.match(msg, { type: 'message', role: 'assistant', model: 'claude-sim', stop_reason: 'end_turn', stop_sequence: null })
  t.match(msg.id, /^msg_/)
  t.match(msg.content[0]?.text, /Hello from claude-sim/)
  t.match(msg.usage, { cache_read_input_tokens: 0, cache_creation_input_tokens: 0 })
  t.ok(Number(msg.usage.input_tokens) > 0 && Number(msg.usage.output_tokens) > 0)

  const stream = await call(client, { model: 'claude-sim', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'Tell me something' }] })
  const fs = frames(await text(stream.body))
  for (const f of fs) t.equal((JSON.parse(f.data) as Json).type, f.event)
  const names = fs.map((f) => f.event)
  t.same(names.slice(0, 3), ['message_start', 'content_block_start', 'ping'])
  t.same(names.slice(-3), ['content_block_stop', 'message_delta', 'message_stop'])
  const deltas = fs.filter((f) => f.event === 'content_block_delta').map((f) => (JSON.parse(f.data) as { delta: { text: string } }).delta.text)
  t.equal(deltas.join(''), msg.content[0]?.text, 'the stream says what the JSON says')
  const end = JSON.parse(fs[fs.length - 2]?.data ?? '{}') as { usage: Json }
  t.equal(end.usage.output_tokens, msg.usage.output_tokens)
})

t.test('gemini protocol: JSON and a data-only stream, the model named by the path, a forced call, countTokens, errors in Google\'s shape', async (t) => {
  const client = createDemoClient('demo-gemini', 'gemini', { chunkDelayMs: 0 })
  const signal = new CallAbort()
  const ask = async (method: string, body: unknown, model = 'gemini-sim'): Promise<UpstreamResponse> =>
    await client.request({ path: `/v1beta/models/${model}:${method}${method === 'streamGenerateContent' ? '?alt=sse' : ''}`, headers: {}, body: JSON.stringify(body), signal })
  type Answer = { candidates: Array<{ content: { role: string, parts: Json[] }, finishReason?: string, index: number }>, usageMetadata: Json, modelVersion: string, responseId: string }
  const contents = [{ role: 'user', parts: [{ text: 'Tell me something' }] }]
  const asked = { contents, systemInstruction: { parts: [{ text: 'be nice' }] } }
  const res = await ask('generateContent', asked)
  t.equal(res.statusCode, 200)
  const whole = JSON.parse(await text(res.body)) as Answer
  t.match(whole, { candidates: [{ content: { role: 'model' }, finishReason: 'STOP', index: 0 }], modelVersion: 'gemini-sim' })
  t.match(whole.candidates[0]?.content.parts[0]?.text, /^Hello from gemini-sim/)
  const u = whole.usageMetadata as { promptTokenCount: number, candidatesTokenCount: number, totalTokenCount: number }
  t.ok(u.promptTokenCount > 0 && u.candidatesTokenCount > 0 && u.totalTokenCount === u.promptTokenCount + u.candidatesTokenCount)

  const stream = await ask('streamGenerateContent', asked)
  t.match(stream.headers['content-type'], /^text\/event-stream/)
  const raw = await text(stream.body)
  const chunks = raw.split('\r\n\r\n').filter((f) => f !== '').map((f) => { t.ok(f.startsWith('data: '), 'only data lines'); return JSON.parse(f.slice(6)) as Answer })
  t.notMatch(raw, /\[DONE\]|event:/)
  t.equal(chunks.map((c) => c.candidates[0]?.content.parts[0]?.text).join(''), whole.candidates[0]?.content.parts[0]?.text, 'the stream says what the JSON says')
  t.equal(chunks[chunks.length - 1]?.candidates[0]?.finishReason, 'STOP')
  t.same(chunks[chunks.length - 1]?.usageMetadata, whole.usageMetadata)

  const tools = [{ functionDeclarations: [{ name: 'get_weather', parameters: { type: 'OBJECT', properties: { city: { type: 'STRING' }, days: { type: 'INTEGER', minimum: 1 } } } }] }]
  const forced = JSON.parse(await text((await ask('generateContent', { contents, tools, toolConfig: { functionCallingConfig: { mode: 'ANY' } } })).body)) as Answer
  t.same(forced.candidates[0]?.content.parts, [{ functionCall: { name: 'get_weather', args: { city: 'example city', days: 1 } } }])
  const after = JSON.parse(await text((await ask('generateContent', { contents: [...contents, forced.candidates[0]?.content, { role: 'user', parts: [{ functionResponse: { name: 'get_weather', response: { output: 'Sunny' } } }] }], tools })).body)) as Answer
  t.match(after.candidates[0]?.content.parts[0]?.text, /The tool answered "Sunny"/)
  const cut = JSON.parse(await text((await ask('generateContent', { contents, generationConfig: { maxOutputTokens: 2 } })).body)) as Answer
  t.equal(cut.candidates[0]?.finishReason, 'MAX_TOKENS')

  const count = JSON.parse(await text((await ask('countTokens', { contents })).body)) as { totalTokens: number }
  t.ok(Number.isInteger(count.totalTokens) && count.totalTokens > 0)
  const slashed = JSON.parse(await text((await ask('generateContent', { contents }, 'google%2Fgemini-sim')).body)) as Answer
  t.equal(slashed.modelVersion, 'google/gemini-sim', 'an escaped slash in the path is the model\'s')

  const empty = await ask('generateContent', { contents: [] })
  t.equal(empty.statusCode, 400)
  t.same(JSON.parse(await text(empty.body)), { error: { code: 400, message: '* GenerateContentRequest.contents: contents is not specified', status: 'INVALID_ARGUMENT' } })
  const lost = await client.request({ path: '/chat/completions', headers: {}, body: '{}', signal })
  t.equal(lost.statusCode, 404)
  t.match(JSON.parse(await text(lost.body)), { error: { code: 404, status: 'NOT_FOUND' } })
})

t.test('max_tokens cuts the answer (length / max_tokens) and stop sequences end it', async (t) => {
  const openai = createDemoClient('demo', 'openai', { chunkDelayMs: 0 })
  const cut = JSON.parse(await text((await call(openai, { model: 'gpt-sim', max_tokens: 3, messages: [{ role: 'user', content: 'a long answer please' }] })).body)) as { choices: Array<{ message: { content: string }, finish_reason: string }>, usage: { completion_tokens: number } }
  t.equal(cut.choices[0]?.finish_reason, 'length')
  t.ok(cut.usage.completion_tokens <= 3 && cut.usage.completion_tokens > 0)
  t.ok((cut.choices[0]?.message.content.length ?? 99) <= 16)

  const messages = createDemoClient('demo-messages', 'messages', { chunkDelayMs: 0 })
  const one = JSON.parse(await text((await call(messages, { model: 'claude-sim', max_tokens: 1, messages: [{ role: 'user', content: 'x' }] })).body)) as { stop_reason: string, content: Array<{ text: string }>, usage: { output_tokens: number } }
  t.equal(one.stop_reason, 'max_tokens')
  t.equal(one.content[0]?.text, 'Hello')
  t.equal(one.usage.output_tokens, 1)
  const stopped = JSON.parse(await text((await call(messages, { model: 'claude-sim', max_tokens: 100, stop_sequences: ['You said'], messages: [{ role: 'user', content: 'x' }] })).body)) as { stop_reason: string, stop_sequence: string, content: Array<{ text: string }> }
  t.equal(stopped.stop_reason, 'stop_sequence')
  t.equal(stopped.stop_sequence, 'You said')
  t.equal(stopped.content[0]?.text, 'Hello from claude-sim.')
})

t.test('tool calls: arguments from the schema when forced or asked for; text after a tool result', async (t) => {
  const openai = createDemoClient('demo', 'openai', { chunkDelayMs: 0 })
  const forced = JSON.parse(await text((await call(openai, { model: 'gpt-sim', tools: [WEATHER_OPENAI], tool_choice: 'required', messages: [{ role: 'user', content: 'hi' }] })).body)) as { choices: Array<{ message: { content: null, tool_calls: Array<{ id: string, type: string, function: { name: string, arguments: string } }> }, finish_reason: string }> }
  t.equal(forced.choices[0]?.finish_reason, 'tool_calls')
  t.equal(forced.choices[0]?.message.content, null)
  const fn = forced.choices[0]?.message.tool_calls[0]
  t.match(fn, { type: 'function', id: /^call_/, function: { name: 'get_weather' } })
  t.same(JSON.parse(fn?.function.arguments ?? ''), { city: 'example city', days: 1, unit: 'celsius', detailed: true })

  const auto = JSON.parse(await text((await call(openai, { model: 'gpt-sim', tools: [WEATHER_OPENAI], messages: [{ role: 'user', content: 'no need' }] })).body)) as typeof forced
  t.equal(auto.choices[0]?.finish_reason, 'stop', 'tool_choice auto and nothing asked: text')
  const none = JSON.parse(await text((await call(openai, { model: 'gpt-sim', tools: [WEATHER_OPENAI], tool_choice: 'none', messages: [{ role: 'user', content: 'use a tool' }] })).body)) as typeof forced
  t.equal(none.choices[0]?.finish_reason, 'stop')

  const messages = createDemoClient('demo-messages', 'messages', { chunkDelayMs: 0 })
  const asked = await call(messages, { model: 'claude-sim', max_tokens: 100, stream: true, tools: [WEATHER_MESSAGES], messages: [{ role: 'user', content: 'call get_weather for Oslo' }] })
  const fs = frames(await text(asked.body))
  const start = fs.find((f) => f.event === 'content_block_start')
  t.match(JSON.parse(start?.data ?? '{}'), { index: 0, content_block: { type: 'tool_use', id: /^toolu_/, name: 'get_weather', input: {} } })
  const json = fs.filter((f) => f.event === 'content_block_delta').map((f) => (JSON.parse(f.data) as { delta: { type: string, partial_json: string } }).delta)
  t.ok(json.every((d) => d.type === 'input_json_delta'))
  t.same(JSON.parse(json.map((d) => d.partial_json).join('')), { city: 'example city', tags: ['example tags'] })
  t.match(JSON.parse(fs[fs.length - 2]?.data ?? '{}'), { delta: { stop_reason: 'tool_use' } })

  const after = JSON.parse(await text((await call(messages, {
    model: 'claude-sim',
    max_tokens: 100,
    tools: [WEATHER_MESSAGES],
    messages: [
      { role: 'user', content: 'call get_weather' },
      { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: {} }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: 'sunny and 20 degrees' }] }
    ]
  })).body)) as { content: Array<{ type: string, text: string }>, stop_reason: string }
  t.equal(after.stop_reason, 'end_turn')
  t.match(after.content[0]?.text, /The tool answered "sunny and 20 degrees"/)
})

t.test('count_tokens, bad JSON and unknown paths answer like a provider', async (t) => {
  const messages = createDemoClient('demo-messages', 'messages', { chunkDelayMs: 0 })
  const signal = new CallAbort()
  const count = await messages.request({ path: '/v1/messages/count_tokens', headers: {}, body: JSON.stringify({ model: 'claude-sim', messages: [{ role: 'user', content: 'hi' }] }), signal })
  const n = (JSON.parse(await text(count.body)) as { input_tokens: number }).input_tokens
  t.ok(Number.isInteger(n) && n > 0)

  const bad = await messages.request({ path: '/v1/messages', headers: {}, body: '{oops', signal })
  t.equal(bad.statusCode, 400)
  t.same(JSON.parse(await text(bad.body)), { type: 'error', error: { type: 'invalid_request_error', message: 'The request body is not valid JSON.' } })
  const missing = await messages.request({ path: '/v1/messages', headers: {}, body: JSON.stringify({ model: 'm', messages: [] }), signal })
  t.equal(missing.statusCode, 400)
  await text(missing.body)

  const openai = createDemoClient('demo', 'openai', { chunkDelayMs: 0 })
  const lost = await openai.request({ path: '/audio/speech', headers: {}, body: '{}', signal })
  t.equal(lost.statusCode, 404)
  t.match(JSON.parse(await text(lost.body)), { error: { type: 'invalid_request_error', param: null } })
})

t.test('abort: the stream stops at once, errors with AbortError, and leaves no timer behind', async (t) => {
  const client = createDemoClient('demo', 'openai', { chunkDelayMs: 50 })
  const before = timeouts()
  const controller = new CallAbort()
  const res = await call(client, { model: 'gpt-sim', stream: true, messages: [{ role: 'user', content: 'a long one' }] }, controller)
  const got: string[] = []
  const ended = new Promise<Error | null>((resolve) => {
    res.body.on('data', (c: Buffer | string) => {
      got.push(String(c))
      if (got.length === 2) controller.abort()
    })
    res.body.on('error', (err) => resolve(err))
    res.body.on('end', () => resolve(null))
  })
  const err = await ended
  t.equal(err?.name, 'AbortError')
  t.equal(got.length, 2, 'nothing after the abort')
  t.ok(res.body.destroyed)
  await new Promise((resolve) => setImmediate(resolve))
  t.equal(timeouts(), before, 'no timer left running')

  const aborted = new CallAbort()
  aborted.abort()
  await t.rejects(call(client, { model: 'gpt-sim', messages: [{ role: 'user', content: 'x' }] }, aborted), { name: 'AbortError' })
})

t.test('close() ends the streams still running', async (t) => {
  const client = createDemoClient('demo-messages', 'messages', { chunkDelayMs: 30 })
  const res = await call(client, { model: 'claude-sim', max_tokens: 100, stream: true, messages: [{ role: 'user', content: 'x' }] })
  res.body.once('data', () => { void client.close() })
  await new Promise((resolve) => res.body.once('close', resolve))
  t.ok(res.body.destroyed)
})

/** The pauses (in ms) the demo's paced body schedules between frames while `run` reads it. */
async function pausesWhile (run: () => Promise<unknown>): Promise<number[]> {
  const real = globalThis.setTimeout
  const pauses: number[] = []
  const spy = (fn: (...args: unknown[]) => void, ms?: number, ...args: unknown[]): NodeJS.Timeout => {
    if (fn.name === 'push') pauses.push(ms ?? 0)
    return real(fn, ms, ...args)
  }
  globalThis.setTimeout = spy as typeof setTimeout
  try { await run() } finally { globalThis.setTimeout = real }
  return pauses
}

t.test('the default delay comes from MODELGATE_DEMO_DELAY_MS, and 0 is allowed', async (t) => {
  const saved = process.env.MODELGATE_DEMO_DELAY_MS
  t.teardown(() => { if (saved === undefined) delete process.env.MODELGATE_DEMO_DELAY_MS; else process.env.MODELGATE_DEMO_DELAY_MS = saved })
  const stream = async (): Promise<string> => await text((await call(createDemoClient('demo', 'openai'), { model: 'gpt-sim', stream: true, messages: [{ role: 'user', content: 'paced' }] })).body)
  process.env.MODELGATE_DEMO_DELAY_MS = '7'
  let sse = ''
  const paced = await pausesWhile(async () => { sse = await stream() })
  t.equal(paced.length, frames(sse).length - 1, 'a pause before every frame but the first')
  t.ok(paced.every((ms) => ms === 7), `each of the configured length: ${paced.join(',')}`)
  process.env.MODELGATE_DEMO_DELAY_MS = '0'
  t.same(await pausesWhile(stream), [], '0: every frame at once, no timer')
  delete process.env.MODELGATE_DEMO_DELAY_MS
  const byDefault = await pausesWhile(stream)
  t.ok(byDefault.length > 0 && byDefault.every((ms) => ms === 5), 'unset: 5 ms')
})

t.test('the official SDKs read the demo with their strict helpers', async (t) => {
  const base = await bridge(t, 1)
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: 'unused', maxRetries: 0 })
  const done = await openai.chat.completions.stream({ model: 'gpt-sim', messages: [{ role: 'user', content: 'hello' }], stream_options: { include_usage: true } }).finalChatCompletion()
  t.match(done.choices[0]?.message.content, /^Hello from gpt-sim/)
  t.ok((done.usage?.completion_tokens ?? 0) > 0)
  const tool = await openai.chat.completions.stream({ model: 'gpt-sim', messages: [{ role: 'user', content: 'hello' }], tools: [WEATHER_OPENAI], tool_choice: { type: 'function', function: { name: 'get_weather' } } }).finalChatCompletion()
  const tc = tool.choices[0]?.message.tool_calls?.[0]
  t.equal(tc?.type === 'function' ? tc.function.name : null, 'get_weather')

  const anthropic = new Anthropic({ baseURL: base, apiKey: 'unused', maxRetries: 0 })
  const msg = await anthropic.messages.stream({ model: 'claude-sim', max_tokens: 200, messages: [{ role: 'user', content: 'hello' }] }).finalMessage()
  t.match(msg.content[0], { type: 'text', text: /^Hello from claude-sim/ })
  t.equal(msg.stop_reason, 'end_turn')
  const use = await anthropic.messages.stream({ model: 'claude-sim', max_tokens: 200, tools: [WEATHER_MESSAGES], tool_choice: { type: 'any' }, messages: [{ role: 'user', content: 'hello' }] }).finalMessage()
  t.match(use.content[0], { type: 'tool_use', name: 'get_weather', input: { city: 'example city' } })
  const created = await anthropic.messages.create({ model: 'claude-sim', max_tokens: 200, messages: [{ role: 'user', content: 'hello' }] })
  t.equal(created.type, 'message')
  const counted = await anthropic.messages.countTokens({ model: 'claude-sim', messages: [{ role: 'user', content: 'hello' }] })
  t.ok(counted.input_tokens > 0)
})

t.test('the demo reads a bounded part of a request: the start of the last user message, the first 128 tools', async (t) => {
  const tools = Array.from({ length: 5_000 }, (_, i) => ({ type: 'function', function: { name: `tool_${i}`, parameters: { type: 'object' } } }))
  const view = readRequest({ model: 'demo/x', messages: [{ role: 'user', content: 'x'.repeat(1_000_000) + ' tool_4999' }], tools }, 'openai')
  t.equal(view.tools.length, 128)
  t.equal(view.lastUserText.length, 10_000)
  t.same(toolsToCall(view, true, false).map((x) => x.name), ['tool_0'], 'a name past what is read is not seen')
})
