import t from 'tap'
import { bearer, build, KEY_A, KEY_B, testConfig } from '../helper.js'

t.test('GET /v1/models lists the active models the key may see, without prices', async (t) => {
  const app = await build(t)
  const res = await app.inject({ method: 'GET', url: '/v1/models', headers: bearer(KEY_A) })
  t.equal(res.statusCode, 200)
  const body = res.json()
  t.equal(body.object, 'list')
  const ids = body.data.map((m: { id: string }) => m.id)
  t.same(ids, ['demo/gpt', 'demo/claude', 'anthropic/claude-x', 'openai/no-price'])
  const keys = new Set<string>()
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk)
    else if (v !== null && typeof v === 'object') for (const [k, x] of Object.entries(v)) { keys.add(k); walk(x) }
  }
  walk(body)
  t.notOk([...keys].some((k) => /price|pricing|cost|rate/i.test(k)), 'no price field anywhere in the payload')
  t.same(body.data[0], {
    id: 'demo/gpt',
    object: 'model',
    name: 'demo/gpt',
    context_length: 128000,
    architecture: { input_modalities: ['text', 'image'], output_modalities: ['text'] },
    supported_parameters: ['temperature', 'top_p', 'max_tokens', 'stop', 'stop_sequences', 'tools', 'tool_choice', 'user', 'metadata'],
    default_parameters: {}
  })
})

t.test('a key with models: ["anthropic/*"] sees only those', async (t) => {
  const app = await build(t)
  const res = await app.inject({ method: 'GET', url: '/v1/models', headers: bearer(KEY_B) })
  t.same(res.json().data.map((m: { id: string }) => m.id), ['anthropic/claude-x'])
  const hidden = await app.inject({ method: 'GET', url: '/v1/models/demo/gpt', headers: bearer(KEY_B) })
  t.equal(hidden.statusCode, 404)
  t.equal(hidden.json().error.code, 'model_not_found')
})

t.test('GET /v1/models/{id} with slashes; deprecated and offline models are 404', async (t) => {
  const app = await build(t)
  const ok = await app.inject({ method: 'GET', url: '/v1/models/anthropic/claude-x', headers: bearer(KEY_A) })
  t.equal(ok.statusCode, 200)
  t.equal(ok.json().id, 'anthropic/claude-x')
  t.equal(ok.json().object, 'model')
  for (const id of ['anthropic/claude-old', 'anthropic/claude-gone', 'nobody/nothing']) {
    const res = await app.inject({ method: 'GET', url: `/v1/models/${id}`, headers: bearer(KEY_A) })
    t.equal(res.statusCode, 404, id)
    t.equal(res.json().error.code, 'model_not_found', id)
    t.match(res.json().error.message, id)
  }
  const list = await app.inject({ method: 'GET', url: '/v1/models', headers: bearer(KEY_A) })
  t.notOk(list.body.includes('claude-old') || list.body.includes('claude-gone'), 'hidden from the list')
})

t.test('GET /v1/models/ without an id is 400', async (t) => {
  const app = await build(t)
  const res = await app.inject({ method: 'GET', url: '/v1/models/', headers: bearer(KEY_A) })
  t.equal(res.statusCode, 400)
  t.equal(res.json().error.code, 400)
  t.equal(res.headers['x-should-retry'], 'false')
})

t.test('limit: default 500, 1..1000, anything else 400', async (t) => {
  const app = await build(t)
  const get = (q: string) => app.inject({ method: 'GET', url: `/v1/models${q}`, headers: bearer(KEY_A) })
  t.equal((await get('?limit=1')).json().data.length, 1)
  t.equal((await get('?limit=2')).json().data.length, 2)
  t.equal((await get('?limit=1000')).json().data.length, 4)
  t.equal((await get('')).json().data.length, 4)
  for (const bad of ['0', '1001', '-1', '1.5', 'abc', '', '10000', 'Infinity', '1e400']) {
    const res = await get(`?limit=${bad}`)
    t.equal(res.statusCode, 400, `limit=${bad}`)
    t.match(res.json().error.message, /^Invalid query parameter limit: must be /)
  }
  t.equal((await get('?limit=1e2')).json().data.length, 4, 'a number written with an exponent is still an integer')
  const repeated = await get('?limit=5&limit=6')
  t.equal(repeated.statusCode, 400)
  t.equal(repeated.json().error.message, 'Invalid query parameter limit: must be given once')
})

t.test('embeddings and images answer 501', async (t) => {
  const app = await build(t)
  for (const url of ['/v1/embeddings', '/v1/images/generations']) {
    const res = await app.inject({ method: 'POST', url, headers: bearer(KEY_A), payload: { model: 'x', input: 'y' } })
    t.equal(res.statusCode, 501, url)
    t.equal(res.json().error.code, 501)
    t.ok(res.headers['x-svc-trace-id'])
  }
})

t.test('a model whose providers have no credentials is listed nowhere, and its call says what is missing', async (t) => {
  const base = testConfig()
  const app = await build(t, {
    providers: [...base.providers, { id: 'openai', protocol: 'openai', base_url: 'http://127.0.0.1:9/v1', api_key: '' }, { id: 'backup', protocol: 'openai', base_url: 'http://127.0.0.1:9/v1', api_key: '' }],
    models: [
      ...base.models.map((m) => ({ ...m })),
      { id: 'openai/keyless', name: 'Keyless', provider: ['openai', 'backup'], context_length: 8192, pricing: { input: 1, output: 2 } },
      // one provider without credentials, one with: served
      { id: 'openai/half', name: 'Half', provider: ['openai', 'demo'], context_length: 8192 }
    ]
  })
  const ids = (await app.inject({ method: 'GET', url: '/v1/models', headers: bearer(KEY_A) })).json().data.map((m: { id: string }) => m.id)
  t.notOk(ids.includes('openai/keyless'), '/v1/models leaves it out')
  t.ok(ids.includes('openai/half'), 'a model with one provider that has credentials stays')
  t.equal((await app.inject({ method: 'GET', url: '/v1/models/openai/keyless', headers: bearer(KEY_A) })).statusCode, 404, 'and so does /v1/models/{id}')
  const gemini = (await app.inject({ method: 'GET', url: '/v1beta/models', headers: { 'x-goog-api-key': KEY_A } })).json().models.map((m: { name: string }) => m.name)
  t.ok(gemini.includes('models/openai/half'))
  t.notOk(gemini.includes('models/openai/keyless'), 'Gemini\'s model list too')
  t.equal((await app.inject({ method: 'GET', url: '/v1beta/models/openai/keyless', headers: { 'x-goog-api-key': KEY_A } })).statusCode, 404)
  const market = (await app.inject({ method: 'GET', url: '/console/api/models' })).json().data.map((m: { id: string }) => m.id)
  t.ok(market.includes('openai/half'))
  t.notOk(market.includes('openai/keyless'), 'and the marketplace')

  const call = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: { model: 'openai/keyless', messages: [{ role: 'user', content: 'hi' }] } })
  t.equal(call.statusCode, 503)
  t.same(call.json().error.code, 'no_credentials')
  t.equal(call.json().error.message, 'The model openai/keyless is not available on this gateway: none of its providers (openai, backup) has an API key configured.')
  t.equal(call.headers['x-should-retry'], 'false', 'a retry cannot help')
  const messages = await app.inject({ method: 'POST', url: '/v1/messages', headers: bearer(KEY_A), payload: { model: 'openai/keyless', max_tokens: 8, messages: [{ role: 'user', content: 'hi' }] } })
  t.equal(messages.statusCode, 503)
  t.match(messages.json().error.message, /none of its providers \(openai, backup\) has an API key/)

  const ready = (await app.inject({ method: 'GET', url: '/readyz' })).json()
  t.equal(ready.status, 'ready', 'the gateway serves its other models')
  t.match(ready.providers, { openai: { credentials: false }, backup: { credentials: false }, demo: { credentials: true } })
  t.same(ready.unavailable_models, ['openai/keyless'], '/readyz names the models it cannot serve')
})
