import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { ConfigError, parseConfig } from '../../config/load.js'
import type { Json } from '../../plugins/api/index.js'
import { vectorFromBase64 } from '../../engine/translation/embeddings.js'
import { DEMO_DIMENSIONS, demoVector } from '../../engine/upstream/demo-media.js'
import { bearer, build, KEY_A, KEY_B, listeningGateway, mockCatalogWithGemini, settled, type ListeningGateway } from '../helper.js'

// POST /v1/embeddings and /v1/images/generations (OpenAI's shapes) and Google's embedContent and
// batchEmbedContents, for the catalog's embedding and image models on OpenAI- and Gemini-protocol
// providers (the mock upstream: its vectors are the demo provider's, its token counts in its
// header); the spec's 501 where the catalog has no model of a kind, 400 for a model of another
// kind, 404 for one unknown or not granted; and the pipeline's concerns on these routes (balance,
// quota, key limits, idempotency, guardrails, the cache, usage records).

const media = (id: string, provider: string, upstream: string, kind: 'embeddings' | 'image', extra: Json = {}): Json => ({
  id,
  name: id,
  provider,
  upstream_model: upstream,
  context_length: 8192,
  architecture: { input_modalities: ['text'], output_modalities: [kind] },
  pricing: kind === 'embeddings' ? { input: 0.1, output: 0 } : { input: 5, output: 40 },
  ...(kind === 'image' ? { max_output_tokens: 100 } : {}),
  ...extra
})

const MODELS = [
  media('openai/embed-test', 'mock-openai', 'text-embedding-up', 'embeddings'),
  media('google/embed-test', 'mock-gemini', 'gemini-embedding-up', 'embeddings'),
  media('openai/image-test', 'mock-openai', 'gpt-image-up', 'image'),
  media('google/image-test', 'mock-gemini', 'gemini-image-up', 'image')
]

async function gateway (t: Test, extra: Json = {}): Promise<ListeningGateway> {
  return await listeningGateway(t, (mock) => ({ ...mockCatalogWithGemini(mock, MODELS), plugins: [{ name: 'auth' }, { name: 'usage' }, { name: 'diagnostics' }], ...extra }))
}

const post = async (app: FastifyInstance, url: string, payload: unknown, headers: Record<string, string> = bearer(KEY_A)) =>
  await app.inject({ method: 'POST', url, headers, payload: payload as Json })

const tokens = (text: string): number => Math.max(1, Math.ceil(text.length / 4))
const close = (a: readonly number[], b: readonly number[]): boolean => a.length === b.length && a.every((x, i) => Math.abs(x - (b[i] as number)) < 1e-6)
const PNG = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])
const isPng = (b64: unknown): boolean => typeof b64 === 'string' && Buffer.from(b64, 'base64').subarray(0, 8).equals(PNG)

t.test('POST /v1/embeddings to an OpenAI upstream (forwarded) and a Gemini one (batchEmbedContents): the vectors, the usage, the record', async (t) => {
  const { app, mock, rows } = await gateway(t)
  const input = ['first text', 'second text']
  const prompt = tokens(input[0] as string) + tokens(input[1] as string)

  const openai = await post(app, '/v1/embeddings', { model: 'openai/embed-test', input, encoding_format: 'float' })
  t.equal(openai.statusCode, 200, openai.body.slice(0, 200))
  const list = openai.json() as { object: string, data: Array<{ object: string, index: number, embedding: number[] }>, usage: Json }
  t.match(list, { object: 'list', data: [{ object: 'embedding', index: 0 }, { object: 'embedding', index: 1 }], usage: { prompt_tokens: prompt, total_tokens: prompt } })
  t.ok(list.data.every((d, i) => close(d.embedding, demoVector(input[i] as string))), 'the upstream\'s vectors, unchanged')
  t.equal(openai.headers['x-svc-model'], 'openai/embed-test')
  t.equal(openai.headers['x-svc-provider'], 'mock-openai')
  t.match(mock.requests.at(-1), { path: '/v1/embeddings', body: { model: 'text-embedding-up', input, encoding_format: 'float' } })

  const gemini = await post(app, '/v1/embeddings', { model: 'google/embed-test', input, dimensions: 8, encoding_format: 'base64', user: 'someone' })
  t.equal(gemini.statusCode, 200, gemini.body.slice(0, 200))
  const encoded = gemini.json() as { data: Array<{ embedding: string }>, model: string, usage: Json }
  t.equal(encoded.model, 'google/embed-test')
  t.ok(encoded.data.every((d, i) => typeof d.embedding === 'string' && close(vectorFromBase64(d.embedding), demoVector(input[i] as string, 8))), 'base64 of the float32 values, as OpenAI sends them')
  t.same(encoded.usage, { prompt_tokens: prompt, total_tokens: prompt }, 'Google reports no tokens: estimated from the texts')
  t.equal(gemini.headers['x-svc-dropped-params'], 'user')
  t.match(mock.requests.at(-1), {
    path: '/v1beta/models/gemini-embedding-up:batchEmbedContents',
    body: { requests: input.map((text) => ({ model: 'models/gemini-embedding-up', content: { parts: [{ text }] }, outputDimensionality: 8 })) }
  })

  const one = await post(app, '/v1/embeddings', { model: 'openai/embed-test', input: [5, 6, 7] })
  t.equal(one.statusCode, 200)
  t.equal((one.json() as { usage: Json }).usage.prompt_tokens, 3, 'token ids count one token each')
  const refused = await post(app, '/v1/embeddings', { model: 'google/embed-test', input: [[5, 6, 7]] })
  t.equal(refused.statusCode, 400)
  t.match(refused.json(), { error: { type: 'invalid_request_error', message: /token ids/ } }, 'Gemini takes no token ids')

  await settled()
  const records = (await rows()).filter((r) => r.status === 'ok')
  t.equal(records.length, 3)
  t.ok(records.every((r) => r.endpoint === 'embeddings' && r.completion_tokens === 0 && r.stream === 0), 'recorded as embeddings calls, input tokens only')
  // 0.1 USD per million tokens: 100 nano-dollars a token
  t.same(records.map((r) => [r.provider, r.prompt_tokens, r.cost_nano]), [['mock-openai', 3, 300], ['mock-gemini', prompt, prompt * 100], ['mock-openai', prompt, prompt * 100]])
})

t.test('Google\'s embedContent and batchEmbedContents in front, for embedding models of either protocol', async (t) => {
  const { app, mock, rows } = await gateway(t)
  const goog = { 'x-goog-api-key': KEY_A }
  const single = await post(app, '/v1beta/models/openai/embed-test:embedContent', { content: { parts: [{ text: 'hello world' }] }, outputDimensionality: 4, taskType: 'RETRIEVAL_QUERY' }, goog)
  t.equal(single.statusCode, 200, single.body.slice(0, 200))
  t.ok(close((single.json() as { embedding: { values: number[] } }).embedding.values, demoVector('hello world', 4)))
  t.equal(single.headers['x-svc-dropped-params'], 'taskType', 'no OpenAI equivalent')
  t.same(mock.body(), { model: 'text-embedding-up', input: ['hello world'], encoding_format: 'float', dimensions: 4 })

  const texts = ['one', 'two words']
  const requests = texts.map((text) => ({ model: 'models/openai/embed-test', content: { parts: [{ text }] } }))
  const batch = await post(app, '/v1beta/models/openai%2Fembed-test:batchEmbedContents', { requests }, goog)
  t.equal(batch.statusCode, 200)
  const embeddings = (batch.json() as { embeddings: Array<{ values: number[] }> }).embeddings
  t.ok(embeddings.length === 2 && embeddings.every((e, i) => close(e.values, demoVector(texts[i] as string))))

  const google = await post(app, '/v1/models/google/embed-test:batchEmbedContents', { requests: requests.map((r) => ({ ...r, model: 'models/google/embed-test', taskType: 'SEMANTIC_SIMILARITY' })) }, goog)
  t.equal(google.statusCode, 200, 'under /v1 too')
  t.match(mock.requests.at(-1), { path: '/v1beta/models/gemini-embedding-up:batchEmbedContents', body: { requests: [{ model: 'models/gemini-embedding-up', taskType: 'SEMANTIC_SIMILARITY' }, { model: 'models/gemini-embedding-up' }] } })
  const googleOne = await post(app, '/v1beta/models/google/embed-test:embedContent', { content: { parts: [{ text: 'hi' }] } }, goog)
  t.equal(googleOne.statusCode, 200)
  t.equal(mock.requests.at(-1)?.path, '/v1beta/models/gemini-embedding-up:embedContent')

  const other = await post(app, '/v1beta/models/google/embed-test:batchEmbedContents', { requests: [{ model: 'models/openai/embed-test', content: { parts: [{ text: 'x' }] } }] }, goog)
  t.equal(other.statusCode, 400)
  t.match(other.json(), { error: { code: 400, status: 'INVALID_ARGUMENT', message: /requests\[0\]\.model/ } }, 'every request names the path\'s model')
  const empty = await post(app, '/v1beta/models/google/embed-test:embedContent', { content: { parts: [] } }, goog)
  t.match(empty.json(), { error: { code: 400, status: 'INVALID_ARGUMENT', message: /content\.parts/ } })

  const listed = await app.inject({ method: 'GET', url: '/v1beta/models/openai/embed-test', headers: goog })
  t.same((listed.json() as Json).supportedGenerationMethods, ['embedContent', 'batchEmbedContents'])
  const chat = await app.inject({ method: 'GET', url: '/v1beta/models/openai/gpt-test', headers: goog })
  t.same((chat.json() as Json).supportedGenerationMethods, ['generateContent', 'streamGenerateContent', 'countTokens'])

  await settled()
  t.ok((await rows()).filter((r) => r.status === 'ok').every((r) => r.endpoint === 'embeddings'))
})

t.test('POST /v1/images/generations: forwarded to an OpenAI upstream, through generateContent to a Gemini image model', async (t) => {
  const { app, mock, rows } = await gateway(t)
  const prompt = 'a red fox in the snow'
  const openai = await post(app, '/v1/images/generations', { model: 'openai/image-test', prompt, n: 2, size: '1024x1024' })
  t.equal(openai.statusCode, 200, openai.body.slice(0, 200))
  const answer = openai.json() as { created: number, data: Array<{ b64_json: string }>, usage: Json }
  t.ok(answer.data.length === 2 && answer.data.every((d) => isPng(d.b64_json)), 'two PNGs')
  t.match(answer.usage, { input_tokens: tokens(prompt), output_tokens: 200 })
  t.match(mock.requests.at(-1), { path: '/v1/images/generations', body: { model: 'gpt-image-up', prompt, n: 2, size: '1024x1024' } })

  const gemini = await post(app, '/v1/images/generations', { model: 'google/image-test', prompt, size: '1792x1024', quality: 'high' })
  t.equal(gemini.statusCode, 200, gemini.body.slice(0, 200))
  const g = gemini.json() as { data: Array<{ b64_json: string }>, usage: Json }
  t.ok(g.data.length === 1 && isPng(g.data[0]?.b64_json), 'the inline image as b64_json')
  t.match(g.usage, { output_tokens: 1290 })
  t.equal(gemini.headers['x-svc-dropped-params'], 'quality')
  t.match(mock.requests.at(-1), { path: '/v1beta/models/gemini-image-up:generateContent', body: { contents: [{ role: 'user', parts: [{ text: prompt }] }], generationConfig: { responseModalities: ['TEXT', 'IMAGE'], imageConfig: { aspectRatio: '16:9' } } } })

  const sent = mock.requests.length
  const url = await post(app, '/v1/images/generations', { model: 'google/image-test', prompt, response_format: 'url' })
  t.equal(url.statusCode, 400)
  t.match(url.json(), { error: { type: 'invalid_request_error', message: /response_format "url"/ } })
  t.equal(mock.requests.length, sent, 'nothing sent')

  mock.enqueue({ body: { candidates: [{ content: { role: 'model', parts: [{ text: 'I cannot draw that.' }] }, finishReason: 'IMAGE_SAFETY', index: 0 }], usageMetadata: { promptTokenCount: 6, totalTokenCount: 6 } } })
  const none = await post(app, '/v1/images/generations', { model: 'google/image-test', prompt })
  t.equal(none.statusCode, 400)
  t.match(none.json(), { error: { code: 'no_image_generated', message: /IMAGE_SAFETY/ } })

  await settled()
  const records = await rows()
  const ok = records.filter((r) => r.status === 'ok')
  t.ok(ok.every((r) => r.endpoint === 'images.generations'))
  // 5 USD per million input tokens (5,000 nano-dollars a token), 40 per million output tokens
  t.same(ok.map((r) => [r.provider, r.completion_tokens, r.cost_nano]).reverse(), [
    ['mock-openai', 200, tokens(prompt) * 5000 + 200 * 40000],
    ['mock-gemini', 1290, (ok[0]?.prompt_tokens ?? 0) * 5000 + 1290 * 40000]
  ])
  t.match(records[0], { status: 'upstream_error', cost_nano: 0 }, 'an answer without an image is not billed')
})

t.test('an image model priced per image: each image at the price of the size asked for (else default), beside the tokens reported, in the record and the balance hold', async (t) => {
  const perImage = { '1024x1024': 0.04, '1536x1024': 0.06, default: 0.05 }
  const priced = media('openai/image-priced', 'mock-openai', 'gpt-image-up', 'image', { pricing: { input: 5, output: 40, per_image: perImage } })
  const g = await listeningGateway(t, (mock) => ({ ...mockCatalogWithGemini(mock, [priced]), plugins: [{ name: 'auth' }, { name: 'usage' }] }))
  const prompt = 'a red fox in the snow'
  const asked = [['1536x1024', 2], ['1024x1024', 1], [undefined, 1], ['256x256', 1]] as const
  for (const [size, n] of asked) {
    const res = await post(g.app, '/v1/images/generations', { model: 'openai/image-priced', prompt, n, ...(size === undefined ? {} : { size }) })
    t.equal(res.statusCode, 200, res.body.slice(0, 200))
  }
  await settled()
  const records = (await g.rows()).reverse()
  const tokenPart = (images: number): number => tokens(prompt) * 5000 + images * 100 * 40000
  t.same(records.map((r) => [r.images, r.cost_nano]), [
    [2, tokenPart(2) + 2 * 60_000_000],
    [1, tokenPart(1) + 40_000_000],
    [1, tokenPart(1) + 50_000_000],
    [1, tokenPart(1) + 50_000_000]
  ], 'per_image by size, default for a size not listed or not given')
  t.match(records[0]?.cost_detail, { images: 120_000_000, input: tokens(prompt) * 5000, output: 200 * 40000 }, 'the images are their own part of the charge')
})

t.test('501 while the catalog has no model of the kind; 400 for a model of another kind, on every route; 404 for one unknown or not granted', async (t) => {
  t.test('501 per kind', async (t) => {
    const app = await build(t, { models: [media('demo/embed', 'demo', 'embed-1', 'embeddings'), media('demo/chat', 'demo', 'chat', 'embeddings', { architecture: { input_modalities: ['text'], output_modalities: ['text'] } })] })
    const images = await post(app, '/v1/images/generations', { model: 'demo/embed', prompt: 'x' })
    t.equal(images.statusCode, 501)
    t.match(images.json(), { error: { code: 501, type: 'not_implemented' } })
    t.equal((await post(app, '/v1/embeddings', { model: 'demo/embed', input: 'x' })).statusCode, 200, 'the demo provider embeds')
  })

  const { app, mock } = await gateway(t)
  const refusals: Array<[string, unknown, RegExp, Record<string, string>?]> = [
    ['/v1/embeddings', { model: 'openai/gpt-test', input: 'x' }, /openai\/gpt-test is not an embedding model/],
    ['/v1/embeddings', { model: 'openai/image-test', input: 'x' }, /is not an embedding model/],
    ['/v1beta/models/openai/gpt-test:embedContent', { content: { parts: [{ text: 'x' }] } }, /is not an embedding model/],
    ['/v1/images/generations', { model: 'openai/embed-test', prompt: 'x' }, /openai\/embed-test is not an image generation model/],
    ['/v1/chat/completions', { model: 'openai/embed-test', messages: [{ role: 'user', content: 'x' }] }, /not a chat model: it is served on POST \/v1\/embeddings/],
    ['/v1/responses', { model: 'openai/image-test', input: 'x' }, /not a chat model: it is served on POST \/v1\/images\/generations/],
    ['/v1/messages', { model: 'google/embed-test', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }, /not a chat model/],
    ['/v1/messages/count_tokens', { model: 'google/embed-test', messages: [{ role: 'user', content: 'x' }] }, /not a chat model/],
    ['/v1beta/models/openai/embed-test:generateContent', { contents: [{ role: 'user', parts: [{ text: 'x' }] }] }, /not a chat model/],
    ['/v1beta/models/openai/embed-test:countTokens', { contents: [{ role: 'user', parts: [{ text: 'x' }] }] }, /not a chat model/]
  ]
  for (const [url, body, message] of refusals) {
    const res = await post(app, url, body)
    t.equal(res.statusCode, 400, url)
    const error = (res.json() as { error: Json }).error
    t.match(error.message, message, url)
    if (url.startsWith('/v1beta')) t.equal(error.status, 'INVALID_ARGUMENT', `${url}: Google's shape`)
    else if (url.startsWith('/v1/messages')) t.equal(error.type, 'invalid_request_error', `${url}: the Messages shape`)
    else t.match(error, { code: 'wrong_model_kind', type: 'invalid_request_error' }, url)
  }
  for (const [url, body] of [['/v1/embeddings', { model: 'openai/nope', input: 'x' }], ['/v1/images/generations', { model: 'google/nope', prompt: 'x' }], ['/v1beta/models/openai/nope:embedContent', { content: { parts: [{ text: 'x' }] } }]] as const) {
    t.equal((await post(app, url, body)).statusCode, 404, `${url}: unknown`)
  }
  // KEY_B may use anthropic/* only
  for (const [url, body] of [['/v1/embeddings', { model: 'openai/embed-test', input: 'x' }], ['/v1/images/generations', { model: 'openai/image-test', prompt: 'x' }], ['/v1beta/models/google/embed-test:batchEmbedContents', { requests: [{ content: { parts: [{ text: 'x' }] } }] }]] as const) {
    const res = await post(app, url, body, bearer(KEY_B))
    t.equal(res.statusCode, 404, `${url}: not granted`)
  }
  const bad: Array<[string, unknown, RegExp]> = [
    ['/v1/embeddings', { model: 'openai/embed-test' }, /Missing required field: input/],
    ['/v1/embeddings', { model: 'openai/embed-test', input: [] }, /input: must not be empty/],
    ['/v1/embeddings', { model: 'openai/embed-test', input: ['a', 2] }, /input\[1\]/],
    ['/v1/embeddings', { model: 'openai/embed-test', input: 'a', encoding_format: 'int8' }, /encoding_format/],
    ['/v1/embeddings', { model: 'openai/embed-test', input: 'a', dimensions: 0 }, /dimensions/],
    ['/v1/images/generations', { model: 'openai/image-test' }, /Missing required field: prompt/],
    ['/v1/images/generations', { model: 'openai/image-test', prompt: 'x', n: 11 }, /n: must be an integer from 1 to 10/],
    ['/v1/images/generations', { model: 'openai/image-test', prompt: 'x', stream: true }, /stream/]
  ]
  for (const [url, body, message] of bad) {
    const res = await post(app, url, body)
    t.equal(res.statusCode, 400, JSON.stringify(body))
    t.match((res.json() as { error: Json }).error.message, message)
  }
  t.equal(mock.requests.length, 0, 'nothing refused reached the provider')
})

t.test('an embedding or image model behind a Messages provider is a config error', async (t) => {
  let problems: string[] = []
  try {
    parseConfig({
      providers: [{ id: 'claude', protocol: 'messages', base_url: 'http://127.0.0.1:1' }],
      models: [media('a/embed', 'claude', 'e', 'embeddings'), media('a/image', 'claude', 'i', 'image')]
    }, {})
  } catch (err) {
    if (err instanceof ConfigError) problems = err.problems
  }
  t.match(problems.join('\n'), /models\[0\]\.provider: claude speaks the Messages protocol, which has no embeddings/)
  t.match(problems.join('\n'), /models\[1\]\.provider: claude speaks the Messages protocol, which has no image generation/)
})

t.test('balance, quota, key limits and idempotency apply as on chat', async (t) => {
  t.test('the balance holds the worst case: the input for an embedding, the output cap of every image asked for', async (t) => {
    // 0.0005 USD: an embedding of a few characters (100 nano-dollars a character at most), but
    // not its context length (8,192 tokens: 819,200), nor an image (its 100 output tokens at 40 USD
    // per million are 4,000,000 nano-dollars)
    const tenants = [{ org: 'acme', balance_usd: 0.0005, projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
    const { app, mock } = await gateway(t, { tenants, plugins: [{ name: 'auth' }, { name: 'balance' }, { name: 'usage' }] })
    const embedded = await post(app, '/v1/embeddings', { model: 'google/embed-test', input: 'hello there' })
    t.equal(embedded.statusCode, 200)
    await settled()
    const org = await app.gateway.store.orgs.get('acme')
    t.equal(org?.spent_nano, tokens('hello there') * 100, 'charged what it used')
    const image = await post(app, '/v1/images/generations', { model: 'openai/image-test', prompt: 'x' })
    t.equal(image.statusCode, 402)
    t.equal(mock.requests.length, 1, 'the image call never left')
  })
  t.test('quota and key limits', async (t) => {
    const tenants = [{ org: 'acme', projects: [{ id: 'web', quota: { tokens: 5, per: 'hour' }, keys: [{ key: KEY_A, limits: { rpm: 3 } }] }] }]
    const { app } = await gateway(t, { tenants, plugins: [{ name: 'auth' }, { name: 'quota' }, { name: 'usage' }] })
    t.equal((await post(app, '/v1/embeddings', { model: 'openai/embed-test', input: 'a text of some twenty-four' })).statusCode, 200)
    await settled()
    const over = await post(app, '/v1/embeddings', { model: 'openai/embed-test', input: 'x' })
    t.equal(over.statusCode, 429, 'the project\'s token quota is used up')
    t.match(over.json(), { error: { code: 429, message: /acme\/web/ } })
    const gemini = await post(app, '/v1beta/models/openai/embed-test:embedContent', { content: { parts: [{ text: 'x' }] } }, { 'x-goog-api-key': KEY_A })
    t.equal(gemini.statusCode, 429)
    t.equal((gemini.json() as { error: Json }).error.status, 'RESOURCE_EXHAUSTED')
  })
  t.test('a key\'s rpm', async (t) => {
    const tenants = [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, limits: { rpm: 1 } }] }] }]
    const { app } = await gateway(t, { tenants, plugins: [{ name: 'auth' }, { name: 'quota' }, { name: 'usage' }] })
    t.equal((await post(app, '/v1/images/generations', { model: 'openai/image-test', prompt: 'x' })).statusCode, 200)
    const limited = await post(app, '/v1/embeddings', { model: 'openai/embed-test', input: 'x' })
    t.equal(limited.statusCode, 429)
    t.ok(Number(limited.headers['retry-after']) > 0)
  })
  t.test('idempotency', async (t) => {
    const { app, mock } = await gateway(t, { plugins: [{ name: 'auth' }, { name: 'idempotency' }, { name: 'usage' }] })
    const headers = { ...bearer(KEY_A), 'idempotency-key': 'embed-1' }
    t.equal((await post(app, '/v1/embeddings', { model: 'openai/embed-test', input: 'x' }, headers)).statusCode, 200)
    const again = await post(app, '/v1/embeddings', { model: 'openai/embed-test', input: 'x' }, headers)
    t.equal(again.statusCode, 409)
    t.equal(again.headers['x-should-retry'], 'false')
    const image = { ...bearer(KEY_A), 'idempotency-key': 'image-1' }
    t.equal((await post(app, '/v1/images/generations', { model: 'openai/image-test', prompt: 'x' }, image)).statusCode, 200)
    t.equal((await post(app, '/v1/images/generations', { model: 'openai/image-test', prompt: 'x' }, image)).statusCode, 409)
    t.equal(mock.requests.length, 2)
  })
})

t.test('guardrails read the texts to embed and the prompt; token ids are refused while request rules are set', async (t) => {
  const rules = [
    { name: 'block-secret', pattern: 'TOP-SECRET', action: 'block', on: ['request'] },
    { name: 'no-keys', pattern: 'sk-[a-z0-9]{8,}', action: 'redact', on: ['request'] },
    { name: 'no-codes', pattern: 'CODE-[0-9]+', action: 'redact', on: ['response'] }
  ]
  const { app, mock } = await gateway(t, { plugins: [{ name: 'auth' }, { name: 'guardrails', options: { rules } }, { name: 'usage' }] })
  for (const [url, body] of [
    ['/v1/embeddings', { model: 'openai/embed-test', input: ['fine', 'this is TOP-SECRET'] }],
    ['/v1/images/generations', { model: 'google/image-test', prompt: 'draw TOP-SECRET plans' }],
    ['/v1beta/models/google/embed-test:batchEmbedContents', { requests: [{ content: { parts: [{ text: 'TOP-SECRET' }] } }] }]
  ] as const) {
    const res = await post(app, url, body)
    t.equal(res.statusCode, 400, url)
    t.match(res.json(), { error: { message: /block-secret/ } })
  }
  t.equal(mock.requests.length, 0, 'nothing blocked was sent')
  t.equal((await post(app, '/v1/embeddings', { model: 'google/embed-test', input: 'my key is sk-abcdef123456' })).statusCode, 200)
  t.same((mock.body().requests as Json[])[0]?.content, { parts: [{ text: 'my key is [REDACTED]' }] }, 'redacted before it went up')
  t.equal((await post(app, '/v1/images/generations', { model: 'openai/image-test', prompt: 'sk-abcdef123456 as art' })).statusCode, 200)
  t.equal(mock.body().prompt, '[REDACTED] as art')
  mock.enqueue({ body: { created: 1, data: [{ b64_json: 'iVBORw0KGgo=', revised_prompt: 'A fox holding CODE-1234' }] } })
  const revised = await post(app, '/v1/images/generations', { model: 'openai/image-test', prompt: 'a fox' })
  t.equal((revised.json() as { data: Json[] }).data[0]?.revised_prompt, 'A fox holding [REDACTED]', 'the revised prompt of an answer is read too')
  const ids = await post(app, '/v1/embeddings', { model: 'openai/embed-test', input: [1, 2, 3] })
  t.equal(ids.statusCode, 400)
  t.match(ids.json(), { error: { code: 'content_unreadable' } })
})

t.test('the cache answers a repeated embedding without the provider; images are never cached', async (t) => {
  const { app, mock, rows } = await gateway(t, { plugins: [{ name: 'auth' }, { name: 'cache', options: { opt_in: false } }, { name: 'usage' }, { name: 'diagnostics' }] })
  const body = { model: 'google/embed-test', input: ['cache me', 'and me'], encoding_format: 'base64' }
  const first = await post(app, '/v1/embeddings', body)
  t.equal(first.headers['x-svc-cache'], 'miss')
  await settled()
  const second = await post(app, '/v1/embeddings', body)
  t.equal(second.statusCode, 200)
  t.equal(second.headers['x-svc-cache'], 'hit')
  t.same(second.json(), first.json(), 'the same answer')
  const goog = { requests: [{ content: { parts: [{ text: 'cache me' }] } }] }
  await post(app, '/v1beta/models/google/embed-test:batchEmbedContents', goog, { 'x-goog-api-key': KEY_A })
  await settled()
  const googHit = await post(app, '/v1beta/models/google/embed-test:batchEmbedContents', goog, { 'x-goog-api-key': KEY_A })
  t.equal(googHit.headers['x-svc-cache'], 'hit', 'Google\'s shape too')
  t.equal(mock.requests.length, 2, 'each reached the provider once')

  const image = { model: 'openai/image-test', prompt: 'x' }
  await post(app, '/v1/images/generations', image)
  const again = await post(app, '/v1/images/generations', image)
  t.equal(again.headers['x-svc-cache'], undefined)
  t.equal(mock.requests.length, 4, 'every image call reaches the provider')
  await settled()
  const hits = (await rows()).filter((r) => r.cache_hit === 1)
  t.equal(hits.length, 2)
  t.ok(hits.every((r) => r.endpoint === 'embeddings' && r.cost_nano === 0 && r.saved_nano > 0 && r.prompt_tokens > 0), 'recorded as hits, with what they saved')
})

t.test('the demo models answer both routes with no provider', async (t) => {
  const app = await build(t, {
    models: [
      media('demo/embed-1', 'demo', 'embed-1', 'embeddings'),
      media('demo/image-1', 'demo', 'image-1', 'image')
    ]
  })
  const res = await post(app, '/v1/embeddings', { model: 'demo/embed-1', input: ['the cat sat on the mat', 'a cat sits on a mat', 'quarterly revenue grew'] })
  t.equal(res.statusCode, 200)
  const vectors = (res.json() as { data: Array<{ embedding: number[] }> }).data.map((d) => d.embedding)
  t.ok(vectors.every((v) => v.length === DEMO_DIMENSIONS))
  const image = await post(app, '/v1/images/generations', { model: 'demo/image-1', prompt: 'a lighthouse', response_format: 'url' })
  t.equal(image.statusCode, 200)
  t.match((image.json() as { data: Array<{ url: string }> }).data[0]?.url, /^data:image\/png;base64,iVBORw0KGgo/)
})
