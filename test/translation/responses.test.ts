import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import OpenAI from 'openai'
import t from 'tap'
import { isGatewayError } from '../../engine/kernel/errors.js'
import { pairFor } from '../../engine/translation/index.js'
import { flatToolName as flatName } from '../../engine/kernel/tool-names.js'
import { namespacedTools } from '../../engine/protocols/responses/request.js'
import { serialize, SseParser } from '../../engine/protocols/sse.js'
import type { Json, Protocol, SseEvent, TranslateCtx } from '../../engine/translation/types.js'
import { fromRoot } from '../../paths.js'
import { checkResponsesBody } from './responses-route.js'

// The Responses pairs beyond the fixture replays: the event stream's own invariants, the openai
// SDK's stream reader fed the streams the pairs write, the route's request checks, the
// failure frames, and the flat names of namespaced tools.

const ROOT = fromRoot('test', 'fixtures')
const BASE_CTX: TranslateCtx = { model: 'vendor/model', upstreamModel: 'up-model', id: 'abc', created: 1700000000, stream: false, includeUsage: false, flatten: false, defaultMaxTokens: 4096 }
const TRANSLATED: Record<string, Protocol> = { 'responses-to-chat': 'openai', 'responses-to-messages': 'messages' }

const read = (dir: string, file: string): Json => JSON.parse(readFileSync(join(dir, file), 'utf8')) as Json
const ctxFor = (dir: string): TranslateCtx => existsSync(join(dir, 'client-request.json')) ? { ...BASE_CTX, clientRequest: read(dir, 'client-request.json') } : BASE_CTX
const parseAll = (text: string): SseEvent[] => { const p = new SseParser(); return [...p.push(text), ...p.end()] }

/** The client stream a pair writes for a case's upstream stream. */
function replay (upstream: Protocol, dir: string): string {
  const mapper = pairFor('responses', upstream).stream(ctxFor(dir))
  let text = ''
  for (const f of parseAll(readFileSync(join(dir, 'upstream-stream.txt'), 'utf8'))) for (const ev of mapper.push(f)) text += serialize(ev)
  for (const ev of mapper.end()) text += serialize(ev)
  return text
}

const streamCases = (): Array<{ name: string, upstream: Protocol, dir: string }> => Object.entries(TRANSLATED).flatMap(([pairName, upstream]) =>
  readdirSync(join(ROOT, pairName)).sort().map((c) => ({ name: `${pairName}/${c}`, upstream, dir: join(ROOT, pairName, c) })).filter((c) => existsSync(join(c.dir, 'upstream-stream.txt'))))

const TERMINAL = new Set(['response.completed', 'response.incomplete', 'response.failed'])

t.test('every written stream: event names its type, sequence numbers from 0, created first, one terminal event last', async (t) => {
  const cases = streamCases()
  t.ok(cases.length >= 12, 'the stream cases are found')
  for (const c of cases) {
    const frames = parseAll(replay(c.upstream, c.dir)).map((f) => ({ event: f.event, data: JSON.parse(f.data) as Json }))
    t.ok(frames.every((f) => f.event === f.data.type), `${c.name}: event line = type`)
    t.same(frames.map((f) => f.data.sequence_number), frames.map((_, i) => i), `${c.name}: sequence numbers`)
    t.equal(frames[0]?.data.type, 'response.created', `${c.name}: created first`)
    t.equal(frames[1]?.data.type, 'response.in_progress', `${c.name}: then in_progress`)
    t.same(frames.filter((f) => TERMINAL.has(String(f.data.type))).map((f) => f.data.type), [frames[frames.length - 1]?.data.type], `${c.name}: one terminal event, last`)
    // each item is added before it is written to, and done once
    const added = new Set<number>()
    const done = new Set<number>()
    for (const f of frames) {
      const i = f.data.output_index as number | undefined
      if (i === undefined) continue
      if (f.data.type === 'response.output_item.added') { t.notOk(added.has(i), `${c.name}: item ${i} added once`); added.add(i) } else t.ok(added.has(i) && !done.has(i), `${c.name}: ${String(f.data.type)} on an open item`)
      if (f.data.type === 'response.output_item.done') done.add(i)
    }
  }
})

/** Serves `body` as an SSE answer to any request, like the Responses API would. */
async function sseServer (t: { teardown: (fn: () => unknown) => void }, body: () => string): Promise<string> {
  const server: Server = createServer((req, res) => {
    req.resume()
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/event-stream; charset=utf-8' })
      // written in small pieces, as a network would deliver it
      const text = Buffer.from(body())
      for (let i = 0; i < text.length; i += 97) res.write(text.subarray(i, i + 97))
      res.end()
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(async () => await new Promise<void>((resolve) => server.close(() => resolve())))
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`
}

/** The SDK's final response without what its helper adds on top of the wire object. */
function wireOf (response: unknown): Json {
  const r = structuredClone(response) as Json & { output: Json[] }
  delete r.output_text
  delete r.output_parsed
  for (const item of r.output) {
    delete item.parsed_arguments
    for (const part of (Array.isArray(item.content) ? item.content : []) as Json[]) delete part.parsed
  }
  return r
}

t.test('openai SDK: responses.stream().finalResponse() rebuilds each written stream into the non-streamed answer', async (t) => {
  let current = ''
  const baseURL = await sseServer(t, () => current)
  const client = new OpenAI({ baseURL, apiKey: 'sk-test', maxRetries: 0 })
  const cases = streamCases().filter((c) => existsSync(join(c.dir, 'client-response.json')))
  t.ok(cases.filter((c) => c.upstream === 'openai').length >= 2 && cases.filter((c) => c.upstream === 'messages').length >= 2, 'text and tool-call streams of both upstreams')
  t.ok(cases.some((c) => c.name.endsWith('/function-call')) && cases.some((c) => c.name.endsWith('/instructions-developer')))
  for (const c of cases) {
    current = replay(c.upstream, c.dir)
    const stream = client.responses.stream({ model: 'vendor/model', input: 'hi' })
    const types: string[] = []
    stream.on('event', (ev) => { types.push(ev.type) })
    const final = await stream.finalResponse()
    t.same(wireOf(final), read(c.dir, 'client-response.json'), `${c.name}: the streamed answer equals the JSON one`)
    const expected = read(c.dir, 'client-response.json') as { output: Json[], status: string }
    const text = expected.output.filter((i) => i.type === 'message').flatMap((i) => (i.content as Json[]).map((p) => p.text)).join('')
    t.equal(final.output_text, text, `${c.name}: output_text`)
    t.equal(types[types.length - 1], expected.status === 'completed' ? 'response.completed' : 'response.incomplete', `${c.name}: last event`)
  }
})

t.test('openai SDK: a stream that failed mid-way resolves with status failed and the error', async (t) => {
  let current = ''
  const baseURL = await sseServer(t, () => current)
  const client = new OpenAI({ baseURL, apiKey: 'sk-test', maxRetries: 0 })
  for (const c of streamCases().filter((c) => c.name.endsWith('/stream-error'))) {
    current = replay(c.upstream, c.dir)
    const final = await client.responses.stream({ model: 'vendor/model', input: 'hi' }).finalResponse()
    t.equal(final.status, 'failed', c.name)
    t.match(final.error, { code: /^server_/, message: /error|Overloaded/ }, c.name)
    t.equal(final.output_text, 'Par', `${c.name}: what was written before the failure is kept`)
  }
})

t.test('fail(): after the first byte, response.failed continues the numbering; nothing after a terminal event', async (t) => {
  const chunk = (delta: Json, finish: string | null = null): SseEvent => ({ data: JSON.stringify({ id: 'c', object: 'chat.completion.chunk', created: 1, model: 'm', choices: [{ index: 0, delta, finish_reason: finish }] }) })
  const mapper = pairFor('responses', 'openai').stream(BASE_CTX)
  const first = [...mapper.push(chunk({ role: 'assistant', content: '' })), ...mapper.push(chunk({ content: 'Hi' }))]
  const failed = mapper.fail?.({ status: 408, message: 'The upstream stream was idle for more than 5 s.', type: 'timeout_error' }) ?? []
  t.equal(failed.length, 1)
  const data = JSON.parse(failed[0]?.data ?? '{}') as Json & { response: Json }
  t.equal(failed[0]?.event, 'response.failed')
  t.equal(data.sequence_number, first.length)
  t.same(data.response.error, { code: 'server_error', message: 'The upstream stream was idle for more than 5 s.' })
  t.equal(mapper.finished(), false)
  t.same(mapper.fail?.({ status: 502, message: 'again' }), [], 'a second failure writes nothing')
  t.same(mapper.push(chunk({ content: 'late' })), [], 'nor does a late frame')

  // before anything was written: created first, so that a reader has a snapshot to fail
  const early = pairFor('responses', 'messages').stream(BASE_CTX).fail?.({ status: 429, message: 'Slow down' }) ?? []
  t.same(early.map((e) => e.event), ['response.created', 'response.in_progress', 'response.failed'])
  t.match(JSON.parse(early[2]?.data ?? '{}'), { sequence_number: 2, response: { status: 'failed', error: { code: 'rate_limit_exceeded' } } })

  // after the answer completed, a failure is not written
  const done = pairFor('responses', 'openai').stream(BASE_CTX)
  done.push(chunk({ content: 'x' }))
  done.push(chunk({}, 'stop'))
  const end = done.end()
  t.equal(end[end.length - 1]?.event, 'response.completed', 'a stream cut after finish_reason still completes (its usage never came)')
  t.equal(done.finished(), true)
  t.equal(done.usage(), null)
  t.same(done.fail?.({ status: 502, message: 'reset' }), [])
})

t.test('an upstream stream cut before its end writes no terminal event: the route fails it', async (t) => {
  const mapper = pairFor('responses', 'messages').stream(BASE_CTX)
  const out: SseEvent[] = []
  const frames = parseAll(readFileSync(join(ROOT, 'responses-to-messages', 'function-call', 'upstream-stream.txt'), 'utf8'))
  for (const f of frames.slice(0, 6)) out.push(...mapper.push(f))
  out.push(...mapper.end())
  t.notOk(out.some((e) => TERMINAL.has(e.event ?? '')))
  t.equal(mapper.finished(), false)
  t.equal(mapper.relayedText(), 'I will use get_weather.')
  const failed = mapper.fail?.({ status: 502, message: 'The upstream provider failed while streaming the response.' }) ?? []
  t.equal(failed[0]?.event, 'response.failed')
})

t.test('passthrough: usage from the body and from the terminal event; fail() numbers after the relayed events', async (t) => {
  const pair = pairFor('responses', 'responses')
  const dir = join(ROOT, 'passthrough-responses', 'json')
  t.same(pair.response(read(dir, 'upstream-response.json'), BASE_CTX).usage, { prompt_tokens: 9, cached_input_tokens: 4, completion_tokens: 2, cache_creation_input_tokens: 0, reasoning_tokens: 1 })

  const frames = parseAll(readFileSync(join(ROOT, 'passthrough-responses', 'stream', 'upstream-stream.txt'), 'utf8'))
  const mapper = pair.stream(BASE_CTX)
  for (const f of frames.slice(0, 5)) t.same(mapper.push(f), [f], 'relayed as they came')
  t.equal(mapper.relayedText(), 'Hel')
  const failed = mapper.fail?.({ status: 502, message: 'reset' }) ?? []
  t.equal(failed.length, 1)
  t.match(JSON.parse(failed[0]?.data ?? '{}'), { type: 'response.failed', sequence_number: 5, response: { id: 'resp_up', status: 'failed', error: { code: 'server_error', message: 'reset' } } })

  const whole = pair.stream(BASE_CTX)
  for (const f of frames) whole.push(f)
  t.equal(whole.finished(), true)
  t.same(whole.fail?.({ status: 502, message: 'late' }), [])
})

t.test('the Responses route\'s schema and its stateless checks: what the route refuses before anything is forwarded', async (t) => {
  const ok = { model: 'm', input: 'hi' }
  t.equal(checkResponsesBody(ok), ok)
  t.ok(checkResponsesBody({ model: 'm', input: [{ role: 'user', content: 'x' }, { type: 'function_call_output', call_id: 'c', output: 'y' }], stream: true, previous_response_id: null, background: false }))
  const refused: Array<[unknown, string, number, RegExp]> = [
    [null, 'invalid_body', 400, /JSON object/],
    [[], 'invalid_body', 400, /JSON object/],
    [{ input: 'hi' }, 'missing_field', 400, /model/],
    [{ model: 3, input: 'hi' }, 'invalid_field', 400, /model/],
    [{ model: 'm' }, 'missing_field', 400, /input/],
    [{ model: 'm', input: 3 }, 'invalid_field', 400, /input/],
    [{ model: 'm', input: [] }, 'invalid_field', 400, /input/],
    [{ model: 'm', input: ['hi'] }, 'invalid_field', 400, /input\[0\]/],
    [{ model: 'm', input: [{ content: 'no role' }] }, 'invalid_field', 400, /input\[0\]/],
    [{ model: 'm', input: 'hi', stream: 'yes' }, 'invalid_field', 400, /stream/],
    [{ model: 'm', input: 'hi', max_output_tokens: 0 }, 'invalid_field', 400, /max_output_tokens/],
    [{ model: 'm', input: 'hi', tools: {} }, 'invalid_field', 400, /tools/],
    [{ model: 'm', input: 'hi', previous_response_id: 'resp_1' }, 'no_stored_history', 400, /previous_response_id.*whole conversation in input/],
    [{ model: 'm', input: 'hi', conversation: 'conv_1' }, 'no_stored_history', 400, /conversation.*no conversation history/],
    [{ model: 'm', input: 'hi', background: true }, 'no_background', 400, /background/]
  ]
  for (const [body, key, status, message] of refused) {
    let thrown: unknown
    try { checkResponsesBody(body) } catch (err) { thrown = err }
    t.ok(isGatewayError(thrown), `${JSON.stringify(body)} is refused`)
    t.match(thrown, { key, statusCode: status, message }, JSON.stringify(body))
    t.match(thrown, { spec: { openaiType: 'invalid_request_error' } })
  }
})

t.test('flat names of namespaced tools: valid upstream names, unique, named back', async (t) => {
  t.equal(flatName('multi_agent_v1', 'spawn_agent'), 'multi_agent_v1__spawn_agent')
  t.equal(flatName('mcp__calendar__', '__create_event'), 'mcp__calendar__create_event', 'no doubled separator')
  const long = flatName('mcp__a_very_long_server_name_that_goes_on', 'and_a_tool_name_that_is_long_too')
  const other = flatName('mcp__a_very_long_server_name_that_goes_on', 'and_a_tool_name_that_is_long_too_2')
  const odd = flatName('crm.v2', 'find customer')
  for (const name of [long, other, odd]) t.match(name, /^[a-zA-Z0-9_-]{1,64}$/, name)
  t.not(long, other, 'two long names stay distinct')
  t.not(odd, 'crm_v2__find_customer', 'a name that had to change gets a hash, so it cannot meet a real one')
  const names = namespacedTools([{ type: 'namespace', name: 'crm.v2', tools: [{ type: 'function', name: 'find customer' }] }, { type: 'function', name: 'plain' }])
  t.same([...names.entries()], [[odd, { namespace: 'crm.v2', name: 'find customer' }]])

  // a call by that flat name comes back as the client declared the tool
  const ctx = { ...BASE_CTX, clientRequest: { tools: [{ type: 'namespace', name: 'crm.v2', description: 'CRM', tools: [{ type: 'function', name: 'find customer', parameters: {} }] }] } }
  const body = pairFor('responses', 'openai').response({ choices: [{ index: 0, message: { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: odd, arguments: '{}' } }] }, finish_reason: 'tool_calls' }] }, ctx).body as { output: Json[] }
  t.match(body.output[0], { type: 'function_call', name: 'find customer', namespace: 'crm.v2', call_id: 'call_1' })
  const up = pairFor('responses', 'messages').request({ model: 'm', input: 'x', tools: ctx.clientRequest.tools }, ctx).body as { tools: Json[] }
  t.same(up.tools.map((tool) => tool.name), [odd])
})

t.test('an inline image goes to a Messages upstream only as a type it takes, as from Chat Completions', async (t) => {
  const input = (url: string): Json[] => [{ role: 'user', content: [{ type: 'input_text', text: 'what is this?' }, { type: 'input_image', image_url: url }] }]
  const up = pairFor('responses', 'messages').request({ model: 'm', input: input('data:image/png;base64,iVBORw0KGgo=') }, BASE_CTX).body as { messages: Array<{ content: Json[] }> }
  t.match(up.messages[0]?.content[1], { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } })
  const byUrl = pairFor('responses', 'messages').request({ model: 'm', input: input('https://example.com/cat.png') }, BASE_CTX).body as { messages: Array<{ content: Json[] }> }
  t.match(byUrl.messages[0]?.content[1], { type: 'image', source: { type: 'url', url: 'https://example.com/cat.png' } })
  for (const [client, body] of [
    ['responses', { model: 'm', input: input('data:text/html;base64,PGgxPg==') }],
    ['openai', { model: 'm', messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:text/html;base64,PGgxPg==' } }] }] }]
  ] as Array<[Protocol, Json]>) {
    let thrown: unknown
    try { pairFor(client, 'messages').request(body, BASE_CTX) } catch (err) { thrown = err }
    t.ok(isGatewayError(thrown), `${client}: a data: URL of another type is refused`)
    t.match(thrown, { statusCode: 400, message: /JPEG, PNG, GIF or WebP/ }, client)
  }
  let thrown: unknown
  try { pairFor('responses', 'messages').request({ model: 'm', input: input('data:text/html;base64,PGgxPg==') }, BASE_CTX) } catch (err) { thrown = err }
  t.match(thrown, { message: /input\[0\]\.content\[1\]\.image_url/ }, 'the 400 names where the URL sits')
})

t.test('the Responses reader is strict: a wrong type anywhere is a 400 naming its field, toward every upstream', async (t) => {
  const fn = { type: 'function', name: 'f', parameters: { type: 'object' } }
  const cases: Array<[Json, RegExp]> = [
    [{ instructions: 3 }, /for instructions:/],
    [{ temperature: 'hot' }, /for temperature:/],
    [{ top_p: [] }, /for top_p:/],
    [{ stop: [1] }, /for stop\[0\]:/],
    [{ text: 'json' }, /for text:/],
    [{ text: { format: 'json' } }, /for text\.format:/],
    [{ text: { verbosity: 2 } }, /for text\.verbosity:/],
    [{ reasoning: 'high' }, /for reasoning:/],
    [{ reasoning: { effort: 5 } }, /for reasoning\.effort:/],
    [{ metadata: 'x' }, /for metadata:/],
    [{ user: 1 }, /for user:/],
    [{ safety_identifier: {} }, /for safety_identifier:/],
    [{ prompt_cache_key: 7 }, /for prompt_cache_key:/],
    [{ include: 'x' }, /for include:/],
    [{ include: [1] }, /for include\[0\]:/],
    [{ parallel_tool_calls: 'yes' }, /for parallel_tool_calls:/],
    [{ tools: [3] }, /for tools\[0\]:/],
    [{ tools: [{ type: 'function', name: 3 }] }, /for tools\[0\]\.name:/],
    [{ tools: [{ ...fn, description: 1 }] }, /for tools\[0\]\.description:/],
    [{ tools: [{ ...fn, parameters: 'x' }] }, /for tools\[0\]\.parameters:/],
    [{ tools: [{ ...fn, strict: 'no' }] }, /for tools\[0\]\.strict:/],
    [{ tools: [{ type: 'namespace', name: 'ns', tools: 'x' }] }, /for tools\[0\]\.tools:/],
    [{ tools: [{ type: 'namespace', name: 'ns', tools: [{ type: 'function', name: null }] }] }, /for tools\[0\]\.tools\[0\]\.name:/],
    [{ tool_choice: 'sometimes' }, /for tool_choice:/],
    [{ tool_choice: 3 }, /for tool_choice:/],
    [{ tools: [fn], tool_choice: { type: 'function', name: 1 } }, /for tool_choice\.name:/],
    [{ tools: [fn], tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [2] } }, /for tool_choice\.tools\[0\]:/],
    [{ input: [{ role: 'user', content: 5 }] }, /for input\[0\]\.content:/],
    [{ input: [{ role: 'user', content: ['hi'] }] }, /for input\[0\]\.content\[0\]:/],
    [{ input: [{ role: 'user', content: [{ type: 'input_text', text: 1 }] }] }, /for input\[0\]\.content\[0\]\.text:/],
    [{ input: [{ role: 'assistant', content: [{ type: 'refusal', refusal: null }] }] }, /for input\[0\]\.content\[0\]\.refusal:/],
    [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 5 }] }] }, /for input\[0\]\.content\[0\]\.image_url:/],
    [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: { url: 5 } }] }] }, /for input\[0\]\.content\[0\]\.image_url\.url:/],
    [{ input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'https://example.com/a.png', detail: 1 }] }] }, /for input\[0\]\.content\[0\]\.detail:/],
    [{ input: [{ type: 'function_call', call_id: 1, name: 'f', arguments: '{}' }] }, /for input\[0\]\.call_id:/],
    [{ input: [{ type: 'function_call', call_id: 'c', name: ['f'], arguments: '{}' }] }, /for input\[0\]\.name:/],
    [{ input: [{ type: 'function_call', call_id: 'c', name: 'f', arguments: {} }] }, /for input\[0\]\.arguments:/],
    [{ input: [{ type: 'function_call', call_id: 'c', name: 'f', namespace: 2, arguments: '{}' }] }, /for input\[0\]\.namespace:/],
    [{ input: [{ type: 'function_call_output', call_id: 'c', output: 4 }] }, /for input\[0\]\.output:/],
    [{ input: [{ type: 'function_call_output', call_id: 'c', output: [{ type: 'input_text', text: false }] }] }, /for input\[0\]\.output\[0\]\.text:/]
  ]
  for (const upstream of ['openai', 'messages', 'gemini'] as Protocol[]) {
    for (const [fields, field] of cases) {
      const body = { model: 'm', input: 'hi', ...fields }
      let thrown: unknown
      try { pairFor('responses', upstream).request(body, BASE_CTX) } catch (err) { thrown = err }
      t.ok(isGatewayError(thrown), `${upstream}: ${JSON.stringify(fields)} is refused`)
      t.match(thrown, { statusCode: 400, message: field }, `${upstream}: ${JSON.stringify(fields)}`)
    }
  }
  // what is right still goes, namespaced tools and a built-in tool's choice (dropped) included
  const ok = pairFor('responses', 'openai').request({ model: 'm', input: [{ role: 'user', content: [{ type: 'input_text', text: 'hi' }] }], tools: [fn], tool_choice: { type: 'web_search' }, temperature: 0.5, stop: 'END', text: { verbosity: 'low' } }, BASE_CTX)
  t.same(ok.dropped, ['tool_choice'])
})
