import t from 'tap'
import fc from 'fast-check'
import { isGatewayError } from '../../plugins/gateway/errors.js'
import { pairFor } from '../../plugins/translation/index.js'
import type { Protocol, SseEvent, TranslateCtx, TranslatorPair } from '../../plugins/translation/types.js'

// Hostile bodies for every pair: valid skeletons (so the bodies reach deep code) with some of
// their values swapped for nulls, wrong types, prototype names or random JSON, keys deleted and
// keys added. Whatever comes in, a pair answers or throws a GatewayError, never a TypeError, and
// what it answers is plain JSON: no function fished out of a prototype, header-safe drop names.

const RUNS = 600
const SEED = 20240611

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

const ERROR_BODY = { type: 'error', error: { type: 'invalid_request_error', message: 'bad', code: null, param: 'x' } }

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
  includeUsage: fc.boolean(),
  supported: fc.option(fc.subarray(['top_k', 'reasoning_effort', 'temperature'])).map((s) => s === null ? undefined : new Set(s))
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

const SKELETONS: Record<Protocol, { request: unknown, response: unknown, stream: unknown[] }> = {
  openai: { request: CHAT_REQUEST, response: CHAT_RESPONSE, stream: CHAT_STREAM },
  messages: { request: MESSAGES_REQUEST, response: MESSAGES_RESPONSE, stream: MESSAGES_STREAM },
  responses: { request: {}, response: {}, stream: [] }
}

const frameArb = (events: unknown[]): fc.Arbitrary<SseEvent[]> => fc.array(fc.oneof(
  { weight: 8, arbitrary: fc.oneof(...events.map(around)).map((d) => ({ data: JSON.stringify(d) ?? 'null', event: (d as { type?: unknown } | null)?.type as string | undefined })) },
  { weight: 1, arbitrary: fc.record({ data: fc.constantFrom('[DONE]', '', '{', 'null', '"x"', '7', '[]'), event: fc.option(fc.constantFrom('message_start', 'error', ...NAMES), { nil: undefined }) }) }
), { maxLength: 14 }).map((frames) => frames.map((f) => f.event === undefined || typeof f.event !== 'string' ? { data: f.data } : f))

const PAIRS: Array<[Protocol, Protocol]> = [['openai', 'messages'], ['messages', 'openai'], ['openai', 'openai'], ['messages', 'messages']]

for (const [client, upstream] of PAIRS) {
  const pair: TranslatorPair = pairFor(client, upstream)
  t.test(`${client} → ${upstream}: hostile input never throws anything but a GatewayError`, async (t) => {
    const params = { seed: SEED, numRuns: RUNS, endOnFailure: true }
    fc.assert(fc.property(around(SKELETONS[client].request), ctxArb, (body, ctx) => {
      const b = json(body)
      if (b === null || typeof b !== 'object' || Array.isArray(b)) return // checkBody answers these before any pair
      guarded(() => {
        const out = pair.request(b as Record<string, unknown>, ctx)
        for (const name of out.dropped) if (!/^[\w.%-]+$/.test(name)) throw new Error(`dropped name not header-safe: ${name}`)
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

    fc.assert(fc.property(fc.integer({ min: 400, max: 599 }), fc.oneof(around(ERROR_BODY), hostile), (status, body) => {
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

t.test('the fuzzer reaches deep code: a skeleton goes through whole', async (t) => {
  // a sanity check on the skeletons themselves, so that the fuzz runs start from bodies that map
  const ctx: TranslateCtx = { model: 'vendor/model', upstreamModel: 'up-model', id: 'abc', created: 1, includeUsage: true, flatten: false, defaultMaxTokens: 4096, supported: new Set(['top_k', 'reasoning_effort']) }
  const chat = pairFor('openai', 'messages').request(json(CHAT_REQUEST) as Record<string, unknown>, ctx)
  t.equal((chat.body.messages as unknown[]).length, 3, 'chat skeleton: user, assistant, user turns')
  t.ok(chat.dropped.includes('seed'))
  const messages = pairFor('messages', 'openai').request(json(MESSAGES_REQUEST) as Record<string, unknown>, ctx)
  t.equal(messages.body.reasoning_effort, 'high')
  t.ok(messages.dropped.includes('tools.web_search'))
})

t.test('a dropped field or tool type with a lone surrogate, or cut inside a pair, is still listed header-safe', async (t) => {
  const { Dropped } = await import('../../plugins/translation/fields.js')
  const d = new Dropped()
  d.add('\ud800')
  d.add('x'.repeat(63) + '😀tail')
  const list = d.list()
  t.equal(list.length, 2)
  for (const name of list) t.match(name, /^[\w.%-]+$/, `${name} is header-safe`)
})
