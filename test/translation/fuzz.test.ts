import t from 'tap'
import fc from 'fast-check'
import { droppedName } from '../../engine/gateway/dropped-names.js'
import { isGatewayError } from '../../engine/kernel/errors.js'
import { pairFor, upstreamPath } from '../../engine/translation/index.js'
import type { Protocol, SseEvent, TranslateCtx, TranslatorPair } from '../../engine/translation/types.js'
import { checkResponsesBody } from './responses-route.js'

// Hostile bodies for every pair: valid skeletons (so the bodies reach deep code) with some of
// their values swapped for nulls, wrong types, prototype names or random JSON, keys deleted and
// keys added. Whatever comes in, a pair answers or throws a GatewayError, never a TypeError, and
// what it answers is plain JSON: no function fished out of a prototype, drop names that are strings
// (made header tokens by the call, engine/gateway/dropped-names.ts). A share of the runs here;
// fuzz.slow.test.ts runs the full count on another seed. FUZZ_SEED and FUZZ_RUNS replay or widen a run.

const RUNS = Number(process.env.FUZZ_RUNS ?? 200)
const SEED = Number(process.env.FUZZ_SEED ?? 20240611)

const CHAT_REQUEST = {
  model: 'vendor/model',
  messages: [
    { role: 'system', content: 'Be brief.' },
    { role: 'developer', content: [{ type: 'text', text: 'English.' }] },
    { role: 'user', name: 'ann', content: [{ type: 'text', text: 'Look' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBO', detail: 'low' } }, { type: 'image_url', image_url: 'https://example.com/a.png' }] },
    { role: 'assistant', content: [{ type: 'text', text: 'ok' }, { type: 'refusal', refusal: 'no' }], refusal: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }, { id: 'call_2', type: 'custom', custom: { name: 'g', input: 'x' } }] },
    { role: 'tool', tool_call_id: 'call_1', content: [{ type: 'text', text: 'done' }] },
    { role: 'function', name: 'f', content: 'x' },
    { role: 'user', content: 'again' }
  ],
  tools: [{ type: 'function', function: { name: 'f', description: 'd', strict: true, parameters: { type: 'object', properties: {} } } }, { type: 'custom', custom: { name: 'g' } }],
  tool_choice: { type: 'function', function: { name: 'f' } },
  parallel_tool_calls: false,
  response_format: { type: 'json_schema', json_schema: { name: 'o', schema: { type: 'object' } } },
  reasoning_effort: 'medium',
  stop: ['END'],
  max_completion_tokens: 10,
  max_tokens: 20,
  n: 1,
  user: 'u',
  safety_identifier: 's',
  metadata: { user_id: 'm', k: 'v' },
  service_tier: 'default',
  temperature: 0.5,
  top_k: 3,
  thinking: { type: 'enabled', budget_tokens: 1024 },
  seed: 1,
  stream: true,
  stream_options: { include_usage: true }
}

const MESSAGES_REQUEST = {
  model: 'vendor/model',
  max_tokens: 100,
  system: [{ type: 'text', text: 'Be kind.', cache_control: { type: 'ephemeral' } }],
  messages: [
    { role: 'user', content: [{ type: 'text', text: 'Look' }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBO' } }, { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }, { type: 'document', source: { type: 'text', data: 'doc' } }] },
    { role: 'assistant', content: [{ type: 'thinking', thinking: 't', signature: 's' }, { type: 'text', text: 'ok' }, { type: 'tool_use', id: 'toolu_1', name: 'f', input: { a: 1 } }] },
    { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', is_error: false, content: [{ type: 'text', text: 'r' }] }, { type: 'text', text: 'next' }] },
    { role: 'system', content: 'mid' },
    { role: 'assistant', content: 'plain' }
  ],
  tools: [{ name: 'f', description: 'd', strict: true, input_schema: { type: 'object', properties: {} }, cache_control: { type: 'ephemeral' } }, { type: 'web_search_20250305', name: 'web_search' }],
  tool_choice: { type: 'tool', name: 'f', disable_parallel_tool_use: true },
  stop_sequences: ['END'],
  metadata: { user_id: 'u' },
  thinking: { type: 'enabled', budget_tokens: 2048 },
  output_config: { effort: 'high', format: { type: 'json_schema', schema: { type: 'object' } } },
  output_format: { type: 'json_schema', schema: { type: 'object' } },
  service_tier: 'standard_only',
  top_k: 5,
  temperature: 0.2,
  context_management: { edits: [] },
  stream: true
}

const CHAT_RESPONSE = {
  id: 'chatcmpl-1',
  object: 'chat.completion',
  choices: [{ index: 0, message: { role: 'assistant', content: 'hi', tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: '{"a":1}' } }] }, finish_reason: 'tool_calls' }],
  usage: { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7, prompt_tokens_details: { cached_tokens: 1 } }
}

const MESSAGES_RESPONSE = {
  id: 'msg_1',
  type: 'message',
  role: 'assistant',
  content: [{ type: 'text', text: 'hi' }, { type: 'tool_use', id: 'toolu_1', name: 'f', input: { a: 1 } }],
  stop_reason: 'tool_use',
  usage: { input_tokens: 5, cache_read_input_tokens: 1, cache_creation_input_tokens: 1, output_tokens: 2 }
}

const GEMINI_REQUEST = {
  contents: [
    { role: 'user', parts: [{ text: 'Look' }, { inlineData: { mimeType: 'image/png', data: 'iVBO' } }, { fileData: { mimeType: 'image/jpeg', fileUri: 'https://example.com/a.jpg' } }, { fileData: { fileUri: 'https://example.com/photo' } }, { inlineData: { mimeType: 'application/pdf', data: 'JVBE' } }] },
    { role: 'model', parts: [{ text: 'hmm', thought: true }, { text: 'ok', thoughtSignature: 'c2ln' }, { functionCall: { name: 'f', args: { a: 1 } }, thoughtSignature: 'bW9kZWxnYXRlLXRoaW5raW5nOlt7InR5cGUiOiJ0aGlua2luZyIsInRoaW5raW5nIjoieCIsInNpZ25hdHVyZSI6InMifV0=' }, { functionCall: { id: 'c2', name: 'f', args: {} } }, { executableCode: { language: 'PYTHON', code: '1' } }] },
    { role: 'user', parts: [{ functionResponse: { name: 'f', response: { output: 'r' } } }, { functionResponse: { id: 'c2', name: 'f', response: { error: 'e' }, parts: [{ inlineData: { mimeType: 'image/png', data: 'AA' } }] } }, { text: 'next' }] },
    { role: 'function', parts: [{ text: 'legacy' }] }
  ],
  systemInstruction: { role: 'user', parts: [{ text: 'Be brief.' }, { text: 'Really.' }] },
  tools: [{ functionDeclarations: [{ name: 'f', description: 'd', parameters: { type: 'OBJECT', properties: { a: { type: 'INTEGER', nullable: true } }, required: ['a'] } }, { name: 'g', parametersJsonSchema: { type: 'object' }, response: { type: 'OBJECT' } }] }, { googleSearch: {} }],
  toolConfig: { functionCallingConfig: { mode: 'ANY', allowedFunctionNames: ['f'] }, retrievalConfig: {} },
  generationConfig: {
    temperature: 1,
    topP: 0.95,
    topK: 64,
    maxOutputTokens: 100,
    stopSequences: ['END'],
    candidateCount: 1,
    presencePenalty: 0.1,
    frequencyPenalty: 0.2,
    seed: 3,
    responseMimeType: 'application/json',
    responseSchema: { type: 'OBJECT' },
    responseJsonSchema: { type: 'object' },
    thinkingConfig: { includeThoughts: true, thinkingBudget: 2048, thinkingLevel: 'high' },
    responseModalities: ['TEXT']
  },
  safetySettings: [{ category: 'HARM_CATEGORY_HARASSMENT', threshold: 'BLOCK_NONE' }]
}

const RESPONSES_REQUEST = {
  model: 'vendor/model',
  instructions: 'Be brief.',
  input: [
    { type: 'message', role: 'developer', content: [{ type: 'input_text', text: 'dev' }] },
    { role: 'user', content: [{ type: 'input_text', text: 'look' }, { type: 'input_image', image_url: 'https://example.com/a.png' }, { type: 'input_audio', input_audio: { data: 'AA', format: 'wav' } }] },
    { type: 'message', role: 'assistant', content: [{ type: 'output_text', text: 'ok' }] },
    { type: 'function_call', call_id: 'call_1__tsbc2ln', name: 'f', arguments: '{"a":1}' },
    { type: 'function_call_output', call_id: 'call_1__tsbc2ln', output: [{ type: 'input_text', text: 'r' }] }
  ],
  tools: [{ type: 'function', name: 'f', strict: true, parameters: { type: 'object' } }, { type: 'namespace', name: 'ns', tools: [{ type: 'function', name: 'g' }] }, { type: 'web_search' }],
  tool_choice: { type: 'function', name: 'f' },
  parallel_tool_calls: false,
  reasoning: { effort: 'low', summary: 'auto' },
  text: { format: { type: 'json_schema', name: 'o', schema: { type: 'object' } }, verbosity: 'low' },
  max_output_tokens: 50,
  temperature: 0.5,
  user: 'u',
  stream: true
}

const GEMINI_RESPONSE = {
  candidates: [
    { content: { role: 'model', parts: [{ text: 'hmm', thought: true, thoughtSignature: 'c2ln' }, { text: 'Hi', thoughtSignature: 'dA==' }, { functionCall: { name: 'f', args: { a: 1 } }, thoughtSignature: 'c2ln' }, { functionCall: { id: 'x', name: 'g', args: {} } }] }, finishReason: 'STOP', index: 0 },
    { content: { role: 'model', parts: [{ text: 'B' }] }, finishReason: 'MAX_TOKENS', index: 1 }
  ],
  promptFeedback: { blockReason: 'SAFETY' },
  usageMetadata: { promptTokenCount: 5, cachedContentTokenCount: 1, candidatesTokenCount: 2, thoughtsTokenCount: 3, totalTokenCount: 10 }
}

const ERROR_BODY = { type: 'error', error: { type: 'invalid_request_error', message: 'bad', code: null, param: 'x' } }
const GOOGLE_ERROR = [{ error: { code: 400, message: 'bad', status: 'INVALID_ARGUMENT', details: [] } }]

const CHAT_STREAM = [
  { id: 'c', object: 'chat.completion.chunk', created: 1, choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] },
  { id: 'c', choices: [{ index: 0, delta: { content: 'Hel' }, finish_reason: null }] },
  { id: 'c', choices: [{ index: 0, delta: { tool_calls: [{ index: 0, id: 'call_1', type: 'function', function: { name: 'f', arguments: '' } }] }, finish_reason: null }] },
  { id: 'c', choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { arguments: '{"a":1}' } }] }, finish_reason: null }] },
  { id: 'c', choices: [{ index: 0, delta: {}, finish_reason: 'tool_calls' }] },
  { id: 'c', choices: [], usage: { prompt_tokens: 5, completion_tokens: 2, prompt_tokens_details: { cached_tokens: 1 } } },
  { error: { message: 'boom', type: 'server_error' } }
]

const MESSAGES_STREAM = [
  { type: 'message_start', message: { id: 'msg_1', usage: { input_tokens: 5, output_tokens: 1 } } },
  { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
  { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hel' } },
  { type: 'content_block_stop', index: 0 },
  { type: 'content_block_start', index: 1, content_block: { type: 'tool_use', id: 'toolu_1', name: 'f', input: {} } },
  { type: 'content_block_delta', index: 1, delta: { type: 'input_json_delta', partial_json: '{"a":1}' } },
  { type: 'message_delta', delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 3 } },
  { type: 'message_stop' },
  { type: 'error', error: { type: 'overloaded_error', message: 'busy' } }
]

const GEMINI_STREAM = [
  { candidates: [{ content: { role: 'model', parts: [{ text: 'think', thought: true }] }, index: 0 }], usageMetadata: { promptTokenCount: 5 } },
  { candidates: [{ content: { role: 'model', parts: [{ text: 'Hel', thoughtSignature: 'c2ln' }] }, index: 0 }] },
  { candidates: [{ content: { role: 'model', parts: [{ functionCall: { name: 'f', args: { a: 1 } }, thoughtSignature: 'c2ln' }] }, index: 0 }, { content: { parts: [{ text: 'B' }] }, index: 1 }] },
  { candidates: [{ content: { role: 'model', parts: [{ text: '' }] }, finishReason: 'STOP', index: 0 }], usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 2, thoughtsTokenCount: 1, totalTokenCount: 8 } },
  { promptFeedback: { blockReason: 'OTHER' } },
  { error: { code: 429, message: 'slow', status: 'RESOURCE_EXHAUSTED' } }
]

const NAMES = ['constructor', '__proto__', 'toString', 'valueOf', 'hasOwnProperty', 'prototype']

const hostile: fc.Arbitrary<unknown> = fc.oneof(
  fc.constantFrom<unknown>(null, true, false, 0, -1, 1.5, 1e308, '', '[DONE]', [], {}, [null], [[]], ['x'], { type: 'constructor' }, ...NAMES),
  fc.string({ maxLength: 6 }),
  fc.integer(),
  fc.jsonValue({ maxDepth: 2 })
)

/** A value shaped like `v`: mostly kept, each node sometimes replaced, removed or given an extra key. */
function around (v: unknown): fc.Arbitrary<unknown> {
  let keep: fc.Arbitrary<unknown>
  if (Array.isArray(v)) {
    keep = v.length === 0 ? fc.constant([]) : fc.array(fc.oneof(...v.map(around)), { minLength: 0, maxLength: v.length + 1 })
  } else if (v !== null && typeof v === 'object') {
    const entries = Object.entries(v)
    keep = fc.tuple(
      fc.tuple(...entries.map(([, x]) => fc.oneof({ weight: 12, arbitrary: around(x) }, { weight: 1, arbitrary: fc.constant(undefined) }))),
      fc.option(fc.tuple(fc.constantFrom('type', 'text', 'content', 'index', 'role', 'usage', 'error', ...NAMES), hostile), { freq: 8 })
    ).map(([values, extra]) => {
      const o: Record<string, unknown> = {}
      entries.forEach(([k], i) => { o[k] = values[i] })
      if (extra !== null) Object.defineProperty(o, extra[0], { value: extra[1], enumerable: true, writable: true, configurable: true })
      return o
    })
  } else {
    keep = fc.constant(v)
  }
  return fc.oneof({ weight: 10, arbitrary: keep }, { weight: 1, arbitrary: hostile })
}

/** As a parsed JSON body would be (undefined gone, `__proto__` an own key). */
const json = (v: unknown): unknown => v === undefined ? undefined : JSON.parse(JSON.stringify(v))

const ctxArb: fc.Arbitrary<TranslateCtx> = fc.record({
  flatten: fc.boolean(),
  stream: fc.boolean(),
  includeUsage: fc.boolean(),
  supported: fc.option(fc.subarray(['top_k', 'reasoning_effort', 'temperature', 'thinking', 'output_config', 'max_tokens'])).map((s) => s === null ? undefined : new Set(s)),
  // what the Responses and Gemini pairs read back of the request in their answers
  clientRequest: fc.option(fc.oneof(around(GEMINI_REQUEST), around(RESPONSES_REQUEST)).map(json).filter((v): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v)), { nil: undefined })
}).map((c) => ({ model: 'vendor/model', upstreamModel: 'up-model', id: 'abc', created: 1700000000, defaultMaxTokens: 4096, ...c }))

/** Fails on a function anywhere in a result (a prototype member looked up by an untrusted string). */
function plain (v: unknown, path = '$'): void {
  if (typeof v === 'function') throw new Error(`a function at ${path}`)
  if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) plain(x, `${path}.${k}`)
}

/** Runs `fn`; anything it throws must be a GatewayError. */
function guarded (fn: () => unknown): void {
  let out: unknown
  try {
    out = fn()
  } catch (err) {
    if (isGatewayError(err)) return
    throw err
  }
  plain(out)
}

/** The protocols of model calls (MCP's tool calls have no translator pair). */
type ModelProtocol = Protocol

const SKELETONS: Record<ModelProtocol, { request: unknown, response: unknown, stream: unknown[], error: unknown }> = {
  openai: { request: CHAT_REQUEST, response: CHAT_RESPONSE, stream: CHAT_STREAM, error: ERROR_BODY },
  messages: { request: MESSAGES_REQUEST, response: MESSAGES_RESPONSE, stream: MESSAGES_STREAM, error: ERROR_BODY },
  responses: { request: RESPONSES_REQUEST, response: {}, stream: [], error: ERROR_BODY },
  gemini: { request: GEMINI_REQUEST, response: GEMINI_RESPONSE, stream: GEMINI_STREAM, error: GOOGLE_ERROR }
}

const frameArb = (events: unknown[]): fc.Arbitrary<SseEvent[]> => fc.array(fc.oneof(
  { weight: 8, arbitrary: fc.oneof(...events.map(around)).map((d) => ({ data: JSON.stringify(d) ?? 'null', event: (d as { type?: unknown } | null)?.type as string | undefined })) },
  { weight: 1, arbitrary: fc.record({ data: fc.constantFrom('[DONE]', '', '{', 'null', '"x"', '7', '[]'), event: fc.option(fc.constantFrom('message_start', 'error', ...NAMES), { nil: undefined }) }) }
), { maxLength: 14 }).map((frames) => frames.map((f) => f.event === undefined || typeof f.event !== 'string' ? { data: f.data } : f))

const PAIRS: Array<[ModelProtocol, ModelProtocol]> = [
  ['openai', 'messages'], ['messages', 'openai'], ['openai', 'openai'], ['messages', 'messages'],
  ['gemini', 'openai'], ['gemini', 'messages'], ['openai', 'gemini'], ['messages', 'gemini'], ['responses', 'gemini'], ['gemini', 'gemini']
]

/** The route's own checks, made before any pair sees a body (only the Responses route has some the pairs rely on). */
function routeAccepts (client: Protocol, body: Record<string, unknown>): boolean {
  if (client !== 'responses') return true
  try { checkResponsesBody(body) } catch { return false }
  return true
}

for (const [client, upstream] of PAIRS) {
  const pair: TranslatorPair = pairFor(client, upstream)
  t.test(`${client} → ${upstream}: hostile input never throws anything but a GatewayError`, async (t) => {
    const params = { seed: SEED, numRuns: RUNS, endOnFailure: true }
    fc.assert(fc.property(around(SKELETONS[client].request), ctxArb, (body, ctx) => {
      const b = json(body)
      if (b === null || typeof b !== 'object' || Array.isArray(b)) return // checkBody answers these before any pair
      if (!routeAccepts(client, b as Record<string, unknown>)) return
      guarded(() => {
        const out = pair.request(b as Record<string, unknown>, ctx)
        for (const name of out.dropped) if (typeof name !== 'string' || !/^[\w.%-]+$/.test(droppedName(name))) throw new Error(`dropped name not header-safe: ${String(name)}`)
        if (!upstreamPath(pair, ctx).startsWith('/')) throw new Error('an upstream path that is not a path')
        return out
      })
    }), params)
    t.pass('request()')

    fc.assert(fc.property(around(SKELETONS[upstream].response), ctxArb, (body, ctx) => {
      const b = json(body)
      if (b === null || typeof b !== 'object' || Array.isArray(b)) return // the pipeline parses an object or fails the call
      guarded(() => pair.response(b as Record<string, unknown>, ctx))
    }), params)
    t.pass('response()')

    fc.assert(fc.property(fc.integer({ min: 400, max: 599 }), fc.oneof(around(SKELETONS[upstream].error), hostile), (status, body) => {
      guarded(() => pair.error(status, json(body)))
    }), params)
    t.pass('error()')

    fc.assert(fc.property(frameArb(SKELETONS[upstream].stream), ctxArb, (frames, ctx) => {
      const mapper = pair.stream(ctx)
      for (const f of frames) guarded(() => mapper.push(f))
      guarded(() => mapper.end())
      guarded(() => [mapper.usage(), mapper.relayedText(), mapper.finished()])
    }), params)
    t.pass('stream push() and end()')
  })
}

// Converse, reached through each client's pair to Messages: its frames are named by their event
// type (the event-stream header), not by a field of their payload
const CONVERSE_RESPONSE = {
  output: { message: { role: 'assistant', content: [{ reasoningContent: { reasoningText: { text: 't', signature: 's' } } }, { text: 'hi' }, { toolUse: { toolUseId: 't1', name: 'f', input: { a: 1 } } }, { reasoningContent: { redactedContent: 'AA' } }] } },
  stopReason: 'tool_use',
  usage: { inputTokens: 5, outputTokens: 2, cacheReadInputTokens: 1, cacheWriteInputTokens: 2, cacheDetails: [{ ttl: '1h', inputTokens: 2 }] }
}
const CONVERSE_STREAM: Array<[string, unknown]> = [
  ['messageStart', { role: 'assistant' }],
  ['contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'Hel' } }],
  ['contentBlockDelta', { contentBlockIndex: 1, delta: { reasoningContent: { text: 'x', signature: 's' } } }],
  ['contentBlockStart', { contentBlockIndex: 2, start: { toolUse: { toolUseId: 't1', name: 'f' } } }],
  ['contentBlockDelta', { contentBlockIndex: 2, delta: { toolUse: { input: '{"a":1}' } } }],
  ['contentBlockStop', { contentBlockIndex: 2 }],
  ['messageStop', { stopReason: 'tool_use' }],
  ['metadata', { usage: { inputTokens: 5, outputTokens: 2, cacheDetails: [{ ttl: '5m', inputTokens: 1 }] } }],
  ['exception', { type: 'throttlingException', message: 'slow' }]
]
for (const client of ['openai', 'messages', 'responses', 'gemini'] as const) {
  const pair: TranslatorPair = pairFor(client, 'converse')
  t.test(`${client} → converse: hostile input never throws anything but a GatewayError`, async (t) => {
    const params = { seed: SEED, numRuns: RUNS / 2, endOnFailure: true }
    fc.assert(fc.property(around(SKELETONS[client].request), ctxArb, (body, ctx) => {
      const b = json(body)
      if (b === null || typeof b !== 'object' || Array.isArray(b)) return
      if (!routeAccepts(client, b as Record<string, unknown>)) return
      guarded(() => {
        const out = pair.request(b as Record<string, unknown>, ctx)
        for (const name of out.dropped) if (typeof name !== 'string' || !/^[\w.%-]+$/.test(droppedName(name))) throw new Error(`dropped name not header-safe: ${String(name)}`)
        return out
      })
    }), params)
    fc.assert(fc.property(around(CONVERSE_RESPONSE), ctxArb, (body, ctx) => {
      const b = json(body)
      if (b === null || typeof b !== 'object' || Array.isArray(b)) return
      guarded(() => pair.response(b as Record<string, unknown>, ctx))
    }), params)
    fc.assert(fc.property(fc.integer({ min: 400, max: 599 }), fc.oneof(around({ message: 'bad', __type: 'ValidationException' }), hostile), (status, body) => {
      guarded(() => pair.error(status, json(body)))
    }), params)
    const frames = fc.array(fc.oneof(...CONVERSE_STREAM.map(([event, data]) => around(data).map((d) => ({ event, data: JSON.stringify(d) ?? 'null' })))), { maxLength: 12 })
    fc.assert(fc.property(frames, ctxArb, (fs, ctx) => {
      const mapper = pair.stream(ctx)
      for (const f of fs) guarded(() => mapper.push(f))
      guarded(() => mapper.end())
      guarded(() => [mapper.usage(), mapper.relayedText(), mapper.finished(), mapper.fail?.({ status: 502, message: 'x' })])
    }), params)
    t.pass('request(), response(), error(), stream')
  })
}

t.test('the fuzzer reaches deep code: a skeleton goes through whole', async (t) => {
  // a sanity check on the skeletons themselves, so that the fuzz runs start from bodies that map
  const ctx: TranslateCtx = { model: 'vendor/model', upstreamModel: 'up-model', id: 'abc', created: 1, stream: false, includeUsage: true, flatten: false, defaultMaxTokens: 4096, supported: new Set(['top_k', 'reasoning_effort']) }
  const chat = pairFor('openai', 'messages').request(json(CHAT_REQUEST) as Record<string, unknown>, ctx)
  t.equal((chat.body.messages as unknown[]).length, 3, 'chat skeleton: user, assistant, user turns')
  t.ok(chat.dropped.includes('seed'))
  const messages = pairFor('messages', 'openai').request(json(MESSAGES_REQUEST) as Record<string, unknown>, ctx)
  t.equal(messages.body.reasoning_effort, 'high')
  t.ok(messages.dropped.includes('tools.web_search'))
  const gemini = pairFor('gemini', 'openai').request(json(GEMINI_REQUEST) as Record<string, unknown>, ctx)
  t.equal((gemini.body.messages as unknown[]).length, 7, 'gemini skeleton: system, user, assistant with calls, two tool results, user, user')
  t.ok(gemini.dropped.includes('tools.googleSearch'))
  const toMessages = pairFor('gemini', 'messages').request(json(GEMINI_REQUEST) as Record<string, unknown>, ctx)
  t.same((toMessages.body.messages as Array<{ content: Array<{ type: string }> }>)[1]?.content.map((b) => b.type), ['text', 'thinking', 'tool_use', 'tool_use'], 'the packed thinking block is read')
  for (const client of ['openai', 'messages', 'responses'] as const) {
    const out = pairFor(client, 'gemini').request(json(SKELETONS[client].request) as Record<string, unknown>, ctx)
    t.ok(Array.isArray(out.body.contents) && (out.body.contents as unknown[]).length >= 3, `${client} skeleton → a Gemini conversation`)
  }
})

t.test('a dropped field or tool type with a lone surrogate, or cut inside a pair, is listed header-safe', async (t) => {
  const { Dropped } = await import('../../engine/protocols/fields.js')
  const d = new Dropped()
  d.add('\ud800')
  d.add('x'.repeat(127) + '😀tail')
  const list = d.list().map(droppedName)
  t.same(list, ['x'.repeat(127), '%EF%BF%BD'], 'the lone surrogate as U+FFFD; the pair not cut in half')
  for (const name of list) t.match(name, /^[\w.%-]+$/, `${name} is header-safe`)
})
