import t, { type Test } from 'tap'
import Fastify from 'fastify'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import { GoogleGenAI } from '@google/genai'
import { definePlugin, type CallOutcome, type Json, type PluginAnswer } from '../../plugins/api/index.js'
import { testGateway, TEST_KEY } from '../../engine/host/testing.js'

// A plugin may answer a call itself at admission (what a cache does): nothing goes upstream, the
// answer reaches the client in its protocol, whole or replayed as the protocol's own stream, and
// the official SDKs' stream helpers rebuild exactly that answer; the call costs nothing and its
// outcome says it was a hit, with what it would have cost.

const usage = { prompt_tokens: 1200, cached_input_tokens: 0, completion_tokens: 300, cache_creation_input_tokens: 0 }
const longText = 'The heron stands in the shallows, patient as a post, waiting for the light to shift and a fish to forget it is there. '.repeat(3)

const ANSWERS: Record<string, Json> = {
  openai: {
    id: 'chatcmpl-cached',
    object: 'chat.completion',
    created: 1700000000,
    model: 'test/echo',
    choices: [{ index: 0, message: { role: 'assistant', content: longText, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Lyon","unit":"celsius","days":3,"hourly":false}' } }] }, finish_reason: 'tool_calls', logprobs: null }],
    usage: { prompt_tokens: 1200, completion_tokens: 300, total_tokens: 1500 }
  },
  messages: {
    id: 'msg_cached',
    type: 'message',
    role: 'assistant',
    model: 'test/claude',
    stop_reason: 'tool_use',
    stop_sequence: null,
    content: [
      { type: 'thinking', thinking: 'The user wants the weather; a tool call will give it. '.repeat(3), signature: 'sig-abc' },
      { type: 'text', text: longText },
      { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Lyon', days: 3 } }
    ],
    usage: { input_tokens: 1200, output_tokens: 300, cache_read_input_tokens: 0, cache_creation_input_tokens: 0 }
  },
  responses: {
    id: 'resp_cached',
    object: 'response',
    created_at: 1700000000,
    status: 'completed',
    model: 'test/echo',
    error: null,
    incomplete_details: null,
    output: [
      { type: 'message', id: 'msg_1', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: longText, annotations: [] }] },
      { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Lyon"}', status: 'completed' }
    ],
    usage: { input_tokens: 1200, input_tokens_details: { cached_tokens: 0 }, output_tokens: 300, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 1500 },
    parallel_tool_calls: true,
    tool_choice: 'auto',
    tools: []
  },
  gemini: {
    candidates: [{
      content: { role: 'model', parts: [{ text: 'Checking the forecast.', thought: true }, { text: longText, thoughtSignature: 'c2lnLWdlbQ==' }, { functionCall: { name: 'get_weather', args: { city: 'Lyon', days: 3 } } }] },
      finishReason: 'STOP',
      index: 0
    }],
    usageMetadata: { promptTokenCount: 1200, candidatesTokenCount: 300, totalTokenCount: 1500 },
    modelVersion: 'test/echo',
    responseId: 'gem-cached'
  }
}

async function start (t: Test) {
  const outcomes: CallOutcome[] = []
  const answerer = definePlugin({
    name: 'answerer',
    plugin: async (fastify) => {
      fastify.gateway.addHook('onAdmission', (ctx) => {
        const answer: PluginAnswer = { body: structuredClone(ANSWERS[ctx.call.protocol] as Json), usage, cacheHit: true, headers: { 'x-answered-by': 'plugin' } }
        ctx.answer?.(answer)
      })
      fastify.gateway.addHook('onCallEnd', (o) => { outcomes.push(o) })
    }
  })
  // runs after the answerer: it must never see a call the answerer answered
  const after = definePlugin({
    name: 'after',
    plugin: async (fastify) => { fastify.gateway.addHook('onAdmission', () => { throw new Error('a later admission hook ran') }) }
  })
  const app = Fastify()
  const gw = await testGateway(app)
  await gw.use('auth')
  await gw.use('usage')
  await gw.use(answerer)
  await gw.use(after)
  await gw.use('guardrails', { rules: [{ name: 'post', pattern: 'as a post', action: 'redact', on: ['response'] }] })
  await gw.routes()
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(() => app.close())
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  return {
    app,
    gw,
    base,
    outcomes,
    openai: new OpenAI({ baseURL: `${base}/v1`, apiKey: TEST_KEY, maxRetries: 0 }),
    anthropic: new Anthropic({ baseURL: base, apiKey: TEST_KEY, maxRetries: 0 }),
    google: new GoogleGenAI({ apiKey: TEST_KEY, httpOptions: { baseUrl: base } })
  }
}

const redacted = longText.replaceAll('as a post', '[REDACTED]')

t.test('chat: whole and streamed, rebuilt by the SDK\'s stream helper; free, marked a hit, through the response hooks', async (t) => {
  const g = await start(t)
  const whole = await g.openai.chat.completions.create({ model: 'test/echo', messages: [{ role: 'user', content: 'weather?' }] })
  t.equal(whole.id, 'chatcmpl-cached')
  t.equal(whole.choices[0]?.message.content, redacted, 'the response hooks saw it: the guardrail redacted it')
  const stream = g.openai.chat.completions.stream({ model: 'test/echo', messages: [{ role: 'user', content: 'weather?' }], stream_options: { include_usage: true } })
  let deltas = 0
  stream.on('content', () => { deltas++ })
  const final = await stream.finalChatCompletion()
  t.ok(deltas > 3, `the text came in several deltas (${deltas})`)
  t.equal(final.choices[0]?.message.content, redacted)
  t.same(final.choices[0]?.message.tool_calls?.[0]?.function, { name: 'get_weather', arguments: '{"city":"Lyon","unit":"celsius","days":3,"hourly":false}' }, 'the tool call rebuilt from its fragments')
  t.equal(final.choices[0]?.finish_reason, 'tool_calls')
  t.equal(final.usage?.prompt_tokens, 1200, 'the usage chunk the client asked for')
  const [a, b] = g.outcomes
  for (const o of [a, b]) {
    t.match(o, { status: 'ok', attempted: false, billed: false, costNano: 0, cacheHit: true, attempts: [] }, 'no provider, no cost')
    t.equal(o?.usage.prompt_tokens, 1200, 'with the tokens it stands for')
    t.equal(o?.savedNano, 1200 * 1000 + 300 * 2000, 'and what it would have cost at the model\'s prices')
  }
  await g.gw.gateway.store.flush()
  const rows = await g.gw.gateway.store.usage.page({}, 10)
  t.equal(rows.length, 2, 'each hit has its usage record')
  t.match(rows[0], { cache_hit: 1, cost_nano: 0, saved_nano: 1_800_000, prompt_tokens: 1200, completion_tokens: 300, provider: null })
})

t.test('Messages: thinking, text and a tool call replayed so that finalMessage() rebuilds them', async (t) => {
  const g = await start(t)
  const stream = g.anthropic.messages.stream({ model: 'test/claude', max_tokens: 100, messages: [{ role: 'user', content: 'weather?' }] })
  const final = await stream.finalMessage()
  t.match(final, { id: 'msg_cached', stop_reason: 'tool_use', usage: { input_tokens: 1200, output_tokens: 300 } })
  t.same(final.content.map((b) => b.type), ['thinking', 'text', 'tool_use'])
  t.match(final.content[0], { type: 'thinking', signature: 'sig-abc' }, 'the thinking block with its signature')
  t.equal((final.content[1] as { text: string }).text, redacted)
  t.same((final.content[2] as { input: unknown }).input, { city: 'Lyon', days: 3 })
  const whole = await g.anthropic.messages.create({ model: 'test/claude', max_tokens: 100, messages: [{ role: 'user', content: 'weather?' }] })
  t.equal(whole.id, 'msg_cached')
})

t.test('Responses: finalResponse() rebuilds the replayed events', async (t) => {
  const g = await start(t)
  const stream = g.openai.responses.stream({ model: 'test/echo', input: 'weather?' })
  const final = await stream.finalResponse()
  t.equal(final.id, 'resp_cached')
  t.equal(final.output_text, redacted)
  t.match(final.output[1], { type: 'function_call', name: 'get_weather', arguments: '{"city":"Lyon"}' })
  const res = await fetch(`${g.base}/v1/responses`, { method: 'POST', headers: { authorization: `Bearer ${TEST_KEY}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'test/echo', input: 'weather?' }) })
  t.equal(res.headers.get('x-answered-by'), 'plugin', 'the plugin\'s headers')
  t.equal((await res.json() as { id: string }).id, 'resp_cached')
})

t.test('Gemini: whole, and replayed as SSE chunks the SDK reads back into the same parts; as a JSON array without alt=sse', async (t) => {
  const g = await start(t)
  const whole = await g.google.models.generateContent({ model: 'test/echo', contents: 'weather?' })
  t.equal(whole.responseId, 'gem-cached')
  t.equal(whole.candidates?.[0]?.content?.parts?.filter((p) => p.thought !== true).map((p) => p.text ?? '').join(''), redacted, 'the response hooks saw it: the guardrail redacted it')
  t.same(whole.functionCalls, [{ name: 'get_weather', args: { city: 'Lyon', days: 3 } }])

  const chunks = []
  for await (const chunk of await g.google.models.generateContentStream({ model: 'test/echo', contents: 'weather?' })) chunks.push(chunk)
  t.ok(chunks.length > 3, `the text came in several chunks (${chunks.length})`)
  const parts = chunks.flatMap((c) => c.candidates?.[0]?.content?.parts ?? [])
  t.equal(parts.filter((p) => p.thought !== true).map((p) => p.text ?? '').join(''), redacted)
  t.equal(parts.filter((p) => p.thought === true).map((p) => p.text).join(''), 'Checking the forecast.', 'the thought summary')
  t.ok(parts.some((p) => p.thoughtSignature === 'c2lnLWdlbQ=='), 'the signature kept')
  t.same(parts.filter((p) => p.functionCall !== undefined).map((p) => p.functionCall), [{ name: 'get_weather', args: { city: 'Lyon', days: 3 } }], 'the call whole')
  t.match(chunks.at(-1), { candidates: [{ finishReason: 'STOP' }], usageMetadata: { promptTokenCount: 1200, candidatesTokenCount: 300 } })

  const res = await fetch(`${g.base}/v1beta/models/test/echo:streamGenerateContent`, { method: 'POST', headers: { 'x-goog-api-key': TEST_KEY, 'content-type': 'application/json' }, body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'weather?' }] }] }) })
  const array = await res.json() as Array<{ candidates?: Array<{ content?: { parts?: Array<{ text?: string, thought?: boolean }> } }> }>
  t.ok(Array.isArray(array) && array.length === chunks.length, 'the same chunks, as one JSON array')
  t.equal(array.flatMap((c) => c.candidates?.[0]?.content?.parts ?? []).filter((p) => p.thought !== true).map((p) => p.text ?? '').join(''), redacted)
  t.ok(g.outcomes.length === 3 && g.outcomes.every((o) => o.cacheHit && o.costNano === 0 && o.endpoint === 'generate_content' && o.usage.prompt_tokens === 1200), 'free hits, with the tokens they stand for')
})
