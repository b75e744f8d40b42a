import t from 'tap'
import { ApiError, FunctionCallingConfigMode, GoogleGenAI, Type, type Content, type GenerateContentResponse } from '@google/genai'
import { KEY_A, KEY_B, listeningGateway, mockCatalogWithGemini, settled } from '../helper.js'

// Google's own SDK (@google/genai) against the gateway, on a model of each upstream protocol:
// generateContent, generateContentStream, a function-calling loop, countTokens, and the model
// list; errors as the SDK's ApiError with Google's status.

const MODELS = ['google/gemini-test', 'openai/gpt-test', 'anthropic/claude-test'] as const

const weather = {
  functionDeclarations: [{
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: Type.OBJECT, properties: { city: { type: Type.STRING, description: 'a city' } }, required: ['city'] }
  }, {
    name: 'get_time',
    description: 'The time in a city',
    parametersJsonSchema: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] }
  }]
}

/** The answer's text, thoughts and calls aside (what `.text` gives, without its warning about calls). */
const textOf = (r: GenerateContentResponse): string => (r.candidates?.[0]?.content?.parts ?? []).filter((p) => p.thought !== true).map((p) => p.text ?? '').join('')

t.test('@google/genai through the gateway, for a model of each upstream protocol', async (t) => {
  const { base, mock, rows } = await listeningGateway(t, (m) => ({ ...mockCatalogWithGemini(m), plugins: [{ name: 'auth' }, { name: 'usage' }] }))
  const ai = new GoogleGenAI({ apiKey: KEY_A, httpOptions: { baseUrl: base } })

  for (const model of MODELS) {
    t.test(model, async (t) => {
      const whole = await ai.models.generateContent({ model, contents: 'Tell me about herons', config: { systemInstruction: 'Be brief.', temperature: 0.3, maxOutputTokens: 200 } })
      t.equal(whole.text, 'Echo: Tell me about herons')
      t.equal(whole.candidates?.[0]?.finishReason, 'STOP')
      t.ok((whole.usageMetadata?.promptTokenCount ?? 0) > 0 && (whole.usageMetadata?.candidatesTokenCount ?? 0) > 0, 'usage')

      const chunks: GenerateContentResponse[] = []
      for await (const chunk of await ai.models.generateContentStream({ model, contents: 'Stream about herons' })) chunks.push(chunk)
      t.ok(chunks.length > 1, `streamed in ${chunks.length} chunks`)
      t.equal(chunks.map(textOf).join(''), 'Echo: Stream about herons')
      t.equal(chunks.at(-1)?.candidates?.[0]?.finishReason, 'STOP', 'the last chunk ends it')
      t.ok((chunks.at(-1)?.usageMetadata?.candidatesTokenCount ?? 0) > 0, 'with the usage')

      // the tool loop: a call, its result sent back (by id when the call had one), the answer
      const history: Content[] = [{ role: 'user', parts: [{ text: 'Please use the tool get_weather for Lyon' }] }]
      const first = await ai.models.generateContent({ model, contents: history, config: { tools: [weather], toolConfig: { functionCallingConfig: { mode: FunctionCallingConfigMode.AUTO } } } })
      const call = first.functionCalls?.[0]
      t.equal(call?.name, 'get_weather')
      t.same(call?.args, { city: 'example city' }, 'arguments from the declared schema')
      history.push(first.candidates?.[0]?.content as Content)
      history.push({ role: 'user', parts: [{ functionResponse: { id: call?.id, name: 'get_weather', response: { output: 'sunny and warm' } } }] })
      const second = await ai.models.generateContent({ model, contents: history, config: { tools: [weather] } })
      t.equal(second.text, 'The tool returned: sunny and warm', 'the result reached the model')

      // streamed, the call comes whole
      let streamedCall: unknown
      for await (const chunk of await ai.models.generateContentStream({ model, contents: 'Please use the tool get_time', config: { tools: [weather] } })) {
        streamedCall = chunk.functionCalls?.[0] ?? streamedCall
      }
      t.match(streamedCall, { name: 'get_time', args: { city: String } })

      const count = await ai.models.countTokens({ model, contents: 'How many tokens are these few words?' })
      t.ok((count.totalTokens ?? 0) > 0, `countTokens: ${count.totalTokens}`)
    })
  }

  t.test('models.list and models.get', async (t) => {
    const names: string[] = []
    for await (const m of await ai.models.list({ config: { pageSize: 2 } })) names.push(m.name ?? '')
    t.ok(names.length > 3, 'every page followed')
    for (const model of MODELS) t.ok(names.includes(`models/${model}`), model)
    const one = await ai.models.get({ model: 'google/gemini-test' })
    t.match(one, { name: 'models/google/gemini-test', displayName: 'google/gemini-test', inputTokenLimit: 200000 })
    t.ok(one.supportedActions?.includes('generateContent'))
    const limited = new GoogleGenAI({ apiKey: KEY_B, httpOptions: { baseUrl: base } })
    const visible: string[] = []
    for await (const m of await limited.models.list()) visible.push(m.name ?? '')
    t.same(visible, ['models/anthropic/claude-test'], 'a key sees its own models')
  })

  t.test('errors reach the SDK as ApiError with Google\'s status', async (t) => {
    const err = await ai.models.generateContent({ model: 'nope/x', contents: 'hi' }).catch((e: unknown) => e)
    t.ok(err instanceof ApiError)
    t.equal((err as ApiError).status, 404)
    t.match((err as ApiError).message, /NOT_FOUND/)
    const denied = await new GoogleGenAI({ apiKey: 'mg-not-a-key-0123456789abcdef', httpOptions: { baseUrl: base } }).models.generateContent({ model: 'google/gemini-test', contents: 'hi' }).catch((e: unknown) => e)
    t.equal((denied as ApiError).status, 401)
    t.match((denied as ApiError).message, /UNAUTHENTICATED/)
  })

  t.test('every call metered as generate_content', async (t) => {
    await settled()
    const all = await rows()
    const records = all.filter((r) => r.status !== 'refused')
    // 5 metered calls per model (countTokens is free); the model list is no call, and the errors the gateway answered are refused records
    t.equal(records.length, 15)
    t.ok(records.every((r) => r.endpoint === 'generate_content' && r.status === 'ok'))
    t.ok(all.every((r) => r.status !== 'refused' || (r.cost_nano === 0 && r.error !== null)), `the refused ones with their code: ${all.filter((r) => r.status === 'refused').map((r) => r.error).join(', ')}`)
    t.equal(mock.requests.filter((r) => r.path.endsWith(':countTokens')).length, 1, 'countTokens went to the Gemini upstream only')
  })
})
