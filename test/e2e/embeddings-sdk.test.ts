import t from 'tap'
import { createOpenAI } from '@ai-sdk/openai'
import { GoogleGenAI } from '@google/genai'
import { cosineSimilarity, embedMany } from 'ai'
import OpenAI from 'openai'
import { loadConfig } from '../../config/load.js'
import type { Json } from '../../plugins/api/index.js'
import { cosine, demoVector } from '../../engine/upstream/demo-media.js'
import { fromRoot } from '../../paths.js'
import { KEY_A, listeningGateway, mockCatalogWithGemini, settled } from '../helper.js'

// The clients apps embed and draw with, against the gateway on a real socket: the openai SDK's
// embeddings.create (floats, base64, and its default: base64 asked for and decoded) and
// images.generate, @google/genai's embedContent, and the Vercel AI SDK's embedMany; for models on
// an OpenAI-protocol and a Gemini-protocol provider (the mock upstream), and the shipped catalog's
// demo models with no provider at all.

const media = (id: string, provider: string, upstream: string, kind: 'embeddings' | 'image'): Json => ({
  id,
  name: id,
  provider,
  upstream_model: upstream,
  context_length: 8192,
  max_output_tokens: 100,
  architecture: { input_modalities: ['text'], output_modalities: [kind] },
  pricing: kind === 'embeddings' ? { input: 0.1, output: 0 } : { input: 5, output: 40 }
})
const MODELS = [
  media('openai/embed-test', 'mock-openai', 'text-embedding-up', 'embeddings'),
  media('google/embed-test', 'mock-gemini', 'gemini-embedding-up', 'embeddings'),
  media('openai/image-test', 'mock-openai', 'gpt-image-up', 'image'),
  media('google/image-test', 'mock-gemini', 'gemini-image-up', 'image')
]

const close = (a: readonly number[], b: readonly number[]): boolean => a.length === b.length && a.every((x, i) => Math.abs(x - (b[i] as number)) < 1e-6)
const PNG = '89504e470d0a1a0a'
const isPng = (b64: string | undefined): boolean => b64 !== undefined && Buffer.from(b64, 'base64').subarray(0, 8).toString('hex') === PNG

t.test('the openai SDK, @google/genai and the AI SDK embed and draw through the gateway', async (t) => {
  const { base, mock, rows } = await listeningGateway(t, (m) => ({ ...mockCatalogWithGemini(m, MODELS), plugins: [{ name: 'auth' }, { name: 'usage' }] }))
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY_A, maxRetries: 0 })
  const texts = ['the heron waits by the river', 'a grey heron stands in the stream']

  for (const model of ['openai/embed-test', 'google/embed-test']) {
    await t.test(`openai.embeddings.create, ${model}`, async (t) => {
      const floats = await openai.embeddings.create({ model, input: texts, encoding_format: 'float' })
      t.equal(floats.data.length, 2)
      t.ok(floats.data.every((d, i) => close(d.embedding, demoVector(texts[i] as string))), 'floats')
      t.ok(floats.usage.prompt_tokens > 0)

      const b64 = await openai.embeddings.create({ model, input: texts[0] as string, encoding_format: 'base64', dimensions: 16 })
      t.type(b64.data[0]?.embedding, 'string', 'base64 asked for, base64 given')

      // the SDK's default: it asks for base64 and decodes the float32 values itself
      const byDefault = await openai.embeddings.create({ model, input: texts, dimensions: 16 })
      t.ok(byDefault.data.every((d, i) => Array.isArray(d.embedding) && close(d.embedding, demoVector(texts[i] as string, 16))), 'decoded by the SDK to the same vectors')
      t.equal(model === 'openai/embed-test' ? (mock.body().encoding_format as string) : 'base64', 'base64')

      await t.rejects(openai.embeddings.create({ model: 'openai/gpt-test', input: 'x' }), { status: 400, message: /not an embedding model/ })
    })
  }

  await t.test('openai.images.generate', async (t) => {
    for (const model of ['openai/image-test', 'google/image-test']) {
      const images = await openai.images.generate({ model, prompt: 'a heron at dawn', n: 2, size: '1536x1024' })
      t.equal(images.data?.length, 2, model)
      t.ok(images.data?.every((d) => isPng(d.b64_json)), `${model}: PNGs in b64_json`)
      t.ok((images.usage?.output_tokens ?? 0) > 0, `${model}: the output tokens`)
    }
    await t.rejects(openai.images.generate({ model: 'openai/embed-test', prompt: 'x' }), { status: 400, message: /not an image generation model/ })
  })

  await t.test('@google/genai embedContent', async (t) => {
    const ai = new GoogleGenAI({ apiKey: KEY_A, httpOptions: { baseUrl: base } })
    for (const model of ['openai/embed-test', 'google/embed-test']) {
      const res = await ai.models.embedContent({ model, contents: texts, config: { outputDimensionality: 8 } })
      t.equal(res.embeddings?.length, 2, model)
      t.ok(res.embeddings?.every((e, i) => close(e.values ?? [], demoVector(texts[i] as string, 8))), `${model}: the vectors`)
      const one = await ai.models.embedContent({ model, contents: 'just one' })
      t.ok(close(one.embeddings?.[0]?.values ?? [], demoVector('just one')), `${model}: one content`)
    }
    await t.rejects(ai.models.embedContent({ model: 'openai/gpt-test', contents: 'x' }), { status: 400, message: /not an embedding model/ })
  })

  await t.test('the AI SDK\'s embedMany', async (t) => {
    const provider = createOpenAI({ baseURL: `${base}/v1`, apiKey: KEY_A })
    for (const model of ['openai/embed-test', 'google/embed-test']) {
      const { embeddings, usage } = await embedMany({ model: provider.textEmbeddingModel(model), values: [...texts, 'quarterly revenue grew by ten percent'], maxRetries: 0 })
      t.equal(embeddings.length, 3, model)
      t.ok(cosineSimilarity(embeddings[0] as number[], embeddings[1] as number[]) > cosineSimilarity(embeddings[0] as number[], embeddings[2] as number[]), `${model}: related texts are closer than unrelated ones`)
      t.ok(usage.tokens > 0)
    }
  })

  await settled()
  const records = (await rows()).filter((r) => r.status === 'ok')
  t.same([...new Set(records.map((r) => r.endpoint))].sort(), ['embeddings', 'images.generations'], 'every call recorded under its endpoint')
})

t.test('the shipped catalog answers both routes with no provider key: demo/embed-1 and demo/image-1', async (t) => {
  const config = await loadConfig(fromRoot('config', 'gateway.yaml'), { MODELGATE_DB: ':memory:' })
  const { buildApp } = await import('../../app.js')
  const app = await buildApp(config, { logger: false })
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(() => app.close())
  const port = (app.server.address() as { port: number }).port
  const openai = new OpenAI({ baseURL: `http://127.0.0.1:${port}/v1`, apiKey: 'mg-demo-local-only-0123456789abcdef', maxRetries: 0 })

  const texts = ['the cat sat on the mat', 'a cat sits on a mat', 'quarterly revenue grew by ten percent', 'the cat sat on the mat']
  const { data } = await openai.embeddings.create({ model: 'demo/embed-1', input: texts })
  const v = data.map((d) => d.embedding)
  t.same(v[0], v[3], 'equal texts, equal vectors')
  t.ok(cosine(v[0] as number[], v[1] as number[]) > 0.5, 'related texts are close')
  t.ok(cosine(v[0] as number[], v[1] as number[]) > cosine(v[0] as number[], v[2] as number[]) + 0.4, 'closer than unrelated ones')

  const image = await openai.images.generate({ model: 'demo/image-1', prompt: 'a lighthouse on a cliff', size: '1024x1536' })
  const png = Buffer.from(image.data?.[0]?.b64_json ?? '', 'base64')
  t.equal(png.subarray(0, 8).toString('hex'), PNG)
  t.same([png.readUInt32BE(16), png.readUInt32BE(20)], [43, 64], 'a small PNG in the aspect ratio asked for')
})
