import t, { type Test } from 'tap'
import OpenAI, { toFile } from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import { GoogleGenAI } from '@google/genai'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import type { Json } from '../../engine/translation/types.js'
import { startMockAccount } from '../mock-account.js'
import { startMockUpstream, type MockUpstream, type RecordedRequest } from '../mock-upstream.js'
import { KEY_A, KEY_OTHER_ORG, mockCatalogWithGemini, testConfig } from '../helper.js'

// The objects of a provider account named in the body of a /v1 call (chat, Messages, Responses,
// Gemini, count_tokens, embeddings, images): a call reaches only the objects its organization
// made (through pass-through) at the provider it goes to, or those of a provider whose objects
// the operator shares (passthrough_shared); else 404 with nothing sent. acme made the objects
// below; rival names the same ids.

const GOOGLE_FILE = 'https://generativelanguage.googleapis.com/v1beta/files/acme1'

interface Gw { app: FastifyInstance, mock: MockUpstream, base: string }

/** The mock's three protocols (OpenAI's serving Responses natively), a second OpenAI provider, the objects acme made at each. */
async function gateway (t: Test, shared = false): Promise<Gw> {
  const mock = await startMockUpstream()
  // the bodies these calls send are the gateway's business here, not the mock's checks
  mock.validate = false
  const media = (id: string, provider: string, upstream: string, kind: 'embeddings' | 'image'): Record<string, unknown> => ({
    id, name: id, provider, upstream_model: upstream, context_length: 8192, architecture: { input_modalities: ['text'], output_modalities: [kind] }, pricing: { input: 1, output: 1 }
  })
  const catalog = mockCatalogWithGemini(mock, [
    media('openai/embed-test', 'mock-openai', 'text-embedding-up', 'embeddings'),
    media('google/embed-test', 'mock-gemini', 'gemini-embedding-up', 'embeddings'),
    media('openai/image-test', 'mock-openai', 'gpt-image-up', 'image')
  ])
  const ids = ['mock-openai', 'mock-messages', 'mock-gemini', 'mock-openai-b']
  const providers = [
    ...(catalog.providers as Array<Record<string, unknown>>).map((p) => ids.includes(p.id as string) ? { ...p, passthrough: true, passthrough_shared: shared, responses: p.id === 'mock-openai' } : p),
    { id: 'mock-openai-b', protocol: 'openai', base_url: mock.openaiBaseUrl, api_key: 'sk-second-account', passthrough: true, passthrough_shared: shared }
  ]
  const models = (catalog.models as Array<Record<string, unknown>>).map((m) => {
    // the architecture takes files; Messages models take a container as a parameter
    const architecture = { input_modalities: ['text', 'image', 'video', 'file'], output_modalities: ['text'] }
    if (m.id === 'anthropic/claude-test') return { ...m, architecture, supported_parameters: [...m.supported_parameters as string[], 'container'] }
    // the tools the provider runs (and a type the gateway does not know, taken for one) priced per use, as a call may ask for them only then
    const pricing = { ...m.pricing as Record<string, unknown>, server_tools: { file_search: 0.0025, code_interpreter: 0.03, x_retrieval: 0.001 } }
    return (m.architecture as { output_modalities: string[] }).output_modalities.includes('text') ? { ...m, architecture, pricing } : m
  })
  const two = { ...models[0], id: 'openai/two', name: 'openai/two', provider: ['mock-openai', 'mock-openai-b'], default_parameters: {} }
  const app = await buildApp(testConfig({
    providers,
    models: [...models, two],
    plugins: [{ name: 'auth' }, { name: 'usage' }],
    tenants: [
      { org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, passthrough: ids }] }] },
      { org: 'rival', projects: [{ id: 'app', keys: [{ key: KEY_OTHER_ORG, passthrough: ids }] }] }
    ]
  }), { logger: false })
  const owner = { org: 'acme', project: 'web' }
  const now = app.gateway.clock.now()
  const claim = async (provider: string, ...objects: Array<[string, string]>): Promise<void> => { await app.gateway.store.objects.claim(provider, objects.map(([kind, id]) => ({ kind, id })), owner, now) }
  await claim('mock-openai', ['files', 'file-acme'], ['vector_stores', 'vs_acme'])
  await claim('mock-openai-b', ['files', 'file-b-acme'])
  await claim('mock-messages', ['files', 'file_acme'])
  await claim('mock-gemini', ['files', 'files/acme1'], ['cached_contents', 'cachedContents/acme'])
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { await app.close(); await mock.close() })
  return { app, mock, base: `http://127.0.0.1:${(app.server.address() as { port: number }).port}` }
}

const headers = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json', 'anthropic-version': '2023-06-01' })

interface Answer { status: number, text: string, sent: RecordedRequest[] }

/** A call, and what reached the provider for it. */
async function call (g: Gw, key: string, path: string, body: unknown): Promise<Answer> {
  const before = g.mock.requests.length
  const res = await fetch(`${g.base}${path}`, { method: 'POST', headers: headers(key), body: JSON.stringify(body) })
  const text = await res.text()
  return { status: res.status, text, sent: g.mock.requests.slice(before) }
}

const user = (...content: unknown[]): Json => ({ role: 'user', content: [{ type: 'text', text: 'read it' }, ...content] })
const chat = (content: unknown[], extra: Json = {}): Json => ({ model: 'openai/gpt-test', max_tokens: 16, messages: [user(...content)], ...extra })
const messages = (content: unknown[], extra: Json = {}): Json => ({ model: 'anthropic/claude-test', max_tokens: 16, messages: [user(...content)], ...extra })
const responses = (content: unknown[], extra: Json = {}): Json => ({ model: 'openai/gpt-test', max_output_tokens: 16, input: [{ role: 'user', content: [{ type: 'input_text', text: 'read it' }, ...content] }], ...extra })
const gemini = (parts: unknown[], extra: Json = {}): Json => ({ contents: [{ role: 'user', parts: [{ text: 'read it' }, ...parts] }], ...extra })
const fileData = (fileUri: string): Json => ({ fileData: { fileUri, mimeType: 'image/png' } })
const GEN = '/v1beta/models/google/gemini-test:generateContent'

/**
 * A case: the route, the body, and what acme (who made the objects) and rival are answered
 * (`ok`: the call reached the provider); `shared`: what rival is answered when the providers'
 * objects are shared (default `ok`).
 */
type Want = 'ok' | number
interface Case { name: string, path: string, body: Json, acme: Want, rival: Want, shared?: Want }
const owned = (name: string, path: string, body: Json): Case => ({ name, path, body, acme: 'ok', rival: 404 })
const nobodys = (name: string, path: string, body: Json, status = 404): Case => ({ name, path, body, acme: status, rival: status })

const CASES: Case[] = [
  // Chat Completions
  owned('chat: a file part', '/v1/chat/completions', chat([{ type: 'file', file: { file_id: 'file-acme' } }])),
  owned('chat: a file part, streamed', '/v1/chat/completions', chat([{ type: 'file', file: { file_id: 'file-acme' } }], { stream: true })),
  owned('chat: a part of a type the gateway does not know', '/v1/chat/completions', chat([{ type: 'x_attachment', x_attachment: { file_id: 'file-acme' } }])),
  owned('chat: a tool of a type the gateway does not know', '/v1/chat/completions', chat([], { tools: [{ type: 'x_retrieval', vector_store_ids: ['vs_acme'] }] })),
  nobodys('chat: an earlier answer\'s audio (no one\'s: the gateway never saw it made)', '/v1/chat/completions', { model: 'openai/gpt-test', messages: [user(), { role: 'assistant', audio: { id: 'audio_abc' } }, user()] }),
  // translated, an id goes nowhere: the pair refuses it
  { ...nobodys('chat: a file, to a model a Messages provider serves', '/v1/chat/completions', { ...chat([{ type: 'file', file: { file_id: 'file-acme' } }]), model: 'anthropic/claude-test' }, 400), shared: 400 },
  // Messages
  owned('messages: a document by file', '/v1/messages', messages([{ type: 'document', source: { type: 'file', file_id: 'file_acme' } }])),
  owned('messages: a document by file, streamed', '/v1/messages', messages([{ type: 'document', source: { type: 'file', file_id: 'file_acme' } }], { stream: true })),
  owned('messages: an image by file', '/v1/messages', messages([{ type: 'image', source: { type: 'file', file_id: 'file_acme' } }])),
  owned('messages: a container upload', '/v1/messages', messages([{ type: 'container_upload', file_id: 'file_acme' }])),
  owned('messages: an image by file inside a document\'s content', '/v1/messages', messages([{ type: 'document', source: { type: 'content', content: [{ type: 'image', source: { type: 'file', file_id: 'file_acme' } }] } }])),
  owned('messages: a document by file in a tool result', '/v1/messages', {
    model: 'anthropic/claude-test',
    max_tokens: 16,
    tools: [{ name: 'fetch', input_schema: { type: 'object' } }],
    messages: [user(), { role: 'assistant', content: [{ type: 'tool_use', id: 'tu_1', name: 'fetch', input: { file_id: 'not-an-object: the client\'s own argument' } }] }, { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'tu_1', content: [{ type: 'document', source: { type: 'file', file_id: 'file_acme' } }] }] }]
  }),
  owned('messages: count_tokens', '/v1/messages/count_tokens', { model: 'anthropic/claude-test', messages: [user({ type: 'document', source: { type: 'file', file_id: 'file_acme' } })] }),
  nobodys('messages: a source of a type the gateway does not know', '/v1/messages', messages([{ type: 'document', source: { type: 'file_ref', ref: 'file_acme' } }]), 400),
  nobodys('messages: a container (containers are made elsewhere: no one\'s)', '/v1/messages', messages([], { container: 'container_abc' })),
  nobodys('messages: a custom skill', '/v1/messages', messages([], { container: { skills: [{ type: 'custom', skill_id: 'skill_01abc', version: 'latest' }] } })),
  { name: 'messages: one of Anthropic\'s own skills names nothing', path: '/v1/messages', body: messages([], { container: { skills: [{ type: 'anthropic', skill_id: 'pptx', version: 'latest' }] } }), acme: 'ok', rival: 'ok' },
  // Responses, at a provider that serves it itself
  owned('responses: an input file', '/v1/responses', responses([{ type: 'input_file', file_id: 'file-acme' }])),
  owned('responses: an input file, streamed', '/v1/responses', responses([{ type: 'input_file', file_id: 'file-acme' }], { stream: true })),
  owned('responses: an input image by file', '/v1/responses', responses([{ type: 'input_image', file_id: 'file-acme' }])),
  owned('responses: a file search over a vector store', '/v1/responses', responses([], { tools: [{ type: 'file_search', vector_store_ids: ['vs_acme'] }] })),
  owned('responses: a code interpreter given files', '/v1/responses', responses([], { tools: [{ type: 'code_interpreter', container: { type: 'auto', file_ids: ['file-acme'] } }] })),
  nobodys('responses: an item reference', '/v1/responses', { model: 'openai/gpt-test', input: [{ type: 'item_reference', id: 'msg_abc' }] }),
  nobodys('responses: a reasoning item by its id alone', '/v1/responses', { model: 'openai/gpt-test', input: [{ type: 'reasoning', id: 'rs_abc', summary: [] }, { role: 'user', content: 'go on' }] }),
  { name: 'responses: a reasoning item that carries its content', path: '/v1/responses', body: { model: 'openai/gpt-test', input: [{ type: 'reasoning', id: 'rs_abc', summary: [], encrypted_content: 'gAAA' }, { role: 'user', content: 'go on' }] }, acme: 'ok', rival: 'ok' },
  { ...nobodys('responses: a previous response (no history is kept)', '/v1/responses', { model: 'openai/gpt-test', input: 'go on', previous_response_id: 'resp_abc' }, 400), shared: 400 },
  // Gemini
  owned('gemini: a Files API file', GEN, gemini([fileData(GOOGLE_FILE)])),
  owned('gemini: a Files API file, streamed', '/v1beta/models/google/gemini-test:streamGenerateContent?alt=sse', gemini([fileData(GOOGLE_FILE)])),
  owned('gemini: a Files API file, streamed as one array', '/v1beta/models/google/gemini-test:streamGenerateContent', gemini([fileData(GOOGLE_FILE)])),
  owned('gemini: a Files API file, its download URI', GEN, gemini([fileData(`${GOOGLE_FILE}:download?alt=media`)])),
  owned('gemini: a Files API file under /v1', '/v1/models/google/gemini-test:generateContent', gemini([fileData(GOOGLE_FILE)])),
  owned('gemini: countTokens', '/v1beta/models/google/gemini-test:countTokens', gemini([fileData(GOOGLE_FILE)])),
  owned('gemini: countTokens of a wrapped request', '/v1beta/models/google/gemini-test:countTokens', { generateContentRequest: { model: 'models/gemini-test', ...gemini([fileData(GOOGLE_FILE)]) } }),
  owned('gemini: a cached content', GEN, gemini([], { cachedContent: 'cachedContents/acme' })),
  owned('gemini: a file by the fields\' proto names', GEN, gemini([{ file_data: { file_uri: GOOGLE_FILE, mime_type: 'image/png' } }])),
  owned('gemini: a file in a function response', GEN, {
    contents: [
      { role: 'user', parts: [{ text: 'look' }] },
      { role: 'model', parts: [{ functionCall: { name: 'look', args: {} } }] },
      { role: 'user', parts: [{ functionResponse: { name: 'look', response: { output: 'here' }, parts: [fileData(GOOGLE_FILE)] } }] }
    ],
    tools: [{ functionDeclarations: [{ name: 'look', parameters: { type: 'object' } }] }]
  }),
  owned('gemini: a file in the system instruction', GEN, { ...gemini([]), systemInstruction: { parts: [fileData(GOOGLE_FILE)] } }),
  nobodys('gemini: a file search store', GEN, gemini([], { tools: [{ fileSearch: { fileSearchStoreNames: ['fileSearchStores/abc'] } }] })),
  nobodys('gemini: a Files API URI written with an escape', GEN, gemini([fileData('https://generativelanguage.googleapis.com/v1beta/%66iles/acme1')]), 400),
  nobodys('gemini: a Files API URI with a dot segment', GEN, gemini([fileData('https://generativelanguage.googleapis.com/v1beta/files/acme1/../acme2')]), 400),
  { name: 'gemini: a URL of another host is media', path: GEN, body: gemini([fileData('https://example.com/files/acme1.png')]), acme: 'ok', rival: 'ok' },
  owned('gemini: embedContent', '/v1beta/models/google/embed-test:embedContent', { content: { parts: [{ text: 'read it' }, fileData(GOOGLE_FILE)] } }),
  owned('gemini: batchEmbedContents', '/v1beta/models/google/embed-test:batchEmbedContents', { requests: [{ model: 'models/google/embed-test', content: { parts: [fileData(GOOGLE_FILE)] } }] }),
  // into a Gemini provider from another protocol: a media URL becomes fileData, a Files API URI there a file of its account
  owned('chat to Gemini: an image URL that is a Files API URI', '/v1/chat/completions', { ...chat([{ type: 'image_url', image_url: { url: GOOGLE_FILE } }]), model: 'google/gemini-test' }),
  owned('chat to Gemini: a video URL that is a Files API URI, streamed', '/v1/chat/completions', { ...chat([{ type: 'video_url', video_url: { url: GOOGLE_FILE } }]), model: 'google/gemini-test', stream: true }),
  owned('messages to Gemini: an image URL that is a Files API URI', '/v1/messages', { ...messages([{ type: 'image', source: { type: 'url', url: GOOGLE_FILE } }]), model: 'google/gemini-test' }),
  owned('responses to Gemini: an image URL that is a Files API URI', '/v1/responses', { ...responses([{ type: 'input_image', image_url: GOOGLE_FILE }]), model: 'google/gemini-test' }),
  { ...nobodys('gemini to Messages: a cached content goes nowhere but its provider', '/v1beta/models/anthropic/claude-test:generateContent', gemini([], { cachedContent: 'cachedContents/acme' }), 400), shared: 400 },
  { name: 'responses to Messages: a reasoning item by its id alone is dropped there', path: '/v1/responses', body: { model: 'anthropic/claude-test', input: [{ type: 'reasoning', id: 'rs_abc', summary: [] }, { role: 'user', content: 'go on' }] }, acme: 'ok', rival: 'ok' },
  { name: 'gemini to chat: a Files API URI is a URL the OpenAI provider fetches', path: '/v1beta/models/openai/gpt-test:generateContent', body: gemini([fileData(GOOGLE_FILE)]), acme: 'ok', rival: 'ok' },
  // embeddings and images: a field the gateway does not know is searched
  owned('embeddings: a field that names a file', '/v1/embeddings', { model: 'openai/embed-test', input: 'read it', extra: { file_id: 'file-acme' } }),
  owned('images: a field that names a file', '/v1/images/generations', { model: 'openai/image-test', prompt: 'a lighthouse', reference: { file_id: 'file-acme' } })
]

t.test('a /v1 call reaches only the objects its organization made at the provider', async (t) => {
  const g = await gateway(t)
  for (const c of CASES) {
    for (const [who, key, want] of [['acme', KEY_A, c.acme], ['rival', KEY_OTHER_ORG, c.rival]] as const) {
      const res = await call(g, key, c.path, c.body)
      if (want === 'ok') {
        t.ok(res.status < 400 && res.sent.length > 0, `${c.name}, ${who}: reaches the provider (${res.status} ${res.text.slice(0, 200)})`)
      } else {
        t.equal(res.status, want, `${c.name}, ${who}: ${want} (${res.text.slice(0, 200)})`)
        t.equal(res.sent.length, 0, `${c.name}, ${who}: nothing sent`)
      }
    }
  }
})

t.test('the refusal is in the route\'s error shape', async (t) => {
  const g = await gateway(t)
  const openai = await call(g, KEY_OTHER_ORG, '/v1/chat/completions', chat([{ type: 'file', file: { file_id: 'file-acme' } }]))
  t.match(JSON.parse(openai.text), { error: { code: 'object_not_found', type: 'invalid_request_error', message: /no object file-acme of your organization at provider mock-openai/ } })
  const anthropic = await call(g, KEY_OTHER_ORG, '/v1/messages', messages([{ type: 'document', source: { type: 'file', file_id: 'file_acme' } }], { stream: true }))
  t.match(JSON.parse(anthropic.text), { type: 'error', error: { type: 'not_found_error', message: /file_acme/ } }, 'Messages, before any stream begins')
  const google = await call(g, KEY_OTHER_ORG, '/v1beta/models/google/gemini-test:streamGenerateContent?alt=sse', gemini([fileData(GOOGLE_FILE)]))
  t.match(JSON.parse(google.text), { error: { code: 404, status: 'NOT_FOUND', message: /files\/acme1/ } }, 'Google\'s')
  const unreadable = await call(g, KEY_A, '/v1/messages', messages([{ type: 'image', source: { type: 'file_ref', ref: 'x' } }]))
  t.match(JSON.parse(unreadable.text), { type: 'error', error: { type: 'invalid_request_error', message: /messages\[0\]\.content\[1\]\.source\.type may name an object of provider mock-messages/ } })
})

t.test('what reaches the provider is what was checked', async (t) => {
  const g = await gateway(t)
  const translated = await call(g, KEY_A, '/v1/chat/completions', { ...chat([{ type: 'image_url', image_url: { url: GOOGLE_FILE } }]), model: 'google/gemini-test' })
  t.equal(translated.status, 200)
  t.match((translated.sent[0]?.body as Json).contents, [{ parts: [{ text: 'read it' }, { fileData: { fileUri: GOOGLE_FILE } }] }], 'the Gemini provider was sent the file it holds for acme')
  const native = await call(g, KEY_A, '/v1/responses', responses([{ type: 'input_file', file_id: 'file-acme' }]))
  t.equal(native.sent[0]?.path, '/v1/responses', 'a Responses call went to the provider\'s own Responses API')
  t.match((native.sent[0]?.body as Json).input, [{ content: [{}, { type: 'input_file', file_id: 'file-acme' }] }])
})

t.test('failover: a call naming an object goes only to the providers that hold it', async (t) => {
  const g = await gateway(t)
  // openai/two is served by mock-openai and mock-openai-b: two accounts
  const atB = await call(g, KEY_A, '/v1/chat/completions', { ...chat([{ type: 'file', file: { file_id: 'file-b-acme' } }]), model: 'openai/two' })
  t.equal(atB.status, 200)
  t.same(atB.sent.map((r) => r.apiKey), ['sk-second-account'], 'the file made at the second account: sent there alone')
  const plain = await call(g, KEY_A, '/v1/chat/completions', { ...chat([]), model: 'openai/two' })
  t.equal(plain.sent.length, 1, 'a call naming nothing goes as the routing says')

  g.mock.faults = { status: { status: 503 } }
  const down = await call(g, KEY_A, '/v1/chat/completions', { ...chat([{ type: 'file', file: { file_id: 'file-acme' } }]), model: 'openai/two' })
  t.ok(down.status >= 500, `the provider holding it fails: the call fails (${down.status})`)
  t.ok(down.sent.length > 0 && down.sent.every((r) => r.apiKey !== 'sk-second-account'), 'and never fails over to an account where the file is not')
  g.mock.faults = {}
  t.equal((await call(g, KEY_OTHER_ORG, '/v1/chat/completions', { ...chat([{ type: 'file', file: { file_id: 'file-b-acme' } }]), model: 'openai/two' })).status, 404, 'another organization: at neither')
})

t.test('passthrough_shared: every key reaches every object of the account through /v1 too', async (t) => {
  const g = await gateway(t, true)
  for (const c of CASES) {
    const res = await call(g, KEY_OTHER_ORG, c.path, c.body)
    const want = c.shared ?? 'ok'
    // an id still goes only to an account of its own protocol, and a previous response is refused for what it is
    if (want === 'ok') t.ok(res.status < 400 && res.sent.length > 0, `${c.name}: reaches the provider (${res.status} ${res.text.slice(0, 200)})`)
    else t.same([res.status, res.sent.length], [want, 0], `${c.name}: ${want}, nothing sent`)
  }
})

t.test('a body that names no object pays no store lookup', async (t) => {
  const g = await gateway(t)
  const objects = g.app.gateway.store.objects
  let lookups = 0
  const owned = objects.owned.bind(objects)
  objects.owned = (provider, org, ids) => { lookups++; return owned(provider, org, ids) }
  t.teardown(() => { objects.owned = owned })
  for (const [path, body] of [
    ['/v1/chat/completions', chat([])],
    ['/v1/chat/completions', { ...chat([], { stream: true }), tools: [{ type: 'function', function: { name: 'read', parameters: { type: 'object', properties: { file_id: { type: 'string' } } } } }] }],
    ['/v1/chat/completions', chat([{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }])],
    ['/v1/chat/completions', { ...chat([{ type: 'image_url', image_url: { url: 'https://example.com/a.png' } }]), model: 'google/gemini-test' }],
    ['/v1/messages', messages([], { metadata: { user_id: 'u1' } })],
    ['/v1/responses', responses([])],
    [GEN, gemini([fileData('https://example.com/a.png')])],
    ['/v1/embeddings', { model: 'openai/embed-test', input: ['a', 'b'] }]
  ] as const) {
    const res = await call(g, KEY_A, path, body)
    t.equal(res.status, 200, `${path}: answered`)
  }
  t.equal(lookups, 0, 'no lookup')
  await call(g, KEY_A, '/v1/chat/completions', chat([{ type: 'file', file: { file_id: 'file-acme' } }]))
  t.equal(lookups, 1, 'one lookup for a call naming a file at its one provider')
})

t.test('objects made through pass-through, named on /v1 with the official SDKs', async (t) => {
  const acct = await startMockAccount()
  const model = (id: string, provider: string, upstream: string): Record<string, unknown> => ({ id, name: id, provider, upstream_model: upstream, context_length: 100000, architecture: { input_modalities: ['text', 'image', 'file'], output_modalities: ['text'] }, pricing: { input: 1, output: 2 } })
  const ids = ['acct-openai', 'acct-messages', 'acct-gemini']
  const app = await buildApp(testConfig({
    providers: [
      { id: 'acct-openai', protocol: 'openai', base_url: `${acct.url}/openai/v1`, api_key: 'sk-acct-openai', passthrough: true },
      { id: 'acct-messages', protocol: 'messages', base_url: `${acct.url}/anthropic`, api_key: 'sk-ant-acct', passthrough: true },
      { id: 'acct-gemini', protocol: 'gemini', base_url: `${acct.url}/gemini`, api_key: 'AIza-acct', passthrough: true }
    ],
    models: [model('openai/acct', 'acct-openai', 'gpt-acct'), model('anthropic/acct', 'acct-messages', 'claude-acct'), model('google/acct', 'acct-gemini', 'gemini-acct')],
    plugins: [{ name: 'auth' }, { name: 'usage' }],
    tenants: [
      { org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, passthrough: ids }] }] },
      { org: 'rival', projects: [{ id: 'app', keys: [{ key: KEY_OTHER_ORG, passthrough: ids }] }] }
    ]
  }), { logger: false })
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { await app.close(); await acct.close() })
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  const statusOf = async (p: Promise<unknown>): Promise<number> => { try { await p; return 200 } catch (err) { return (err as { status?: number }).status ?? 0 } }

  const openai = (key: string, path = '/v1'): OpenAI => new OpenAI({ apiKey: key, baseURL: `${base}${path}`, maxRetries: 0 })
  const file = await openai(KEY_A, '/passthrough/acct-openai').files.create({ file: await toFile(Buffer.from('acme rows'), 'a.jsonl'), purpose: 'user_data' })
  const ask = (key: string): Promise<unknown> => openai(key).chat.completions.create({ model: 'openai/acct', messages: [{ role: 'user', content: [{ type: 'text', text: 'sum it up' }, { type: 'file', file: { file_id: file.id } }] }] })
  const before = acct.requests.length
  t.equal(await statusOf(ask(KEY_OTHER_ORG)), 404, 'OpenAI: another organization names the file: not found')
  t.equal(acct.requests.length, before, 'nothing reached the provider')
  t.equal(await statusOf(ask(KEY_A)), 200, 'its organization names it')

  const form = new FormData()
  form.append('file', new Blob(['acme notes']), 'notes.txt')
  const made = await (await fetch(`${base}/passthrough/acct-messages/v1/files`, { method: 'POST', headers: { 'x-api-key': KEY_A, 'anthropic-beta': 'files-api-2025-04-14' }, body: form })).json() as { id: string }
  const claude = (key: string): Promise<unknown> => new Anthropic({ apiKey: key, baseURL: base, maxRetries: 0 }).messages.create({ model: 'anthropic/acct', max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'file', file_id: made.id } }, { type: 'text', text: 'sum it up' }] }] })
  const sent = acct.requests.length
  t.equal(await statusOf(claude(KEY_OTHER_ORG)), 404, 'Anthropic: another organization\'s file')
  t.equal(acct.requests.length, sent, 'nothing reached the provider')
  t.equal(await statusOf(claude(KEY_A)), 200, 'its own')

  const uploaded = await new GoogleGenAI({ apiKey: KEY_A, httpOptions: { baseUrl: `${base}/passthrough/acct-gemini` } }).files.upload({ file: new Blob(['acme gemini notes'], { type: 'text/plain' }), config: { mimeType: 'text/plain' } })
  const uri = `https://generativelanguage.googleapis.com/v1beta/${uploaded.name as string}`
  const generate = (key: string): Promise<unknown> => new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: base } }).models.generateContent({ model: 'google/acct', contents: [{ role: 'user', parts: [{ fileData: { fileUri: uri, mimeType: 'text/plain' } }, { text: 'sum it up' }] }] })
  const asked = acct.requests.length
  t.equal(await statusOf(generate(KEY_OTHER_ORG)), 404, 'Gemini: another organization\'s file')
  t.equal(acct.requests.length, asked, 'nothing reached the provider')
  t.equal(await statusOf(generate(KEY_A)), 200, 'its own')
})
