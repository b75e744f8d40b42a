import t from 'tap'
import { errorBody } from '../../engine/kernel/errors.js'
import { FOREIGN_SIGNATURE, geminiPath, schemaFromGemini, splitSignature, toGeminiUsage, unpackThinking, usageFromGemini, withSignature } from '../../engine/protocols/gemini/wire.js'
import { pairFor, upstreamPath } from '../../engine/translation/index.js'
import { errorEvent } from '../../engine/protocols/index.js'
import { serialize, SseParser } from '../../engine/protocols/sse.js'
import type { Json, SseEvent, TranslateCtx } from '../../engine/translation/types.js'

// What the fixtures cannot show on their own: a thought signature that leaves the gateway in one
// answer comes back in the next request and lands where Gemini (or Anthropic) wants it; every
// finish reason both ways; usage, schemas, paths and errors.

const CTX: TranslateCtx = { model: 'vendor/model', upstreamModel: 'up-model', id: 'abc', created: 1700000000, stream: false, includeUsage: false, flatten: false, defaultMaxTokens: 4096 }
const SIGNATURE = 'CiQBjz1rX2Q5dGhvdWdodHM+/w=='

type Parts = Array<Record<string, unknown>>
const geminiAnswer = (parts: Parts, finishReason = 'STOP'): Json => ({
  candidates: [{ content: { role: 'model', parts }, finishReason, index: 0 }],
  usageMetadata: { promptTokenCount: 10, candidatesTokenCount: 5, totalTokenCount: 15 }
})

function streamOf (events: SseEvent[]): string {
  return events.map(serialize).join('')
}

function run (pair: ReturnType<typeof pairFor>, ctx: TranslateCtx, upstream: string): SseEvent[] {
  const parser = new SseParser()
  const mapper = pair.stream(ctx)
  const out: SseEvent[] = []
  for (const f of [...parser.push(upstream), ...parser.end()]) out.push(...mapper.push(f))
  out.push(...mapper.end())
  return out
}

t.test('a signature survives the id: canonical base64, another text, Google\'s placeholder; ids stay [A-Za-z0-9_-]', async (t) => {
  for (const signature of [SIGNATURE, 'c2ln', 'not base64 at all ✓', FOREIGN_SIGNATURE, 'QUJD\n', 'QQ']) {
    const id = withSignature('call_abc_0', signature)
    t.match(id, /^[A-Za-z0-9_-]+$/, `${JSON.stringify(signature)} → ${id}`)
    t.same(splitSignature(id), { id: 'call_abc_0', signature })
  }
  t.equal(withSignature('call_x', undefined), 'call_x')
  t.same(splitSignature('call_plain'), { id: 'call_plain' })
  t.same(splitSignature('call__tsb'), { id: 'call__tsb' }, 'a marker without a payload is an ordinary id')
})

t.test('chat client ↔ Gemini upstream: a call\'s signature goes out in its id and back on its part', async (t) => {
  const pair = pairFor('openai', 'gemini')
  const answer = pair.response(geminiAnswer([
    { functionCall: { name: 'f', args: { a: 1 } }, thoughtSignature: SIGNATURE },
    { functionCall: { name: 'g', args: {} } }
  ]), CTX).body as { choices: Array<{ message: Json }> }
  const message = answer.choices[0]?.message as { tool_calls: Array<{ id: string, function: { name: string } }> }
  const [first, second] = message.tool_calls
  t.ok(first !== undefined && second !== undefined)
  const next = pair.request({
    model: 'vendor/model',
    messages: [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: null, tool_calls: message.tool_calls },
      { role: 'tool', tool_call_id: second?.id, content: 'G' },
      { role: 'tool', tool_call_id: first?.id, content: 'F' }
    ]
  }, CTX).body as { contents: Array<{ role: string, parts: Parts }> }
  t.same(next.contents[1], { role: 'model', parts: [{ functionCall: { name: 'f', args: { a: 1 } }, thoughtSignature: SIGNATURE }, { functionCall: { name: 'g', args: {} } }] })
  t.same(next.contents[2], { role: 'user', parts: [{ functionResponse: { name: 'f', response: { output: 'F' } } }, { functionResponse: { name: 'g', response: { output: 'G' } } }] }, 'the results in the order of the calls')

  // streamed, the same id
  const chunks = run(pair, { ...CTX, stream: true }, `data: ${JSON.stringify(geminiAnswer([{ functionCall: { name: 'f', args: {} }, thoughtSignature: SIGNATURE }]))}\r\n\r\n`)
  t.match(streamOf(chunks), `"id":"${first?.id}"`)
})

t.test('messages client ↔ Gemini upstream: thoughts become thinking blocks whose signatures go back to Gemini; a Claude thought does not', async (t) => {
  const pair = pairFor('messages', 'gemini')
  const answer = pair.response(geminiAnswer([
    { text: 'Thinking.', thought: true, thoughtSignature: 'dGhvdWdodA==' },
    { text: 'Answer', thoughtSignature: 'dGV4dA==' },
    { functionCall: { name: 'f', args: {} }, thoughtSignature: SIGNATURE }
  ]), CTX).body as { content: Json[] }
  const next = pair.request({
    model: 'vendor/model',
    max_tokens: 100,
    messages: [
      { role: 'user', content: 'go' },
      { role: 'assistant', content: [{ type: 'thinking', thinking: 'An Anthropic thought', signature: 'EqQBCkY' }, ...answer.content] },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: (answer.content.find((b) => b.type === 'tool_use') as { id: string }).id, content: 'ok' }] }
    ]
  }, CTX)
  const contents = next.body.contents as Array<{ parts: Parts }>
  t.same(contents[1]?.parts, [
    { text: 'Thinking.', thought: true, thoughtSignature: 'dGhvdWdodA==' },
    { text: 'Answer', thoughtSignature: 'dGV4dA==' },
    { functionCall: { name: 'f', args: {} }, thoughtSignature: SIGNATURE }
  ])
  t.ok(next.dropped.includes('messages.thinking'), 'the Anthropic thought is left out, and said so')
})

t.test('responses client ↔ Gemini upstream: the call_id carries the signature back', async (t) => {
  const pair = pairFor('responses', 'gemini')
  const answer = pair.response(geminiAnswer([{ functionCall: { name: 'f', args: { q: 1 } }, thoughtSignature: SIGNATURE }]), { ...CTX, clientRequest: { input: 'x' } }).body as { output: Json[] }
  const call = answer.output.find((o) => o.type === 'function_call') as { call_id: string, name: string, arguments: string }
  const next = pair.request({ model: 'vendor/model', input: [{ role: 'user', content: 'x' }, { type: 'function_call', call_id: call.call_id, name: call.name, arguments: call.arguments }, { type: 'function_call_output', call_id: call.call_id, output: 'done' }] }, CTX)
  t.same((next.body.contents as Json[])[1], { role: 'model', parts: [{ functionCall: { name: 'f', args: { q: 1 } }, thoughtSignature: SIGNATURE }] })
})

t.test('Gemini client ↔ Messages upstream: thinking blocks ride on the next part and go up again ahead of it, so thinking stays on in a tool loop', async (t) => {
  const pair = pairFor('gemini', 'messages')
  const request = { contents: [{ role: 'user', parts: [{ text: 'list' }] }], tools: [{ functionDeclarations: [{ name: 'ls' }] }], generationConfig: { thinkingConfig: { includeThoughts: true, thinkingBudget: 2048 } } }
  const ctx = { ...CTX, clientRequest: request }
  const blocks = [
    { type: 'thinking', thinking: 'I will list.', signature: 'EqQBsig' },
    { type: 'redacted_thinking', data: 'EmwK' },
    { type: 'tool_use', id: 'toolu_01', name: 'ls', input: { path: '.' } }
  ]
  const answer = pair.response({ content: blocks, stop_reason: 'tool_use', usage: { input_tokens: 5, output_tokens: 5 } }, ctx).body as { candidates: Array<{ content: { parts: Parts } }> }
  const parts = answer.candidates[0]?.content.parts ?? []
  t.same(parts[0], { text: 'I will list.', thought: true })
  t.same(unpackThinking(parts[1]?.thoughtSignature), blocks.slice(0, 2))

  // the way the Gemini CLI keeps history: thought parts dropped, the rest as it came, its own result ids
  const history = parts.filter((p) => p.thought !== true)
  const next = pair.request({ ...request, contents: [...request.contents, { role: 'model', parts: history }, { role: 'user', parts: [{ functionResponse: { id: 'ls-1732-ab', name: 'ls', response: { output: 'a.txt' } } }] }] }, ctx)
  const messages = next.body.messages as Array<{ role: string, content: Json[] }>
  t.same(messages[1]?.content, blocks, 'the thinking blocks precede the tool call, signatures and all')
  t.same(messages[2]?.content, [{ type: 'tool_result', tool_use_id: 'toolu_01', content: 'a.txt' }])
  t.same(next.body.thinking, { type: 'enabled', budget_tokens: 2048 })
  t.same(next.dropped, [])

  // streamed: the thoughts as they come, the signature on the call
  const events = [
    { type: 'message_start', message: { usage: { input_tokens: 5, output_tokens: 1 } } },
    { type: 'content_block_start', index: 0, content_block: { type: 'thinking', thinking: '', signature: '' } },
    { type: 'content_block_delta', index: 0, delta: { type: 'thinking_delta', thinking: 'I will list.' } },
    { type: 'content_block_delta', index: 0, delta: { type: 'signature_delta', signature: 'EqQBsig' } },
    { type: 'content_block_stop', index: 0 },
    { type: 'content_block_start', index: 1, content_block: { type: 'redacted_thinking', data: 'EmwK' } },
    { type: 'content_block_stop', index: 1 },
    { type: 'content_block_start', index: 2, content_block: { type: 'tool_use', id: 'toolu_01', name: 'ls', input: {} } },
    { type: 'content_block_delta', index: 2, delta: { type: 'input_json_delta', partial_json: '{"path": "."}' } },
    { type: 'content_block_stop', index: 2 },
    { type: 'message_delta', delta: { stop_reason: 'tool_use' }, usage: { output_tokens: 9 } },
    { type: 'message_stop' }
  ]
  const out = run(pair, { ...ctx, stream: true }, events.map((e) => `event: ${e.type}\ndata: ${JSON.stringify(e)}\n\n`).join(''))
  const streamed = out.flatMap((f) => (JSON.parse(f.data) as { candidates: Array<{ content: { parts: Parts } }> }).candidates[0]?.content.parts ?? [])
  t.same(streamed, parts, 'the stream carries the same parts as the JSON answer')
})

t.test('finish reasons map both ways, every value', async (t) => {
  const toChat = pairFor('openai', 'gemini')
  const toMessages = pairFor('messages', 'gemini')
  const toResponses = pairFor('responses', 'gemini')
  const table: Array<[string, boolean, string, string, string]> = [
    ['STOP', false, 'stop', 'end_turn', 'completed'],
    ['STOP', true, 'tool_calls', 'tool_use', 'completed'],
    ['MAX_TOKENS', false, 'length', 'max_tokens', 'max_output_tokens'],
    ['SAFETY', false, 'content_filter', 'refusal', 'content_filter'],
    ['RECITATION', false, 'content_filter', 'refusal', 'content_filter'],
    ['BLOCKLIST', false, 'content_filter', 'refusal', 'content_filter'],
    ['PROHIBITED_CONTENT', false, 'content_filter', 'refusal', 'content_filter'],
    ['SPII', false, 'content_filter', 'refusal', 'content_filter'],
    ['MALFORMED_FUNCTION_CALL', false, 'stop', 'end_turn', 'completed'],
    ['OTHER', false, 'stop', 'end_turn', 'completed'],
    ['UNEXPECTED_TOOL_CALL', false, 'stop', 'end_turn', 'completed']
  ]
  for (const [reason, called, chat, messages, responses] of table) {
    const parts = called ? [{ functionCall: { name: 'f', args: {} } }] : [{ text: 'x' }]
    t.equal((toChat.response(geminiAnswer(parts, reason), CTX).body as { choices: Array<{ finish_reason: string }> }).choices[0]?.finish_reason, chat, `${reason} → ${chat}`)
    t.equal((toMessages.response(geminiAnswer(parts, reason), CTX).body as { stop_reason: string }).stop_reason, messages, `${reason} → ${messages}`)
    const r = toResponses.response(geminiAnswer(parts, reason), CTX).body as { status: string, incomplete_details: { reason: string } | null }
    t.equal(r.incomplete_details?.reason ?? r.status, responses, `${reason} → ${responses}`)
  }
  const fromChat = pairFor('gemini', 'openai')
  for (const [finish, reason] of [['stop', 'STOP'], ['length', 'MAX_TOKENS'], ['tool_calls', 'STOP'], ['function_call', 'STOP'], ['content_filter', 'SAFETY'], ['unheard_of', 'STOP']]) {
    const out = fromChat.response({ choices: [{ index: 0, message: { role: 'assistant', content: 'x' }, finish_reason: finish }] }, CTX).body as { candidates: Array<{ finishReason: string }> }
    t.equal(out.candidates[0]?.finishReason, reason, `${finish} → ${reason}`)
  }
  const fromMessages = pairFor('gemini', 'messages')
  for (const [stop, reason] of [['end_turn', 'STOP'], ['stop_sequence', 'STOP'], ['pause_turn', 'STOP'], ['tool_use', 'STOP'], ['max_tokens', 'MAX_TOKENS'], ['model_context_window_exceeded', 'MAX_TOKENS'], ['refusal', 'SAFETY']]) {
    const out = fromMessages.response({ content: [{ type: 'text', text: 'x' }], stop_reason: stop, usage: { input_tokens: 1, output_tokens: 1 } }, CTX).body as { candidates: Array<{ finishReason: string }> }
    t.equal(out.candidates[0]?.finishReason, reason, `${stop} → ${reason}`)
  }
})

t.test('usage: prompt counts cached content (and tool-use prompts), completion counts thoughts; and back', async (t) => {
  t.same(usageFromGemini({ promptTokenCount: 100, cachedContentTokenCount: 40, candidatesTokenCount: 20, thoughtsTokenCount: 30, toolUsePromptTokenCount: 7, totalTokenCount: 157 }),
    { prompt_tokens: 107, cached_input_tokens: 40, completion_tokens: 50, cache_creation_input_tokens: 0, reasoning_tokens: 30 })
  t.same(usageFromGemini({ promptTokenCount: 3 }), { prompt_tokens: 3, cached_input_tokens: 0, completion_tokens: 0, cache_creation_input_tokens: 0 })
  t.equal(usageFromGemini(null), null)
  t.same(usageFromGemini({ promptTokenCount: -5, candidatesTokenCount: 'x' }), { prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, cache_creation_input_tokens: 0 })
  t.same(toGeminiUsage({ prompt_tokens: 100, cached_input_tokens: 40, completion_tokens: 50, cache_creation_input_tokens: 0, reasoning_tokens: 30 }),
    { promptTokenCount: 100, candidatesTokenCount: 20, totalTokenCount: 150, cachedContentTokenCount: 40, thoughtsTokenCount: 30 })
  t.same(toGeminiUsage({ prompt_tokens: 5, cached_input_tokens: 0, completion_tokens: 2, cache_creation_input_tokens: 0 }), { promptTokenCount: 5, candidatesTokenCount: 2, totalTokenCount: 7 })
})

t.test('usage: AUDIO tokens of the modality breakdowns, less the cached ones; and back', async (t) => {
  const u = usageFromGemini({
    promptTokenCount: 1500,
    cachedContentTokenCount: 500,
    candidatesTokenCount: 300,
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: 300 }, { modality: 'AUDIO', tokenCount: 1200 }],
    cacheTokensDetails: [{ modality: 'AUDIO', tokenCount: 400 }, { modality: 'TEXT', tokenCount: 100 }],
    candidatesTokensDetails: [{ modality: 'TEXT', tokenCount: 100 }, { modality: 'AUDIO', tokenCount: 200 }]
  })
  t.same(u, { prompt_tokens: 1500, cached_input_tokens: 500, completion_tokens: 300, cache_creation_input_tokens: 0, audio_input_tokens: 800, audio_output_tokens: 200 })
  t.same(usageFromGemini({ promptTokenCount: 10, promptTokensDetails: [{ modality: 'AUDIO', tokenCount: 99 }, { modality: 'AUDIO' }, 'x'] }), { prompt_tokens: 10, cached_input_tokens: 0, completion_tokens: 0, cache_creation_input_tokens: 0, audio_input_tokens: 10 }, 'held to the prompt; malformed entries count nothing')
  t.same(toGeminiUsage(u as NonNullable<typeof u>), {
    promptTokenCount: 1500,
    candidatesTokenCount: 300,
    totalTokenCount: 1800,
    cachedContentTokenCount: 500,
    promptTokensDetails: [{ modality: 'TEXT', tokenCount: 700 }, { modality: 'AUDIO', tokenCount: 800 }],
    candidatesTokensDetails: [{ modality: 'TEXT', tokenCount: 100 }, { modality: 'AUDIO', tokenCount: 200 }]
  })
  t.same(toGeminiUsage({ prompt_tokens: 10, cached_input_tokens: 0, completion_tokens: 4, cache_creation_input_tokens: 0, audio_input_tokens: 10, audio_output_tokens: 9 }), {
    promptTokenCount: 10,
    candidatesTokenCount: 4,
    totalTokenCount: 14,
    promptTokensDetails: [{ modality: 'AUDIO', tokenCount: 10 }],
    candidatesTokensDetails: [{ modality: 'AUDIO', tokenCount: 4 }]
  }, 'all audio: no TEXT entry; a count past its total is held to it')
})

t.test('schemas in Google\'s OpenAPI subset become JSON Schema', async (t) => {
  t.same(schemaFromGemini({
    type: 'OBJECT',
    properties: {
      a: { type: 'STRING', nullable: true, enum: ['x'] },
      b: { type: 'ARRAY', items: { type: 'INTEGER', format: 'int32' }, minItems: '2', maxItems: 5 },
      c: { anyOf: [{ type: 'NUMBER' }], nullable: true },
      d: { type: 'TYPE_UNSPECIFIED', example: 3, title: 'D' }
    },
    required: ['a'],
    propertyOrdering: ['b', 'a']
  }), {
    type: 'object',
    properties: {
      a: { type: ['string', 'null'], enum: ['x', null] },
      b: { type: 'array', items: { type: 'integer', format: 'int32' }, minItems: 2, maxItems: 5 },
      c: { anyOf: [{ type: 'number' }, { type: 'null' }] },
      d: { examples: [3], title: 'D' }
    },
    required: ['a']
  })
  t.same(schemaFromGemini({ type: 'string', maxLength: 'ten' }), { type: 'string', maxLength: 'ten' }, 'what it cannot read goes as it is')
})

t.test('paths: a bare model gets models/, a collection keeps its own, names are escaped, the stream is alt=sse', async (t) => {
  t.equal(geminiPath('gemini-2.5-flash', false), '/v1beta/models/gemini-2.5-flash:generateContent')
  t.equal(geminiPath('gemini-2.5-flash', true), '/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse')
  t.equal(geminiPath('models/gemini-2.5-pro', false), '/v1beta/models/gemini-2.5-pro:generateContent')
  t.equal(geminiPath('tunedModels/a b?c', false), '/v1beta/tunedModels/a%20b%3Fc:generateContent')
  t.equal(geminiPath('gemini-2.5-flash', false, 'countTokens'), '/v1beta/models/gemini-2.5-flash:countTokens')
  t.equal(upstreamPath(pairFor('openai', 'messages'), CTX), '/v1/messages', 'a fixed path is its own')
  for (const client of ['openai', 'messages', 'responses', 'gemini'] as const) {
    const pair = pairFor(client, 'gemini')
    t.equal(upstreamPath(pair, { ...CTX, stream: true }), '/v1beta/models/up-model:streamGenerateContent?alt=sse', `${client} → gemini, streamed`)
    t.equal(upstreamPath(pair, CTX), '/v1beta/models/up-model:generateContent', `${client} → gemini`)
  }
})

t.test('errors in Google\'s shape: the status named by the HTTP status, in a body and in a stream', async (t) => {
  const names: Array<[number, string]> = [[400, 'INVALID_ARGUMENT'], [401, 'UNAUTHENTICATED'], [402, 'RESOURCE_EXHAUSTED'], [403, 'PERMISSION_DENIED'], [404, 'NOT_FOUND'], [408, 'DEADLINE_EXCEEDED'],
    [409, 'INVALID_ARGUMENT'], [413, 'INVALID_ARGUMENT'], [429, 'RESOURCE_EXHAUSTED'], [500, 'INTERNAL'], [501, 'INTERNAL'], [502, 'UNAVAILABLE'], [503, 'UNAVAILABLE'], [504, 'DEADLINE_EXCEEDED'], [529, 'UNAVAILABLE']]
  for (const [status, name] of names) t.same(errorBody('gemini', { status, message: 'm', code: 'ignored', openaiType: 'x' }), { error: { code: status, message: 'm', status: name } }, `${status} → ${name}`)
  const ev = errorEvent('gemini', { status: 504, message: 'Upstream timed out.' })
  t.equal(ev.event, undefined, 'a data-only frame')
  t.same(JSON.parse(ev.data), { error: { code: 504, message: 'Upstream timed out.', status: 'DEADLINE_EXCEEDED' } })
  for (const upstream of ['openai', 'messages'] as const) {
    t.same(pairFor('gemini', upstream).error(401, { error: { message: 'bad key', type: 'authentication_error' } }), { error: { code: 401, message: 'bad key', status: 'UNAUTHENTICATED' } })
  }
})

t.test('where the text sits in Gemini bodies and chunks (what guardrails read and rewrite)', async (t) => {
  const { mapRequestText, mapResponseText, streamText } = await import('../../plugins/api/content-text.js')
  const upper = (s: string): string => s.toUpperCase()
  const request: Json = {
    systemInstruction: { role: 'user', parts: [{ text: 'sys' }] },
    contents: [
      { role: 'user', parts: [{ text: 'hi' }, { inlineData: { mimeType: 'image/png', data: 'abc' } }] },
      { role: 'model', parts: [{ text: 'plan', thought: true }, { functionCall: { name: 'f', args: { q: 'x' } } }] },
      { role: 'user', parts: [{ functionResponse: { name: 'f', response: { output: 'out' } } }] }
    ]
  }
  mapRequestText('gemini', request, upper)
  t.same(request, {
    systemInstruction: { role: 'user', parts: [{ text: 'SYS' }] },
    contents: [
      { role: 'user', parts: [{ text: 'HI' }, { inlineData: { mimeType: 'image/png', data: 'abc' } }] },
      { role: 'model', parts: [{ text: 'plan', thought: true }, { functionCall: { name: 'f', args: { q: 'x' } } }] },
      { role: 'user', parts: [{ functionResponse: { name: 'f', response: { output: 'OUT' } } }] }
    ]
  }, 'texts and function outputs, not thoughts, arguments or media')
  const answer: Json = { candidates: [{ content: { role: 'model', parts: [{ text: 'why', thought: true }, { text: 'yes' }] }, index: 0 }] }
  mapResponseText('gemini', answer, upper)
  t.same(answer, { candidates: [{ content: { role: 'model', parts: [{ text: 'why', thought: true }, { text: 'YES' }] }, index: 0 }] })

  const st = streamText('gemini')
  const ev = { data: { candidates: [{ content: { role: 'model', parts: [{ text: 'a' }, { text: 'b' }, { functionCall: { name: 'f', args: {} } }] }, index: 0 }, { content: { parts: [{ text: 'c' }] }, finishReason: 'STOP', index: 1 }], responseId: 'r' } }
  t.same(st.deltas(ev), [{ block: 'c0', text: 'ab' }, { block: 'c1', text: 'c' }])
  t.same(st.closes(ev), ['c1'])
  t.same(st.withDeltas(ev, new Map([['c0', 'AB']])).data.candidates, [
    { content: { role: 'model', parts: [{ text: 'AB' }, { text: '' }, { functionCall: { name: 'f', args: {} } }] }, index: 0 },
    { content: { parts: [{ text: '' }] }, finishReason: 'STOP', index: 1 }
  ])
  t.same(ev.data.candidates[0]?.content.parts[0], { text: 'a' }, 'the event itself is left alone')
  t.same(st.textEvent({ data: { ...ev.data, usageMetadata: { promptTokenCount: 1 } } }, 'c1', 'held'), { data: { responseId: 'r', candidates: [{ content: { role: 'model', parts: [{ text: 'held' }] }, index: 1 }] } })
  t.equal(st.closes({ data: { error: { code: 500, message: 'x', status: 'INTERNAL' } } }), 'all')
})

t.test('a whole Gemini answer replayed as its stream (a cache hit for a streaming client) says what the answer says', async (t) => {
  const { replayStream } = await import('../../engine/protocols/index.js')
  const long = 'word '.repeat(30).trim()
  const body: Json = {
    candidates: [
      { content: { role: 'model', parts: [{ text: 'Thinking it over at some length, really.', thought: true }, { text: long, thoughtSignature: 'c2ln' }, { functionCall: { name: 'f', args: { a: 1 } } }] }, finishReason: 'STOP', index: 0, safetyRatings: [] },
      { content: { role: 'model', parts: [{ text: 'B' }] }, finishReason: 'MAX_TOKENS', index: 1 }
    ],
    usageMetadata: { promptTokenCount: 5, candidatesTokenCount: 9, totalTokenCount: 14 },
    modelVersion: 'gemini-2.5-flash',
    responseId: 'r1'
  }
  const frames = replayStream('gemini', body, CTX)
  t.ok(frames.every((f) => f.event === undefined && f.data !== '[DONE]'), 'data-only frames')
  const chunks = frames.map((f) => JSON.parse(f.data) as { candidates: Array<{ content: { parts: Parts }, index: number, finishReason?: string }>, usageMetadata?: Json, modelVersion: string, responseId: string })
  t.ok(chunks.length > 5, 'the long text in several chunks')
  t.ok(chunks.every((c) => c.modelVersion === 'gemini-2.5-flash' && c.responseId === 'r1'))
  t.ok(chunks.slice(0, -1).every((c) => c.usageMetadata === undefined && c.candidates.every((x) => x.finishReason === undefined)), 'only the last chunk ends the answer')
  const last = chunks[chunks.length - 1]
  t.same(last?.candidates, [{ content: { role: 'model', parts: [] }, finishReason: 'STOP', index: 0, safetyRatings: [] }, { content: { role: 'model', parts: [] }, finishReason: 'MAX_TOKENS', index: 1 }])
  t.same(last?.usageMetadata, body.usageMetadata)
  const parts = (index: number): Parts => chunks.flatMap((c) => c.candidates.filter((x) => x.index === index).flatMap((x) => x.content.parts))
  const zero = parts(0)
  t.equal(zero.filter((p) => p.thought === true).map((p) => p.text).join(''), 'Thinking it over at some length, really.')
  const texts = zero.filter((p) => p.thought !== true && typeof p.text === 'string')
  t.equal(texts.map((p) => p.text).join(''), long)
  t.equal(texts[0]?.thoughtSignature, 'c2ln', 'the signature rides on the first piece only')
  t.ok(texts.slice(1).every((p) => p.thoughtSignature === undefined))
  t.same(zero[zero.length - 1], { functionCall: { name: 'f', args: { a: 1 } } })
  t.same(parts(1), [{ text: 'B' }])
  // what a Gemini client's relay reads back from the replay: the same usage, a finished answer
  const mapper = pairFor('gemini', 'gemini').stream(CTX)
  for (const f of frames) mapper.push(f)
  t.same(mapper.usage(), usageFromGemini(body.usageMetadata))
  t.equal(mapper.finished(), true)
})

t.test('one table of reasoning efforts as thinking budgets, whichever protocol names the effort', async (t) => {
  const budget = (client: 'openai' | 'messages' | 'responses', effort: string): unknown => {
    const body: Json = client === 'openai'
      ? { model: 'm', messages: [{ role: 'user', content: 'hi' }], reasoning_effort: effort }
      : client === 'messages'
        ? { model: 'm', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }], output_config: { effort } }
        : { model: 'm', input: 'hi', reasoning: { effort } }
    const up = pairFor(client, 'gemini').request(body, CTX).body as { generationConfig?: { thinkingConfig?: { thinkingBudget?: number } } }
    return up.generationConfig?.thinkingConfig?.thinkingBudget
  }
  const table: Array<[string, number]> = [['low', 1024], ['medium', 8192], ['high', 24576], ['xhigh', 32768], ['max', 32768]]
  for (const client of ['openai', 'messages', 'responses'] as const) {
    for (const [effort, expected] of table) t.equal(budget(client, effort), expected, `${client}: ${effort}`)
  }
  // the efforts below low, which the Messages API does not name
  t.equal(budget('openai', 'minimal'), 512)
  t.equal(budget('openai', 'none'), 0)
  t.equal(budget('responses', 'minimal'), 512)
  // Gemini's own thinkingLevel towards a Messages upstream reads the same table
  const toMessages = (level: string): unknown => (pairFor('gemini', 'messages').request({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }], generationConfig: { thinkingConfig: { thinkingLevel: level } } }, CTX).body as { thinking?: { budget_tokens?: number } }).thinking
  t.same(toMessages('low'), { type: 'enabled', budget_tokens: 1024 })
  t.same(toMessages('medium'), { type: 'enabled', budget_tokens: 8192 })
  t.same(toMessages('high'), { type: 'enabled', budget_tokens: 24576 })
})
