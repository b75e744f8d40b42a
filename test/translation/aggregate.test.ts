import t from 'tap'
import { readFileSync } from 'node:fs'
import { aggregateStream } from '../../plugins/api/index.js'
import { replayStream } from '../../engine/protocols/index.js'
import { serialize } from '../../engine/protocols/sse.js'
import type { Json, Protocol, SseEvent } from '../../engine/translation/types.js'
import { fromRoot } from '../../paths.js'

// A stream folded back into its whole answer is the inverse of the replay of a whole answer as
// a stream: aggregate(replay(x)) == x in every protocol, for answers with text in many pieces,
// thinking, tool calls, several choices or candidates, and usage. A stream that stopped early
// or carried an error is no answer.

const ctx = { id: 'trace0', created: 1700000000, model: 'vendor/model' }
const long = 'The heron stands in the shallows, patient as a post, waiting for the light to shift and a fish to forget it is there. '.repeat(4)

// MCP is a client protocol with no answers to aggregate (a tool result is whole)
const ANSWERS: Record<Protocol, Json[]> = {
  openai: [
    {
      id: 'chatcmpl-1',
      object: 'chat.completion',
      created: 1700000001,
      model: 'vendor/model',
      system_fingerprint: 'fp_1',
      choices: [{ index: 0, message: { role: 'assistant', content: long, refusal: null, reasoning_content: 'Think first. '.repeat(9) }, logprobs: null, finish_reason: 'stop' }],
      usage: { prompt_tokens: 120, completion_tokens: 30, total_tokens: 150, prompt_tokens_details: { cached_tokens: 20 } }
    },
    {
      id: 'chatcmpl-2',
      object: 'chat.completion',
      created: 1700000002,
      model: 'vendor/model',
      choices: [{
        index: 0,
        message: {
          role: 'assistant',
          content: null,
          refusal: null,
          tool_calls: [
            { id: 'call_a', type: 'function', function: { name: 'get_weather', arguments: JSON.stringify({ city: 'Lyon', days: 3, notes: long }) } },
            { id: 'call_b', type: 'function', function: { name: 'get_time', arguments: '{}' } }
          ]
        },
        logprobs: null,
        finish_reason: 'tool_calls'
      }],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }
    },
    {
      id: 'chatcmpl-3',
      object: 'chat.completion',
      created: 1700000003,
      model: 'vendor/model',
      choices: [
        { index: 0, message: { role: 'assistant', content: 'one', refusal: null }, logprobs: null, finish_reason: 'stop' },
        { index: 1, message: { role: 'assistant', content: '', refusal: 'I cannot help with that.' }, logprobs: null, finish_reason: 'stop' }
      ],
      usage: { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 }
    }
  ],
  messages: [
    {
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: 'vendor/model',
      stop_reason: 'tool_use',
      stop_sequence: null,
      content: [
        { type: 'thinking', thinking: 'The user wants the weather. '.repeat(5), signature: 'sig-abc' },
        { type: 'redacted_thinking', data: 'opaque' },
        { type: 'text', text: long },
        { type: 'tool_use', id: 'toolu_1', name: 'get_weather', input: { city: 'Lyon', days: 3, notes: long } },
        { type: 'tool_use', id: 'toolu_2', name: 'get_time', input: {} }
      ],
      usage: { input_tokens: 1200, cache_creation_input_tokens: 10, cache_read_input_tokens: 300, output_tokens: 300 }
    },
    {
      id: 'msg_2',
      type: 'message',
      role: 'assistant',
      model: 'vendor/model',
      stop_reason: 'stop_sequence',
      stop_sequence: 'END',
      content: [{ type: 'text', text: 'short' }],
      usage: { input_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 1 }
    }
  ],
  responses: [
    {
      id: 'resp_1',
      object: 'response',
      created_at: 1700000000,
      status: 'completed',
      model: 'vendor/model',
      error: null,
      incomplete_details: null,
      output: [
        { type: 'reasoning', id: 'rs_1', summary: [{ type: 'summary_text', text: 'Thinking about it. '.repeat(6) }] },
        { type: 'message', id: 'msg_1', status: 'completed', role: 'assistant', content: [{ type: 'output_text', text: long, annotations: [] }] },
        { type: 'function_call', id: 'fc_1', call_id: 'call_1', name: 'get_weather', arguments: JSON.stringify({ city: 'Lyon', notes: long }), status: 'completed' }
      ],
      usage: { input_tokens: 1200, input_tokens_details: { cached_tokens: 0 }, output_tokens: 300, output_tokens_details: { reasoning_tokens: 12 }, total_tokens: 1500 },
      parallel_tool_calls: true,
      tool_choice: 'auto',
      tools: []
    },
    {
      id: 'resp_2',
      object: 'response',
      created_at: 1700000000,
      status: 'incomplete',
      model: 'vendor/model',
      error: null,
      incomplete_details: { reason: 'max_output_tokens' },
      output: [{ type: 'message', id: 'msg_2', status: 'incomplete', role: 'assistant', content: [{ type: 'output_text', text: 'cut sh', annotations: [] }] }],
      usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 2, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 12 }
    }
  ],
  gemini: [
    {
      candidates: [{
        content: {
          role: 'model',
          parts: [
            { text: 'Considering the weather. '.repeat(4), thought: true },
            { text: long, thoughtSignature: 'c2lnX21vY2sx' },
            { functionCall: { name: 'get_weather', args: { city: 'Lyon' } } }
          ]
        },
        finishReason: 'STOP',
        index: 0
      }],
      usageMetadata: { promptTokenCount: 12, candidatesTokenCount: 40, thoughtsTokenCount: 8, totalTokenCount: 60 },
      modelVersion: 'gemini-test',
      responseId: 'resp-g1'
    },
    {
      candidates: [
        { content: { role: 'model', parts: [{ text: 'first' }] }, finishReason: 'STOP', index: 0 },
        { content: { role: 'model', parts: [{ text: 'second ' + long }] }, finishReason: 'MAX_TOKENS', index: 1 }
      ],
      usageMetadata: { promptTokenCount: 2, candidatesTokenCount: 4, totalTokenCount: 6 }
    }
  ]
}

const text = (events: SseEvent[]): string => events.map((e) => serialize(e)).join('')

for (const protocol of Object.keys(ANSWERS) as Array<Protocol>) {
  t.test(`${protocol}: aggregate(replay(x)) == x`, async (t) => {
    for (const [i, x] of (ANSWERS[protocol] as Json[]).entries()) {
      const frames = replayStream(protocol, structuredClone(x), ctx)
      t.ok(frames.length > 3, `answer ${i} replays as ${frames.length} frames`)
      t.same(aggregateStream(protocol, frames), x, `answer ${i} from its frames`)
      t.same(aggregateStream(protocol, text(frames)), x, `answer ${i} from the stream's text`)
      // the same events with their data parsed, as stream hooks see them
      const parsed = frames.filter((f) => f.data !== '[DONE]').map((f) => ({ event: f.event, data: JSON.parse(f.data) as Json }))
      t.same(aggregateStream(protocol, parsed), x, `answer ${i} from parsed events`)
    }
  })

  t.test(`${protocol}: a stream cut before its end, or carrying an error, is no answer`, async (t) => {
    const frames = replayStream(protocol, structuredClone(ANSWERS[protocol][0] as Json), ctx)
    // the last frame that ends the answer (chat: the finish chunk; Gemini: the finishReason chunk)
    const ends = protocol === 'openai' ? frames.length - 3 : frames.length - 1
    t.equal(aggregateStream(protocol, frames.slice(0, ends)), null, 'cut before the last event')
    const error = protocol === 'messages'
      ? { event: 'error', data: JSON.stringify({ type: 'error', error: { type: 'overloaded_error', message: 'x' } }) }
      : protocol === 'responses'
        ? { event: 'error', data: JSON.stringify({ type: 'error', code: 'server_error', message: 'x', sequence_number: 99 }) }
        : { data: JSON.stringify({ error: { code: 500, message: 'x' } }) }
    t.equal(aggregateStream(protocol, [...frames.slice(0, 2), error, ...frames.slice(2)]), null, 'with an error event')
  })
}

t.test('chat: a stream without its usage chunk takes the call\'s usage', async (t) => {
  const x = ANSWERS.openai[0] as Json
  const frames = replayStream('openai', { ...x, usage: undefined }, ctx)
  t.notOk(frames.some((f) => f.data.includes('"prompt_tokens"')), 'no usage chunk')
  t.equal(aggregateStream('openai', frames)?.usage, undefined, 'none given: none')
  const usage = { prompt_tokens: 120, cached_input_tokens: 20, completion_tokens: 30, cache_creation_input_tokens: 0 }
  t.same(aggregateStream('openai', frames, { usage })?.usage, x.usage, 'the call\'s usage, in the protocol\'s shape')
})

t.test('upstream streams, as providers send them, fold into their whole answers', async (t) => {
  const fixture = (dir: string, file: string): string => readFileSync(fromRoot('test', 'fixtures', dir, file), 'utf8')
  const chat = aggregateStream('openai', fixture('passthrough-openai/with-include-usage', 'upstream-stream.txt'))
  t.match(chat, { object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant' } }] })
  t.type((chat?.choices as Json[])[0]?.finish_reason, 'string')
  t.ok(chat?.usage !== undefined, 'with the usage chunk\'s usage')
  const gemini = aggregateStream('gemini', fixture('passthrough-gemini/stream-two-candidates', 'upstream-stream.txt'))
  t.same(gemini, {
    candidates: [
      { content: { role: 'model', parts: [{ text: 'A.' }] }, finishReason: 'STOP', index: 0 },
      { content: { role: 'model', parts: [{ text: 'B!' }] }, finishReason: 'STOP', index: 1 }
    ],
    usageMetadata: { promptTokenCount: 2, candidatesTokenCount: 4, totalTokenCount: 6 }
  }, 'each candidate\'s text pieces joined, the last usage kept')
  const messages = aggregateStream('messages', fixture('passthrough-messages/stream', 'upstream-stream.txt'))
  t.match(messages, { type: 'message', role: 'assistant' })
  t.ok(typeof messages?.stop_reason === 'string', 'with its stop reason from message_delta')
})
