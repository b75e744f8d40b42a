import t, { type Test } from 'tap'
import { request as httpRequest, type IncomingHttpHeaders } from 'node:http'
import { connect } from 'node:net'
import OpenAI, { toFile } from 'openai'
import { GoogleGenAI } from '@google/genai'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { startMockAccount, type MockAccount } from '../mock-account.js'
import { startLenientUpstream } from '../mock-lenient.js'
import { startMockUpstream, type MockUpstream } from '../mock-upstream.js'
import { mockMcpHttp } from '../mock-mcp.js'
import { eventually, KEY_A, KEY_B, KEY_OTHER_ORG, mockCatalogWithGemini, testConfig } from '../helper.js'

// What one tenant can reach of a provider it shares with others through pass-through, and what
// it can make the gateway do to the others:
//   - a request target is classified as the provider routes it (a fragment or an escape never
//     turns a metered call free, nor reaches a model the key was not granted);
//   - a client's own request never counts against a provider's health (`Expect` and the like);
//   - the objects of a provider's account (files, batches...) are the organization's that made
//     them, unless the operator shares them (`passthrough_shared`);
//   - a JSON body nested past the depth limit is refused on every route, pass-through included.

const ADMIN = 'tenants-admin-token-0123456789'

interface Raw { status: number, text: string, headers: IncomingHttpHeaders }

/** A request sent with its target exactly as written: fetch and inject would parse it as a URL first. */
async function raw (base: string, method: string, target: string, headers: Record<string, string>, body?: string): Promise<Raw> {
  const { port } = new URL(base)
  return await new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path: target, headers }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => { text += d })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, text, headers: res.headers }) })
    })
    req.on('error', reject)
    req.end(body)
  })
}

const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}`, 'content-type': 'application/json' })
const chat = (model: string, extra: Record<string, unknown> = {}): string => JSON.stringify({ model, messages: [{ role: 'user', content: 'hello there' }], ...extra })
const contents = { contents: [{ role: 'user', parts: [{ text: 'hello there' }] }] }

interface MockGw { app: FastifyInstance, mock: MockUpstream, base: string }

/**
 * The gateway in front of the mock upstream (its three protocols passed through): acme (KEY_A),
 * rival (KEY_OTHER_ORG, granted google/gemini-test alone) and a broke organization (KEY_B).
 */
async function mockGateway (t: Test, extra: Record<string, unknown> = {}): Promise<MockGw> {
  const mock = await startMockUpstream()
  const c = mockCatalogWithGemini(mock)
  const ids = ['mock-openai', 'mock-messages', 'mock-gemini']
  const providers = (c.providers as Array<Record<string, unknown>>).map((p) => ids.includes(p.id as string) ? { ...p, passthrough: true } : p)
  const app = await buildApp(testConfig({
    ...c,
    providers,
    plugins: [{ name: 'auth' }, { name: 'balance' }, { name: 'usage' }],
    tenants: [
      { org: 'acme', balance_usd: 10, projects: [{ id: 'web', keys: [{ key: KEY_A, passthrough: ids }] }] },
      { org: 'rival', balance_usd: 10, projects: [{ id: 'app', keys: [{ key: KEY_OTHER_ORG, models: ['google/gemini-test'], passthrough: ids }] }] },
      { org: 'broke', balance_usd: 0, projects: [{ id: 'app', keys: [{ key: KEY_B, passthrough: ids }] }] }
    ],
    ...extra
  }), { logger: false })
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { await app.close(); await mock.close() })
  return { app, mock, base: `http://127.0.0.1:${(app.server.address() as { port: number }).port}` }
}

t.test('finding 1: a request target is classified as the provider routes it; a model its path names needs the grant', async (t) => {
  const g = await mockGateway(t)
  const openai = '/passthrough/mock-openai'
  const gemini = '/passthrough/mock-gemini/v1beta/models'
  // targets a provider decodes or normalises before it routes them; each read as the gateway
  // reads paths would be another endpoint (free, unmetered) or another model
  const forms: Array<[string, string]> = [
    [`${openai}/chat/completions#/files`, chat('gpt-upstream-name')],
    [`${openai}/chat/completions#/cancel`, chat('gpt-upstream-name')],
    [`${openai}/%63hat/completions`, chat('gpt-upstream-name')],
    [`${openai}/%2563hat/completions`, chat('gpt-upstream-name')],
    [`${openai}/chat%2Fcompletions`, chat('gpt-upstream-name')],
    [`${openai}/chat/completions;x=/files`, chat('gpt-upstream-name')],
    [`${openai}/chat/completions/`, chat('gpt-upstream-name')],
    [`${openai}/chat/completions.`, chat('gpt-upstream-name')],
    [`${openai}/chat//completions`, chat('gpt-upstream-name')],
    [`${openai}/files/../chat/completions`, chat('gpt-upstream-name')],
    [`${openai}/files/%2e%2e/chat/completions`, chat('gpt-upstream-name')],
    [`${openai}/files\\..\\chat\\completions`, chat('gpt-upstream-name')],
    [`${gemini}/gemini-upstream-name%3AgenerateContent`, JSON.stringify(contents)],
    [`${gemini}/gemini-upstream-name%3agenerateContent`, JSON.stringify(contents)],
    [`${gemini}/gemini-upstream-n%61me:generateContent`, JSON.stringify(contents)],
    [`${gemini}/other-model:generateContent#/files`, JSON.stringify(contents)],
    [`${gemini}/gemini-upstream-name:generateContent#x`, JSON.stringify(contents)]
  ]
  for (const [target, body] of forms) {
    for (const key of [KEY_A, KEY_B]) {
      const res = await raw(g.base, 'POST', target, bearer(key), body)
      t.equal(res.status, 400, `${target}: refused`)
      t.match(JSON.parse(res.text), { error: { message: /request target is refused/ } }, `${target}: says why`)
    }
  }
  // a prefix the router matched decoded
  t.not((await raw(g.base, 'POST', '/passthrough/mock-%6fpenai/chat/completions', bearer(KEY_A), chat('gpt-upstream-name'))).status, 200, 'an escape in the provider\'s id')
  t.equal(g.mock.requests.length, 0, 'none reached the provider')
  t.equal((await raw(g.base, 'GET', `${openai}/models`, { ...bearer(KEY_A), 'x-http-method-override': 'POST' })).status, 400, 'a method override header is refused')
  t.equal(g.mock.requests.length, 0, 'nor that one')

  // the broke organization: a metered call is refused however it is spelt, never free
  for (const target of [`${openai}/chat/completions`, `${openai}/Chat/Completions`, `${openai}/CHAT/completions?x=/files`]) {
    t.equal((await raw(g.base, 'POST', target, bearer(KEY_B), chat('gpt-upstream-name'))).status, 402, `${target}: metered, refused on an empty balance`)
  }
  t.equal((await raw(g.base, 'POST', `${gemini}/gemini-upstream-name:GenerateContent`, bearer(KEY_B), JSON.stringify(contents))).status, 402, 'a Gemini method in another case: metered')
  t.equal(g.mock.requests.length, 0)

  // a provider that routes paths case-insensitively runs /Chat/Completions as a chat call: it is billed as one
  const lenient = await startLenientUpstream()
  t.teardown(async () => { await lenient.close() })
  const app = await buildApp(testConfig({
    providers: [{ id: 'lenient', protocol: 'openai', base_url: `${lenient.url}/v1`, api_key: 'sk-lenient', passthrough: true }],
    models: [{ id: 'openai/lenient', name: 'openai/lenient', provider: 'lenient', upstream_model: 'gpt-lenient', context_length: 1000, architecture: { input_modalities: ['text'], output_modalities: ['text'] }, pricing: { input: 1, output: 2 } }],
    plugins: [{ name: 'auth' }, { name: 'usage' }],
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, passthrough: ['lenient'] }] }] }]
  }), { logger: false })
  t.teardown(async () => { await app.close() })
  const cased = await app.inject({ method: 'POST', url: '/passthrough/lenient/Chat/Completions', headers: bearer(KEY_A), payload: chat('gpt-lenient') })
  t.equal(cased.statusCode, 200)
  t.match(lenient.served, [{ route: 'chat', model: 'gpt-lenient' }], 'the provider ran a chat call')
  const [row] = await app.gateway.store.usage.page({}, 1)
  t.match(row, { model: 'openai/lenient', prompt_tokens: 100, completion_tokens: 10 }, 'metered as that chat call')
  t.ok((row?.cost_nano ?? 0) > 0, 'and charged')

  // rival's key is granted google/gemini-test alone: a path naming another model is refused, whatever the method costs
  const narrow = { authorization: `Bearer ${KEY_OTHER_ORG}` }
  const before = g.mock.requests.length
  t.equal((await raw(g.base, 'GET', `${openai}/models/gpt-upstream-name`, narrow)).status, 404, 'an OpenAI model read: not granted')
  t.equal((await raw(g.base, 'GET', `${gemini}/other-model`, narrow)).status, 404, 'a Gemini model read: no such model')
  t.equal((await raw(g.base, 'POST', `${gemini}/other-model:countTokens`, { ...narrow, 'content-type': 'application/json' }, JSON.stringify(contents))).status, 404, 'a free method: the model still needs the grant')
  t.equal(g.mock.requests.length, before, 'nothing sent')
  t.equal((await raw(g.base, 'GET', `${gemini}/gemini-upstream-name`, narrow)).status < 500, true, 'the granted model is reached')
  t.equal(g.mock.requests.length, before + 1)
})

t.test('finding 3: a client\'s own request never counts against a provider\'s health', async (t) => {
  const g = await mockGateway(t, { upstream: { breaker: { failures: 2, open_s: 30 } }, server: { body_limit_mb: 1 } })
  const health = (): unknown => g.app.gateway.upstreams.status()['mock-openai']
  const other = async (): Promise<number> => (await fetch(`${g.base}/v1/chat/completions`, { method: 'POST', headers: bearer(KEY_OTHER_ORG), body: chat('google/gemini-test') })).status
  const openaiChat = async (key: string): Promise<number> => (await fetch(`${g.base}/v1/chat/completions`, { method: 'POST', headers: bearer(key), body: chat('openai/gpt-test') })).status

  // Expect: 100-continue (curl's for a large body), which undici cannot send: the header stays here
  for (let i = 0; i < 6; i++) {
    const res = await raw(g.base, 'POST', '/passthrough/mock-openai/chat/completions', { ...bearer(KEY_A), expect: '100-continue' }, chat('gpt-upstream-name'))
    t.equal(res.status, 200, `Expect: 100-continue, call ${i + 1}: answered`)
  }
  t.equal(g.mock.requests.at(-1)?.headers.expect, undefined, 'the provider never sees it')
  t.match(health(), { state: 'closed', failures: 0 }, 'the breaker stays closed')
  t.equal(await openaiChat(KEY_A), 200, 'the provider serves everyone')

  // headers that belong to the client's connection only
  await raw(g.base, 'GET', '/passthrough/mock-openai/models', { ...bearer(KEY_A), connection: 'keep-alive, x-hop-secret', 'x-hop-secret': 'mine', upgrade: 'h2c', te: 'trailers', 'x-kept': 'yes' })
  const up = g.mock.requests.at(-1)?.headers ?? {}
  t.equal(up['x-hop-secret'], undefined, 'a header the client\'s Connection names is not forwarded')
  t.equal(up.upgrade, undefined)
  t.equal(up.te, undefined)
  t.equal(up['x-kept'], 'yes', 'other headers are')

  // an upload its client cuts short, six times
  const { port } = new URL(g.base)
  for (let i = 0; i < 6; i++) {
    const sent = g.mock.requests.length
    await new Promise<void>((resolve) => {
      const socket = connect(Number(port), '127.0.0.1', () => {
        socket.write(`POST /passthrough/mock-openai/files HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${KEY_A}\r\nContent-Type: application/octet-stream\r\nContent-Length: 500000\r\n\r\n`)
        socket.write('x'.repeat(1000))
        // the upload is under way at the provider before the client goes
        void eventually(2000, () => g.mock.requests.length, (n) => n > sent).then(() => { socket.destroy(); resolve() })
      })
      socket.on('error', () => {})
    })
  }
  const aborted = await eventually(5000, async () => (await g.app.gateway.store.usage.page({ status: ['client_aborted'] }, 100)).length, (n) => n >= 6)
  t.equal(aborted, 6, 'each cut upload ended as the client\'s abort')
  t.match(health(), { state: 'closed', failures: 0 }, 'and none counted against the provider')

  // uploads past the body limit, sent chunked (no length to refuse them by up front): the gateway
  // answers 413 and closes the connection, which the client may see first while it still writes
  for (let i = 0; i < 3; i++) {
    const res = await new Promise<number>((resolve) => {
      const req = httpRequest({ host: '127.0.0.1', port, method: 'POST', path: '/passthrough/mock-openai/files', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/octet-stream', connection: 'close' } }, (r) => { r.resume(); resolve(r.statusCode ?? 0) })
      req.on('error', () => { resolve(0) })
      const chunk = Buffer.alloc(64 * 1024, 120)
      for (let k = 0; k < 24; k++) req.write(chunk)
      req.end()
    })
    t.ok(res === 413 || res === 0, `upload past the limit ${i + 1}: 413 (or the connection closed under the client)`)
  }
  const tooLarge = await eventually(5000, async () => (await g.app.gateway.store.usage.page({ endpoint: 'passthrough' }, 100)).filter((r) => r.attempts.some((a) => a.error === 'MG_REQUEST_TOO_LARGE')), (rows) => rows.length >= 3)
  t.ok(tooLarge.length >= 3 && tooLarge.every((r) => r.attempts.every((a) => a.outcome === 'request_error')), 'each recorded as the request\'s own error')
  t.match(health(), { state: 'closed', failures: 0 }, 'the breaker is still closed')
  t.equal(await other(), 200, 'another organization\'s calls are answered')
  t.equal(await openaiChat(KEY_A), 200)

  // what the provider does wrong still counts
  g.mock.faults = { status: { status: 503, times: 2 } }
  await openaiChat(KEY_A)
  await openaiChat(KEY_A)
  t.match(health(), { state: 'open' }, 'a provider\'s own 5xx opens the breaker')
  const attempts = (await g.app.gateway.store.usage.page({ endpoint: 'passthrough' }, 100)).flatMap((r) => r.attempts)
  t.notOk(attempts.some((a) => a.outcome === 'network_error'), 'no client request was recorded as a network failure of the provider')
})

interface AcctGw { app: FastifyInstance, acct: MockAccount, base: string }

/** The gateway in front of one account at three providers, shared by acme (KEY_A) and rival (KEY_OTHER_ORG). */
async function accountGateway (t: Test, shared = false): Promise<AcctGw> {
  const acct = await startMockAccount()
  const model = (id: string, provider: string, upstream: string): Record<string, unknown> => ({ id, name: id, provider, upstream_model: upstream, context_length: 100000, architecture: { input_modalities: ['text', 'image', 'file'], output_modalities: ['text'] }, pricing: { input: 1, output: 2 } })
  const ids = ['acct-openai', 'acct-messages', 'acct-gemini']
  const app = await buildApp(testConfig({
    providers: [
      { id: 'acct-openai', protocol: 'openai', base_url: `${acct.url}/openai/v1`, api_key: 'sk-acct-openai', passthrough: true, passthrough_shared: shared },
      { id: 'acct-messages', protocol: 'messages', base_url: `${acct.url}/anthropic`, api_key: 'sk-ant-acct', passthrough: true, passthrough_shared: shared },
      { id: 'acct-gemini', protocol: 'gemini', base_url: `${acct.url}/gemini`, api_key: 'AIza-acct', passthrough: true, passthrough_shared: shared }
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
  return { app, acct, base: `http://127.0.0.1:${(app.server.address() as { port: number }).port}` }
}

const ids = <T extends { id: string }>(items: T[]): string[] => items.map((f) => f.id)
/** The HTTP status an SDK call failed with (200 when it did not fail). */
async function statusOf (call: Promise<unknown>): Promise<number> {
  try {
    await call
    return 200
  } catch (err) {
    return (err as { status?: number }).status ?? 0
  }
}
async function all<T> (pages: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = []
  for await (const item of pages) out.push(item)
  return out
}

t.test('finding 4: OpenAI files and batches made through pass-through are their organization\'s (the official SDK)', async (t) => {
  const g = await accountGateway(t)
  const client = (key: string): OpenAI => new OpenAI({ apiKey: key, baseURL: `${g.base}/passthrough/acct-openai`, maxRetries: 0 })
  const acme = client(KEY_A)
  const rival = client(KEY_OTHER_ORG)
  const mine = await acme.files.create({ file: await toFile(Buffer.from('acme secret rows'), 'a.jsonl'), purpose: 'batch' })
  const theirs = await rival.files.create({ file: await toFile(Buffer.from('rival rows'), 'b.jsonl'), purpose: 'batch' })
  t.same(ids(await all(acme.files.list())), [mine.id], 'a list holds the organization\'s own files')
  t.same(ids(await all(rival.files.list())), [theirs.id], 'and only them, for each')

  const before = g.acct.requests.length
  for (const [what, attempt] of [
    ['retrieve', async () => await rival.files.retrieve(mine.id)],
    ['download', async () => await rival.files.content(mine.id)],
    ['delete', async () => await rival.files.delete(mine.id)],
    ['batch over it', async () => await rival.batches.create({ input_file_id: mine.id, endpoint: '/v1/chat/completions', completion_window: '24h' })],
    ['chat naming it', async () => await rival.chat.completions.create({ model: 'gpt-acct', messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: mine.id } }] }] })]
  ] as const) {
    t.equal(await statusOf(attempt()), 404, `another organization's file: ${what} answers 404`)
  }
  t.equal(g.acct.requests.length, before, 'nothing reached the provider')
  t.match(await (await acme.files.content(mine.id)).text(), /acme secret rows/, 'its organization downloads it')
  t.equal((await acme.chat.completions.create({ model: 'gpt-acct', messages: [{ role: 'user', content: [{ type: 'file', file: { file_id: mine.id } }] }] })).object, 'chat.completion', 'and names it in a call')

  const batch = await acme.batches.create({ input_file_id: mine.id, endpoint: '/v1/chat/completions', completion_window: '24h' })
  t.equal(await statusOf(rival.batches.retrieve(batch.id)), 404, 'another organization\'s batch: not found')
  t.equal(await statusOf(rival.batches.cancel(batch.id)), 404, 'nor cancelled')
  t.same(ids(await all(rival.batches.list())), [], 'nor listed')
  const done = await acme.batches.retrieve(batch.id)
  const output = done.output_file_id as string
  t.match(output, /^file-/, 'the batch ran')
  t.match(await (await acme.files.content(output)).text(), /results of/, 'its output file, which the provider made, is the batch\'s organization\'s')
  t.equal(await statusOf(rival.files.content(output)), 404, 'and no one else\'s')
  t.same(ids(await all(acme.files.list())), [mine.id, output])

  await acme.files.delete(mine.id)
  const after = g.acct.requests.length
  t.equal(await statusOf(acme.files.retrieve(mine.id)), 404, 'a deleted file is forgotten')
  t.equal(g.acct.requests.length, after, 'and not asked for')
})

t.test('finding 4: a list is read on until it holds a page of the caller\'s own; its cursors name nothing of another organization\'s', async (t) => {
  const g = await accountGateway(t)
  const client = (key: string): OpenAI => new OpenAI({ apiKey: key, baseURL: `${g.base}/passthrough/acct-openai`, maxRetries: 0 })
  const acme = client(KEY_A)
  const rival = client(KEY_OTHER_ORG)
  const made: Record<string, string[]> = { acme: [], rival: [] }
  for (let i = 0; i < 12; i++) {
    const who = i % 4 === 1 ? 'acme' : 'rival'
    made[who]?.push((await (who === 'acme' ? acme : rival).files.create({ file: await toFile(Buffer.from(`row ${i}`), `${i}.jsonl`), purpose: 'batch' })).id)
  }
  t.same(ids(await all(acme.files.list({ limit: 2 }))), made.acme, 'every one of acme\'s files, pages of two at a time')
  t.same(ids(await all(rival.files.list({ limit: 5 }))), made.rival, 'every one of rival\'s')
  const res = await fetch(`${g.base}/passthrough/acct-openai/files?limit=2`, { headers: { authorization: `Bearer ${KEY_A}` } })
  const text = await res.text()
  const page = JSON.parse(text) as { data: Array<{ id: string }>, has_more: boolean, first_id: string, last_id: string }
  t.same(ids(page.data), made.acme.slice(0, 2))
  t.match(page, { has_more: true, first_id: made.acme[0], last_id: made.acme[1] })
  t.notOk((made.rival).some((id) => text.includes(id)), 'no id of another organization\'s in the answer')
  const whole = await (await fetch(`${g.base}/passthrough/acct-openai/files`, { headers: { authorization: `Bearer ${KEY_A}` } })).json() as { data: Array<{ id: string }>, has_more: boolean }
  t.same(ids(whole.data), made.acme, 'with no limit, the provider\'s page of them, uncut')
  t.equal(whole.has_more, false)
})

t.test('finding 4: Anthropic files and message batches are their organization\'s', async (t) => {
  const g = await accountGateway(t)
  const url = `${g.base}/passthrough/acct-messages/v1`
  const as = (key: string): Record<string, string> => ({ 'x-api-key': key, 'anthropic-beta': 'files-api-2025-04-14' })
  const form = new FormData()
  form.append('file', new Blob(['acme notes']), 'notes.txt')
  const made = await (await fetch(`${url}/files`, { method: 'POST', headers: as(KEY_A), body: form })).json() as { id: string }
  t.match(made.id, /^file_/)
  const listed = async (key: string): Promise<string[]> => ((await (await fetch(`${url}/files`, { headers: as(key) })).json()) as { data: Array<{ id: string }> }).data.map((f) => f.id)
  t.same(await listed(KEY_A), [made.id])
  t.same(await listed(KEY_OTHER_ORG), [], 'another organization lists none of them')
  const before = g.acct.requests.length
  for (const [method, path] of [['GET', `/files/${made.id}`], ['GET', `/files/${made.id}/content`], ['DELETE', `/files/${made.id}`]]) {
    const res = await fetch(`${url}${path}`, { method, headers: as(KEY_OTHER_ORG) })
    t.equal(res.status, 404, `${method} ${path} by another organization`)
    t.match(await res.json(), { type: 'error', error: { type: 'not_found_error' } }, 'in the Messages shape')
  }
  const naming = await fetch(`${url}/messages`, { method: 'POST', headers: { ...as(KEY_OTHER_ORG), 'content-type': 'application/json' }, body: JSON.stringify({ model: 'claude-acct', max_tokens: 10, messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'file', file_id: made.id } }] }] }) })
  t.equal(naming.status, 404, 'a message naming another organization\'s file')
  t.equal(g.acct.requests.length, before, 'nothing reached the provider')
  t.match(await (await fetch(`${url}/files/${made.id}/content`, { headers: as(KEY_A) })).text(), /acme notes/, 'its organization downloads it')

  const batch = await (await fetch(`${url}/messages/batches`, { method: 'POST', headers: { ...as(KEY_A), 'content-type': 'application/json' }, body: JSON.stringify({ requests: [] }) })).json() as { id: string }
  t.equal((await fetch(`${url}/messages/batches/${batch.id}/results`, { headers: as(KEY_OTHER_ORG) })).status, 404, 'another organization\'s batch results')
  t.equal((await fetch(`${url}/messages/batches/${batch.id}/results`, { headers: as(KEY_A) })).status, 200, 'its own')
})

t.test('finding 4: Gemini files (the official SDK\'s resumable upload) and cached contents are their organization\'s', async (t) => {
  const g = await accountGateway(t)
  const ai = (key: string): GoogleGenAI => new GoogleGenAI({ apiKey: key, httpOptions: { baseUrl: `${g.base}/passthrough/acct-gemini` } })
  const acme = ai(KEY_A)
  const rival = ai(KEY_OTHER_ORG)
  const file = await acme.files.upload({ file: new Blob(['acme gemini notes'], { type: 'text/plain' }), config: { mimeType: 'text/plain' } })
  const name = file.name as string
  t.match(name, /^files\//, 'uploaded through the gateway, its upload URL the gateway\'s')
  t.ok(g.acct.requests.every((r) => !r.url.includes('upload_id') || r.headers['x-goog-api-key'] === 'AIza-acct'), 'each step of the upload went through the gateway')
  t.equal((await acme.files.get({ name })).name, name, 'its organization reads it')
  t.equal(await statusOf(rival.files.get({ name })), 404, 'another organization does not')
  t.same((await all(await acme.files.list())).map((f) => f.name), [name])
  t.same((await all(await rival.files.list())).map((f) => f.name), [], 'nor lists it')

  const before = g.acct.requests.length
  const download = await fetch(`${g.base}/passthrough/acct-gemini/v1beta/${name}:download?alt=media`, { headers: { 'x-goog-api-key': KEY_OTHER_ORG } })
  t.equal(download.status, 404, 'nor downloads it')
  t.match(await download.json(), { error: { code: 404, status: 'NOT_FOUND' } }, 'Google\'s shape')
  const part = { fileData: { fileUri: file.uri as string, mimeType: 'text/plain' } }
  t.equal(await statusOf(rival.models.generateContent({ model: 'gemini-acct', contents: [{ role: 'user', parts: [part, { text: 'summarize' }] }] })), 404, 'nor names it in a call')
  t.equal(g.acct.requests.length, before, 'nothing reached the provider')
  t.ok((await acme.models.generateContent({ model: 'gemini-acct', contents: [{ role: 'user', parts: [part, { text: 'summarize' }] }] })).text, 'its organization names it')

  const rows = '{"rows":   [1, 2]}\n'
  const jsonFile = await acme.files.upload({ file: new Blob([rows], { type: 'application/json' }), config: { mimeType: 'application/json' } })
  t.equal(g.acct.objects.get(jsonFile.name as string)?.content, rows, 'an upload\'s bytes reach the provider as they were sent, a JSON file\'s too')

  const cache = await (await fetch(`${g.base}/passthrough/acct-gemini/v1beta/cachedContents`, { method: 'POST', headers: { 'x-goog-api-key': KEY_A, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'models/gemini-acct', contents: [{ role: 'user', parts: [part] }] }) })).json() as { name: string }
  t.match(cache.name, /^cachedContents\//)
  const cached = (key: string): Promise<Response> => fetch(`${g.base}/passthrough/acct-gemini/v1beta/models/gemini-acct:generateContent`, { method: 'POST', headers: { 'x-goog-api-key': key, 'content-type': 'application/json' }, body: JSON.stringify({ ...contents, cachedContent: cache.name }) })
  t.equal((await cached(KEY_OTHER_ORG)).status, 404, 'another organization\'s cached content')
  const snake = await fetch(`${g.base}/passthrough/acct-gemini/v1beta/models/gemini-acct:generateContent`, { method: 'POST', headers: { 'x-goog-api-key': KEY_OTHER_ORG, 'content-type': 'application/json' }, body: JSON.stringify({ contents: [{ role: 'user', parts: [{ file_data: { file_uri: file.uri } }] }], cached_content: cache.name }) })
  t.equal(snake.status, 404, 'named by the fields\' proto names too')
  t.equal((await cached(KEY_A)).status, 200, 'its own')
})

t.test('finding 4: endpoints whose objects the gateway cannot attribute are refused; passthrough_shared opens the account to every key', async (t) => {
  const g = await accountGateway(t)
  const as = { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }
  for (const [method, path] of [
    ['GET', '/passthrough/acct-openai/assistants'], ['POST', '/passthrough/acct-openai/threads'], ['GET', '/passthrough/acct-openai/chat/completions'],
    ['GET', '/passthrough/acct-openai/responses/resp_1'], ['DELETE', '/passthrough/acct-openai/models/ft:gpt-acct:org::1'], ['GET', '/passthrough/acct-openai/organization/users'],
    ['GET', '/passthrough/acct-openai/files/file-1/unknown'], ['GET', '/passthrough/acct-messages/v1/organizations/api_keys'], ['GET', '/passthrough/acct-gemini/v1beta/tunedModels'],
    ['GET', '/passthrough/acct-gemini/v1beta/operations'], ['GET', '/passthrough/acct-openai'], ['POST', '/passthrough/acct-gemini/v1beta/models/gemini-acct:asyncBatchEmbedContent']
  ]) {
    const res = await fetch(`${g.base}${path}`, { method, headers: as, body: method === 'POST' ? '{}' : undefined })
    t.equal(res.status, 403, `${method} ${path}: refused`)
    t.match(await res.json(), { error: { code: /unattributable_endpoint|403/ } })
  }
  const previous = (await fetch(`${g.base}/passthrough/acct-openai/chat/completions`, { method: 'POST', headers: as, body: JSON.stringify({ model: 'gpt-acct', messages: [{ role: 'user', content: 'go on' }], previous_response_id: 'resp_someone' }) })).status
  t.equal(previous, 404, 'a stored response no one can be told the owner of')
  t.equal(g.acct.requests.length, 0, 'none reached the provider')

  const open = await accountGateway(t, true)
  const client = (key: string): OpenAI => new OpenAI({ apiKey: key, baseURL: `${open.base}/passthrough/acct-openai`, maxRetries: 0 })
  const made = await client(KEY_A).files.create({ file: await toFile(Buffer.from('shared rows'), 'a.jsonl'), purpose: 'batch' })
  t.same(ids(await all(client(KEY_OTHER_ORG).files.list())), [made.id], 'shared: every key granted the provider lists every file of the account')
  t.match(await (await client(KEY_OTHER_ORG).files.content(made.id)).text(), /shared rows/, 'and reads it')
  t.equal((await fetch(`${open.base}/passthrough/acct-openai/assistants`, { headers: { authorization: `Bearer ${KEY_OTHER_ORG}` } })).status, 404, 'any endpoint reaches the provider (whose answer this is)')
  const gemini = new GoogleGenAI({ apiKey: KEY_A, httpOptions: { baseUrl: `${open.base}/passthrough/acct-gemini` } })
  const uploaded = await gemini.files.upload({ file: new Blob(['shared notes'], { type: 'text/plain' }), config: { mimeType: 'text/plain' } })
  t.equal((await new GoogleGenAI({ apiKey: KEY_OTHER_ORG, httpOptions: { baseUrl: `${open.base}/passthrough/acct-gemini` } }).files.get({ name: uploaded.name as string })).name, uploaded.name, 'a Gemini upload goes through the gateway there too, and any key reads it')
})

t.test('finding 10: a JSON body nested past the depth limit is refused with 400 on every route that parses one', async (t) => {
  const mcp = await mockMcpHttp()
  t.teardown(async () => { await mcp.close() })
  const g = await mockGateway(t, { admin: { token: ADMIN }, mcp: { servers: [{ id: 'docs', transport: 'http', url: mcp.url }] } })
  const deep = `${'['.repeat(5000)}${']'.repeat(5000)}`
  const cases: Array<[string, string, Record<string, string>]> = [
    ['/passthrough/mock-openai/chat/completions', `{"model":"gpt-upstream-name","messages":[],"x":${deep}}`, bearer(KEY_A)],
    ['/passthrough/mock-openai/moderations', `{"input":${deep}}`, bearer(KEY_A)],
    ['/passthrough/mock-openai/embeddings', `{"model":"text-embedding-up","input":${deep}}`, bearer(KEY_A)],
    ['/passthrough/mock-gemini/v1beta/models/gemini-upstream-name:countTokens', `{"contents":${deep}}`, bearer(KEY_A)],
    ['/v1/chat/completions', `{"model":"openai/gpt-test","messages":${deep}}`, bearer(KEY_A)],
    ['/v1/messages', `{"model":"anthropic/claude-test","max_tokens":5,"messages":${deep}}`, bearer(KEY_A)],
    ['/mcp', `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"docs__echo","arguments":{"text":${deep}}}}`, { ...bearer(KEY_A), accept: 'application/json, text/event-stream' }],
    ['/admin/v1/keys', `{"org":"acme","project":"web","name":${deep}}`, { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }]
  ]
  for (const [path, body, headers] of cases) {
    const res = await fetch(`${g.base}${path}`, { method: 'POST', headers, body })
    t.equal(res.status, 400, `${path}: 400`)
    t.match(await res.text(), /more than 64 levels deep/, `${path}: says why`)
  }
  t.equal(g.mock.requests.length, 0, 'nothing reached a provider')
  t.equal(mcp.tools.calls.length, 0, 'nor an MCP server')
})
