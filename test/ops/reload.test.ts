import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import t from 'tap'
import { configChanges } from '../../config/diff.js'
import { loadConfig } from '../../config/load.js'
import { GatewayServer } from '../../server.js'
import { startMockUpstream } from '../mock-upstream.js'
import { KEY_A, mockCatalog, testConfig } from '../helper.js'
import { sample } from './prom.js'
import { tempDir } from '../temp-dir.js'

// Reloading the config file while serving: a model added, a plugin disabled and a quota changed
// without dropping a stream in flight; an invalid file changes nothing.

const ADMIN = 'admin-token-0123456789'

t.test('a reload adds a model, disables a plugin and changes a quota; the stream in flight completes on the old configuration and is metered', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const file = join(tempDir('reload'), 'gateway.json')
  const c = mockCatalog(mock)
  const base = {
    server: { port: 0, request_timeout_s: 10 },
    store: { sqlite: ':memory:' },
    admin: { token: ADMIN },
    metrics: { auth: 'open' },
    plugins: [{ name: 'auth' }, { name: 'quota' }, { name: 'usage' }, { name: 'diagnostics' }],
    providers: c.providers,
    models: c.models,
    tenants: [{ org: 'acme', projects: [{ id: 'web', quota: { tokens: 1_000_000, per: 'day' }, keys: [{ key: KEY_A }] }] }]
  }
  writeFileSync(file, JSON.stringify(base))
  const server = await GatewayServer.start({ file, config: await loadConfig(file), host: '127.0.0.1' })
  t.teardown(() => server.close())
  const url = `http://127.0.0.1:${(await server.listen()).port}`
  const call = async (model: string, stream = false): Promise<Response> => await fetch(`${url}/v1/chat/completions`, {
    method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: JSON.stringify({ model, stream, messages: [{ role: 'user', content: 'tell me a long story please' }] })
  })
  const reload = async (): Promise<{ status: number, body: Record<string, unknown> }> => {
    const res = await fetch(`${url}/admin/v1/reload`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}` } })
    return { status: res.status, body: await res.json() as Record<string, unknown> }
  }

  const plugins = async (): Promise<{ generation: number, data: Array<{ name: string }> }> =>
    await (await fetch(`${url}/admin/v1/plugins`, { headers: { authorization: `Bearer ${ADMIN}` } })).json() as { generation: number, data: Array<{ name: string }> }
  t.match(await plugins(), { generation: 1, data: [{ name: 'auth' }, { name: 'quota' }, { name: 'usage' }, { name: 'diagnostics' }, { name: 'metrics' }] }, 'the admin API shows the chain of generation 1')

  t.equal((await call('openai/gpt-new')).status, 404, 'no such model yet')
  // a stream held after its first frame until the new configuration has answered a call: its
  // tokens count against the quota only when it ends, and the new quota (1 token) would refuse
  // that call once they did
  let release!: () => void
  const held = new Promise<void>((resolve) => { release = resolve })
  mock.faults = { idleMidStreamMs: { ms: 0, until: held, path: '/v1/chat/completions' } }
  const inFlight = await call('openai/gpt-test', true)
  t.equal(inFlight.status, 200)
  t.equal(inFlight.headers.get('x-svc-model'), 'openai/gpt-test', 'started with the diagnostics plugin on')
  const reader = (inFlight.body as ReadableStream<Uint8Array>).getReader()
  const decoder = new TextDecoder()
  let received = decoder.decode((await reader.read()).value)

  writeFileSync(file, JSON.stringify({
    ...base,
    plugins: [{ name: 'auth' }, { name: 'quota' }, { name: 'usage' }, { name: 'diagnostics', enabled: false }],
    models: [...c.models as object[], { ...(c.models as Array<Record<string, unknown>>)[0], id: 'openai/gpt-new' }],
    tenants: [{ org: 'acme', projects: [{ id: 'web', quota: { tokens: 1, per: 'day' }, keys: [{ key: KEY_A }] }] }]
  }))
  const done = await reload()
  t.equal(done.status, 200)
  t.match(done.body, { reloaded: true, generation: 2 })
  t.same(done.body.changes, ['models: added openai/gpt-new', 'plugins: disabled diagnostics', 'tenants: changed acme'])
  t.equal(server.open, 2, 'the previous configuration stays while its stream runs')
  const after = await plugins()
  t.equal(after.generation, 2, 'and of generation 2 after the reload')
  t.same(after.data.map((p) => p.name), ['auth', 'quota', 'usage', 'metrics'], 'without the disabled plugin')

  mock.faults = {}
  const added = await call('openai/gpt-new')
  t.equal(added.status, 200, 'the added model answers')
  t.equal(added.headers.get('x-svc-model'), null, 'without the disabled plugin\'s headers')
  await added.text()
  release()

  for (;;) {
    const { value, done } = await reader.read()
    if (done) break
    received += decoder.decode(value, { stream: true })
  }
  t.match(received, /data: \[DONE\]\n\n$/, 'the stream in flight completed')
  const trace = inFlight.headers.get('x-svc-trace-id')
  await server.app.gateway.store.flush()
  const record = (await server.app.gateway.store.usage.page({}, 10)).find((r) => r.trace_id === trace)
  t.equal(record?.status, 'ok', 'and is metered')
  t.ok((record?.completion_tokens ?? 0) > 0)
  for (let i = 0; i < 1000 && server.open > 1; i++) await new Promise((resolve) => setTimeout(resolve, 10))
  t.equal(server.open, 1, 'the previous configuration is closed once its last request is done')

  const refused = await call('openai/gpt-test')
  t.equal(refused.status, 429, 'the new quota (1 token) is used up')
  await refused.text()

  writeFileSync(file, JSON.stringify({ ...base, models: [{ ...(c.models as Array<Record<string, unknown>>)[0], pricing: { input: -1, output: 1 } }], surprise: true }))
  const bad = await reload()
  t.equal(bad.status, 400)
  t.match(bad.body, { error: { code: 'invalid_config' } })
  t.same(bad.body.problems, ['surprise: is not a known key', 'models[0].pricing.input: must be >= 0'], 'every problem, with its path')
  t.equal((await call('openai/gpt-new')).status, 429, 'the running configuration is kept (the added model, the quota)')
  const text = await (await fetch(`${url}/metrics`)).text()
  t.equal(sample(text, 'modelgate_config_reloads_total', { result: 'ok' }), 1)
  t.equal(sample(text, 'modelgate_config_reloads_total', { result: 'invalid' }), 1)
  t.equal(sample(text, 'modelgate_config_generation'), 2)
})

t.test('what a reload reports as changed', async (t) => {
  const before = testConfig({ admin: { token: 'secret-one' } })
  const after = testConfig({
    admin: { token: 'secret-two' },
    server: { request_timeout_s: 9, port: 9999 },
    plugins: [{ name: 'diagnostics' }, { name: 'auth' }, { name: 'quota' }],
    models: before.models.filter((m) => m.id !== 'demo/gpt').map((m) => m.id === 'demo/claude' ? { ...m, name: 'renamed' } : m),
    mcp: { max_result_mb: 4 }
  })
  t.same(configChanges(before, after), [
    'models: removed demo/gpt',
    'models: changed demo/claude',
    'plugins: enabled quota',
    'plugins: reordered (diagnostics, auth, quota)',
    'mcp.max_result_mb: 8 → 4',
    'server.request_timeout_s: 5 → 9',
    'server.port: 8080 → 9999 (takes effect at the next start)',
    'admin.token: changed'
  ])
})

t.test('a reload that adds single sign-on or admin tokens says so without their secrets', async (t) => {
  const before = testConfig({ admin: { token: 'secret-one-0123456789' } })
  const after = testConfig({
    admin: { token: 'secret-one-0123456789', tokens: [{ token: 'viewer-secret-0123456789', role: 'viewer', name: 'finance' }] },
    sso: { issuer: 'https://login.example.com', client_id: 'modelgate', client_secret: 'sso-client-secret', redirect_url: 'https://gw.example.com/console/auth/callback', roles: [{ group: 'ops', role: 'admin' }] }
  })
  const changes = configChanges(before, after)
  t.ok(changes.includes('admin.tokens: changed'))
  t.ok(changes.includes('sso.client_secret: changed'))
  t.ok(changes.includes('sso.issuer: unset → "https://login.example.com"'), 'a new section is told key by key')
  t.notMatch(JSON.stringify(changes), /viewer-secret|sso-client-secret/, 'no secret in what a reload reports')
  t.notMatch(JSON.stringify(configChanges(after, before)), /viewer-secret|sso-client-secret/, 'nor when they are removed')
})
