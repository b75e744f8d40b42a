import t, { type Test } from 'tap'
import { Writable } from 'node:stream'
import Anthropic from '@anthropic-ai/sdk'
import { GoogleGenAI } from '@google/genai'
import { OAuth2Client } from 'google-auth-library'
import OpenAI, { AzureOpenAI } from 'openai'
import type { FastifyInstance } from 'fastify'
import { ServiceAccountTokens, readServiceAccount } from '../../engine/upstream/platforms/vertex-token.js'
import { FakeClock, KEY_A, KEY_B, mockCatalog, testConfig, UPSTREAM_ANTHROPIC_KEY, UPSTREAM_OPENAI_KEY } from '../helper.js'
import { AZURE_KEY, startMockPlatforms, type MockPlatforms } from '../mock-platforms.js'
import { startMockUpstream, type MockUpstream } from '../mock-upstream.js'
import { tempDir } from '../temp-dir.js'

// Azure OpenAI and Google Vertex AI end to end. The local platforms (test/mock-platforms.ts) are
// first proved by the platforms' own clients (openai's AzureOpenAI, @google/genai with vertexai:
// true), so that what the gateway is tested against is what the platforms take and answer; then
// the gateway in front of them is called by the openai, Anthropic and Google SDKs, JSON and
// streamed, and each call's record is checked against the usage the client saw.

const PRICE = { input: 3, cached_input: 0.3, output: 15 }
const model = (id: string, provider: unknown, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  id,
  name: id,
  provider,
  context_length: 200000,
  architecture: { input_modalities: ['text'], output_modalities: ['text'] },
  supported_parameters: ['temperature', 'max_tokens', 'stop', 'tools', 'tool_choice'],
  pricing: PRICE,
  ...extra
})
const nano = (prompt: number, completion: number): number => prompt * PRICE.input * 1000 + completion * PRICE.output * 1000

interface World { app: FastifyInstance, base: string, mock: MockUpstream, cloud: MockPlatforms, clock: FakeClock, logs: () => string, saFile: string }

const ADMIN = 'admin-token-platforms-0123456789'

async function world (t: Test): Promise<World> {
  const clock = new FakeClock(Date.now())
  const mock = await startMockUpstream()
  const cloud = await startMockPlatforms(mock, { now: clock.now })
  const saFile = cloud.serviceAccountFile(tempDir('platforms'))
  const catalog = mockCatalog(mock)
  const { buildApp } = await import('../../app.js')
  const config = testConfig({
    plugins: [{ name: 'auth' }, { name: 'usage' }],
    admin: { token: ADMIN },
    providers: [
      ...(catalog.providers as unknown[]),
      { id: 'azure', protocol: 'openai', platform: 'azure', base_url: cloud.url, api_key: AZURE_KEY, api_version: '2024-10-21', passthrough: true },
      { id: 'azure-r', protocol: 'openai', platform: 'azure', base_url: cloud.url, api_key: AZURE_KEY, api_version: '2024-10-21', responses: true },
      { id: 'vertex', protocol: 'gemini', platform: 'vertex', base_url: cloud.url, project: 'test-project', location: 'us-central1', credentials_file: saFile, passthrough: true },
      { id: 'vertex-claude', protocol: 'messages', platform: 'vertex', base_url: cloud.url, project: 'test-project', location: 'us-east5', credentials_file: saFile, passthrough: true }
    ],
    tenants: [{ org: 'acme', balance_usd: 25, projects: [{ id: 'web', keys: [{ key: KEY_A, name: 'a', models: ['*'], passthrough: ['azure', 'vertex', 'vertex-claude'] }, { key: KEY_B, name: 'b', models: ['google/*'], passthrough: ['azure', 'vertex'] }] }] }],
    models: [
      model('azure/gpt', 'azure', { upstream_model: 'gpt-4o-deploy' }),
      model('azure/gpt-r', 'azure-r', { upstream_model: 'gpt-4o-deploy' }),
      model('google/gemini-v', 'vertex', { upstream_model: 'gemini-2.5-flash' }),
      model('anthropic/claude-v', 'vertex-claude', { upstream_model: 'claude-sonnet-4-5@20250929' }),
      model('anthropic/claude-multi', [{ id: 'mock-messages', upstream_model: 'claude-sonnet-4-5' }, { id: 'vertex-claude', upstream_model: 'claude-sonnet-4-5@20250929' }]),
      model('openai/gpt-multi', [{ id: 'mock-openai', upstream_model: 'gpt-4o' }, { id: 'azure', upstream_model: 'gpt-4o-deploy' }]),
      model('openai/embed-az', 'azure', { upstream_model: 'embed-deploy', architecture: { input_modalities: ['text'], output_modalities: ['embeddings'] }, pricing: { input: 0.1, output: 0 } })
    ]
  })
  let logs = ''
  const stream = new Writable({ write (chunk: Buffer, _enc, cb) { logs += chunk.toString(); cb() } })
  const app = await buildApp(config, { logger: { level: 'info', stream }, clock })
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { await app.close(); await cloud.close(); await mock.close() })
  return { app, base: `http://127.0.0.1:${(app.server.address() as { port: number }).port}`, mock, cloud, clock, logs: () => logs, saFile }
}

const rowOf = async (app: FastifyInstance, model: string): Promise<import('../../engine/store/types.js').UsageRow> => {
  const rows = await app.gateway.store.usage.page({}, 100)
  const row = rows.find((r) => r.model === model)
  if (row === undefined) throw new Error(`no usage record for ${model}`)
  return row
}

t.test('the mock platforms are what the platforms\' own clients expect', async (t) => {
  const { mock, cloud, clock } = await world(t)
  const azure = new AzureOpenAI({ endpoint: cloud.url, apiKey: AZURE_KEY, apiVersion: '2024-10-21', deployment: 'gpt-4o-deploy', maxRetries: 0 })
  const chat = await azure.chat.completions.create({ model: 'gpt-4o-deploy', messages: [{ role: 'user', content: 'hello there azure' }] })
  t.match(chat.choices[0]?.message.content, /Echo: hello there azure/, 'AzureOpenAI parses the mock\'s answer')
  const sent = cloud.seen.at(-1)
  t.equal(sent?.headers['api-key'], AZURE_KEY, 'the SDK sends the key as api-key')
  t.equal(sent?.headers.authorization, undefined, 'and no Authorization')
  t.match(sent?.url, /^\/openai\/deployments\/gpt-4o-deploy\/chat\/completions\?api-version=2024-10-21$/, 'the deployment URL the SDK builds')
  const stream = await azure.chat.completions.create({ model: 'gpt-4o-deploy', messages: [{ role: 'user', content: 'stream it' }], stream: true })
  let text = ''
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content ?? ''
  t.match(text, /Echo: stream it/, 'and its stream')
  const emb = await new AzureOpenAI({ endpoint: cloud.url, apiKey: AZURE_KEY, apiVersion: '2024-10-21', deployment: 'embed-deploy', maxRetries: 0 }).embeddings.create({ model: 'embed-deploy', input: 'a heron', encoding_format: 'float' })
  t.equal(emb.data[0]?.embedding.length, 256, 'embeddings')
  cloud.contentFilter()
  await t.rejects(azure.chat.completions.create({ model: 'gpt-4o-deploy', messages: [{ role: 'user', content: 'x' }] }), { status: 400, code: 'content_filter' }, 'the content-filter refusal as the SDK reads it')
  // the Responses API, as AzureOpenAI calls it (a dated preview api-version, the deployment in the body)
  const azureR = new AzureOpenAI({ endpoint: cloud.url, apiKey: AZURE_KEY, apiVersion: '2025-04-01-preview', maxRetries: 0 })
  const resp = await azureR.responses.create({ model: 'gpt-4o-deploy', input: 'hello azure responses' })
  t.match(resp.output_text, /Echo: hello azure responses/, 'AzureOpenAI parses the mock\'s Responses answer')
  t.match(cloud.seen.at(-1)?.url, /^\/openai\/responses\?api-version=2025-04-01-preview$/, 'the SDK\'s Responses URL')
  t.equal(cloud.seen.at(-1)?.body?.model, 'gpt-4o-deploy', 'the deployment in the body')

  // Vertex: a token from the mock's token endpoint, by the gateway's own token code, then @google/genai
  const account = readServiceAccount(cloud.serviceAccountFile(tempDir('sa')))
  const token = await new ServiceAccountTokens(account, clock.now, 'test').get()
  t.equal(cloud.exchanges(), 1, 'the JWT bearer assertion was verified and answered')
  const authClient = new OAuth2Client()
  authClient.setCredentials({ access_token: token, expiry_date: Date.now() + 3_600_000 })
  const ai = new GoogleGenAI({ vertexai: true, project: 'test-project', location: 'us-central1', googleAuthOptions: { authClient }, httpOptions: { baseUrl: cloud.url, apiVersion: 'v1' } })
  const g = await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'hello vertex' })
  t.match(g.text, /Echo: hello vertex/, '@google/genai (vertexai) parses generateContent')
  t.match(cloud.seen.at(-1)?.url, /^\/v1\/projects\/test-project\/locations\/us-central1\/publishers\/google\/models\/gemini-2\.5-flash:generateContent$/, 'the SDK\'s Vertex URL')
  let streamed = ''
  for await (const chunk of await ai.models.generateContentStream({ model: 'gemini-2.5-flash', contents: 'stream vertex' })) streamed += chunk.text ?? ''
  t.match(streamed, /Echo: stream vertex/, 'and streamGenerateContent?alt=sse')
  const counted = await ai.models.countTokens({ model: 'gemini-2.5-flash', contents: 'count me please' })
  t.ok((counted.totalTokens ?? 0) > 0, 'and countTokens')
  const other = new OAuth2Client()
  other.setCredentials({ access_token: 'ya29.not-issued-here', expiry_date: Date.now() + 3_600_000 })
  const bad = new GoogleGenAI({ vertexai: true, project: 'test-project', location: 'us-central1', googleAuthOptions: { authClient: other }, httpOptions: { baseUrl: cloud.url, apiVersion: 'v1' } })
  await t.rejects(bad.models.generateContent({ model: 'gemini-2.5-flash', contents: 'x' }), /UNAUTHENTICATED/, 'a token it did not issue is refused')
  t.ok(mock.requests.length > 0)
})

t.test('Azure serving the Responses API itself (responses: true): the v1 route, the deployment in the body, billed exactly', async (t) => {
  const { app, base, cloud } = await world(t)
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY_A, maxRetries: 0 })
  const r = await openai.responses.create({ model: 'azure/gpt-r', input: 'hello from responses' })
  t.match(r.output_text, /Echo: hello from responses/)
  const sent = cloud.seen.at(-1)
  t.equal(sent?.url, '/openai/v1/responses', 'Azure\'s v1 Responses route')
  t.equal(sent?.body?.model, 'gpt-4o-deploy', 'the deployment named in the body')
  t.equal(sent?.headers['api-key'], AZURE_KEY, 'the key as api-key')
  t.equal(sent?.headers.authorization, undefined, 'never in Authorization')
  const row = await rowOf(app, 'azure/gpt-r')
  t.match(row, { provider: 'azure-r', endpoint: 'responses', prompt_tokens: r.usage?.input_tokens, completion_tokens: r.usage?.output_tokens })
  t.equal(row.cost_nano, nano(r.usage?.input_tokens ?? 0, r.usage?.output_tokens ?? 0), 'billed exactly')
  let text = ''
  let usage: { input_tokens: number, output_tokens: number } | undefined
  for await (const ev of await openai.responses.create({ model: 'azure/gpt-r', input: 'stream from responses', stream: true })) {
    if (ev.type === 'response.output_text.delta') text += ev.delta
    if (ev.type === 'response.completed') usage = ev.response.usage ?? undefined
  }
  t.match(text, /Echo: stream from responses/, 'and its stream')
  t.equal(cloud.seen.at(-1)?.url, '/openai/v1/responses')
  t.ok(usage !== undefined && usage.output_tokens > 0, 'with its usage')
  // a chat client on the same model: translated to Responses on Azure's route
  const c = await openai.chat.completions.create({ model: 'azure/gpt-r', messages: [{ role: 'user', content: 'chat to azure responses' }] })
  t.match(c.choices[0]?.message.content, /chat to azure responses/)
})

t.test('Azure through the gateway: the openai, Anthropic and Google SDKs, JSON and streamed, billed exactly', async (t) => {
  const { app, base, cloud } = await world(t)
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY_A, maxRetries: 0 })
  const a = await openai.chat.completions.create({ model: 'azure/gpt', messages: [{ role: 'user', content: 'hello from openai' }] })
  t.match(a.choices[0]?.message.content, /Echo: hello from openai/)
  const sent = cloud.seen.at(-1)
  t.match(sent?.url, /^\/openai\/deployments\/gpt-4o-deploy\/chat\/completions\?api-version=2024-10-21$/, 'the deployment URL')
  t.equal(sent?.headers['api-key'], AZURE_KEY, 'the key as api-key')
  t.equal(sent?.headers.authorization, undefined, 'never in Authorization')
  let row = await rowOf(app, 'azure/gpt')
  t.equal(row.provider, 'azure')
  t.equal(row.prompt_tokens, a.usage?.prompt_tokens, 'the record has the usage the client saw')
  t.equal(row.cost_nano, nano(a.usage?.prompt_tokens ?? 0, a.usage?.completion_tokens ?? 0), 'billed exactly')
  t.equal(row.attempts[0]?.upstream_model, 'gpt-4o-deploy')

  const anthropic = new Anthropic({ baseURL: base, apiKey: KEY_A, maxRetries: 0 })
  const m = await anthropic.messages.create({ model: 'azure/gpt', max_tokens: 100, messages: [{ role: 'user', content: 'hello from anthropic' }] })
  t.match(m.content[0]?.type === 'text' ? m.content[0].text : '', /Echo: hello from anthropic/, 'Messages client, translated')
  const ms = anthropic.messages.stream({ model: 'azure/gpt', max_tokens: 100, messages: [{ role: 'user', content: 'stream from anthropic' }] })
  const final = await ms.finalMessage()
  t.match(final.content[0]?.type === 'text' ? final.content[0].text : '', /Echo: stream from anthropic/, 'Messages stream, translated')
  row = (await app.gateway.store.usage.page({}, 1))[0] as typeof row
  t.equal(row.stream, 1)
  t.equal(row.cost_nano, nano(final.usage.input_tokens, final.usage.output_tokens), 'the stream billed exactly')

  const google = new GoogleGenAI({ apiKey: KEY_A, httpOptions: { baseUrl: base } })
  const g = await google.models.generateContent({ model: 'azure/gpt', contents: 'hello from google' })
  t.match(g.text, /Echo: hello from google/, 'Gemini client, translated')
  let gs = ''
  for await (const c of await google.models.generateContentStream({ model: 'azure/gpt', contents: 'stream from google' })) gs += c.text ?? ''
  t.match(gs, /Echo: stream from google/, 'Gemini stream, translated')

  const emb = await openai.embeddings.create({ model: 'openai/embed-az', input: 'a heron', encoding_format: 'float' })
  t.equal(emb.data[0]?.embedding.length, 256, 'embeddings at the deployment')
  t.match(cloud.seen.at(-1)?.url, /^\/openai\/deployments\/embed-deploy\/embeddings\?api-version=/)

  cloud.contentFilter()
  const refused = await openai.chat.completions.create({ model: 'azure/gpt', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e) as { status?: number, code?: string }
  t.equal(refused.status, 400, 'a content-filter refusal is the client\'s 400')
  t.equal(refused.code, 'content_filter', 'with its code')
  cloud.contentFilter()
  const refusedM = await anthropic.messages.create({ model: 'azure/gpt', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e) as { status?: number, error?: { error?: { type?: string } } }
  t.equal(refusedM.status, 400, 'and a Messages client\'s 400')
})

t.test('Vertex through the gateway: Gemini and Anthropic models, service-account tokens reused and renewed', async (t) => {
  const { app, base, cloud, clock, mock } = await world(t)
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY_A, maxRetries: 0 })
  const anthropic = new Anthropic({ baseURL: base, apiKey: KEY_A, maxRetries: 0 })
  const google = new GoogleGenAI({ apiKey: KEY_A, httpOptions: { baseUrl: base } })

  const a = await openai.chat.completions.create({ model: 'google/gemini-v', messages: [{ role: 'user', content: 'hello gemini on vertex' }] })
  t.match(a.choices[0]?.message.content, /Echo: hello gemini on vertex/, 'chat client → Gemini on Vertex')
  t.match(cloud.seen.at(-1)?.url, /^\/v1\/projects\/test-project\/locations\/us-central1\/publishers\/google\/models\/gemini-2\.5-flash:generateContent$/)
  t.equal(cloud.seen.at(-1)?.headers.authorization, `Bearer ${cloud.issued[0] as string}`, 'the token from the service account')
  t.equal(cloud.seen.at(-1)?.headers['x-goog-api-key'], undefined, 'no API key')
  let row = await rowOf(app, 'google/gemini-v')
  t.equal(row.cost_nano, nano(a.usage?.prompt_tokens ?? 0, a.usage?.completion_tokens ?? 0), 'billed exactly')

  let gs = ''
  for await (const c of await google.models.generateContentStream({ model: 'google/gemini-v', contents: 'stream gemini on vertex' })) gs += c.text ?? ''
  t.match(gs, /Echo: stream gemini on vertex/, 'Gemini client stream → streamGenerateContent?alt=sse')
  t.match(cloud.seen.at(-1)?.url, /:streamGenerateContent\?alt=sse$/)
  const counted = await google.models.countTokens({ model: 'google/gemini-v', contents: 'count these words' })
  t.ok((counted.totalTokens ?? 0) > 0, 'countTokens by Vertex\'s own method')
  t.match(cloud.seen.at(-1)?.url, /:countTokens$/)

  const m = await anthropic.messages.create({ model: 'anthropic/claude-v', max_tokens: 100, messages: [{ role: 'user', content: 'hello claude on vertex' }] })
  t.match(m.content[0]?.type === 'text' ? m.content[0].text : '', /Echo: hello claude on vertex/, 'Messages client → rawPredict')
  const raw = cloud.seen.at(-1)
  t.match(raw?.url, /\/publishers\/anthropic\/models\/claude-sonnet-4-5%4020250929:rawPredict$/, 'the model in the path, escaped')
  t.equal(raw?.body?.anthropic_version, 'vertex-2023-10-16')
  t.equal(raw?.body?.model, undefined, 'no model in the body')
  row = (await app.gateway.store.usage.page({}, 1))[0] as typeof row
  t.equal(row.cost_nano, nano(m.usage.input_tokens, m.usage.output_tokens), 'billed exactly')
  const s = await anthropic.messages.stream({ model: 'anthropic/claude-v', max_tokens: 100, messages: [{ role: 'user', content: 'stream claude' }] }).finalMessage()
  t.match(s.content[0]?.type === 'text' ? s.content[0].text : '', /Echo: stream claude/, 'streamRawPredict')
  t.match(cloud.seen.at(-1)?.url, /:streamRawPredict$/)
  const oc = await openai.chat.completions.create({ model: 'anthropic/claude-v', stream: true, stream_options: { include_usage: true }, messages: [{ role: 'user', content: 'chat stream claude' }] })
  let ot = ''
  for await (const c of oc) ot += c.choices[0]?.delta?.content ?? ''
  t.match(ot, /Echo: chat stream claude/, 'chat client stream → streamRawPredict')
  // Messages' count_tokens has no Vertex method: the gateway's estimate answers
  const before = cloud.seen.length
  const est = await anthropic.messages.countTokens({ model: 'anthropic/claude-v', messages: [{ role: 'user', content: 'how many' }] })
  t.ok(est.input_tokens > 0, 'count_tokens estimated')
  t.equal(cloud.seen.length, before, 'nothing sent to Vertex for it')

  // each provider has its own token (two providers here, on one service account)
  t.equal(cloud.exchanges(), 2, 'one token per provider for every call so far')
  clock.advance(54 * 60_000)
  await openai.chat.completions.create({ model: 'google/gemini-v', messages: [{ role: 'user', content: 'x' }] })
  t.equal(cloud.exchanges(), 2, 'still reused 6 minutes before it expires')
  clock.advance(2 * 60_000)
  await openai.chat.completions.create({ model: 'google/gemini-v', messages: [{ role: 'user', content: 'x' }] })
  t.equal(cloud.exchanges(), 3, 'renewed within 5 minutes of its expiry')
  t.equal(cloud.seen.at(-1)?.headers.authorization, `Bearer ${cloud.issued[2] as string}`, 'the new token sent')

  // expired meanwhile, five calls at once: one exchange for all of them
  clock.advance(60 * 60_000)
  await Promise.all(Array.from({ length: 5 }, async (_, i) => await openai.chat.completions.create({ model: 'google/gemini-v', messages: [{ role: 'user', content: `call ${i}` }] })))
  t.equal(cloud.exchanges(), 4, 'one exchange at a time, however many calls wait')

  // the token refused (revoked upstream): renewed once, the call sent again
  cloud.revokeTokens()
  const again = await openai.chat.completions.create({ model: 'google/gemini-v', messages: [{ role: 'user', content: 'after revocation' }] })
  t.match(again.choices[0]?.message.content, /after revocation/, 'answered after the 401')
  t.equal(cloud.exchanges(), 5, 'one renewal for the 401')
  const revoked = await rowOf(app, 'google/gemini-v')
  t.same(revoked.attempts.map((a) => [a.outcome, a.status]), [['client_error', 401], ['ok', 200]], 'the refused attempt and the one after it, on the record')

  // a token endpoint that refuses: the provider's calls fail, naming nothing secret
  const vertexSecrets = app.gateway.upstreams.get('vertex')?.secrets ?? []
  t.ok(vertexSecrets.some((s) => s.startsWith('ya29.')), 'issued tokens are among the provider\'s secrets (masked in errors)')
  t.ok(mock.requests.every((r) => !JSON.stringify(r.headers).includes('ya29.')), 'no token reaches the model server behind')
})

t.test('one model on several platforms: each attempt with its own upstream name and credentials', async (t) => {
  const { app, base, cloud, mock } = await world(t)
  const anthropic = new Anthropic({ baseURL: base, apiKey: KEY_A, maxRetries: 0 })
  // the vendor API fails (its path only: Vertex's calls reach the mock by its own route)
  mock.faults.status = { status: 529, times: 1, path: '/v1/messages' }
  const m = await anthropic.messages.create({ model: 'anthropic/claude-multi', max_tokens: 50, messages: [{ role: 'user', content: 'fail over' }] })
  t.match(m.content[0]?.type === 'text' ? m.content[0].text : '', /Echo: fail over/)
  const row = await rowOf(app, 'anthropic/claude-multi')
  t.same(row.attempts.map((a) => [a.provider, a.upstream_model, a.outcome]), [['mock-messages', 'claude-sonnet-4-5', 'server_error'], ['vertex-claude', 'claude-sonnet-4-5@20250929', 'ok']], 'each attempt on its own name')
  t.equal(row.provider, 'vertex-claude')
  const vendorCall = mock.requests.find((r) => r.path === '/v1/messages' && r.apiKey === UPSTREAM_ANTHROPIC_KEY)
  t.equal((vendorCall?.body as { model?: string }).model, 'claude-sonnet-4-5', 'the vendor API got its name, with its key')
  t.match(cloud.seen.at(-1)?.url, /claude-sonnet-4-5%4020250929:rawPredict$/, 'Vertex got its own')

  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY_A, maxRetries: 0 })
  mock.faults.status = { status: 503, times: 1, path: '/v1/chat/completions' }
  const c = await openai.chat.completions.create({ model: 'openai/gpt-multi', messages: [{ role: 'user', content: 'fail over to azure' }] })
  t.match(c.choices[0]?.message.content, /Echo: fail over to azure/)
  const r2 = await rowOf(app, 'openai/gpt-multi')
  t.same(r2.attempts.map((a) => [a.provider, a.upstream_model, a.outcome]), [['mock-openai', 'gpt-4o', 'server_error'], ['azure', 'gpt-4o-deploy', 'ok']])
  t.equal(mock.requests.find((r) => r.apiKey === UPSTREAM_OPENAI_KEY)?.path, '/v1/chat/completions', 'the vendor attempt with the vendor key')
  t.equal(cloud.seen.at(-1)?.headers['api-key'], AZURE_KEY, 'the Azure attempt with the Azure key')
})

t.test('a platform refusing the gateway\'s credentials: 502 naming the provider, never the credential', async (t) => {
  const clock = new FakeClock(Date.now())
  const mock = await startMockUpstream()
  const cloud = await startMockPlatforms(mock, { now: clock.now })
  const { buildApp } = await import('../../app.js')
  const wrong = 'azure-wrong-key-0123456789abcdef'
  const app = await buildApp(testConfig({
    plugins: [{ name: 'auth' }, { name: 'usage' }],
    providers: [
      { id: 'azure', protocol: 'openai', platform: 'azure', base_url: cloud.url, api_key: wrong, api_version: '2024-10-21' },
      { id: 'vertex', protocol: 'gemini', platform: 'vertex', base_url: cloud.url, project: 'p', location: 'us-central1', access_token: 'ya29.static-token-not-issued' }
    ],
    models: [model('azure/gpt', 'azure', { upstream_model: 'd' }), model('google/v', 'vertex', { upstream_model: 'gemini-2.5-flash' })]
  }), { logger: false, clock })
  t.teardown(async () => { await app.close(); await cloud.close(); await mock.close() })
  for (const m of ['azure/gpt', 'google/v']) {
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { authorization: `Bearer ${KEY_A}` }, payload: { model: m, messages: [{ role: 'user', content: 'x' }] } })
    t.equal(res.statusCode, 502, m)
    t.match(res.json().error.message, m === 'azure/gpt' ? /azure/ : /vertex/, 'the provider named')
    t.notMatch(res.body, /azure-wrong-key|ya29/, 'no credential in the answer')
  }
  t.equal(cloud.seen.filter((s) => s.url.includes('publishers')).length, 1, 'a static access token is not renewed: one call')
})

t.test('operators see each provider\'s platform; traces name it; no credential in the log, an answer or the console', async (t) => {
  const { app, base, cloud, logs, mock, saFile } = await world(t)
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY_A, maxRetries: 0 })
  await openai.chat.completions.create({ model: 'google/gemini-v', messages: [{ role: 'user', content: 'x' }] })
  await openai.chat.completions.create({ model: 'azure/gpt', messages: [{ role: 'user', content: 'x' }] })
  cloud.revokeTokens()
  await openai.chat.completions.create({ model: 'google/gemini-v', messages: [{ role: 'user', content: 'y' }] })
  mock.faults.status = { status: 500, times: 1, path: '/v1/chat/completions' }
  await openai.chat.completions.create({ model: 'openai/gpt-multi', messages: [{ role: 'user', content: 'z' }] })

  const res = await app.inject({ method: 'GET', url: '/admin/v1/providers', headers: { authorization: `Bearer ${ADMIN}` } })
  t.equal(res.statusCode, 200)
  const byId = new Map((res.json().data as Array<{ id: string, platform: string | null, base_url: string | null }>).map((p) => [p.id, p]))
  t.equal(byId.get('azure')?.platform, 'azure')
  t.equal(byId.get('vertex')?.platform, 'vertex')
  t.equal(byId.get('mock-openai')?.platform, null, 'the vendor\'s own API: no platform')

  const { readFileSync } = await import('node:fs')
  const pem = (JSON.parse(readFileSync(saFile, 'utf8')) as { private_key: string }).private_key
  const keyLine = pem.split('\n')[3] as string
  const secrets = [AZURE_KEY, ...cloud.issued, keyLine]
  const console = await app.inject({ method: 'GET', url: '/console/admin', headers: { authorization: `Bearer ${ADMIN}` } })
  for (const secret of secrets) {
    t.notOk(logs().includes(secret), `not in the log: ${secret.slice(0, 10)}…`)
    t.notOk(res.body.includes(secret), 'nor in /admin/v1/providers (the console\'s provider view)')
    t.notOk(console.body.includes(secret), 'nor in the console page')
  }

  const { callSpans } = await import('../../engine/ops/tracing/index.js')
  const outcome = {
    traceId: '0123456789abcdef0123456789abcdef',
    endpoint: 'chat.completions',
    model: 'openai/gpt-multi',
    upstreamModel: 'gpt-4o',
    provider: 'azure',
    status: 'ok',
    httpStatus: 200,
    t0: 0,
    t1: 10,
    stream: false,
    billed: true,
    costNano: 0,
    overheadMs: null,
    principal: null,
    usage: { prompt_tokens: 1, completion_tokens: 1, cached_input_tokens: 0 },
    attempts: [
      { provider: 'mock-openai', upstreamModel: 'gpt-4o', outcome: 'server_error', status: 500, start: 0, end: 1, n: 1, retry: false, failover: false },
      { provider: 'azure', upstreamModel: 'gpt-4o-deploy', outcome: 'ok', status: 200, start: 1, end: 2, n: 2, retry: false, failover: true }
    ]
  } as unknown as Parameters<typeof callSpans>[0]
  const spans = callSpans(outcome, (id) => app.gateway.upstreams.get(id)?.platform.traceName ?? null)
  t.same(spans.map((s) => [s.attributes['gen_ai.provider.name'], s.attributes['modelgate.provider'], s.attributes['gen_ai.request.model']]), [
    ['azure.openai', 'azure', 'openai/gpt-multi'],
    ['mock-openai', 'mock-openai', 'gpt-4o'],
    ['azure.openai', 'azure', 'gpt-4o-deploy']
  ], 'gen_ai.provider.name is the platform\'s; each attempt names the model as that provider does')
  t.equal(app.gateway.upstreams.get('vertex')?.platform.traceName, 'gcp.vertex_ai')
})

t.test('pass-through on Azure and Vertex AI: the gateway\'s credentials, the model in the path granted and billed', async (t) => {
  const { app, base, cloud } = await world(t)
  // openai's own Azure client, pointed at the gateway's pass-through, its key the gateway's
  const azure = new AzureOpenAI({ endpoint: `${base}/passthrough/azure`, apiKey: KEY_A, apiVersion: '2024-10-21', deployment: 'gpt-4o-deploy', maxRetries: 0 })
  const chat = await azure.chat.completions.create({ model: 'gpt-4o-deploy', messages: [{ role: 'user', content: 'through the pass-through' }] })
  t.match(chat.choices[0]?.message.content, /Echo: through the pass-through/)
  t.equal(cloud.seen.at(-1)?.headers['api-key'], AZURE_KEY, 'the provider\'s key sent, not the client\'s')
  let row = (await app.gateway.store.usage.page({}, 1))[0]
  t.equal(row?.model, 'azure/gpt', 'the deployment in the path is the catalog model billed')
  t.equal(row?.cost_nano, nano(chat.usage?.prompt_tokens ?? 0, chat.usage?.completion_tokens ?? 0), 'billed exactly')
  const other = new AzureOpenAI({ endpoint: `${base}/passthrough/azure`, apiKey: KEY_B, apiVersion: '2024-10-21', deployment: 'gpt-4o-deploy', maxRetries: 0 })
  const refused = await other.chat.completions.create({ model: 'gpt-4o-deploy', messages: [{ role: 'user', content: 'x' }] }).catch((e: unknown) => e) as { status?: number }
  t.equal(refused.status, 404, 'a deployment of a model the key may not use: 404, nothing sent')

  const token = new OAuth2Client()
  token.setCredentials({ access_token: KEY_A, expiry_date: Date.now() + 3_600_000 })
  const ai = new GoogleGenAI({ vertexai: true, project: 'test-project', location: 'us-central1', googleAuthOptions: { authClient: token }, httpOptions: { baseUrl: `${base}/passthrough/vertex`, apiVersion: 'v1' } })
  const g = await ai.models.generateContent({ model: 'gemini-2.5-flash', contents: 'vertex pass-through' })
  t.match(g.text, /Echo: vertex pass-through/, '@google/genai (vertexai) through the pass-through')
  t.match(cloud.seen.at(-1)?.headers.authorization, /^Bearer ya29\./, 'the gateway\'s own token sent')
  row = (await app.gateway.store.usage.page({}, 1))[0]
  t.equal(row?.model, 'google/gemini-v')
  t.ok((row?.cost_nano ?? 0) > 0, 'billed')
  const elsewhere = await app.inject({ method: 'POST', url: '/passthrough/vertex/v1/projects/someone-else/locations/us-central1/publishers/google/models/gemini-2.5-flash:generateContent', headers: { authorization: `Bearer ${KEY_A}` }, payload: { contents: [{ role: 'user', parts: [{ text: 'x' }] }] } })
  t.equal(elsewhere.statusCode, 400, 'another project: refused, nothing sent')

  const predicts = (): number => cloud.seen.filter((x) => x.url.includes(':rawPredict')).length
  const sentBefore = predicts()
  const raw = await app.inject({
    method: 'POST',
    url: '/passthrough/vertex-claude/v1/projects/test-project/locations/us-east5/publishers/anthropic/models/claude-sonnet-4-5@20250929:rawPredict',
    headers: { authorization: `Bearer ${KEY_A}` },
    payload: { anthropic_version: 'vertex-2023-10-16', max_tokens: 50, messages: [{ role: 'user', content: 'raw predict' }] }
  })
  t.equal(raw.statusCode, 200, raw.body)
  t.match(raw.json().content[0].text, /Echo: raw predict/)
  t.equal(predicts(), sentBefore + 1, 'one rawPredict sent')
  t.equal(cloud.seen.at(-1)?.body?.model, undefined, 'no model added to a rawPredict body')
  row = (await app.gateway.store.usage.page({}, 1))[0]
  t.equal(row?.model, 'anthropic/claude-v', 'the model in the path billed')
  t.equal(row?.cost_nano, nano(raw.json().usage.input_tokens, raw.json().usage.output_tokens))
})

t.test('one model on three platforms: the vendor\'s API, Bedrock (signed InvokeModel) and Vertex AI, each on its own name and credentials', async (t) => {
  const { startMockBedrock, TEST_KEYS } = await import('../mock-bedrock.js')
  const clock = new FakeClock(Date.now())
  const mock = await startMockUpstream()
  const cloud = await startMockPlatforms(mock, { now: clock.now })
  const bedrock = await startMockBedrock()
  const saFile = cloud.serviceAccountFile(tempDir('three'))
  const catalog = mockCatalog(mock)
  const { buildApp } = await import('../../app.js')
  const BEDROCK_NAME = 'us.anthropic.claude-sonnet-4-5-20250929-v1:0'
  const app = await buildApp(testConfig({
    plugins: [{ name: 'auth' }, { name: 'usage' }],
    providers: [
      ...(catalog.providers as unknown[]),
      { id: 'bedrock-claude', protocol: 'messages', platform: 'bedrock', region: 'us-east-1', base_url: bedrock.url, aws: { access_key_id: 'AKIDTESTBEDROCK1', secret_access_key: TEST_KEYS.AKIDTESTBEDROCK1.secret } },
      { id: 'vertex-claude', protocol: 'messages', platform: 'vertex', base_url: cloud.url, project: 'test-project', location: 'us-east5', credentials_file: saFile }
    ],
    models: [model('anthropic/claude-sonnet-4-5', [
      { id: 'mock-messages', upstream_model: 'claude-sonnet-4-5' },
      { id: 'bedrock-claude', upstream_model: BEDROCK_NAME },
      { id: 'vertex-claude', upstream_model: 'claude-sonnet-4-5@20250929' }
    ])]
  }), { logger: false, clock })
  t.teardown(async () => { await app.close(); await bedrock.close(); await cloud.close(); await mock.close() })
  const ask = async (content: string): Promise<unknown> => await app.inject({ method: 'POST', url: '/v1/messages', headers: { 'x-api-key': KEY_A }, payload: { model: 'anthropic/claude-sonnet-4-5', max_tokens: 50, messages: [{ role: 'user', content }] } })
  const attempts = async (): Promise<Array<[string, string | null, string]>> => ((await app.gateway.store.usage.page({}, 1))[0]?.attempts ?? []).map((a) => [a.provider, a.upstream_model, a.outcome])

  mock.faults.status = { status: 529, times: 1, path: '/v1/messages' }
  const viaBedrock = await ask('to bedrock') as { statusCode: number, body: string }
  t.equal(viaBedrock.statusCode, 200, viaBedrock.body)
  t.same(await attempts(), [['mock-messages', 'claude-sonnet-4-5', 'server_error'], ['bedrock-claude', BEDROCK_NAME, 'ok']])
  t.equal(bedrock.last().auth, 'AKIDTESTBEDROCK1', 'Bedrock\'s attempt signed with the AWS keys')
  t.match(bedrock.last().path, /^\/model\/us\.anthropic\.claude-sonnet-4-5-20250929-v1%3A0\/invoke$/, 'on Bedrock\'s name')

  mock.faults.status = { status: 529, times: 1, path: '/v1/messages' }
  bedrock.failNext('ServiceUnavailableException', 503, 'Bedrock is unavailable')
  const viaVertex = await ask('to vertex') as { statusCode: number, body: string }
  t.equal(viaVertex.statusCode, 200, viaVertex.body)
  t.match(viaVertex.body, /Echo: to vertex/)
  t.same(await attempts(), [['mock-messages', 'claude-sonnet-4-5', 'server_error'], ['bedrock-claude', BEDROCK_NAME, 'server_error'], ['vertex-claude', 'claude-sonnet-4-5@20250929', 'ok']], 'three platforms, three names')
  t.match(cloud.seen.at(-1)?.headers.authorization, /^Bearer ya29\./, 'Vertex AI\'s attempt with its token')
})
