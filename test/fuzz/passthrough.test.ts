import t, { type Test } from 'tap'
import fc from 'fast-check'
import { request as httpRequest } from 'node:http'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { snapshotBase } from '../../engine/gateway/catalog.js'
import { startMockUpstream, type MockUpstream } from '../mock-upstream.js'
import { startLenientUpstream } from '../mock-lenient.js'
import { KEY_A, mockCatalog, testConfig } from '../helper.js'

// Pass-through's edges, fuzzed: the model a body names, the case of the headers a client and the
// config give, and the form of the request target. A name reaches the provider only when it is
// the upstream name of a catalog model of that provider, or a dated or versioned snapshot of one
// (and then it is billed as that model); any other is refused with 404 and nothing is sent. A
// header the provider's config sets reaches it with the configured value only, whatever the case
// of either side. A target reaches a provider only in a form it routes as the gateway read it.
// A share of the runs here; passthrough.slow.test.ts runs the full count on another seed.
// FUZZ_SEED and FUZZ_RUNS replay or widen a run.

const SEED = Number(process.env.FUZZ_SEED ?? 20261127)
const RUNS = Number(process.env.FUZZ_RUNS ?? 100)
const UPSTREAM = 'gpt-upstream-name'

/** A gateway in front of `mock` (a mock upstream of its own when none is given). */
async function gateway (t: Test, headers: Record<string, string> = {}, shared?: MockUpstream): Promise<{ app: FastifyInstance, mock: MockUpstream }> {
  const mock = shared ?? await startMockUpstream()
  const c = mockCatalog(mock)
  const providers = (c.providers as Array<Record<string, unknown>>).map((p) => p.id === 'mock-openai' ? { ...p, passthrough: true, headers } : p)
  const app = await buildApp(testConfig({ ...c, providers, plugins: [{ name: 'auth' }, { name: 'usage' }], tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, passthrough: ['mock-openai'] }] }] }] }), { logger: false })
  t.teardown(async () => { await app.close(); if (shared === undefined) await mock.close() })
  return { app, mock }
}

const call = async (app: FastifyInstance, model: unknown, headers: Record<string, string> = {}): Promise<number> =>
  (await app.inject({ method: 'POST', url: '/passthrough/mock-openai/chat/completions', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json', ...headers }, payload: JSON.stringify({ model, max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }) })).statusCode

const upstreamNames = ['gpt-upstream-name', 'claude-upstream-name', 'gpt-video', 'gpt-text', 'gpt-x']
const snapshot = fc.oneof(
  fc.date({ min: new Date('2020-01-01'), max: new Date('2030-12-31'), noInvalidDate: true }).map((d) => `-${d.toISOString().slice(0, 10)}`),
  fc.date({ min: new Date('2020-01-01'), max: new Date('2030-12-31'), noInvalidDate: true }).map((d) => `-${d.toISOString().slice(0, 10).replace(/-/g, '')}`),
  fc.integer({ min: 0, max: 999 }).map((n) => `-${String(n).padStart(3, '0')}`),
  fc.constant('-latest')
)
const names = fc.oneof(
  fc.constantFrom(...upstreamNames),
  fc.tuple(fc.constantFrom(...upstreamNames), snapshot).map(([n, s]) => n + s),
  fc.tuple(fc.constantFrom(...upstreamNames), fc.constantFrom('-mini', '-preview', '-2024-13', '_2024-08-06', '-2024-08-06-extra', ' ', '/x', '\u0000')).map(([n, s]) => n + s),
  fc.constantFrom(...upstreamNames).map((n) => n.toUpperCase()),
  fc.string({ maxLength: 80 }),
  fc.string({ unit: 'grapheme', maxLength: 40 }),
  fc.constantFrom('', 'openai/gpt-test', '../gpt-upstream-name', 'gpt-upstream-name'.repeat(500), '-2024-08-06', '__proto__')
)

/** The upstream names of the catalog's models on mock-openai (mockCatalog), and their ids. */
const ON_PROVIDER = new Map([['gpt-upstream-name', ['openai/gpt-test', 'openai/failover']], ['gpt-video', ['openai/video']], ['gpt-text', ['openai/text-only']]])

/** Whether the gateway must let a name through to mock-openai: the upstream name of one of its models, or a snapshot of one. */
function admitted (name: string): boolean {
  return ON_PROVIDER.has(name) || ON_PROVIDER.has(snapshotBase(name) ?? '')
}

t.test('a pass-through model name reaches the provider only when it is a catalog model of it, or a snapshot of one', async (t) => {
  const { app, mock } = await gateway(t)
  let reached = 0
  await fc.assert(fc.asyncProperty(names, async (name) => {
    const before = mock.requests.length
    const status = await call(app, name)
    const went = mock.requests.length > before
    if (went) reached++
    if (admitted(name)) return status === 200 && went && (mock.requests.at(-1)?.body as { model?: string }).model === name
    return (status === 404 || (status === 400 && name === '')) && !went
  }), { seed: SEED, numRuns: RUNS })
  const all = await app.gateway.store.usage.page({}, 10_000)
  const rows = all.filter((r) => r.status !== 'refused')
  t.equal(rows.length, reached, 'a record for each call that reached the provider')
  t.ok(all.every((r) => r.status !== 'refused' || (r.cost_nano === 0 && r.attempts.length === 0 && r.error !== null)), 'the others are refused records, with their code and nothing spent')
  t.ok(rows.every((r) => [...ON_PROVIDER.values()].flat().includes(r.model) && r.cost_nano > 0), 'each billed as its catalog model')
  for (const bad of [42, null, { name: UPSTREAM }, [UPSTREAM]]) t.equal(await call(app, bad), 400, `a model that is no name (${JSON.stringify(bad)}): 400`)
})

t.test('a header the provider\'s config sets reaches it with the configured value only, whatever the case on either side', async (t) => {
  const casing = (name: string): fc.Arbitrary<string> => fc.array(fc.boolean(), { minLength: name.length, maxLength: name.length }).map((up) => [...name].map((ch, i) => up[i] === true ? ch.toUpperCase() : ch.toLowerCase()).join(''))
  // one provider for every run: each gateway's call is the last request it saw
  const upstream = await startMockUpstream()
  t.teardown(() => upstream.close())
  await fc.assert(fc.asyncProperty(casing('x-org-secret'), casing('x-org-secret'), fc.string({ minLength: 1, maxLength: 30 }).filter((v) => /^[\x21-\x7e]+$/.test(v)), async (configured, sent, value) => {
    const { app, mock } = await gateway(t, { [configured]: 'the-configured-value-0123' }, upstream)
    const status = await call(app, UPSTREAM, { [sent]: value, 'OpenAI-Organization': value, 'openai-PROJECT': value, CoOkIe: `a=${value}` })
    await app.close()
    const up = mock.requests.at(-1)?.headers ?? {}
    return status === 200 &&
      up['x-org-secret'] === 'the-configured-value-0123' &&
      up['openai-organization'] === undefined && up['openai-project'] === undefined && up.cookie === undefined
  }), { seed: SEED, numRuns: Math.min(Math.ceil(RUNS / 12), 25) })
})

t.test('a request target in any form: whatever a lenient provider runs as a model call, the gateway billed as that call, of a granted model', async (t) => {
  const lenient = await startLenientUpstream()
  const model = (id: string, provider: string, upstream: string): Record<string, unknown> => ({ id, name: id, provider, upstream_model: upstream, context_length: 1000, architecture: { input_modalities: ['text'], output_modalities: ['text'] }, pricing: { input: 1, output: 2 } })
  const app = await buildApp(testConfig({
    providers: [
      { id: 'lenient', protocol: 'openai', base_url: `${lenient.url}/v1`, api_key: 'sk-lenient', passthrough: true },
      { id: 'lenient-gemini', protocol: 'gemini', base_url: lenient.url, api_key: 'AIza-lenient', passthrough: true }
    ],
    models: [model('openai/lenient', 'lenient', 'gpt-lenient'), model('google/lenient', 'lenient-gemini', 'gemini-lenient'), model('google/other', 'lenient-gemini', 'gemini-other')],
    plugins: [{ name: 'auth' }, { name: 'usage' }],
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, models: ['openai/lenient', 'google/lenient'], passthrough: ['lenient', 'lenient-gemini'] }] }] }]
  }), { logger: false })
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { await app.close(); await lenient.close() })
  const { port } = app.server.address() as { port: number }
  const send = async (method: string, target: string, body: string): Promise<{ status: number, trace: string }> => await new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path: target, headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' } }, (res) => {
      res.resume()
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, trace: String(res.headers['x-svc-trace-id']) }) })
    })
    req.on('error', reject)
    req.end(method === 'GET' ? undefined : body)
  })

  // metered, free and unmetered paths of both protocols, a model granted and one not
  const endpoints = fc.constantFrom(
    ['lenient', 'POST', '/chat/completions'], ['lenient', 'POST', '/files'], ['lenient', 'POST', '/moderations'], ['lenient', 'POST', '/batches'], ['lenient', 'GET', '/models'],
    ['lenient-gemini', 'POST', '/v1beta/models/gemini-lenient:generateContent'], ['lenient-gemini', 'POST', '/v1beta/models/gemini-other:generateContent'],
    ['lenient-gemini', 'POST', '/v1beta/models/gemini-lenient:countTokens'], ['lenient-gemini', 'POST', '/v1beta/models/gemini-other:countTokens'], ['lenient-gemini', 'GET', '/v1beta/models/gemini-other']
  )
  type Change = (path: string) => string
  const hex = (c: string, upper: boolean): string => `%${c.charCodeAt(0).toString(16).padStart(2, '0')[upper ? 'toUpperCase' : 'toLowerCase']()}`
  const change: fc.Arbitrary<Change> = fc.oneof(
    // a character percent-encoded, once or twice
    fc.tuple(fc.nat(), fc.boolean(), fc.boolean()).map(([at, twice, upper]) => (p: string) => {
      const i = at % p.length
      const once = hex(p[i] as string, upper)
      return p.slice(0, i) + (twice ? `%25${once.slice(1)}` : once) + p.slice(i + 1)
    }),
    fc.constantFrom('#', '#/files', '#/cancel', '#:countTokens', ';', ';x=/files', ';/cancel', '/', '.', '..', '/.', '//', '?x=/files', '?/cancel', '?alt=sse').map((tail) => (p: string) => p + tail),
    // a slash doubled, a letter's case flipped
    fc.nat().map((at) => (p: string) => { const i = p.indexOf('/', at % p.length); return i === -1 ? p : `${p.slice(0, i)}/${p.slice(i)}` }),
    fc.nat().map((at) => (p: string) => { const i = at % p.length; const c = p[i] as string; return p.slice(0, i) + (c === c.toUpperCase() ? c.toLowerCase() : c.toUpperCase()) + p.slice(i + 1) })
  )
  const chat = JSON.stringify({ model: 'gpt-lenient', messages: [{ role: 'user', content: 'hi' }] })
  const gemini = JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'hi' }] }] })
  let ran = 0
  await fc.assert(fc.asyncProperty(endpoints, fc.array(change, { maxLength: 3 }), async ([provider, method, path], changes) => {
    const target = changes.reduce((p, c) => c(p), path as string)
    const before = lenient.served.length
    const res = await send(method as string, `/passthrough/${provider as string}${target}`, provider === 'lenient' ? chat : gemini)
    const served = lenient.served.slice(before)
    if (served.length === 0) return true
    ran++
    const [call] = served
    if (served.length !== 1 || call === undefined) return false
    // the provider ran a model call: it must be one of a granted model, metered and charged as it
    if (call.route === 'gemini' && call.model !== 'gemini-lenient') return false
    const row = (await app.gateway.store.usage.byTrace(res.trace))?.row
    return res.status === 200 && row !== undefined && row.cost_nano > 0 && row.model === (call.route === 'chat' ? 'openai/lenient' : 'google/lenient')
  }), { seed: SEED, numRuns: RUNS })
  t.ok(ran > 0, `the provider ran ${ran} model calls, each billed as it`)
})
