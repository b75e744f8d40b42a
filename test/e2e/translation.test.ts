import t, { type Test } from 'tap'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import { promptTokens } from '../mock-upstream.js'
import { KEY_A, listeningGateway, settled } from '../helper.js'

// Each official SDK against a mock upstream of the OTHER protocol, as if the upstream spoke its own.

async function start (t: Test, overrides: Record<string, unknown> = {}) {
  const gw = await listeningGateway(t, () => overrides)
  return {
    ...gw,
    openai: new OpenAI({ baseURL: `${gw.base}/v1`, apiKey: KEY_A, maxRetries: 0 }),
    anthropic: new Anthropic({ baseURL: gw.base, apiKey: KEY_A, maxRetries: 0 }),
    rows: async () => { await settled(); await gw.app.gateway.store.flush(); return await gw.rows() }
  }
}

const weather = { type: 'function' as const, function: { name: 'get_weather', description: 'Weather for a city', parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } } }
const weatherTool = { name: 'get_weather', description: 'Weather for a city', input_schema: { type: 'object' as const, properties: { city: { type: 'string' } }, required: ['city'] } }

t.test('openai SDK → Messages upstream: text, system, stop, user, usage with cache tokens', async (t) => {
  const { openai, mock, rows } = await start(t)
  mock.cachedTokens = 7
  mock.cacheCreationTokens = 3
  const res = await openai.chat.completions.create({
    model: 'anthropic/claude-test',
    messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: 'Hello' }, { role: 'user', content: 'again' }],
    stop: ['STOP'],
    user: 'user-42',
    temperature: 0.5
  })
  const up = mock.body()
  t.equal(up.system, 'Be brief.')
  t.same(up.messages, [{ role: 'user', content: [{ type: 'text', text: 'Hello' }, { type: 'text', text: 'again' }] }], 'same-role turns merged')
  t.same(up.stop_sequences, ['STOP'])
  t.same(up.metadata, { user_id: 'user-42' })
  t.equal(up.max_tokens, 4096, 'a default max_tokens for the Messages upstream')
  t.equal(res.object, 'chat.completion')
  t.equal(res.choices[0]?.finish_reason, 'stop')
  const p = res.usage!.prompt_tokens
  t.equal(res.usage!.prompt_tokens_details?.cached_tokens, 7)
  const [row] = await rows()
  t.equal(row?.prompt_tokens, p, 'the record counts the same input as the client saw')
  t.equal(row?.cached_input_tokens, 7)
  t.equal(row?.completion_tokens, res.usage!.completion_tokens)
  t.equal(p, promptTokens(up) + 7 + 3, 'prompt_tokens = input_tokens + cache_read + cache_creation')
})

t.test('openai SDK → Messages upstream: tool call round trip, streamed through the strict helper', async (t) => {
  const { openai, mock } = await start(t)
  const first = await openai.chat.completions.stream({ model: 'anthropic/claude-test', messages: [{ role: 'user', content: 'What is the weather? use the tool' }], tools: [weather], tool_choice: 'auto' }).finalChatCompletion()
  const call = first.choices[0]?.message.tool_calls?.[0]
  t.equal(first.choices[0]?.finish_reason, 'tool_calls')
  t.equal(call?.type === 'function' ? call.function.name : '', 'get_weather')
  t.same(mock.body().tools, [weatherTool])
  t.same(mock.body().tool_choice, { type: 'auto' })
  const args = call?.type === 'function' ? call.function.arguments : '{}'
  t.ok(JSON.parse(args).city !== undefined)

  const second = await openai.chat.completions.create({
    model: 'anthropic/claude-test',
    messages: [
      { role: 'user', content: 'What is the weather? use the tool' },
      { role: 'assistant', content: null, tool_calls: [call!] },
      { role: 'tool', tool_call_id: call!.id, content: 'Sunny, 21 C' }
    ],
    tools: [weather]
  })
  const up = mock.body().messages as Array<{ role: string, content: Array<Record<string, unknown>> }>
  t.equal(up[1]?.role, 'assistant')
  t.equal(up[1]?.content.at(-1)?.type, 'tool_use')
  t.same(up[2], { role: 'user', content: [{ type: 'tool_result', tool_use_id: call!.id, content: 'Sunny, 21 C' }] })
  t.match(second.choices[0]?.message.content, /Sunny/)
})

t.test('openai SDK → Messages upstream: images, max_tokens, n > 1, video', async (t) => {
  const { openai, mock } = await start(t)
  await openai.chat.completions.create({ model: 'anthropic/claude-test', messages: [{ role: 'user', content: [{ type: 'text', text: 'what is this' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }, { type: 'image_url', image_url: { url: 'https://example.com/cat.jpg' } }] }] })
  const blocks = (mock.body().messages as Array<{ content: unknown[] }>)[0]!.content
  t.same(blocks.slice(1), [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'iVBORw0KGgo=' } }, { type: 'image', source: { type: 'url', url: 'https://example.com/cat.jpg' } }])
  const cut = await openai.chat.completions.create({ model: 'anthropic/claude-test', max_tokens: 2, messages: [{ role: 'user', content: 'one two three four five six' }] })
  t.equal(cut.choices[0]?.finish_reason, 'length')
  t.equal(mock.body().max_tokens, 2)
  const n = await openai.chat.completions.create({ model: 'anthropic/claude-test', n: 2, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e) as { status: number }
  t.equal(n.status, 400)
})

t.test('anthropic SDK → OpenAI upstream: text, system, tool round trip, image, usage', async (t) => {
  const { anthropic, mock, rows } = await start(t)
  mock.cachedTokens = 5
  const msg = await anthropic.messages.create({ model: 'openai/gpt-test', max_tokens: 200, system: 'You are terse.', stop_sequences: ['END'], metadata: { user_id: 'u-1' }, messages: [{ role: 'user', content: 'Hello openai' }] })
  const up = mock.body()
  t.same((up.messages as unknown[])[0], { role: 'system', content: 'You are terse.' })
  t.same(up.stop, ['END'])
  t.equal(up.user, 'u-1')
  t.equal(msg.stop_reason, 'end_turn')
  t.equal(msg.usage.cache_read_input_tokens, 5)
  const [row] = await rows()
  t.equal(row?.prompt_tokens, msg.usage.input_tokens + 5, 'prompt tokens include the cached ones')
  t.equal(row?.cached_input_tokens, 5)

  const first = await anthropic.messages.stream({ model: 'openai/gpt-test', max_tokens: 200, tools: [weatherTool], tool_choice: { type: 'any' }, messages: [{ role: 'user', content: 'weather in Paris' }] }).finalMessage()
  t.equal(first.stop_reason, 'tool_use')
  const use = first.content.find((b) => b.type === 'tool_use')
  t.ok(use)
  t.equal(mock.body().tool_choice, 'required')
  const second = await anthropic.messages.create({
    model: 'openai/gpt-test',
    max_tokens: 200,
    tools: [weatherTool],
    messages: [
      { role: 'user', content: 'weather in Paris' },
      { role: 'assistant', content: first.content },
      { role: 'user', content: [{ type: 'tool_result', tool_use_id: (use as { id: string }).id, content: 'Rain, 12 C' }, { type: 'text', text: 'and so?' }] }
    ]
  })
  const msgs = mock.body().messages as Array<Record<string, unknown>>
  t.same(msgs.slice(-2), [{ role: 'tool', tool_call_id: (use as { id: string }).id, content: 'Rain, 12 C' }, { role: 'user', content: 'and so?' }])
  t.match((second.content[0] as { text: string }).text, /and so\?/)

  await anthropic.messages.create({ model: 'openai/gpt-test', max_tokens: 50, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/jpeg', data: '/9j/4AAQ' } }, { type: 'text', text: 'see' }] }] })
  t.same((mock.body().messages as Array<{ content: unknown[] }>)[0]!.content[0], { type: 'image_url', image_url: { url: 'data:image/jpeg;base64,/9j/4AAQ' } })
})

t.test('anthropic SDK → OpenAI upstream: streaming text through finalMessage, max_tokens', async (t) => {
  const { anthropic } = await start(t)
  const stream = anthropic.messages.stream({ model: 'openai/gpt-test', max_tokens: 3, messages: [{ role: 'user', content: 'alpha beta gamma delta epsilon' }] })
  const events: string[] = []
  stream.on('streamEvent', (e) => events.push(e.type))
  const final = await stream.finalMessage()
  t.equal(final.stop_reason, 'max_tokens')
  t.equal(events[0], 'message_start')
  t.equal(events.at(-1), 'message_stop')
  t.ok(final.usage.output_tokens > 0 && final.usage.input_tokens > 0, 'usage held until the upstream reported it')
})

t.test('an upstream failure before the first byte is answered with its real status', async (t) => {
  const { anthropic, openai, mock } = await start(t)
  mock.faults = { status: { status: 429, message: 'slow down', times: 2 } }
  const a = await anthropic.messages.create({ model: 'openai/gpt-test', max_tokens: 5, stream: true, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e) as { status: number }
  t.equal(a.status, 429)
  const o = await openai.chat.completions.create({ model: 'anthropic/claude-test', stream: true, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e) as { status: number }
  t.equal(o.status, 429)
})

t.test('count_tokens: forwarded to Messages upstreams, counted locally otherwise', async (t) => {
  const { anthropic, mock } = await start(t)
  const up = await anthropic.messages.countTokens({ model: 'anthropic/claude-test', messages: [{ role: 'user', content: 'count me please' }] })
  t.ok(up.input_tokens > 0)
  t.equal(mock.requests.at(-1)?.path, '/v1/messages/count_tokens')
  const before = mock.requests.length
  const local = await anthropic.messages.countTokens({ model: 'openai/gpt-test', messages: [{ role: 'user', content: 'count me please, locally, with a real tokenizer' }] })
  t.ok(local.input_tokens > 5 && local.input_tokens < 40, `a plausible count: ${local.input_tokens}`)
  t.equal(mock.requests.length, before, 'nothing went upstream')
})

t.test('translation.flatten reproduces the spec\'s simplification', async (t) => {
  const { openai, anthropic, mock } = await start(t, { translation: { flatten: true } })
  await openai.chat.completions.create({ model: 'anthropic/claude-test', messages: [{ role: 'user', content: [{ type: 'text', text: 'look' }, { type: 'image_url', image_url: { url: 'https://example.com/x.png' } }] }] })
  t.same((mock.body().messages as unknown[])[0], { role: 'user', content: [{ type: 'text', text: 'look' }] }, 'images dropped silently')
  await anthropic.messages.create({ model: 'openai/gpt-test', max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'url', url: 'https://example.com/x.png' } }] }] }).catch(() => null)
  t.same(((mock.body().messages as Array<{ content: unknown[] }>)[0]!.content[0]), { type: 'image', source: { type: 'url', url: 'https://example.com/x.png' } }, 'image blocks left unconverted')
})
