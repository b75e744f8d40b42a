import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import type { Json } from '../../plugins/api/index.js'
import { SseParser } from '../../engine/protocols/sse.js'
import { bearer, KEY_A, KEY_B, listeningGateway, mockCatalogWithGemini, settled, UPSTREAM_GEMINI_KEY, type ListeningGateway } from '../helper.js'

// Google's Gemini API in front: its paths (model ids with slashes, plain or escaped, with or
// without `models/`, under /v1beta and /v1 beside OpenAI's /v1/models), its key sources, its error
// shape on every error (the IP rate limit, quota and balance included), streams as SSE or one JSON
// array, countTokens, the model list, and the pipeline's concerns on these routes: parameters,
// media rules, usage records, idempotency and guardrails (answers given at admission: in
// test/plugins/plugin-answer.test.ts).

const GEMINI = 'google/gemini-test'
const MODELS = [GEMINI, 'openai/gpt-test', 'anthropic/claude-test'] as const
const UPSTREAM_PATH: Record<string, RegExp> = {
  [GEMINI]: /^\/v1beta\/models\/gemini-upstream-name:(stream)?[gG]enerateContent$/,
  'openai/gpt-test': /^\/v1\/chat\/completions$/,
  'anthropic/claude-test': /^\/v1\/messages$/
}

const body = (text = 'Tell me about herons', extra: Json = {}): Json => ({ contents: [{ role: 'user', parts: [{ text }] }], ...extra })
const goog = (key = KEY_A): Record<string, string> => ({ 'x-goog-api-key': key })

async function gateway (t: Test, extra: Json = {}): Promise<ListeningGateway> {
  return await listeningGateway(t, (mock) => ({ ...mockCatalogWithGemini(mock), plugins: [{ name: 'auth' }, { name: 'usage' }, { name: 'diagnostics' }], ...extra }))
}

const post = async (app: FastifyInstance, url: string, payload: unknown, headers: Record<string, string> = goog()) =>
  await app.inject({ method: 'POST', url, headers, payload: payload as Json })

/** The chunks of an SSE answer, parsed. */
function sseChunks (text: string): Json[] {
  const p = new SseParser()
  return [...p.push(text), ...p.end()].map((e) => JSON.parse(e.data) as Json)
}

const textOf = (chunks: Json[]): string => chunks.map((c) => ((c.candidates as Json[] | undefined)?.[0]?.content as Json | undefined)?.parts as Json[] | undefined ?? [])
  .flat().map((p) => typeof p.text === 'string' && p.thought !== true ? p.text : '').join('')

t.test('generateContent for a model of each upstream protocol, its id written every way a client writes it', async (t) => {
  const { app, mock, rows } = await gateway(t)
  for (const model of MODELS) {
    const escaped = model.replace('/', '%2F')
    for (const url of [`/v1beta/models/${model}:generateContent`, `/v1beta/models/${escaped}:generateContent`, `/v1beta/models/models/${model}:generateContent`, `/v1/models/${model}:generateContent`]) {
      const res = await post(app, url, body())
      t.equal(res.statusCode, 200, `${url}: ${res.body.slice(0, 200)}`)
      const answer = res.json() as Json
      t.match(answer, { candidates: [{ content: { role: 'model', parts: [{ text: 'Echo: Tell me about herons' }] }, finishReason: 'STOP', index: 0 }], usageMetadata: { promptTokenCount: Number } }, url)
      t.equal(res.headers['x-svc-model'], model)
      t.match(mock.requests.at(-1)?.path, UPSTREAM_PATH[model], 'sent in the upstream\'s protocol')
    }
  }
  await settled()
  const records = await rows()
  t.equal(records.length, 12)
  t.ok(records.every((r) => r.endpoint === 'generate_content' && r.status === 'ok' && r.stream === 0 && r.prompt_tokens > 0 && r.completion_tokens > 0 && r.cost_nano > 0), 'metered as generate_content calls')
})

t.test('streamGenerateContent: SSE chunks with alt=sse, one JSON array without; the last chunk carries the finish and the usage', async (t) => {
  const { app, rows } = await gateway(t)
  for (const model of MODELS) {
    const sse = await post(app, `/v1beta/models/${model}:streamGenerateContent?alt=sse`, body())
    t.equal(sse.statusCode, 200)
    t.match(sse.headers['content-type'], /^text\/event-stream/)
    t.match(sse.body, /^data: \{/)
    const chunks = sseChunks(sse.body)
    t.ok(chunks.length > 1, `${model}: streamed in several chunks`)
    t.equal(textOf(chunks), 'Echo: Tell me about herons')
    t.match(chunks.at(-1), { candidates: [{ finishReason: 'STOP' }], usageMetadata: { promptTokenCount: Number, candidatesTokenCount: Number } })

    const array = await post(app, `/v1/models/${model}:streamGenerateContent`, body())
    t.equal(array.statusCode, 200)
    t.match(array.headers['content-type'], /^application\/json/)
    const list = JSON.parse(array.body) as Json[]
    t.ok(Array.isArray(list) && list.length > 1, `${model}: one JSON array of the chunks`)
    t.equal(textOf(list), 'Echo: Tell me about herons')
    t.match(list.at(-1), { candidates: [{ finishReason: 'STOP' }], usageMetadata: { candidatesTokenCount: Number } })
  }
  await settled()
  const records = await rows()
  t.ok(records.length === 6 && records.every((r) => r.endpoint === 'generate_content' && r.stream === 1 && r.status === 'ok' && r.completion_tokens > 0), 'metered streams')

  const bad = await post(app, `/v1beta/models/${GEMINI}:streamGenerateContent?alt=proto`, body())
  t.equal(bad.statusCode, 400)
  t.match(bad.json(), { error: { code: 400, status: 'INVALID_ARGUMENT', message: /alt/ } })
})

t.test('the key: x-goog-api-key, ?key= or Authorization: Bearer; never sent upstream; 401 in Google\'s shape', async (t) => {
  const { app, mock } = await gateway(t)
  const url = `/v1beta/models/${GEMINI}:generateContent`
  t.equal((await post(app, url, body(), goog())).statusCode, 200, 'x-goog-api-key')
  t.equal((await post(app, `${url}?key=${KEY_A}`, body(), {})).statusCode, 200, '?key=')
  t.equal((await post(app, url, body(), bearer(KEY_A))).statusCode, 200, 'Bearer')
  t.equal((await post(app, `/v1/models/openai/gpt-test:generateContent?key=${KEY_A}`, body(), {})).statusCode, 200, '?key= under /v1 too')
  for (const r of mock.requests) {
    t.equal(r.query.key, undefined, 'no key in the upstream query')
    t.notOk(JSON.stringify(r.headers).includes(KEY_A), 'the gateway key appears nowhere upstream')
  }
  t.equal(mock.requests[0]?.apiKey, UPSTREAM_GEMINI_KEY, 'the provider\'s own key, as x-goog-api-key')
  t.equal(mock.requests[0]?.headers['x-goog-api-key'], UPSTREAM_GEMINI_KEY)

  for (const [what, headers, u] of [['no key', {}, url], ['a wrong key', goog('mg-wrong-key-0123456789abcdef'), url], ['a wrong ?key=', {}, `${url}?key=nope-nope-nope-nope`], ['x-api-key is the Messages routes\'', { 'x-api-key': KEY_A }, url]] as const) {
    const res = await post(app, u, body(), headers)
    t.equal(res.statusCode, 401, what)
    t.same(res.json(), { error: { code: 401, message: 'Invalid or missing API key.', status: 'UNAUTHENTICATED' } }, what)
  }
  const list = await app.inject({ method: 'GET', url: '/v1beta/models' })
  t.equal(list.json().error.status, 'UNAUTHENTICATED', 'the model list needs a key too')
})

t.test('errors in Google\'s shape: bad bodies, unknown models and paths; /v1/models stays OpenAI\'s', async (t) => {
  const { app, mock } = await gateway(t)
  const url = `/v1beta/models/${GEMINI}:generateContent`
  const cases: Array<[string, unknown, number, RegExp]> = [
    ['not JSON', '{nope', 400, /JSON/],
    ['no contents', {}, 400, /contents/],
    ['empty contents', { contents: [] }, 400, /contents/],
    ['contents not a list', { contents: 'hi' }, 400, /contents/],
    ['a content without parts', { contents: [{ role: 'user' }] }, 400, /contents\[0\]\.parts/],
    ['a part that is no object', { contents: [{ role: 'user', parts: ['hi'] }] }, 400, /contents\[0\]\.parts\[0\]/],
    ['a generationConfig that is no object', body('x', { generationConfig: 3 }), 400, /generationConfig/],
    // what only a translated request reads (a Gemini upstream judges it itself)
    ['a function call in a user turn', { contents: [{ role: 'user', parts: [{ functionCall: { name: 'f', args: {} } }] }] }, 400, /functionCall/]
  ]
  for (const [what, payload, status, message] of cases) {
    for (const u of what.startsWith('a function call') ? ['/v1/models/openai/gpt-test:generateContent'] : [url, '/v1/models/openai/gpt-test:generateContent']) {
      const res = await app.inject({ method: 'POST', url: u, headers: goog(), payload: payload as string })
      t.equal(res.statusCode, status, `${what} (${u})`)
      t.match(res.json(), { error: { code: status, status: 'INVALID_ARGUMENT', message } }, what)
      t.equal(res.headers['x-should-retry'], 'false')
    }
  }
  t.equal(mock.requests.length, 0, 'nothing went upstream')

  const unknown = await post(app, '/v1beta/models/nope/x:generateContent', body())
  t.equal(unknown.statusCode, 404)
  t.same(unknown.json(), { error: { code: 404, message: 'The model nope/x does not exist or is not available to this API key.', status: 'NOT_FOUND' } })
  const hidden = await post(app, `/v1beta/models/${GEMINI}:generateContent`, body(), goog(KEY_B))
  t.equal(hidden.statusCode, 404, 'a model outside the key\'s globs does not exist for it')
  for (const u of [`/v1beta/models/${GEMINI}:predict`, `/v1beta/models/${GEMINI}`, '/v1beta/cachedContents', `/v1/models/${GEMINI}:predict`]) {
    const res = await post(app, u, body())
    t.equal(res.statusCode, 404, u)
    t.equal(res.json().error.status, 'NOT_FOUND', `${u}: Google's shape`)
  }
  const chatEmbedded = await post(app, `/v1/models/${GEMINI}:embedContent`, body())
  t.equal(chatEmbedded.statusCode, 400, 'a chat model has no embeddings')
  t.match(chatEmbedded.json(), { error: { status: 'INVALID_ARGUMENT', message: /is not an embedding model/ } })
  const openaiPost = await post(app, `/v1/models/${GEMINI}`, body(), bearer(KEY_A))
  t.equal(openaiPost.statusCode, 404)
  t.equal(openaiPost.json().error.type, 'invalid_request_error', 'a POST to an OpenAI path without a method is OpenAI\'s 404')

  const openai = await app.inject({ method: 'GET', url: `/v1/models/${GEMINI}`, headers: bearer(KEY_A) })
  t.equal(openai.statusCode, 200)
  t.match(openai.json(), { id: GEMINI, object: 'model' }, 'GET /v1/models/{id} is OpenAI\'s model object')
  const openaiList = await app.inject({ method: 'GET', url: '/v1/models', headers: bearer(KEY_A) })
  t.equal(openaiList.json().object, 'list')
  const openaiMissing = await app.inject({ method: 'GET', url: '/v1/models/google/nope:generateContent', headers: bearer(KEY_A) })
  t.equal(openaiMissing.json().error.code, 'model_not_found', 'a GET below /v1/models is OpenAI\'s, whatever its path ends with')
})

t.test('GET /v1beta/models and /v1beta/models/{id}: the key\'s models in Google\'s shape, in pages', async (t) => {
  const { app } = await gateway(t)
  const all = await app.inject({ method: 'GET', url: '/v1beta/models?pageSize=1000', headers: goog() })
  t.equal(all.statusCode, 200)
  const models = all.json().models as Json[]
  t.same(models.find((m) => m.name === `models/${GEMINI}`), { name: `models/${GEMINI}`, displayName: GEMINI, inputTokenLimit: 200000, outputTokenLimit: 200000, supportedGenerationMethods: ['generateContent', 'streamGenerateContent', 'countTokens'] })
  t.notOk(models.some((m) => m.name === 'models/anthropic/claude-old'), 'no inactive model')
  t.equal(all.json().nextPageToken, undefined)

  const names: string[] = []
  let token: string | undefined
  let pages = 0
  do {
    const res = await app.inject({ method: 'GET', url: `/v1beta/models?pageSize=3${token === undefined ? '' : `&pageToken=${token}`}`, headers: goog() })
    names.push(...(res.json().models as Json[]).map((m) => m.name as string))
    token = res.json().nextPageToken
    pages++
  } while (token !== undefined && pages < 10)
  t.same(names, models.map((m) => m.name), 'the pages hold the whole list once')
  t.equal(pages, Math.ceil(models.length / 3))

  const b = await app.inject({ method: 'GET', url: '/v1beta/models', headers: goog(KEY_B) })
  t.ok((b.json().models as Json[]).every((m) => (m.name as string).startsWith('models/anthropic/')), 'only what the key\'s globs show')

  for (const id of [GEMINI, GEMINI.replace('/', '%2F'), `models/${GEMINI}`]) {
    const one = await app.inject({ method: 'GET', url: `/v1beta/models/${id}`, headers: goog() })
    t.equal(one.json().name, `models/${GEMINI}`, id)
  }
  const missing = await app.inject({ method: 'GET', url: '/v1beta/models/nope/x', headers: goog() })
  t.equal(missing.statusCode, 404)
  t.equal(missing.json().error.status, 'NOT_FOUND')
  for (const q of ['pageSize=0', 'pageSize=1001', 'pageSize=x', 'pageToken=abc', 'pageToken=999']) {
    const res = await app.inject({ method: 'GET', url: `/v1beta/models?${q}`, headers: goog() })
    t.equal(res.statusCode, 400, q)
    t.equal(res.json().error.status, 'INVALID_ARGUMENT', q)
  }
})

t.test('countTokens: forwarded to a Gemini upstream, counted locally for the others; free and unrecorded', async (t) => {
  const { app, mock, rows } = await gateway(t)
  const forwarded = await post(app, `/v1beta/models/${GEMINI}:countTokens`, body('count me please'))
  t.equal(forwarded.statusCode, 200)
  const up = mock.requests.at(-1)
  t.equal(up?.path, '/v1beta/models/gemini-upstream-name:countTokens')
  t.same(up?.body, body('count me please'), 'the contents as they are')
  t.same(forwarded.json(), { totalTokens: Math.ceil(JSON.stringify(body('count me please').contents).length / 4) }, 'the upstream\'s count')

  const wrapped = { generateContentRequest: { model: `models/${GEMINI}`, ...body('count me too'), systemInstruction: { parts: [{ text: 'Be brief.' }] } } }
  t.equal((await post(app, `/v1beta/models/${GEMINI}:countTokens`, wrapped)).statusCode, 200)
  t.same(mock.body(), { generateContentRequest: { model: 'models/gemini-upstream-name', ...body('count me too'), systemInstruction: { parts: [{ text: 'Be brief.' }] } } }, 'with a system instruction: a request naming the upstream model')

  const before = mock.requests.length
  for (const model of ['openai/gpt-test', 'anthropic/claude-test']) {
    const local = await post(app, `/v1/models/${model}:countTokens`, body('count me please, a few more words than that'))
    t.equal(local.statusCode, 200)
    const n = local.json().totalTokens as number
    t.ok(n > 8 && n < 40, `${model}: counted locally (${n})`)
  }
  t.equal(mock.requests.length, before, 'nothing sent for them')
  const bad = await post(app, `/v1beta/models/${GEMINI}:countTokens`, {})
  t.equal(bad.statusCode, 400)
  t.equal(bad.json().error.status, 'INVALID_ARGUMENT')
  await settled()
  t.same((await rows()).map((r) => [r.endpoint, r.status, r.error]), [['count_tokens', 'refused', 'missing_field']], 'no usage record of a count; the refused one recorded as refused')
})

t.test('parameters: generationConfig and toolConfig checked against the model by their Chat Completions names; defaults and caps', async (t) => {
  const { app, mock } = await gateway(t)
  const config = { temperature: 0.5, topK: 7, maxOutputTokens: 50, seed: 3, candidateCount: 1 }
  const gpt = await post(app, '/v1beta/models/openai/gpt-test:generateContent', body('x', { generationConfig: config, toolConfig: { functionCallingConfig: { mode: 'AUTO' } }, labels: { a: 'b' } }))
  t.equal(gpt.statusCode, 200)
  t.same(gpt.headers['x-svc-dropped-params']?.toString().split(',').sort(), ['generationConfig.seed', 'generationConfig.topK', 'labels'], 'what the model does not list, by its path')
  t.match(mock.body(), { temperature: 0.5, max_tokens: 50 })
  t.notOk('seed' in mock.body() || 'top_k' in mock.body())

  const defaults = await post(app, '/v1beta/models/openai/gpt-test:generateContent', body())
  t.equal(defaults.statusCode, 200)
  t.equal(mock.body().temperature, 0.25, 'default_parameters fill generationConfig')

  const gem = await post(app, `/v1beta/models/${GEMINI}:generateContent`, body('x', { generationConfig: config }))
  t.equal(gem.headers['x-svc-dropped-params'], undefined, 'a model that lists them keeps them all')
  t.match(mock.body(), { generationConfig: config })
})

t.test('parameters: the output cap lowers maxOutputTokens; media follow the model and the URL rules', async (t) => {
  const { app, mock } = await listeningGateway(t, (m) => {
    const c = mockCatalogWithGemini(m)
    const models = (c.models as Json[]).map((model) => model.id === GEMINI ? { ...model, max_output_tokens: 100 } : model)
    return { ...c, models }
  })
  await post(app, `/v1beta/models/${GEMINI}:generateContent`, body('x', { generationConfig: { maxOutputTokens: 5000 } }))
  t.equal((mock.body().generationConfig as Json).maxOutputTokens, 100, 'lowered to the model\'s max_output_tokens')

  const image = { inlineData: { mimeType: 'image/png', data: 'iVBORw0KGgo=' } }
  const textOnly = await post(app, '/v1beta/models/openai/text-only:generateContent', { contents: [{ role: 'user', parts: [{ text: 'what is this' }, image] }] })
  t.equal(textOnly.statusCode, 400)
  t.match(textOnly.json(), { error: { status: 'INVALID_ARGUMENT', message: /image/ } })
  t.equal((await post(app, '/v1beta/models/openai/gpt-test:generateContent', { contents: [{ role: 'user', parts: [{ text: 'what is this' }, image] }] })).statusCode, 200, 'an image for a model that takes images')

  const before = mock.requests.length
  for (const uri of ['http://169.254.169.254/latest/meta-data', 'http://localhost/x.png', 'file:///etc/passwd', 'gs://bucket/x.png']) {
    for (const model of [GEMINI, 'openai/gpt-test']) {
      const res = await post(app, `/v1beta/models/${model}:generateContent`, { contents: [{ role: 'user', parts: [{ text: 'look' }, { fileData: { mimeType: 'image/png', fileUri: uri } }] }] })
      t.equal(res.statusCode, 400, `${uri} to ${model}`)
      t.equal(res.json().error.status, 'INVALID_ARGUMENT')
    }
  }
  const video = await post(app, '/v1beta/models/openai/gpt-test:generateContent', { contents: [{ role: 'user', parts: [{ fileData: { mimeType: 'video/mp4', fileUri: 'https://example.com/v.mp4' } }] }] })
  t.equal(video.statusCode, 400, 'a video for a model without video input')
  const inResult = await post(app, `/v1beta/models/${GEMINI}:generateContent`, {
    contents: [
      { role: 'user', parts: [{ text: 'go' }] },
      { role: 'model', parts: [{ functionCall: { name: 'f', args: {} } }] },
      { role: 'user', parts: [{ functionResponse: { name: 'f', response: { output: 'x' }, parts: [{ fileData: { mimeType: 'image/png', fileUri: 'http://10.0.0.1/a.png' } }] } }] }
    ]
  })
  t.equal(inResult.statusCode, 400, 'inside a function response too')
  t.equal(mock.requests.length, before, 'none of them went upstream')
})

t.test('the IP rate limit, quota and balance answer in Google\'s shape', async (t) => {
  t.test('rate limit', async (t) => {
    const { app } = await gateway(t, { plugins: [{ name: 'rate-limit', options: { max: 1, window_s: 60 } }, { name: 'auth' }] })
    t.equal((await post(app, `/v1beta/models/${GEMINI}:generateContent`, body())).statusCode, 200)
    for (const url of [`/v1beta/models/${GEMINI}:generateContent`, `/v1/models/${GEMINI}:streamGenerateContent?alt=sse`, '/v1beta/models']) {
      const res = await app.inject({ method: url === '/v1beta/models' ? 'GET' : 'POST', url, headers: goog(), payload: body() })
      t.equal(res.statusCode, 429, url)
      t.same(res.json(), { error: { code: 429, message: 'You are being rate limited.', status: 'RESOURCE_EXHAUSTED' } }, url)
      t.ok(Number(res.headers['retry-after']) > 0)
    }
  })
  t.test('quota', async (t) => {
    const tenants = [{ org: 'acme', projects: [{ id: 'web', quota: { tokens: 1, per: 'hour' }, keys: [{ key: KEY_A }] }] }]
    const { app } = await gateway(t, { tenants, plugins: [{ name: 'auth' }, { name: 'quota' }, { name: 'usage' }] })
    t.equal((await post(app, `/v1beta/models/${GEMINI}:generateContent`, body())).statusCode, 200)
    await settled()
    const res = await post(app, `/v1beta/models/${GEMINI}:generateContent`, body())
    t.equal(res.statusCode, 429)
    t.match(res.json(), { error: { code: 429, status: 'RESOURCE_EXHAUSTED', message: /acme\/web/ } })
    t.ok(Number(res.headers['retry-after']) > 0)
  })
  t.test('balance', async (t) => {
    const tenants = [{ org: 'acme', balance_usd: 0, projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
    const { app, mock } = await gateway(t, { tenants, plugins: [{ name: 'auth' }, { name: 'balance' }] })
    const res = await post(app, `/v1beta/models/${GEMINI}:generateContent`, body())
    t.equal(res.statusCode, 402, 'the status stays 402')
    t.match(res.json(), { error: { code: 402, status: 'RESOURCE_EXHAUSTED', message: /balance/i } }, 'the closest of Google\'s statuses')
    t.equal(res.headers['x-should-retry'], 'false')
    t.equal(mock.requests.length, 0)
    const count = await post(app, `/v1beta/models/${GEMINI}:countTokens`, body())
    t.equal(count.statusCode, 200, 'countTokens is free: no balance needed')
  })
  t.test('the balance hold reads maxOutputTokens', async (t) => {
    // 0.01 USD: not the worst case of a whole context (200,000 tokens at 15 USD per million), but 100 tokens' worth
    const tenants = [{ org: 'acme', balance_usd: 0.01, projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
    const { app } = await gateway(t, { tenants, plugins: [{ name: 'auth' }, { name: 'balance' }] })
    t.equal((await post(app, `/v1beta/models/${GEMINI}:generateContent`, body())).statusCode, 402)
    t.equal((await post(app, `/v1beta/models/${GEMINI}:generateContent`, body('x', { generationConfig: { maxOutputTokens: 100 } }))).statusCode, 200)
  })
})

t.test('upstream errors are re-shaped into Google\'s; a stream that fails after it started ends with an error chunk', async (t) => {
  const { app, mock, rows } = await gateway(t)
  for (const model of MODELS) {
    mock.faults = { status: { status: 400, times: 1, message: 'Simulated bad request from the provider.' } }
    const bad = await post(app, `/v1beta/models/${model}:generateContent`, body())
    t.equal(bad.statusCode, 400, model)
    t.match(bad.json(), { error: { code: 400, status: 'INVALID_ARGUMENT', message: /Simulated bad request/ } }, model)
    mock.faults = { status: { status: 429, times: 1 } }
    const limited = await post(app, `/v1beta/models/${model}:streamGenerateContent?alt=sse`, body())
    t.equal(limited.statusCode, 429)
    t.equal(limited.json().error.status, 'RESOURCE_EXHAUSTED', `${model}: before the stream started, a JSON error with the real status`)
    mock.faults = { status: { status: 500, times: 5 } }
    const down = await post(app, `/v1beta/models/${model}:generateContent`, body())
    t.equal(down.statusCode, 502)
    t.equal(down.json().error.status, 'UNAVAILABLE')

    mock.faults = { resetMidStream: { afterFrames: 2, times: 1 } }
    const cut = await post(app, `/v1beta/models/${model}:streamGenerateContent?alt=sse`, body('a much longer prompt so that the answer has many words in it'))
    t.equal(cut.statusCode, 200, 'the stream had started')
    const chunks = sseChunks(cut.body)
    t.match(chunks.at(-1), { error: { code: 502, status: 'UNAVAILABLE', message: String } }, `${model}: an error chunk ends it`)
    mock.faults = { resetMidStream: { afterFrames: 2, times: 1 } }
    const cutArray = await post(app, `/v1beta/models/${model}:streamGenerateContent`, body('a much longer prompt so that the answer has many words in it'))
    t.match((JSON.parse(cutArray.body) as Json[]).at(-1), { error: { status: 'UNAVAILABLE' } }, `${model}: the array still closes, with the error last`)
  }
  mock.faults = {}
  await settled()
  const failed = (await rows()).filter((r) => r.status === 'upstream_error')
  t.ok(failed.length >= 6, 'the failed streams are recorded as upstream errors')
})

t.test('usage: promptTokenCount with cached content, candidates and thoughts as completion tokens', async (t) => {
  const { app, mock, rows } = await gateway(t)
  mock.cachedTokens = 10
  const res = await post(app, `/v1beta/models/${GEMINI}:generateContent`, body('think first', { generationConfig: { thinkingConfig: { includeThoughts: true, thinkingBudget: 512 } } }))
  const usage = res.json().usageMetadata as Json
  t.ok((usage.thoughtsTokenCount as number) > 0 && usage.cachedContentTokenCount === 10)
  await settled()
  const [row] = await rows()
  t.equal(row?.prompt_tokens, usage.promptTokenCount, 'prompt_tokens: promptTokenCount (cached included)')
  t.equal(row?.cached_input_tokens, 10, 'cached_input_tokens: cachedContentTokenCount')
  t.equal(row?.completion_tokens, (usage.candidatesTokenCount as number) + (usage.thoughtsTokenCount as number), 'completion_tokens: candidates + thoughts')
})

t.test('idempotency and guardrails apply on these routes', async (t) => {
  const rule = { name: 'no-keys', pattern: 'sk-[A-Za-z0-9_-]{20,}' }
  const { app, mock } = await gateway(t, {
    plugins: [{ name: 'auth' }, { name: 'idempotency' }, { name: 'guardrails', options: { rules: [{ ...rule, name: 'block-secret', pattern: 'TOP-SECRET', action: 'block', on: ['request'] }, { ...rule, on: ['response'] }] } }]
  })
  const once = { ...goog(), 'idempotency-key': 'gem-1' }
  t.equal((await post(app, `/v1beta/models/${GEMINI}:generateContent`, body(), once)).statusCode, 200)
  const dup = await post(app, `/v1beta/models/${GEMINI}:generateContent`, body(), once)
  t.equal(dup.statusCode, 409)
  t.match(dup.json(), { error: { code: 409, status: 'INVALID_ARGUMENT' } })

  const before = mock.requests.length
  const blocked = await post(app, `/v1beta/models/${GEMINI}:generateContent`, { systemInstruction: { parts: [{ text: 'the code is TOP-SECRET' }] }, ...body() })
  t.equal(blocked.statusCode, 400)
  t.match(blocked.json(), { error: { status: 'INVALID_ARGUMENT', message: /block-secret/ } })
  t.equal(mock.requests.length, before, 'nothing sent upstream')

  const leak = 'my key is sk-ABCDEFGHIJKLMNOPQRSTUVWX ok'
  for (const model of MODELS) {
    const whole = await post(app, `/v1beta/models/${model}:generateContent`, body(leak))
    t.equal(textOf([whole.json()]), 'Echo: my key is [REDACTED] ok', `${model}: a whole answer redacted`)
    const streamed = await post(app, `/v1beta/models/${model}:streamGenerateContent?alt=sse`, body(leak))
    t.equal(textOf(sseChunks(streamed.body)), 'Echo: my key is [REDACTED] ok', `${model}: a stream redacted across its chunks`)
    t.notMatch(streamed.body, /ABCDEFGH/)
  }
})
