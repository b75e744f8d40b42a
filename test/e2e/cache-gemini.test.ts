import t from 'tap'
import { GoogleGenAI, Type, type GenerateContentResponse } from '@google/genai'
import { KEY_A, listeningGateway, mockCatalog } from '../helper.js'

// The response cache behind Google's Gemini API, with Google's own SDK: a whole answer hit by a
// streamed call and a stream hit by a whole call (thoughts, their signature and a function call
// included), on a Gemini upstream and on a translated one; the hits recorded at no cost.

const weather = {
  functionDeclarations: [{
    name: 'get_weather',
    description: 'The weather in a city',
    parameters: { type: Type.OBJECT, properties: { city: { type: Type.STRING } }, required: ['city'] }
  }]
}
const parts = (r: GenerateContentResponse): unknown[] => r.candidates?.[0]?.content?.parts ?? []
const folded = async (stream: AsyncGenerator<GenerateContentResponse>): Promise<{ text: string, thoughts: string, calls: unknown[], signatures: string[], usage: unknown }> => {
  const out = { text: '', thoughts: '', calls: [] as unknown[], signatures: [] as string[], usage: undefined as unknown }
  for await (const chunk of stream) {
    for (const p of parts(chunk) as Array<{ text?: string, thought?: boolean, functionCall?: unknown, thoughtSignature?: string }>) {
      if (p.thought === true) out.thoughts += p.text ?? ''
      else if (p.text !== undefined) out.text += p.text
      if (p.functionCall !== undefined) out.calls.push(p.functionCall)
      if (p.thoughtSignature !== undefined) out.signatures.push(p.thoughtSignature)
    }
    if (chunk.usageMetadata !== undefined) out.usage = chunk.usageMetadata
  }
  return out
}
const whole = (r: GenerateContentResponse): { text: string, thoughts: string, calls: unknown[], signatures: string[], usage: unknown } => {
  const ps = parts(r) as Array<{ text?: string, thought?: boolean, functionCall?: unknown, thoughtSignature?: string }>
  return {
    text: ps.filter((p) => p.thought !== true).map((p) => p.text ?? '').join(''),
    thoughts: ps.filter((p) => p.thought === true).map((p) => p.text ?? '').join(''),
    calls: ps.flatMap((p) => p.functionCall === undefined ? [] : [p.functionCall]),
    signatures: ps.flatMap((p) => p.thoughtSignature === undefined ? [] : [p.thoughtSignature]),
    usage: r.usageMetadata
  }
}

t.test('Gemini clients: hits whole and streamed, on a Gemini and a translated upstream', async (t) => {
  const { base, mock, rows } = await listeningGateway(t, (m) => {
    const c = mockCatalog(m, [{
      id: 'google/gemini-test',
      name: 'google/gemini-test',
      provider: 'mock-gemini',
      upstream_model: 'gemini-upstream-name',
      context_length: 100000,
      architecture: { input_modalities: ['text'], output_modalities: ['text'] },
      supported_parameters: ['temperature', 'max_tokens', 'tools', 'tool_choice', 'reasoning_effort'],
      pricing: { input: 1, output: 2 }
    }])
    return { ...c, providers: [...(c.providers as unknown[]), { id: 'mock-gemini', protocol: 'gemini', base_url: m.geminiBaseUrl, api_key: 'AIza-upstream' }], plugins: [{ name: 'auth' }, { name: 'cache' }, { name: 'usage' }] }
  })
  const ai = new GoogleGenAI({ apiKey: KEY_A, httpOptions: { baseUrl: base, headers: { 'X-SVC-Cache': 'on' } } })
  for (const model of ['google/gemini-test', 'openai/gpt-test']) {
    mock.reset()
    const ask = { model, contents: `Tell me about the herons of ${model}` }
    const first = whole(await ai.models.generateContent(ask))
    const streamed = await folded(await ai.models.generateContentStream(ask))
    t.same(streamed, first, `${model}: a streamed call hits the whole answer`)
    const tools = { model, contents: 'What is the weather in Lyon? use the tool', config: { tools: [weather], thinkingConfig: { includeThoughts: true } } }
    const s = await folded(await ai.models.generateContentStream(tools))
    t.ok(s.calls.length > 0, 'a function call')
    const w = whole(await ai.models.generateContent(tools))
    t.same(w, s, `${model}: a whole call hits the answer a stream stored, thoughts and signatures included`)
    t.equal(mock.requests.length, 2, `${model}: the provider was asked once per distinct call`)
  }
  const records = await rows()
  const hits = records.filter((r) => r.cache_hit === 1)
  t.equal(hits.length, 4)
  t.ok(hits.every((r) => r.endpoint === 'generate_content' && r.cost_nano === 0 && r.saved_nano > 0), 'recorded as Gemini calls, at no cost, with what they saved')
})
