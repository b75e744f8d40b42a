import t from 'tap'
import fc from 'fast-check'
import { EventStreamCodec, type MessageHeaders } from '@smithy/eventstream-codec'
import { fromUtf8, toUtf8 } from '@smithy/util-utf8'
import { EventStreamParser, invokeFrame } from '../../engine/protocols/converse/index.js'
import { pairFor, upstreamPath } from '../../engine/translation/index.js'
import type { Json, Protocol, SseEvent, TranslateCtx } from '../../engine/translation/types.js'

// The Converse codec behind every client protocol: requests written from each client's shape
// (through Messages), answers, usage (cache reads and writes, the 1h writes apart), errors, and
// event streams framed as Bedrock frames them, read back whole however the bytes are split.

const CTX: TranslateCtx = { model: 'bedrock/claude', upstreamModel: 'us.anthropic.claude-sonnet-4-5-20250929-v1:0', id: 'abc', created: 1700000000, stream: false, includeUsage: true, flatten: false, defaultMaxTokens: 4096 }
const NOVA: TranslateCtx = { ...CTX, model: 'bedrock/nova', upstreamModel: 'amazon.nova-pro-v1:0' }
const codec = new EventStreamCodec(toUtf8, fromUtf8)

const PNG = 'iVBORw0KGgo='

function message (eventType: string, payload: unknown, kind: 'event' | 'exception' = 'event'): Uint8Array {
  const headers: MessageHeaders = kind === 'event'
    ? { ':message-type': { type: 'string', value: 'event' }, ':event-type': { type: 'string', value: eventType }, ':content-type': { type: 'string', value: 'application/json' } }
    : { ':message-type': { type: 'string', value: 'exception' }, ':exception-type': { type: 'string', value: eventType }, ':content-type': { type: 'string', value: 'application/json' } }
  return codec.encode({ headers, body: fromUtf8(JSON.stringify(payload)) })
}

const TEXT_STREAM = [
  message('messageStart', { role: 'assistant', p: 'abc' }),
  message('contentBlockDelta', { contentBlockIndex: 0, delta: { reasoningContent: { text: 'Let me think.' } } }),
  message('contentBlockDelta', { contentBlockIndex: 0, delta: { reasoningContent: { signature: 'sig-1' } } }),
  message('contentBlockStop', { contentBlockIndex: 0 }),
  message('contentBlockDelta', { contentBlockIndex: 1, delta: { text: 'Hello' }, p: 'abcdefgh' }),
  message('contentBlockDelta', { contentBlockIndex: 1, delta: { text: ' wörld 👋' } }),
  message('contentBlockStop', { contentBlockIndex: 1 }),
  message('contentBlockStart', { contentBlockIndex: 2, start: { toolUse: { toolUseId: 'tooluse_1', name: 'get_weather' } } }),
  message('contentBlockDelta', { contentBlockIndex: 2, delta: { toolUse: { input: '{"city":' } } }),
  message('contentBlockDelta', { contentBlockIndex: 2, delta: { toolUse: { input: '"Paris"}' } } }),
  message('contentBlockStop', { contentBlockIndex: 2 }),
  message('messageStop', { stopReason: 'tool_use' }),
  message('metadata', { usage: { inputTokens: 10, outputTokens: 7, totalTokens: 37, cacheReadInputTokens: 12, cacheWriteInputTokens: 8, cacheDetails: [{ ttl: '5m', inputTokens: 3 }, { ttl: '1h', inputTokens: 5 }] }, metrics: { latencyMs: 300 } })
]
const BYTES = Buffer.concat(TEXT_STREAM)

/** The client's frames for the stream's bytes cut at `cuts`. */
function run (client: Protocol, bytes: Buffer, cuts: number[], ctx: TranslateCtx = { ...CTX, stream: true }) {
  const parser = new EventStreamParser()
  const mapper = pairFor(client, 'converse').stream(ctx)
  const out: SseEvent[] = []
  let at = 0
  for (const cut of [...cuts.filter((c) => c > 0 && c < bytes.length)].sort((a, b) => a - b).concat(bytes.length)) {
    for (const f of parser.push(bytes.subarray(at, cut))) out.push(...mapper.push(f))
    at = cut
  }
  for (const f of parser.end()) out.push(...mapper.push(f))
  out.push(...mapper.end())
  return { out, mapper }
}

const USAGE = { prompt_tokens: 30, cached_input_tokens: 12, completion_tokens: 7, cache_creation_input_tokens: 8, cache_write_1h_tokens: 5 }

t.test('a stream read whole at any split, for every client protocol', async (t) => {
  const expected = new Map<Protocol, string>()
  for (const client of ['openai', 'messages', 'responses', 'gemini'] as const) {
    const { out, mapper } = run(client, BYTES, [])
    expected.set(client, out.map((f) => `${f.event ?? ''}|${f.data}`).join('\n'))
    t.same(mapper.usage(), USAGE, `${client}: usage from Converse's own counts`)
    t.ok(mapper.finished(), `${client}: finished`)
    t.match(mapper.relayedText(), /Hello wörld 👋/, `${client}: relayed text`)
  }
  const chat = run('openai', BYTES, []).out.map((f) => f.data)
  t.ok(chat.some((d) => d.includes('"finish_reason":"tool_calls"')), 'chat: tool_calls')
  t.ok(chat.some((d) => d.includes('"cached_tokens":12')), 'chat: the usage chunk counts the cache read')
  t.equal(chat[chat.length - 1], '[DONE]')
  const messages = run('messages', BYTES, []).out
  t.same(messages.map((f) => f.event), ['message_start', 'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_stop', 'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_stop', 'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'])
  const delta = JSON.parse(messages[13]?.data ?? '{}') as Json
  t.same(delta, { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { input_tokens: 10, output_tokens: 7, cache_read_input_tokens: 12, cache_creation_input_tokens: 8, cache_creation: { ephemeral_5m_input_tokens: 3, ephemeral_1h_input_tokens: 5 }, server_tool_use: null, service_tier: null, inference_geo: null } })
  t.match(messages[3]?.data, /"signature_delta","signature":"sig-1"/, 'the reasoning signature kept')
  // the same frames whatever the split (bytes cut inside a prelude, a header, a payload, a CRC)
  fc.assert(fc.property(fc.constantFrom<Protocol>('openai', 'messages', 'responses', 'gemini'), fc.array(fc.integer({ min: 1, max: BYTES.length - 1 }), { maxLength: 12 }), (client, cuts) => {
    const got = run(client, BYTES, cuts).out.map((f) => `${f.event ?? ''}|${f.data}`).join('\n')
    return got === expected.get(client)
  }), { seed: 55, numRuns: 200 })
})

t.test('an exception inside the stream ends it with the client protocol\'s error event, once', async (t) => {
  const bytes = Buffer.concat([TEXT_STREAM[0] as Uint8Array, TEXT_STREAM[4] as Uint8Array, message('throttlingException', { message: 'Too many requests' }, 'exception')])
  const chat = run('openai', bytes, [7, 50])
  const last = JSON.parse(chat.out[chat.out.length - 1]?.data ?? '{}') as { error?: { message: string, type: string } }
  t.same(last.error?.message, 'Too many requests')
  t.equal(last.error?.type, 'rate_limit_error')
  t.notOk(chat.mapper.finished(), 'not finished: the call ends as an upstream error')
  t.same(chat.mapper.fail?.({ status: 502, message: 'x' }), [], 'the relay adds no second error')
  const messages = run('messages', bytes, [])
  t.equal(messages.out[messages.out.length - 1]?.event, 'error')
  t.match(messages.out[messages.out.length - 1]?.data, /"rate_limit_error"/)
  // a stream cut with no exception: the relay's own error frame, in the client's protocol
  const cut = run('gemini', Buffer.concat([TEXT_STREAM[0] as Uint8Array]), [])
  t.match(JSON.stringify(cut.mapper.fail?.({ status: 502, message: 'cut' })), /cut/)
  t.throws(() => new EventStreamParser().push(Buffer.from(TEXT_STREAM[0] as Uint8Array).fill(7, 20, 24)), 'a frame whose CRC does not match is refused')
})

t.test('requests from every client protocol', async (t) => {
  const chat = pairFor('openai', 'converse').request({
    model: 'm',
    messages: [
      { role: 'system', content: 'Be brief.' },
      { role: 'user', content: [{ type: 'text', text: 'Look' }, { type: 'image_url', image_url: { url: `data:image/png;base64,${PNG}` } }] },
      { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
      { role: 'tool', tool_call_id: 'call_1', content: '18 C' }
    ],
    tools: [{ type: 'function', function: { name: 'get_weather', description: 'Weather', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }],
    tool_choice: 'required',
    stop: ['END'],
    temperature: 0.5,
    top_p: 0.9,
    max_tokens: 300,
    seed: 4,
    user: 'u-1'
  }, CTX)
  t.same(chat.body, {
    messages: [
      { role: 'user', content: [{ text: 'Look' }, { image: { format: 'png', source: { bytes: PNG } } }] },
      { role: 'assistant', content: [{ toolUse: { toolUseId: 'call_1', name: 'get_weather', input: { city: 'Paris' } } }] },
      { role: 'user', content: [{ toolResult: { toolUseId: 'call_1', content: [{ text: '18 C' }] } }] }
    ],
    system: [{ text: 'Be brief.' }],
    inferenceConfig: { maxTokens: 300, temperature: 0.5, topP: 0.9, stopSequences: ['END'] },
    toolConfig: { tools: [{ toolSpec: { name: 'get_weather', description: 'Weather', inputSchema: { json: { type: 'object', properties: { city: { type: 'string' } } } } } }], toolChoice: { any: {} } }
  })
  t.same(chat.dropped, ['seed', 'user'], 'seed has no place; the user id (Messages metadata on the way) has none on Converse, and is named as the client sent it')
  t.equal(upstreamPath(pairFor('openai', 'converse'), CTX), '/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse')
  t.equal(upstreamPath(pairFor('openai', 'converse'), { ...CTX, stream: true }), '/model/us.anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream')

  const messages = pairFor('messages', 'converse').request({
    model: 'm',
    max_tokens: 100,
    system: [{ type: 'text', text: 'Long context', cache_control: { type: 'ephemeral', ttl: '1h' } }],
    messages: [
      { role: 'user', content: [{ type: 'text', text: 'hi', cache_control: { type: 'ephemeral' } }] },
      { role: 'assistant', content: [{ type: 'thinking', thinking: 'hmm', signature: 'sig' }, { type: 'redacted_thinking', data: 'b64' }, { type: 'text', text: 'ok' }] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: 't1', is_error: true, content: [{ type: 'text', text: 'failed' }] }, { type: 'document', title: 'a/b.pdf', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBE' } }] }
    ],
    top_k: 5,
    thinking: { type: 'enabled', budget_tokens: 1024 },
    tools: [{ name: 'f', input_schema: { type: 'object' }, cache_control: { type: 'ephemeral' } }, { type: 'web_search_20250305', name: 'web_search' }],
    tool_choice: { type: 'none' },
    service_tier: 'auto'
  }, CTX)
  t.same(messages.body.system, [{ text: 'Long context' }, { cachePoint: { type: 'default', ttl: '1h' } }])
  t.same((messages.body.messages as Json[])[0], { role: 'user', content: [{ text: 'hi' }, { cachePoint: { type: 'default' } }] })
  t.same((messages.body.messages as Json[])[1], { role: 'assistant', content: [{ reasoningContent: { reasoningText: { text: 'hmm', signature: 'sig' } } }, { reasoningContent: { redactedContent: 'b64' } }, { text: 'ok' }] })
  t.same((messages.body.messages as Json[])[2], { role: 'user', content: [{ toolResult: { toolUseId: 't1', content: [{ text: 'failed' }], status: 'error' } }, { document: { format: 'pdf', name: 'a b pdf', source: { bytes: 'JVBE' } } }] })
  t.same(messages.body.additionalModelRequestFields, { top_k: 5, thinking: { type: 'enabled', budget_tokens: 1024 } }, 'an Anthropic model takes top_k and thinking')
  t.same(messages.body.toolConfig, { tools: [{ toolSpec: { name: 'f', inputSchema: { json: { type: 'object' } } } }, { cachePoint: { type: 'default' } }] })
  t.same(messages.dropped, ['service_tier', 'tool_choice', 'tools.web_search'])
  const nova = pairFor('messages', 'converse').request({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }], top_k: 5 }, NOVA)
  t.same(nova.dropped, ['top_k'], 'a model that does not take top_k: reported')
  t.equal(nova.body.additionalModelRequestFields, undefined)
  const listed = pairFor('messages', 'converse').request({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }], top_k: 5 }, { ...NOVA, supported: new Set(['top_k']) })
  t.same(listed.body.additionalModelRequestFields, { top_k: 5 }, 'a model that lists top_k takes it')
  t.throws(() => pairFor('messages', 'converse').request({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://x/a.png' } }] }] }, CTX), { statusCode: 400, message: /image by URL/ }, 'an image by URL: Converse takes bytes only')
  t.throws(() => pairFor('messages', 'converse').request({ model: 'm', max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'text', text: 1 }] }] }, CTX), { statusCode: 400, message: /messages\[0\]\.content\[0\]\.text/ })

  const responses = pairFor('responses', 'converse').request({ model: 'm', instructions: 'Be brief.', input: 'Hello', max_output_tokens: 50, temperature: 0.2 }, CTX)
  t.same(responses.body, { messages: [{ role: 'user', content: [{ text: 'Hello' }] }], system: [{ text: 'Be brief.' }], inferenceConfig: { maxTokens: 50, temperature: 0.2 } })
  const gemini = pairFor('gemini', 'converse').request({ contents: [{ role: 'user', parts: [{ text: 'Hi' }] }], systemInstruction: { parts: [{ text: 'Sys' }] }, generationConfig: { maxOutputTokens: 20, stopSequences: ['X'], topK: 3 } }, NOVA)
  t.same(gemini.body.inferenceConfig, { maxTokens: 20, stopSequences: ['X'] })
  t.same(gemini.dropped, ['generationConfig.topK'], 'topK → Messages top_k, which this model does not take: named as the client sent it')
})

t.test('what the Converse leg cannot carry is named as each client sent it', async (t) => {
  const base = { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 10 }
  const tool = { type: 'function', function: { name: 'f', parameters: { type: 'object' }, strict: true } }
  const chat = pairFor('openai', 'converse').request({ ...base, response_format: { type: 'json_schema', json_schema: { name: 's', schema: { type: 'object' } } }, reasoning_effort: 'high', safety_identifier: 'u-2', tools: [tool], parallel_tool_calls: false }, CTX)
  t.same(chat.dropped, ['parallel_tool_calls', 'reasoning_effort', 'response_format', 'safety_identifier', 'tools.function.strict'])
  t.same(pairFor('openai', 'converse').request({ ...base, response_format: { type: 'json_schema', json_schema: { name: 's', schema: { type: 'object' } } } }, CTX).dropped, ['response_format'], 'only what the client sent')
  t.same(pairFor('openai', 'converse').request({ ...base, top_k: 4 }, NOVA).dropped, ['top_k'], 'a name both protocols share stays as it is')
  const responses = pairFor('responses', 'converse').request({ model: 'm', input: 'hi', user: 'u-1', text: { format: { type: 'json_schema', name: 's', schema: { type: 'object' } } }, tools: [{ type: 'function', name: 'f', parameters: { type: 'object' } }], parallel_tool_calls: false }, CTX)
  t.same(responses.dropped, ['parallel_tool_calls', 'text.format', 'user'])
  const gemini = pairFor('gemini', 'converse').request({ contents: [{ role: 'user', parts: [{ text: 'Hi' }] }], generationConfig: { maxOutputTokens: 2048, responseMimeType: 'application/json', responseJsonSchema: { type: 'object' }, thinkingConfig: { thinkingBudget: 1024 } } }, NOVA)
  t.same(gemini.dropped, ['generationConfig.responseJsonSchema', 'generationConfig.responseMimeType', 'generationConfig.thinkingConfig'])
  t.same(pairFor('messages', 'converse').request({ ...base, metadata: { user_id: 'u' }, service_tier: 'auto' }, CTX).dropped, ['metadata', 'service_tier'], 'a Messages client: its own names')
})

const ANSWER = {
  output: { message: { role: 'assistant', content: [{ reasoningContent: { reasoningText: { text: 'mull', signature: 's1' } } }, { text: 'Hi there' }, { toolUse: { toolUseId: 'tu_1', name: 'get_weather', input: { city: 'Paris' } } }] } },
  stopReason: 'tool_use',
  usage: { inputTokens: 10, outputTokens: 4, totalTokens: 34, cacheReadInputTokens: 12, cacheWriteInputTokens: 8, cacheDetails: [{ ttl: '1h', inputTokens: 8 }] },
  metrics: { latencyMs: 310 }
}

t.test('answers to every client protocol, usage exact', async (t) => {
  const usage = { prompt_tokens: 30, cached_input_tokens: 12, completion_tokens: 4, cache_creation_input_tokens: 8, cache_write_1h_tokens: 8 }
  const chat = pairFor('openai', 'converse').response(ANSWER, CTX)
  t.same(chat.usage, usage)
  t.match(chat.body, { object: 'chat.completion', choices: [{ message: { content: 'Hi there', tool_calls: [{ id: 'tu_1', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] }, finish_reason: 'tool_calls' }], usage: { prompt_tokens: 30, prompt_tokens_details: { cached_tokens: 12 } } })
  const messages = pairFor('messages', 'converse').response(ANSWER, CTX)
  t.match(messages.body, { type: 'message', content: [{ type: 'thinking', thinking: 'mull', signature: 's1' }, { type: 'text', text: 'Hi there' }, { type: 'tool_use', id: 'tu_1' }], stop_reason: 'tool_use', usage: { input_tokens: 10, cache_read_input_tokens: 12, cache_creation_input_tokens: 8, cache_creation: { ephemeral_1h_input_tokens: 8 } } })
  t.same(messages.usage, usage)
  const responses = pairFor('responses', 'converse').response(ANSWER, { ...CTX, clientRequest: { model: 'm', input: 'x' } })
  t.match(responses.body, { object: 'response', usage: { input_tokens: 30, input_tokens_details: { cached_tokens: 12 } } })
  const gemini = pairFor('gemini', 'converse').response(ANSWER, CTX)
  t.match(gemini.body, { usageMetadata: { promptTokenCount: 30, cachedContentTokenCount: 12 } })
  for (const [stop, finish] of [['end_turn', 'stop'], ['stop_sequence', 'stop'], ['max_tokens', 'length'], ['tool_use', 'tool_calls'], ['guardrail_intervened', 'content_filter'], ['content_filtered', 'content_filter']]) {
    const r = pairFor('openai', 'converse').response({ ...ANSWER, stopReason: stop }, CTX)
    t.equal((r.body as { choices: Array<{ finish_reason: string }> }).choices[0]?.finish_reason, finish, `${stop as string} → ${finish as string}`)
  }
  t.equal((pairFor('messages', 'converse').response({ ...ANSWER, stopReason: 'guardrail_intervened' }, CTX).body as Json).stop_reason, 'refusal')
  t.throws(() => pairFor('openai', 'converse').response({ output: {} }, CTX), { statusCode: 502, message: /./ }, 'an answer without its message is the upstream\'s fault')
  t.throws(() => pairFor('openai', 'converse').response({ ...ANSWER, usage: { inputTokens: -1 } }, CTX), { statusCode: 502, message: /./ })
})

t.test('errors in the client\'s shape', async (t) => {
  t.match(pairFor('openai', 'converse').error(429, { message: 'Too many requests' }), { error: { message: 'Too many requests', type: 'rate_limit_error' } })
  t.match(pairFor('messages', 'converse').error(400, { message: 'bad', __type: 'ValidationException' }), { type: 'error', error: { type: 'invalid_request_error', message: 'bad' } })
  t.match(pairFor('gemini', 'converse').error(503, { message: 'later' }), { error: { code: 503, message: 'later' } })
  t.match(pairFor('openai', 'converse').error(500, 'not json'), { error: { message: /500/ } })
})

t.test('InvokeModel stream chunks: the Messages events they carry, Bedrock\'s metrics left out', async (t) => {
  const chunk = (ev: Json): Uint8Array => message('chunk', { bytes: Buffer.from(JSON.stringify(ev)).toString('base64'), p: 'ab' })
  const bytes = Buffer.concat([
    chunk({ type: 'message_start', message: { id: 'msg_1', type: 'message', role: 'assistant', content: [], usage: { input_tokens: 9, output_tokens: 1, cache_read_input_tokens: 2 } } }),
    chunk({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }),
    chunk({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hi' } }),
    chunk({ type: 'content_block_stop', index: 0 }),
    chunk({ type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 3 } }),
    chunk({ type: 'message_stop', 'amazon-bedrock-invocationMetrics': { inputTokenCount: 9, outputTokenCount: 3 } })
  ])
  const parser = new EventStreamParser(invokeFrame)
  const frames = [...parser.push(bytes.subarray(0, 100)), ...parser.push(bytes.subarray(100)), ...parser.end()]
  t.same(frames.map((f) => f.event), ['message_start', 'content_block_start', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'])
  t.equal(frames[5]?.data, '{"type":"message_stop"}')
  const mapper = pairFor('openai', 'messages').stream({ ...CTX, stream: true })
  for (const f of frames) mapper.push(f)
  t.same(mapper.usage(), { prompt_tokens: 11, cached_input_tokens: 2, completion_tokens: 3, cache_creation_input_tokens: 0 })
  const err = new EventStreamParser(invokeFrame).push(message('modelStreamErrorException', { message: 'model broke' }, 'exception'))
  t.same(err.map((f) => f.event), ['error'])
  t.match(err[0]?.data, /model broke/)
})
