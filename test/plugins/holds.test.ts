import t from 'tap'
import { boundUsage, costOf, estimatePromptTokens, MAX_TOKENS_PER_CALL, settle, totalOf } from '../../engine/gateway/billing.js'
import { priceOf, type CatalogModel } from '../../engine/gateway/catalog.js'
import { candidates, DEFAULT_SERVER_TOOL_USES, holdOf, outputLimit, serverTools } from '../../engine/gateway/holds.js'
import { nanoToUsd } from '../../engine/kernel/money.js'
import { pairFor } from '../../engine/translation/index.js'
import { geminiPassthrough } from '../../engine/translation/passthrough.js'
import { messagesPassthrough } from '../../engine/translation/passthrough.js'
import { responsesPassthrough } from '../../engine/translation/passthrough.js'
import type { Json, Protocol, TranslateCtx } from '../../engine/translation/types.js'
import { usageFromMessages } from '../../engine/protocols/messages/usage.js'

// The hold of a call (holdOf, estimatePromptTokens) against what the body sent upstream lets the
// upstream bill, and the bounds on what an upstream reports before it is billed.

const price = priceOf({ input: 3, output: 15, server_tools: { web_search: 0.01 } })!
const RATE = 15_000 // nano-dollars per token at $15 per million
const model = (extra: Partial<CatalogModel['config']> = {}): CatalogModel => ({ id: 'm', price, config: { context_length: 200_000, ...extra } }) as unknown as CatalogModel

const ctx = (extra: Partial<TranslateCtx> = {}): TranslateCtx => ({ model: 'm', upstreamModel: 'up', id: 'x', created: 1, stream: false, includeUsage: false, flatten: false, defaultMaxTokens: 4096, ...extra })

/** The output limit and candidates an upstream body lets its upstream generate, read as that upstream reads it. */
function upstreamBound (protocol: Protocol, body: Json, perAnswer: number): number {
  const g = (body.generationConfig ?? {}) as Json
  const int = (v: unknown): number | undefined => typeof v === 'number' ? v : undefined
  switch (protocol) {
    case 'openai': return Math.max(int(body.max_tokens) ?? 0, int(body.max_completion_tokens) ?? 0, body.max_tokens === undefined && body.max_completion_tokens === undefined ? perAnswer : 0) * (int(body.n) ?? 1)
    case 'messages': return int(body.max_tokens) ?? Infinity
    case 'gemini': return (int(g.maxOutputTokens) ?? perAnswer) * (int(g.candidateCount) ?? 1)
    case 'responses': return int(body.max_output_tokens) ?? perAnswer
  }
}

const BASE: Record<Protocol, Json> = {
  openai: { model: 'm', messages: [{ role: 'user', content: 'hi' }] },
  messages: { model: 'm', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] },
  responses: { model: 'm', input: 'hi' },
  gemini: { contents: [{ role: 'user', parts: [{ text: 'hi' }] }] }
}

t.test('property: the hold covers the output limit and candidates of the body every translator sends', async (t) => {
  const perAnswer = 8192
  const m = model({ max_output_tokens: perAnswer })
  let seed = 7
  const rand = (n: number): number => { seed = (seed * 1103515245 + 12345) % 2 ** 31; return seed % n }
  const maybe = (v: number): number | undefined => rand(3) === 0 ? undefined : v
  let checked = 0
  for (let i = 0; i < 400; i++) {
    const limits = [maybe(1 + rand(100_000)), maybe(1 + rand(100_000)), maybe(1 + rand(100_000)), maybe(1 + rand(100_000))]
    for (const client of ['openai', 'messages', 'responses', 'gemini'] as const) {
      const body: Json = structuredClone(BASE[client])
      const g: Json = {}
      if (limits[0] !== undefined) body.max_tokens = limits[0]
      if (limits[1] !== undefined && client === 'openai') body.max_completion_tokens = limits[1]
      if (limits[2] !== undefined && client === 'responses') body.max_output_tokens = limits[2]
      if (limits[3] !== undefined && client === 'gemini') g.maxOutputTokens = limits[3]
      if (client === 'openai' && rand(2) === 0) body.n = 1 + rand(128)
      if (client === 'gemini' && rand(2) === 0) g.candidateCount = 1 + rand(8)
      if (client === 'gemini' && rand(3) === 0) g.thinkingConfig = rand(2) === 0 ? { thinkingBudget: 1024 + rand(30_000) } : { thinkingLevel: 'high' }
      if (client === 'messages' && body.max_tokens === undefined) body.max_tokens = 1 + rand(100_000)
      if (Object.keys(g).length > 0) body.generationConfig = g
      const held = holdOf(m, 'chat.completions', client, body, 4096)
      const prompt = Math.min(estimatePromptTokens(body), 200_000)
      for (const up of ['openai', 'messages', 'gemini', 'responses'] as const) {
        let sent: Json
        try {
          sent = pairFor(client, up === 'responses' && client !== 'responses' ? 'openai' : up).request(structuredClone(body), ctx({ supported: new Set(['max_tokens', 'thinking']) })).body
        } catch { continue }
        const out = upstreamBound(up === 'responses' && client !== 'responses' ? 'openai' : up, sent, perAnswer)
        t.ok(held >= (prompt + out) * RATE, `${client} → ${up}: held ${held} for ${JSON.stringify(body).slice(0, 160)}, upstream may bill ${(prompt + out) * RATE}`)
        checked++
      }
    }
  }
  t.ok(checked > 1000, `${checked} pairs of bodies checked`)
})

t.test('property: a translator to another protocol sends no server tool on (so none is refused there)', async (t) => {
  const tools: Record<Protocol, Json> = {
    openai: { ...BASE.openai, web_search_options: {}, tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }] },
    messages: { ...BASE.messages, tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 3 }, { type: 'web_fetch_20250910', name: 'web_fetch' }, { type: 'code_execution_20250825', name: 'code_execution' }] },
    responses: { ...BASE.responses, tools: [{ type: 'web_search' }, { type: 'file_search', vector_store_ids: ['v'] }, { type: 'code_interpreter', container: { type: 'auto' } }, { type: 'image_generation' }] },
    gemini: { ...BASE.gemini, tools: [{ googleSearch: {} }, { codeExecution: {} }, { urlContext: {} }, { googleSearchRetrieval: {} }] }
  }
  for (const client of ['openai', 'messages', 'responses', 'gemini'] as const) {
    t.ok(serverTools(tools[client]).size > 0, `${client}: the body asks for server tools`)
    for (const up of ['openai', 'messages', 'gemini'] as const) {
      if (up === client) continue
      let sent: Json
      try { sent = pairFor(client, up).request(structuredClone(tools[client]), ctx()).body } catch { continue }
      t.same([...serverTools(sent).keys()], [], `${client} → ${up}: none sent`)
    }
  }
})

t.test('the output limit is the largest of every field, times every candidate', async (t) => {
  // the translators send max_completion_tokens over max_tokens
  t.equal(outputLimit({ max_tokens: 1, max_completion_tokens: 64_000 }, 'openai'), 64_000)
  t.ok(holdOf(model(), 'chat.completions', 'openai', { max_tokens: 1, max_completion_tokens: 64_000, messages: [] }) >= 64_000 * RATE)
  t.equal(candidates({ n: 128 }), 128)
  t.ok(holdOf(model(), 'passthrough', 'openai', { n: 128, max_tokens: 1000, messages: [] }) >= 128_000 * RATE, 'n: 128 holds for 128 answers')
  t.ok(holdOf(model(), 'generate_content', 'gemini', { contents: [], generationConfig: { candidateCount: 8, maxOutputTokens: 1000 } }) >= 8_000 * RATE, 'candidateCount: 8 holds for 8')
  t.ok(holdOf(model({ max_output_tokens: 8192 }), 'generate_content', 'gemini', { contents: [], max_tokens: 5 }) >= 8192 * RATE, 'a field of another protocol is no limit')
})

t.test('every prompt-bearing block is counted, never under its UTF-8 bytes', async (t) => {
  const cjk = '鬱'.repeat(1000)
  const emoji = '👩‍👩‍👧‍👦'.repeat(100)
  t.ok(estimatePromptTokens({ messages: [{ role: 'user', content: cjk }] }) >= Buffer.byteLength(cjk), 'CJK: three bytes a character')
  t.ok(estimatePromptTokens({ input: [emoji, cjk] }) >= Buffer.byteLength(emoji) + Buffer.byteLength(cjk), 'embeddings: emoji and CJK by their bytes')
  const text = 'x'.repeat(1_080_000)
  t.ok(estimatePromptTokens({ messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'text', media_type: 'text/plain', data: text } }] }] }) >= 1_080_000, 'a plain-text document counts its text')
  const pdf = { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: 'JVBERi0xLjQK' } }
  t.equal(estimatePromptTokens({ messages: [{ role: 'user', content: [pdf] }] }), Infinity, 'a PDF cannot be sized from its bytes')
  t.ok(holdOf(model(), 'messages', 'messages', { max_tokens: 10, messages: [{ role: 'user', content: [pdf] }] }) >= (200_000 + 10) * RATE, 'it is held as the whole context window')
  t.equal(estimatePromptTokens({ messages: [{ role: 'user', content: [{ type: 'input_audio', input_audio: { data: 'AAAA', format: 'wav' } }] }] }), Infinity, 'audio')
  t.equal(estimatePromptTokens({ contents: [{ parts: [{ inlineData: { mimeType: 'video/mp4', data: 'AAAA' } }] }] }), Infinity, 'Gemini inline video')
  t.equal(estimatePromptTokens({ contents: [{ parts: [{ fileData: { mimeType: 'application/pdf', fileUri: 'gs://x' } }] }] }), Infinity, 'Gemini file by reference')
  t.ok(estimatePromptTokens({ contents: [{ parts: [{ inlineData: { mimeType: 'image/png', data: 'AAAA' } }] }] }) >= 1600, 'an image: its allowance')
  const tools = [{ name: 'f', description: 'd', input_schema: { type: 'object', properties: { a_long_property_name: { type: 'string' } } } }]
  t.ok(estimatePromptTokens({ messages: [], tools }) >= Buffer.byteLength(JSON.stringify(tools)), 'tools as their JSON')
})

t.test('server tools: read from every protocol, held at their use cap times their price', async (t) => {
  t.same([...serverTools({ tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 100 }, { name: 'mine', input_schema: {} }, { type: 'bash_20250124', name: 'bash' }] })], [['web_search', 100]])
  t.same([...serverTools({ tools: [{ googleSearch: {} }, { functionDeclarations: [] }, { codeExecution: {} }] })], [['web_search', DEFAULT_SERVER_TOOL_USES], ['code_execution', DEFAULT_SERVER_TOOL_USES]])
  t.same([...serverTools({ tools: [{ type: 'web_search_preview' }, { type: 'function', name: 'f' }], max_tool_calls: 3 })], [['web_search', 3]])
  t.same([...serverTools({ web_search_options: {} })], [['web_search', DEFAULT_SERVER_TOOL_USES]])
  const clientTools = [{ type: 'function', name: 'f' }, { type: 'namespace', name: 'ns', tools: [] }, { type: 'custom', name: 'c' }, { type: 'text_editor_20250728', name: 'str_replace_based_edit_tool' }, { type: 'computer_20250124', name: 'computer' }, { type: 'local_shell' }, { functionDeclarations: [] }]
  t.same([...serverTools({ tools: clientTools })], [], 'the tools a client runs are no server tools')
  const body = { max_tokens: 10, messages: [], tools: [{ type: 'web_search_20250305', name: 'web_search', max_uses: 100 }] }
  const without = holdOf(model(), 'messages', 'messages', { ...body, tools: [] })
  t.ok(holdOf(model(), 'messages', 'messages', body) - without >= 100 * 10_000_000, '100 searches at $0.01 held')
  // billed from what the upstream reports
  const usage = usageFromMessages({ input_tokens: 10, output_tokens: 5, server_tool_use: { web_search_requests: 100 } })!
  t.same(usage.server_tools, { web_search: 100 })
  t.equal(costOf(usage, price).tool_call, 1_000_000_000, '$1 of searches in the charge')
})

t.test('the tools an upstream ran are read from its answer', async (t) => {
  const messages = messagesPassthrough.response({ usage: { input_tokens: 1, output_tokens: 1, server_tool_use: { web_search_requests: 3 } } }, ctx())
  t.same(messages.usage?.server_tools, { web_search: 3 })
  const gemini = geminiPassthrough.response({ candidates: [{ content: { parts: [{ text: 'x' }] }, groundingMetadata: { webSearchQueries: ['a', 'b'] } }], usageMetadata: { promptTokenCount: 1, candidatesTokenCount: 1 } }, ctx())
  t.same(gemini.usage?.server_tools, { web_search: 2 })
  const stream = geminiPassthrough.stream(ctx())
  stream.push({ data: JSON.stringify({ candidates: [{ index: 0, content: { parts: [{ text: 'x' }] } }] }) })
  stream.push({ data: JSON.stringify({ candidates: [{ index: 0, content: { parts: [] }, finishReason: 'STOP', groundingMetadata: { webSearchQueries: ['a'] } }], usageMetadata: { promptTokenCount: 1, candidatesTokenCount: 1 } }) })
  t.same(stream.usage()?.server_tools, { web_search: 1 })
  const mstream = messagesPassthrough.stream(ctx({ stream: true }))
  mstream.push({ event: 'message_start', data: JSON.stringify({ type: 'message_start', message: { id: 'm', usage: { input_tokens: 5, output_tokens: 1 } } }) })
  mstream.push({ event: 'message_delta', data: JSON.stringify({ type: 'message_delta', delta: { stop_reason: 'end_turn' }, usage: { output_tokens: 9, server_tool_use: { web_search_requests: 4 } } }) })
  t.same(mstream.usage()?.server_tools, { web_search: 4 }, 'a Messages stream\'s last usage')
  const rstream = responsesPassthrough.stream(ctx({ stream: true }))
  rstream.push({ data: JSON.stringify({ type: 'response.completed', response: { output: [{ type: 'web_search_call' }], usage: { input_tokens: 1, output_tokens: 1 } } }) })
  t.same(rstream.usage()?.server_tools, { web_search: 1 }, 'a Responses stream\'s completed response')
  const responses = responsesPassthrough.response({ output: [{ type: 'web_search_call' }, { type: 'web_search_call' }, { type: 'message' }], usage: { input_tokens: 1, output_tokens: 1 } }, ctx())
  t.same(responses.usage?.server_tools, { web_search: 2 })
})

t.test('upstream counts are bounded before billing: the cost stays a finite decimal', async (t) => {
  const huge = { prompt_tokens: 1e300, cached_input_tokens: Number.NaN, completion_tokens: -5, cache_creation_input_tokens: 2.5, images: 1e9 }
  const b = boundUsage(huge)
  t.ok(b.clamped)
  t.same(b.usage, { prompt_tokens: MAX_TOKENS_PER_CALL, cached_input_tokens: 0, completion_tokens: 0, cache_creation_input_tokens: 2, images: 10_000 })
  const s = settle({ billed: true, usage: { prompt_tokens: 1e300, cached_input_tokens: 0, completion_tokens: 1e300, cache_creation_input_tokens: 0 }, complete: true, relayedText: '', requestBody: {} }, price)
  t.ok(Number.isSafeInteger(s.cost), `a safe integer of nano-dollars: ${s.cost}`)
  t.equal(s.cost, totalOf(s.detail))
  t.match(nanoToUsd(s.cost), /^\d+(\.\d+)?$/, 'a plain decimal string')
  t.equal(s.clamped, true)
  t.notOk(boundUsage({ prompt_tokens: 5, cached_input_tokens: 0, completion_tokens: 5, cache_creation_input_tokens: 0 }).clamped, 'counts within the ceilings are left alone')
})
