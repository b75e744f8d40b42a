import t from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { startMockUpstream, type MockUpstream, type RecordedRequest } from '../mock-upstream.js'
import { KEY_A, mockCatalogWithGemini, settled, testConfig } from '../helper.js'
import type { Json } from '../../engine/translation/types.js'

// The charge as providers bill it, table-driven: each provider's usage block as its documentation
// shows it (Anthropic's cache_creation split, OpenAI's cached_tokens, Gemini's
// cachedContentTokenCount and thoughtsTokenCount, audio tokens in OpenAI's token details and
// Gemini's modality breakdowns), answered by the mock upstream as a JSON body
// and as a stream, to every client protocol (chat, Messages, Responses, Gemini: translated or
// not), billed at price sheets with cache writes, long-context tiers and a per-request price.
// Every expected charge is computed by hand in integer nano-dollars below; a rate of $X per
// million tokens is X × 1000 nano-dollars per token.

interface Case {
  name: string
  model: string
  protocol: 'openai' | 'messages' | 'gemini'
  /** The upstream's usage block, as the provider's API reports it. */
  usage: Json
  /** What the usage record must say. */
  want: { prompt: number, cached: number, writes: number, completion: number, cost: number, detail: Record<string, number | null> }
}

const SONNET = { input: 3, cached_input: 0.3, cache_write: 3.75, cache_write_1h: 6, output: 15, tiers: [{ above_input_tokens: 200_000, input: 6, cached_input: 0.6, cache_write: 7.5, cache_write_1h: 12, output: 22.5 }] }
const GPT_4O = { input: 2.5, cached_input: 1.25, output: 10 }
const GPT_TIERED = { input: 2.5, cached_input: 0.25, output: 15, per_request: 0.0005, tiers: [{ above_input_tokens: 272_000, input: 5, cached_input: 0.5, output: 22.5 }] }
const GEMINI_PRO = { input: 1.25, cached_input: 0.125, output: 10, tiers: [{ above_input_tokens: 200_000, input: 2.5, cached_input: 0.25, output: 15 }] }
const GEMINI_FLASH = { input: 0.3, cached_input: 0.03, output: 2.5 }
// audio tokens at their own rates (gpt-4o-realtime's sheet; Gemini 2.5 Flash's audio input)
const GPT_AUDIO = { input: 5, cached_input: 2.5, output: 20, input_audio: 40, output_audio: 80 }
const GEMINI_FLASH_AUDIO = { input: 0.3, cached_input: 0.03, output: 2.5, input_audio: 1 }

const detail = (d: Partial<Record<'input' | 'cached_input' | 'cache_write' | 'output' | 'images' | 'per_request' | 'tool_call', number>>, tier: number | null = null): Record<string, number | null> =>
  ({ input: 0, cached_input: 0, cache_write: 0, output: 0, images: 0, per_request: 0, tool_call: 0, ...d, tier })

const CASES: Case[] = [
  {
    // Anthropic's prompt caching documentation, a response mixing 5-minute and 1-hour writes
    name: 'Anthropic: cache reads, and writes split into 5-minute and 1-hour',
    model: 'anthropic/sonnet',
    protocol: 'messages',
    usage: { input_tokens: 2048, cache_read_input_tokens: 1800, cache_creation_input_tokens: 248, output_tokens: 503, cache_creation: { ephemeral_5m_input_tokens: 148, ephemeral_1h_input_tokens: 100 } },
    want: {
      prompt: 2048 + 1800 + 248,
      cached: 1800,
      writes: 248,
      completion: 503,
      // 2048 × 3000 + 1800 × 300 + (148 × 3750 + 100 × 6000) + 503 × 15000
      cost: 6_144_000 + 540_000 + 1_155_000 + 7_545_000,
      detail: detail({ input: 6_144_000, cached_input: 540_000, cache_write: 1_155_000, output: 7_545_000 })
    }
  },
  {
    // cache_creation_input_tokens alone (no split): every write is a 5-minute one; the prompt,
    // 150000 + 60000 + 1000 = 211000 tokens, is past 200k: the whole call bills at the tier
    name: 'Anthropic: a long prompt bills wholly at the tier',
    model: 'anthropic/sonnet',
    protocol: 'messages',
    usage: { input_tokens: 150_000, cache_read_input_tokens: 60_000, cache_creation_input_tokens: 1000, output_tokens: 2000 },
    want: {
      prompt: 211_000,
      cached: 60_000,
      writes: 1000,
      completion: 2000,
      // 150000 × 6000 + 60000 × 600 + 1000 × 7500 + 2000 × 22500
      cost: 900_000_000 + 36_000_000 + 7_500_000 + 45_000_000,
      detail: detail({ input: 900_000_000, cached_input: 36_000_000, cache_write: 7_500_000, output: 45_000_000 }, 200_000)
    }
  },
  {
    // OpenAI's prompt caching documentation
    name: 'OpenAI: cached_tokens',
    model: 'openai/gpt',
    protocol: 'openai',
    usage: { prompt_tokens: 2006, completion_tokens: 300, total_tokens: 2306, prompt_tokens_details: { cached_tokens: 1920 }, completion_tokens_details: { reasoning_tokens: 0, accepted_prediction_tokens: 0, rejected_prediction_tokens: 0 } },
    want: {
      prompt: 2006,
      cached: 1920,
      writes: 0,
      completion: 300,
      // (2006 − 1920) × 2500 + 1920 × 1250 + 300 × 10000
      cost: 215_000 + 2_400_000 + 3_000_000,
      detail: detail({ input: 215_000, cached_input: 2_400_000, output: 3_000_000 })
    }
  },
  {
    name: 'OpenAI: past 272k at the tier, and a per-request price',
    model: 'openai/gpt-tiered',
    protocol: 'openai',
    usage: { prompt_tokens: 300_000, completion_tokens: 1000, total_tokens: 301_000, prompt_tokens_details: { cached_tokens: 100_000 } },
    want: {
      prompt: 300_000,
      cached: 100_000,
      writes: 0,
      completion: 1000,
      // 200000 × 5000 + 100000 × 500 + 1000 × 22500 + $0.0005
      cost: 1_000_000_000 + 50_000_000 + 22_500_000 + 500_000,
      detail: detail({ input: 1_000_000_000, cached_input: 50_000_000, output: 22_500_000, per_request: 500_000 }, 272_000)
    }
  },
  {
    // Gemini's context caching documentation (its usage_metadata for a cached transcript):
    // 696219 prompt tokens are past 200k, so the tier's rates apply
    name: 'Gemini: cachedContentTokenCount, at the long-context tier',
    model: 'google/pro',
    protocol: 'gemini',
    usage: { promptTokenCount: 696_219, cachedContentTokenCount: 696_190, candidatesTokenCount: 214, totalTokenCount: 696_433 },
    want: {
      prompt: 696_219,
      cached: 696_190,
      writes: 0,
      completion: 214,
      // 29 × 2500 + 696190 × 250 + 214 × 15000
      cost: 72_500 + 174_047_500 + 3_210_000,
      detail: detail({ input: 72_500, cached_input: 174_047_500, output: 3_210_000 }, 200_000)
    }
  },
  {
    // Gemini's thinking documentation: thoughts are output tokens, billed at the output rate
    name: 'Gemini: thoughtsTokenCount billed as output',
    model: 'google/flash',
    protocol: 'gemini',
    usage: { promptTokenCount: 10, candidatesTokenCount: 120, thoughtsTokenCount: 1024, totalTokenCount: 1154 },
    want: {
      prompt: 10,
      cached: 0,
      writes: 0,
      completion: 1144,
      // 10 × 300 + (120 + 1024) × 2500
      cost: 3_000 + 2_860_000,
      detail: detail({ input: 3_000, output: 2_860_000 })
    }
  },
  {
    // OpenAI's usage of an audio model: audio_tokens in both details, part of the totals; the
    // cached tokens bill at the cached rate, the audio ones (taken as uncached) at the audio rate
    name: 'OpenAI: audio input and output tokens at their own rates',
    model: 'openai/audio',
    protocol: 'openai',
    usage: { prompt_tokens: 1_300, completion_tokens: 300, total_tokens: 1_600, prompt_tokens_details: { cached_tokens: 100, audio_tokens: 1_000 }, completion_tokens_details: { audio_tokens: 250, reasoning_tokens: 0 } },
    want: {
      prompt: 1_300,
      cached: 100,
      writes: 0,
      completion: 300,
      // 200 × 5000 + 1000 × 40000 + 100 × 2500 + 50 × 20000 + 250 × 80000
      cost: 41_000_000 + 250_000 + 21_000_000,
      detail: detail({ input: 41_000_000, cached_input: 250_000, output: 21_000_000 })
    }
  },
  {
    // Gemini's usage_metadata with its modality breakdowns: the AUDIO prompt tokens bill at the
    // audio rate, the rest at the input rate
    name: 'Gemini: AUDIO prompt tokens at the audio rate',
    model: 'google/flash-audio',
    protocol: 'gemini',
    usage: { promptTokenCount: 1_500, candidatesTokenCount: 200, totalTokenCount: 1_700, promptTokensDetails: [{ modality: 'TEXT', tokenCount: 300 }, { modality: 'AUDIO', tokenCount: 1_200 }], candidatesTokensDetails: [{ modality: 'TEXT', tokenCount: 200 }] },
    want: {
      prompt: 1_500,
      cached: 0,
      writes: 0,
      completion: 200,
      // 300 × 300 + 1200 × 1000 + 200 × 2500
      cost: 1_290_000 + 500_000,
      detail: detail({ input: 1_290_000, output: 500_000 })
    }
  }
]

const frame = (data: unknown, event?: string): string => `${event === undefined ? '' : `event: ${event}\n`}data: ${JSON.stringify(data)}\n\n`

/** The upstream's answer carrying `usage`: a JSON body or a stream, in its protocol. */
function answer (c: Case, req: RecordedRequest): { body: Json } | { stream: string[] } {
  const body = req.body as Json
  const streamed = c.protocol === 'gemini' ? req.path.includes('streamGenerateContent') : body.stream === true
  if (c.protocol === 'openai') {
    const base = { id: 'chatcmpl-1', created: 1_700_000_000, model: 'up' }
    if (!streamed) return { body: { ...base, object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content: 'Hello there' }, finish_reason: 'stop', logprobs: null }], usage: c.usage } }
    const chunk = (choices: unknown[], usage: unknown = null): string => frame({ ...base, object: 'chat.completion.chunk', choices, usage })
    return {
      stream: [
        chunk([{ index: 0, delta: { role: 'assistant', content: '' }, finish_reason: null }]),
        chunk([{ index: 0, delta: { content: 'Hello there' }, finish_reason: null }]),
        chunk([{ index: 0, delta: {}, finish_reason: 'stop' }]),
        chunk([], c.usage),
        'data: [DONE]\n\n'
      ]
    }
  }
  if (c.protocol === 'messages') {
    const message = { id: 'msg_1', type: 'message', role: 'assistant', model: 'up', stop_sequence: null }
    if (!streamed) return { body: { ...message, content: [{ type: 'text', text: 'Hello there' }], stop_reason: 'end_turn', usage: c.usage } }
    // message_start carries the input side of the usage, message_delta the cumulative output
    const { output_tokens: output, ...input } = c.usage
    return {
      stream: [
        frame({ type: 'message_start', message: { ...message, content: [], stop_reason: null, usage: { ...input, output_tokens: 1 } } }, 'message_start'),
        frame({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }, 'content_block_start'),
        frame({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hello there' } }, 'content_block_delta'),
        frame({ type: 'content_block_stop', index: 0 }, 'content_block_stop'),
        frame({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: output } }, 'message_delta'),
        frame({ type: 'message_stop' }, 'message_stop')
      ]
    }
  }
  const candidate = (text: string, finish?: string): Json => ({ content: { role: 'model', parts: [{ text }] }, index: 0, ...(finish === undefined ? {} : { finishReason: finish }) })
  if (!streamed) return { body: { candidates: [candidate('Hello there', 'STOP')], usageMetadata: c.usage, modelVersion: 'up', responseId: 'r1' } }
  // every chunk counts the prompt; the last one carries the whole usage
  return {
    stream: [
      frame({ candidates: [candidate('Hello')], usageMetadata: { promptTokenCount: c.usage.promptTokenCount, totalTokenCount: c.usage.promptTokenCount }, modelVersion: 'up', responseId: 'r1' }),
      frame({ candidates: [candidate(' there', 'STOP')], usageMetadata: c.usage, modelVersion: 'up', responseId: 'r1' })
    ]
  }
}

type Client = 'chat' | 'messages' | 'responses' | 'gemini'
const CLIENTS: Client[] = ['chat', 'messages', 'responses', 'gemini']

/** A request for `model` in a client protocol, streamed or not. */
function request (client: Client, model: string, stream: boolean): { url: string, headers: Record<string, string>, payload: Json } {
  const auth = { authorization: `Bearer ${KEY_A}` }
  switch (client) {
    case 'chat': return { url: '/v1/chat/completions', headers: auth, payload: { model, stream, messages: [{ role: 'user', content: 'Hello' }] } }
    case 'messages': return { url: '/v1/messages', headers: auth, payload: { model, stream, max_tokens: 4096, messages: [{ role: 'user', content: 'Hello' }] } }
    case 'responses': return { url: '/v1/responses', headers: auth, payload: { model, stream, input: 'Hello' } }
    case 'gemini': return { url: `/v1beta/models/${model}:${stream ? 'streamGenerateContent?alt=sse' : 'generateContent'}`, headers: { 'x-goog-api-key': KEY_A }, payload: { contents: [{ role: 'user', parts: [{ text: 'Hello' }] }] } }
  }
}

t.test('every provider\'s usage billed at its price sheet, JSON and streamed, translated and not', async (t) => {
  const mock: MockUpstream = await startMockUpstream()
  const catalog = mockCatalogWithGemini(mock)
  const model = (id: string, provider: string, pricing: Json): Json => ({
    id,
    name: id,
    provider,
    upstream_model: 'up',
    context_length: 1_048_576,
    max_output_tokens: 8192,
    architecture: { input_modalities: ['text'], output_modalities: ['text'] },
    supported_parameters: ['max_tokens', 'temperature'],
    pricing
  })
  const app: FastifyInstance = await buildApp(testConfig({
    ...catalog,
    models: [
      model('anthropic/sonnet', 'mock-messages', SONNET),
      model('openai/gpt', 'mock-openai', GPT_4O),
      model('openai/gpt-tiered', 'mock-openai', GPT_TIERED),
      model('google/pro', 'mock-gemini', GEMINI_PRO),
      model('google/flash', 'mock-gemini', GEMINI_FLASH),
      model('openai/audio', 'mock-openai', GPT_AUDIO),
      model('google/flash-audio', 'mock-gemini', GEMINI_FLASH_AUDIO)
    ],
    plugins: [{ name: 'auth' }, { name: 'usage' }]
  }))
  t.teardown(async () => { await app.close(); await mock.close() })

  let current: Case = CASES[0] as Case
  mock.script((req) => answer(current, req))
  for (const c of CASES) {
    current = c
    for (const client of CLIENTS) {
      for (const stream of [false, true]) {
        const what = `${c.name}: ${client} client, ${stream ? 'streamed' : 'JSON'}${client === (c.protocol === 'openai' ? 'chat' : c.protocol) ? '' : ', translated'}`
        const r = request(client, c.model, stream)
        const res = await app.inject({ method: 'POST', url: r.url, headers: { ...r.headers, 'content-type': 'application/json' }, payload: r.payload })
        t.equal(res.statusCode, 200, `${what}: answered`)
        await settled()
        const [rec] = await app.gateway.store.usage.page({}, 1)
        t.match(rec, {
          model: c.model,
          stream: stream ? 1 : 0,
          prompt_tokens: c.want.prompt,
          cached_input_tokens: c.want.cached,
          cache_write_tokens: c.want.writes,
          completion_tokens: c.want.completion,
          cost_nano: c.want.cost
        }, what)
        t.same(rec?.cost_detail, c.want.detail, `${what}: by part`)
      }
    }
  }
})
