import t, { type Test } from 'tap'
import { ChatAnthropic } from '@langchain/anthropic'
import { AIMessage, AIMessageChunk, HumanMessage, SystemMessage, ToolMessage, type BaseMessage } from '@langchain/core/messages'
import { tool } from '@langchain/core/tools'
import { ChatOpenAI, OpenAIEmbeddings } from '@langchain/openai'
import { z } from 'zod'
import { demoVector } from '../../engine/upstream/demo-media.js'
import { KEY_A, KEY_B, listeningGateway, mockCatalogWithGemini, settled } from '../helper.js'

// LangChain's chat models against the gateway, as an app built on LangChain calls it: ChatOpenAI
// on the chat completions and on the Responses API, ChatAnthropic on the Messages API, each on a
// model of every upstream protocol. invoke, stream, a tool loop with a zod tool, the usage
// LangChain reads, errors with their status; OpenAIEmbeddings on an OpenAI-protocol and a
// Gemini-protocol embedding model; and every call metered.

const MODELS = ['openai/gpt-test', 'anthropic/claude-test', 'google/gemini-test'] as const

const embedding = (id: string, provider: string, upstream: string): Record<string, unknown> => ({
  id,
  name: id,
  provider,
  upstream_model: upstream,
  context_length: 8192,
  architecture: { input_modalities: ['text'], output_modalities: ['embeddings'] },
  pricing: { input: 0.1 }
})
const EMBEDDING_MODELS = [embedding('openai/embed-test', 'mock-openai', 'text-embedding-up'), embedding('google/embed-test', 'mock-gemini', 'gemini-embedding-up')]
const close = (a: readonly number[], b: readonly number[]): boolean => a.length === b.length && a.every((x, i) => Math.abs(x - (b[i] as number)) < 1e-6)

const getWeather = tool(async ({ city }) => `sunny in ${city}`, {
  name: 'get_weather',
  description: 'The weather in a city',
  schema: z.object({ city: z.string().describe('a city') })
})

/** The text of a message whatever shape its content has (a string, or content blocks). */
const textOf = (m: BaseMessage): string => typeof m.content === 'string'
  ? m.content
  : m.content.map((b) => (b as { type?: string, text?: string }).type === 'text' ? (b as { text: string }).text : '').join('')

type Chat = ChatOpenAI | ChatAnthropic

/** What every client must get right, whichever protocol it speaks. */
async function exercise (t: Test, chat: Chat): Promise<void> {
  const whole = await chat.invoke([new SystemMessage('Be brief.'), new HumanMessage('Tell me about herons')])
  t.equal(textOf(whole), 'Echo: Tell me about herons')
  t.ok((whole.usage_metadata?.input_tokens ?? 0) > 0 && (whole.usage_metadata?.output_tokens ?? 0) > 0, 'usage_metadata from the answer')

  let streamed: AIMessageChunk | undefined
  let chunks = 0
  for await (const chunk of await chat.stream('Stream about herons')) {
    chunks++
    streamed = streamed === undefined ? chunk : streamed.concat(chunk)
  }
  t.ok(chunks > 1, `streamed in ${chunks} chunks`)
  t.equal(streamed === undefined ? '' : textOf(streamed), 'Echo: Stream about herons')
  t.ok((streamed?.usage_metadata?.output_tokens ?? 0) > 0, 'the stream ends with the usage')

  // the tool loop: the call with its arguments parsed, the tool run, its result sent back by id
  const withTools = chat.bindTools([getWeather])
  const history: BaseMessage[] = [new HumanMessage('Please use the tool get_weather for Lyon')]
  const first = await withTools.invoke(history)
  const call = first.tool_calls?.[0]
  t.equal(call?.name, 'get_weather')
  t.same(call?.args, { city: 'example city' }, 'arguments from the zod schema')
  t.ok(typeof call?.id === 'string' && call.id !== '', 'the call has an id')
  history.push(first)
  history.push(await getWeather.invoke(call!) as ToolMessage)
  const second = await withTools.invoke(history)
  t.equal(textOf(second), 'The tool returned: sunny in example city', 'the result reached the model')

  // streamed, the call's argument fragments add up to the same call
  let streamedCall: AIMessageChunk | undefined
  for await (const chunk of await withTools.stream('Please use the tool get_weather')) streamedCall = streamedCall === undefined ? chunk : streamedCall.concat(chunk)
  t.match(streamedCall?.tool_calls?.[0], { name: 'get_weather', args: { city: 'example city' } })
}

t.test('LangChain chat models through the gateway', async (t) => {
  const { base, rows } = await listeningGateway(t, (m) => ({ ...mockCatalogWithGemini(m, EMBEDDING_MODELS), plugins: [{ name: 'auth' }, { name: 'usage' }] }))
  const openai = (model: string, extra: ConstructorParameters<typeof ChatOpenAI>[0] = {}): ChatOpenAI =>
    new ChatOpenAI({ model, apiKey: KEY_A, maxRetries: 0, configuration: { baseURL: `${base}/v1` }, ...extra })
  const anthropic = (model: string, apiKey = KEY_A): ChatAnthropic =>
    new ChatAnthropic({ model, apiKey, maxRetries: 0, maxTokens: 200, anthropicApiUrl: base })

  for (const model of MODELS) {
    t.test(`ChatOpenAI (chat completions), ${model}`, async (t) => { await exercise(t, openai(model)) })
    t.test(`ChatOpenAI (Responses API), ${model}`, async (t) => { await exercise(t, openai(model, { useResponsesApi: true })) })
    t.test(`ChatAnthropic, ${model}`, async (t) => { await exercise(t, anthropic(model)) })
  }

  t.test('an AIMessage from one protocol carries on in another', async (t) => {
    // a conversation started on ChatAnthropic goes on through ChatOpenAI, as an app that
    // switches models mid-conversation does
    const first = await anthropic('anthropic/claude-test').invoke('Tell me about herons')
    const next = await openai('openai/gpt-test').invoke([new HumanMessage('Tell me about herons'), new AIMessage(textOf(first)), new HumanMessage('And about storks')])
    t.equal(textOf(next), 'Echo: And about storks')
  })

  t.test('OpenAIEmbeddings', async (t) => {
    const texts = ['the heron waits by the river', 'a grey heron stands in the stream']
    for (const model of ['openai/embed-test', 'google/embed-test']) {
      const embeddings = new OpenAIEmbeddings({ model, apiKey: KEY_A, maxRetries: 0, configuration: { baseURL: `${base}/v1` } })
      const docs = await embeddings.embedDocuments(texts)
      t.ok(docs.length === 2 && docs.every((v, i) => close(v, demoVector(texts[i] as string))), `${model}: embedDocuments, each text its vector`)
      const query = await embeddings.embedQuery(texts[0] as string)
      t.ok(close(query, docs[0] as number[]), `${model}: embedQuery, the same vector for the same text`)
      const short = await new OpenAIEmbeddings({ model, dimensions: 16, apiKey: KEY_A, maxRetries: 0, configuration: { baseURL: `${base}/v1` } }).embedQuery(texts[1] as string)
      t.ok(close(short, demoVector(texts[1] as string, 16)), `${model}: dimensions`)
    }
  })

  t.test('errors reach LangChain with the gateway\'s status', async (t) => {
    const missing = await openai('nope/x').invoke('hi').catch((e: unknown) => e) as { status?: number, message?: string }
    t.equal(missing.status, 404, 'an unknown model: 404')
    const denied = await new ChatOpenAI({ model: 'openai/gpt-test', apiKey: 'mg-not-a-key-0123456789abcdef', maxRetries: 0, configuration: { baseURL: `${base}/v1` } })
      .invoke('hi').catch((e: unknown) => e) as { status?: number }
    t.equal(denied.status, 401, 'an unknown key: 401')
    // KEY_B is granted anthropic/claude-test only
    const notGranted = await anthropic('openai/gpt-test', KEY_B).invoke('hi').catch((e: unknown) => e) as { status?: number, error?: { error?: { type?: string } } }
    t.equal(notGranted.status, 404, 'a model the key was not granted is not there for it')
    t.equal(notGranted.error?.error?.type, 'not_found_error', 'in the Messages shape')
  })

  t.test('every call metered, on the route it came by', async (t) => {
    await settled()
    const records = await rows()
    // per client and model: invoke, stream, two tool-loop calls, the streamed tool call; then the
    // two calls of the conversation carried across; three embedding calls per embedding model
    t.equal(records.filter((r) => r.status === 'ok').length, MODELS.length * 3 * 5 + 2 + 2 * 3)
    const by = (endpoint: string): number => records.filter((r) => r.endpoint === endpoint && r.status === 'ok').length
    t.equal(by('responses'), MODELS.length * 5, 'the Responses API')
    t.equal(by('messages'), MODELS.length * 5 + 1, 'the Messages API')
    t.equal(by('chat.completions'), MODELS.length * 5 + 1, 'the chat completions')
    t.equal(by('embeddings'), 2 * 3, 'the embeddings')
    t.ok(records.filter((r) => r.status === 'ok').every((r) => r.cost_nano > 0), 'every one charged')
  })
})
