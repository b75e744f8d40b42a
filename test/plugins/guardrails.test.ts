import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { maxMatchLength, regexShape } from '../../plugins/guardrails/regex-span.js'
import guardrails from '../../plugins/guardrails.js'
import { SseParser } from '../../engine/protocols/sse.js'
import { bareGateway, build, KEY_A, mockCatalog, mockCatalogWithGemini, testGatewayAlone, type Teardown } from '../helper.js'
import { startMockUpstream, type MockUpstream } from '../mock-upstream.js'

// The guardrails plugin on a bare Fastify with the test gateway, in front of the mock upstream:
// block and redact, on requests and answers, both protocols, JSON and streams, and a match split
// across two stream deltas at every split point.

const SECRET = 'sk-ABCDEFGHIJKLMNOPQRSTUV'
const KEY_RULE = { name: 'no-keys', pattern: 'sk-[A-Za-z0-9_-]{20,}' }

/** The gateway with the rules (none: without the plugin) and the mock upstream behind it. */
async function setup (t: Teardown, rules: unknown[]): Promise<{ app: FastifyInstance, mock: MockUpstream }> {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const gw = await bareGateway(t, rules.length > 0 ? [[guardrails, { rules }]] : [], { config: mockCatalog(mock) })
  return { app: gw.app, mock }
}

const chat = (content: string, extra: Record<string, unknown> = {}) => ({ model: 'openai/gpt-test', messages: [{ role: 'user', content }], ...extra })
const messages = (content: string, extra: Record<string, unknown> = {}) => ({ model: 'anthropic/claude-test', max_tokens: 50, messages: [{ role: 'user', content }], ...extra })

t.test('regex spans: the longest match of a pattern, Infinity when unbounded', async (t) => {
  const cases: Array<[string, string, number]> = [
    ['abc', '', 3], ['\\d{4}-\\d{4}', '', 9], ['a|bcd', '', 3], ['(ab)?c{2,3}', '', 5], ['[a-z]{1,8}', '', 8],
    ['sk-[A-Za-z0-9_-]{20,}', '', Infinity], ['x+', '', Infinity], ['(a)\\1', '', Infinity], ['\\bword\\b', '', 4],
    ['(?:foo|ba(?=r))', '', 3], ['a.c', 'u', 4], ['\\u{1F600}', 'u', 2], ['[\\]x]{2}', '', 2], ['a{3}?', '', 3], ['^$', '', 0]
  ]
  for (const [source, flags, want] of cases) t.equal(maxMatchLength(source, flags), want, `/${source}/${flags}`)
  t.throws(() => maxMatchLength('(a'), SyntaxError)
  const startsWith = (source: string, flags: string, text: string): boolean[] => {
    const re = regexShape(source, flags).starts
    return [...text].map((_, i) => { if (re === null) return true; re.lastIndex = i; return re.test(text) })
  }
  t.same(startsWith('sk-[a-z]+', '', 'ask s'), [false, true, false, false, true], 'a literal first character')
  t.same(startsWith('\\d{3}|x', '', 'a1x'), [false, true, true], 'either branch')
  t.same(startsWith('(a)?b', '', 'abc'), [true, true, false], 'an optional atom lets the next one start a match')
  t.same(startsWith('S', 'i', 'sS'), [true, true], 'flags apply')
  t.equal(regexShape('.x').starts, null, 'any character')
})

t.test('block on the request: 400 content_blocked in the route\'s shape, nothing sent upstream', async (t) => {
  const { app, mock } = await setup(t, [{ ...KEY_RULE, action: 'block', on: ['request'] }])
  const a = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat(`my key is ${SECRET}`) })
  t.equal(a.statusCode, 400)
  t.match(a.json(), { error: { code: 'content_blocked', type: 'invalid_request_error', message: /no-keys/ } })
  const b = await app.inject({ method: 'POST', url: '/v1/messages', payload: messages(`my key is ${SECRET}`) })
  t.equal(b.statusCode, 400)
  t.match(b.json(), { type: 'error', error: { type: 'invalid_request_error', code: 'content_blocked' } })
  const system = await app.inject({ method: 'POST', url: '/v1/messages', payload: messages('hi', { system: [{ type: 'text', text: SECRET }] }) })
  t.equal(system.statusCode, 400, 'the system prompt is looked at too')
  t.equal(mock.requests.length, 0, 'nothing reached the upstream')
  t.equal((await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat('nothing to see') })).statusCode, 200)
})

t.test('redact on the request: the upstream gets [REDACTED]', async (t) => {
  const { app, mock } = await setup(t, [{ ...KEY_RULE, on: ['request'] }])
  await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat(`a ${SECRET} b`) })
  t.equal((mock.body().messages as Array<{ content: string }>)[0]?.content, 'a [REDACTED] b')
  await app.inject({ method: 'POST', url: '/v1/messages', payload: messages([{ type: 'text', text: `x ${SECRET}` }] as never) })
  t.same((mock.body().messages as Array<{ content: unknown }>)[0]?.content, [{ type: 'text', text: 'x [REDACTED]' }])
  await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat(`to the other protocol ${SECRET}`, { model: 'anthropic/claude-test' }) })
  t.match(JSON.stringify(mock.body().messages), /to the other protocol \[REDACTED\]/, 'translated calls too')
  t.notMatch(JSON.stringify(mock.requests.map((r) => r.body)), SECRET)
})

t.test('redact and block on JSON answers, both protocols', async (t) => {
  const { app } = await setup(t, [{ ...KEY_RULE, on: ['response'] }, { name: 'no-ssn', pattern: '\\d{3}-\\d{2}-\\d{4}', action: 'block', on: ['response'] }])
  // the mock echoes the user's words
  const a = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat(`say ${SECRET}`) })
  t.equal(a.json().choices[0].message.content, 'Echo: say [REDACTED]')
  const b = await app.inject({ method: 'POST', url: '/v1/messages', payload: messages(`say ${SECRET}`) })
  t.same(b.json().content, [{ type: 'text', text: 'Echo: say [REDACTED]' }])
  const blocked = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat('my number 123-45-6789') })
  t.equal(blocked.statusCode, 400)
  t.equal(blocked.json().error.code, 'content_blocked')
  t.notMatch(blocked.body, '123-45-6789')
})

/** The client text of a chat or Messages stream. */
function streamedText (body: string): string {
  const p = new SseParser()
  let text = ''
  for (const ev of [...p.push(body), ...p.end()]) {
    if (ev.data === '[DONE]') continue
    const d = JSON.parse(ev.data)
    text += d.choices?.[0]?.delta?.content ?? (d.type === 'content_block_delta' ? d.delta.text ?? '' : '')
  }
  return text
}

const chatFrames = (deltas: string[]): string[] => [
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }] })}\n\n`,
  ...deltas.map((d) => `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: { content: d }, finish_reason: null }] })}\n\n`),
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`,
  `data: ${JSON.stringify({ id: 'c1', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [], usage: { prompt_tokens: 5, completion_tokens: 5, total_tokens: 10 } })}\n\n`,
  'data: [DONE]\n\n'
]

const ev = (type: string, data: Record<string, unknown>): string => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
const messagesFrames = (deltas: string[]): string[] => [
  ev('message_start', { message: { id: 'msg_1', type: 'message', role: 'assistant', model: 'm', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 5, output_tokens: 1 } } }),
  ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
  ...deltas.map((d) => ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: d } })),
  ev('content_block_stop', { index: 0 }),
  ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 5 } }),
  ev('message_stop', {})
]

t.test('streams: a match split across two deltas is redacted at every split point, both protocols', async (t) => {
  const { app, mock } = await setup(t, [{ ...KEY_RULE, on: ['response'] }, { name: 'cards', pattern: '\\d{4} \\d{4}', on: ['response'] }])
  const text = `Your key is ${SECRET} and card 1234 5678, keep both.`
  const want = 'Your key is [REDACTED] and card [REDACTED], keep both.'
  let checked = 0
  for (let i = 1; i < text.length; i++) {
    const deltas = [text.slice(0, i), text.slice(i)]
    mock.enqueue({ stream: chatFrames(deltas) })
    const a = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat('x', { stream: true }) })
    mock.enqueue({ stream: messagesFrames(deltas) })
    const b = await app.inject({ method: 'POST', url: '/v1/messages', payload: messages('x', { stream: true }) })
    if (streamedText(a.body) !== want || streamedText(b.body) !== want || a.body.includes('1234 5678') || b.body.includes('ABCDEFGH')) {
      t.fail(`split at ${i}: chat ${JSON.stringify(streamedText(a.body))}, messages ${JSON.stringify(streamedText(b.body))}`)
      break
    }
    t.match(a.body, /data: \[DONE\]\n\n$/, 'the chat stream still ends with [DONE]')
    t.match(b.body, /event: message_stop/, 'the Messages stream still ends with message_stop')
    checked++
  }
  t.equal(checked, text.length - 1, 'every split point')
})

t.test('streams: three-way splits and a key split inside its run of letters', async (t) => {
  const { app, mock } = await setup(t, [{ ...KEY_RULE, on: ['response'] }])
  const deltas = ['The key: sk-ABC', 'DEFGHIJKLMNO', 'PQRSTUV is it.']
  mock.enqueue({ stream: chatFrames(deltas) })
  const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat('x', { stream: true }) })
  t.equal(streamedText(res.body), 'The key: [REDACTED] is it.')
})

t.test('streams: a block rule ends the stream with an error in the client\'s format, without the match', async (t) => {
  const { app, mock } = await setup(t, [{ ...KEY_RULE, action: 'block', on: ['response'] }])
  mock.enqueue({ stream: chatFrames(['Here: sk-ABCDEFGHIJ', 'KLMNOPQRSTUV and more']) })
  const a = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat('x', { stream: true }) })
  t.equal(a.statusCode, 200, 'the stream had started')
  t.match(a.body, /"code":"content_blocked"/)
  t.notMatch(a.body, /sk-ABC/)
  mock.enqueue({ stream: messagesFrames(['Here: sk-ABCDEFGHIJ', 'KLMNOPQRSTUV and more']) })
  const b = await app.inject({ method: 'POST', url: '/v1/messages', payload: messages('x', { stream: true }) })
  t.match(b.body, /event: error\ndata: \{"type":"error","error":\{"type":"invalid_request_error"/)
  t.notMatch(b.body, /sk-ABC/)
})

/** A stream's events with their text deltas merged: what a client makes of it, whatever the chunking. */
function meaning (body: string): string[] {
  const out: string[] = []
  const p = new SseParser()
  for (const e of [...p.push(body), ...p.end()]) {
    if (e.data === '[DONE]') { out.push('[DONE]'); continue }
    const d = JSON.parse(e.data)
    const chatText = d.choices?.[0]?.finish_reason == null && Object.keys(d.choices?.[0]?.delta ?? {}).join() === 'content' ? d.choices[0].delta.content : undefined
    const text = chatText ?? (d.type === 'content_block_delta' && d.delta.type === 'text_delta' ? d.delta.text : undefined)
    if (typeof text === 'string') {
      if (text === '') continue
      if (out.at(-1)?.startsWith('text:') === true) out[out.length - 1] += text
      else out.push(`text:${text}`)
    } else {
      out.push(JSON.stringify(d).replace(/"(id|created)":("[^"]*"|\d+)/g, ''))
    }
  }
  return out
}

t.test('no change when nothing matches: the same answers as without the plugin', async (t) => {
  const plain = await setup(t, [])
  const guarded = await setup(t, [{ ...KEY_RULE }, { name: 'cards', pattern: '\\d{4} \\d{4}', action: 'block' }])
  const strip = (body: string): string => body.replace(/"(id|created)":("[^"]*"|\d+)/g, '')
  for (const stream of [false, true]) {
    for (const [url, payload] of [['/v1/chat/completions', chat('nothing secret here at all', { stream })], ['/v1/messages', messages('nothing secret here at all', { stream })]] as const) {
      for (const { mock } of [plain, guarded]) mock.reset()
      const a = await plain.app.inject({ method: 'POST', url, payload })
      const b = await guarded.app.inject({ method: 'POST', url, payload })
      t.equal(b.statusCode, 200)
      if (stream) t.same(meaning(b.body), meaning(a.body), `${url}, streamed: the same events and text (text may come in other deltas)`)
      else t.equal(strip(b.body), strip(a.body), url)
    }
  }
})

t.test('the Responses API: requests, whole answers and streams (deltas, the .done events and response.completed)', async (t) => {
  const { app, mock } = await setup(t, [{ ...KEY_RULE }])
  const post = (body: Record<string, unknown>) => app.inject({ method: 'POST', url: '/v1/responses', payload: { model: 'openai/gpt-test', ...body } })
  const json = await post({ input: `say ${SECRET}` })
  t.equal(json.statusCode, 200)
  t.notMatch(JSON.stringify(mock.body()), SECRET, 'the request was redacted before it went upstream')
  t.notMatch(json.body, SECRET)
  const text = `Your key is ${SECRET}, keep it.`
  for (const i of [14, 20, 30]) {
    mock.enqueue({ stream: chatFrames([text.slice(0, i), text.slice(i)]) })
    const res = await post({ input: 'x', stream: true })
    const p = new SseParser()
    const events = [...p.push(res.body), ...p.end()].map((e) => JSON.parse(e.data) as Record<string, any>)
    const deltas = events.filter((e) => e.type === 'response.output_text.delta').map((e) => e.delta).join('')
    t.equal(deltas, 'Your key is [REDACTED], keep it.', `split at ${i}: the deltas`)
    t.equal(events.find((e) => e.type === 'response.output_text.done')?.text, 'Your key is [REDACTED], keep it.', 'the .done text')
    t.equal(events.at(-1)?.response?.output?.[0]?.content?.[0]?.text, 'Your key is [REDACTED], keep it.', 'response.completed')
    t.same(events.map((e) => e.sequence_number), events.map((_, n) => n), 'sequence numbers still run from 0 without gaps')
    t.notMatch(res.body, /ABCDEFGH/)
  }
})

t.test('options: a pattern that is not a regular expression is refused by name; replacement; max_hold_chars', async (t) => {
  const gw = await testGatewayAlone(t)
  await t.rejects(gw.use(guardrails, { rules: [KEY_RULE, { name: 'broken', pattern: '(unclosed' }] }), /plugin guardrails\.options\.rules\[1\]\.pattern: not a valid regular expression/)
  await t.rejects(gw.use(guardrails, { rules: [{ ...KEY_RULE, action: 'mask' }] }), /options\.rules/)

  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const { app } = await bareGateway(t, [[guardrails, { rules: [{ ...KEY_RULE, on: ['response'] }], replacement: '***', max_hold_chars: 8 }]], { config: mockCatalog(mock) })
  const json = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat(`say ${SECRET}`) })
  t.match(json.json().choices[0].message.content, /say \*\*\*/, 'the replacement text')
  // an unbounded pattern holds back at most max_hold_chars of a stream: a match that grows past
  // it before its last delta arrives is no longer caught whole (the documented limit)
  mock.enqueue({ stream: chatFrames(['key sk-ABCDEFGHIJ', 'KLMNOPQRSTUV end']) })
  const long = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat('x', { stream: true }) })
  t.notMatch(streamedText(long.body), /\*\*\*/, 'a match longer than max_hold_chars split across deltas passes')
  mock.enqueue({ stream: chatFrames(['key sk-ABCDEFGHIJKLMNOPQRSTUV', ' end']) })
  const whole = await app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat('x', { stream: true }) })
  t.equal(streamedText(whole.body), 'key *** end', 'one that arrives in one delta is replaced')
})

t.test('Gemini streams: a chunk whose text is all held back still brings its function call and signature', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const app = await build(t, { ...mockCatalogWithGemini(mock), plugins: [{ name: 'auth' }, { name: 'guardrails', options: { rules: [{ ...KEY_RULE, on: ['response'] }] } }] })
  const chunk = (parts: unknown[], extra: Record<string, unknown> = {}): string => `data: ${JSON.stringify({ candidates: [{ content: { role: 'model', parts }, index: 0, ...extra }], usageMetadata: { promptTokenCount: 5, totalTokenCount: 5 } })}\r\n\r\n`
  mock.enqueue({
    stream: [
      chunk([{ text: 'Here it is: ' }]),
      // 'sk-ABCDEF' could be the start of a key: held back whole, while the call must go on
      chunk([{ text: 'sk-ABCDEF', thoughtSignature: 'c2ln' }, { functionCall: { name: 'lookup', args: { q: 'x' } } }]),
      chunk([], { finishReason: 'STOP' })
    ]
  })
  const res = await app.inject({ method: 'POST', url: '/v1beta/models/google/gemini-test:streamGenerateContent?alt=sse', headers: { 'x-goog-api-key': KEY_A }, payload: { contents: [{ role: 'user', parts: [{ text: 'go' }] }] } })
  t.equal(res.statusCode, 200)
  const p = new SseParser()
  const parts = [...p.push(res.body), ...p.end()].flatMap((e) => JSON.parse(e.data).candidates?.[0]?.content?.parts ?? []) as Array<Record<string, unknown>>
  t.same(parts.filter((x) => x.functionCall !== undefined).map((x) => x.functionCall), [{ name: 'lookup', args: { q: 'x' } }], 'the function call reached the client')
  t.ok(parts.some((x) => x.thoughtSignature === 'c2ln'), 'and the signature on the held part')
  t.equal(parts.map((x) => typeof x.text === 'string' ? x.text : '').join(''), 'Here it is: sk-ABCDEF', 'the held text followed once no match could grow from it')
})
