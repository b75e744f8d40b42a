import t, { type Test } from 'tap'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { startMockUpstream, type MockUpstream } from '../mock-upstream.js'
import { KEY_A, KEY_OTHER_ORG, mockCatalog, testConfig } from '../helper.js'
import { sample } from './prom.js'

// GET /metrics as calls go through: both protocols, streamed and not, an upstream failure and a
// quota refusal; and {prefix}Overhead-Ms on the answers.

const ADMIN = 'admin-token-0123456789'

async function start (t: Test, metrics: Record<string, unknown> = {}): Promise<{ app: FastifyInstance, mock: MockUpstream, base: string }> {
  const mock = await startMockUpstream()
  const app = await buildApp(testConfig({
    ...mockCatalog(mock),
    admin: { token: ADMIN },
    metrics,
    plugins: [{ name: 'auth' }, { name: 'quota' }, { name: 'usage' }, { name: 'diagnostics' }],
    tenants: [
      { org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A }] }] },
      // a quota the first call uses up
      { org: 'zeta', quota: { tokens: 1, per: 'day' }, projects: [{ id: 'app', keys: [{ key: KEY_OTHER_ORG }] }] }
    ]
  }))
  await app.listen({ host: '127.0.0.1', port: 0 })
  const address = app.server.address()
  t.teardown(async () => { await app.close(); await mock.close() })
  return { app, mock, base: `http://127.0.0.1:${typeof address === 'object' && address !== null ? address.port : 0}` }
}

const chat = (model: string, stream = false): Record<string, unknown> => ({ model, stream, messages: [{ role: 'user', content: 'Count these words please' }] })
const messages = (model: string, stream = false): Record<string, unknown> => ({ model, stream, max_tokens: 50, messages: [{ role: 'user', content: 'Count these words please' }] })

async function post (base: string, path: string, body: unknown, key = KEY_A): Promise<{ status: number, headers: Headers, text: string, ms: number }> {
  const t0 = performance.now()
  const res = await fetch(`${base}${path}`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify(body) })
  const text = await res.text()
  return { status: res.status, headers: res.headers, text, ms: performance.now() - t0 }
}

const scrape = async (base: string): Promise<string> => {
  const res = await fetch(`${base}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })
  if (res.status !== 200) throw new Error(`scrape answered ${res.status}`)
  return await res.text()
}

t.test('counters and histograms move with the calls', async (t) => {
  const { app, mock, base } = await start(t)
  const before = await scrape(base)
  t.equal(sample(before, 'modelgate_requests_total'), 0, 'no call yet')

  t.equal((await post(base, '/v1/chat/completions', chat('openai/gpt-test'))).status, 200)
  const streamed = await post(base, '/v1/chat/completions', chat('openai/gpt-test', true))
  t.equal(streamed.status, 200)
  t.match(streamed.text, /data: \[DONE\]/)
  mock.cachedTokens = 4
  t.equal((await post(base, '/v1/messages', messages('anthropic/claude-test'))).status, 200)
  mock.cachedTokens = 0
  t.equal((await post(base, '/v1/messages', messages('anthropic/claude-test', true))).status, 200)
  mock.faults = { status: { status: 503, times: 1 } }
  t.equal((await post(base, '/v1/chat/completions', chat('openai/gpt-test'))).status, 502, 'an upstream failure')
  t.equal((await post(base, '/v1/chat/completions', chat('openai/gpt-test'), KEY_OTHER_ORG)).status, 200)
  t.equal((await post(base, '/v1/chat/completions', chat('openai/gpt-test'), KEY_OTHER_ORG)).status, 429, 'a quota refusal')

  const text = await scrape(base)
  const ok = { route: 'chat.completions', model: 'openai/gpt-test', provider: 'mock-openai', status: 'ok', code: '200' }
  t.equal(sample(text, 'modelgate_requests_total', ok), 3, 'chat calls that succeeded, streamed or not')
  t.equal(sample(text, 'modelgate_requests_total', { route: 'messages', model: 'anthropic/claude-test', status: 'ok' }), 2)
  t.equal(sample(text, 'modelgate_requests_total', { route: 'chat.completions', status: 'upstream_error', code: '502' }), 1)
  t.equal(sample(text, 'modelgate_requests_total', { status: 'refused', code: '429', provider: '' }), 1)

  await app.gateway.store.flush()
  const rows = await app.gateway.store.usage.page({}, 100)
  const billed = rows.filter((r) => r.status === 'ok')
  const sum = (model: string, f: 'prompt_tokens' | 'completion_tokens' | 'cached_input_tokens'): number => billed.filter((r) => r.model === model).reduce((a, r) => a + r[f], 0)
  const gpt = { gen_ai_request_model: 'openai/gpt-test', gen_ai_provider_name: 'mock-openai', gen_ai_operation_name: 'chat' }
  t.equal(sample(text, 'gen_ai_client_token_usage_count', { ...gpt, gen_ai_token_type: 'input' }), 3)
  t.equal(sample(text, 'gen_ai_client_token_usage_sum', { ...gpt, gen_ai_token_type: 'input' }), sum('openai/gpt-test', 'prompt_tokens'), 'input tokens as the usage records have them')
  t.equal(sample(text, 'gen_ai_client_token_usage_sum', { ...gpt, gen_ai_token_type: 'output' }), sum('openai/gpt-test', 'completion_tokens'))
  t.equal(sample(text, 'gen_ai_client_token_usage_sum', { gen_ai_request_model: 'anthropic/claude-test', gen_ai_token_type: 'cached_input' }), 4)
  t.ok(sum('openai/gpt-test', 'completion_tokens') > 0)

  t.equal(sample(text, 'gen_ai_server_request_duration_seconds_count', { gen_ai_request_model: 'openai/gpt-test' }), 4, 'calls that reached the provider, the failed one included')
  t.equal(sample(text, 'gen_ai_server_time_to_first_token_seconds_count', { route: 'chat.completions', stream: 'true' }), 1)
  t.equal(sample(text, 'gen_ai_server_time_to_first_token_seconds_count', { route: 'messages' }), 2)
  t.equal(sample(text, 'modelgate_overhead_seconds_count', { route: 'messages' }), 2)
  t.equal(sample(text, 'modelgate_overhead_seconds_count', { route: 'chat.completions' }), 5, 'every answer, errors included')
  t.equal(sample(text, 'modelgate_upstream_attempts_total', { provider: 'mock-openai', outcome: 'server_error' }), 1)
  t.equal(sample(text, 'modelgate_upstream_attempts_total', { provider: 'mock-openai', outcome: 'ok' }), 3)

  const cost = (org: string): number => rows.filter((r) => r.org_id === org).reduce((a, r) => a + r.cost_nano, 0) / 1e9
  t.ok(cost('acme') > 0)
  t.ok(Math.abs(sample(text, 'modelgate_cost_usd_total', { org: 'acme' }) - cost('acme')) < 1e-12, 'cost by organization')
  t.equal(sample(text, 'modelgate_breaker_state', { provider: 'mock-openai', state: 'closed' }), 1)
  t.ok(sample(text, 'modelgate_store_write_batch_seconds_count') > 0, 'the store\'s write batches are timed')
  t.match(text, /modelgate_event_loop_lag_seconds\{stat="p99"\}/)
})

t.test('/metrics: the admin token, open, or off', async (t) => {
  const admin = await start(t)
  t.equal((await fetch(`${admin.base}/metrics`)).status, 401)
  t.equal((await fetch(`${admin.base}/metrics`, { headers: { authorization: 'Bearer wrong' } })).status, 401)
  const open = await start(t, { auth: 'open' })
  const res = await fetch(`${open.base}/metrics`)
  t.equal(res.status, 200)
  t.match(res.headers.get('content-type'), /^text\/plain/)
  const off = await start(t, { enabled: false })
  t.equal((await fetch(`${off.base}/metrics`, { headers: { authorization: `Bearer ${ADMIN}` } })).status, 404)
})

t.test('{prefix}Overhead-Ms: on every answer, smaller than the whole call', async (t) => {
  const { base, mock } = await start(t)
  // the provider takes its time: what the header leaves out
  mock.faults = { delayMs: 60 }
  for (const [path, body] of [['/v1/chat/completions', chat('openai/gpt-test')], ['/v1/chat/completions', chat('openai/gpt-test', true)], ['/v1/messages', messages('openai/gpt-test')], ['/v1/messages', messages('anthropic/claude-test', true)]] as const) {
    const r = await post(base, path, body)
    t.equal(r.status, 200)
    const h = r.headers.get('x-svc-overhead-ms')
    t.match(h, /^\d+\.\d\d$/, `${path}: present`)
    t.ok(Number(h) < r.ms, `${path}: ${String(h)} ms of ${r.ms.toFixed(2)} ms`)
    t.ok(Number(h) < r.ms - 50, `${path}: the provider's 60 ms are not in it`)
  }
  mock.faults = {}
  const refused = await post(base, '/v1/chat/completions', chat('openai/gpt-test'), 'not-a-key-0123456789')
  t.equal(refused.status, 401)
  t.ok(refused.headers.get('x-svc-overhead-ms'), 'an error answer has it too')
})

t.test('the Grafana dashboard is valid JSON and names only series the gateway serves', async (t) => {
  const { readFileSync } = await import('node:fs')
  const { fromRoot } = await import('../../paths.js')
  const dash = JSON.parse(readFileSync(fromRoot('docs', 'grafana-dashboard.json'), 'utf8')) as { panels: Array<{ title: string, targets: Array<{ expr: string }> }> }
  const { base } = await start(t)
  const text = await scrape(base)
  const served = new Set([...text.matchAll(/^# TYPE (\S+) /gm)].map((m) => m[1]))
  t.ok(dash.panels.length >= 10)
  for (const p of dash.panels) {
    for (const { expr } of p.targets) {
      // series names: not the label names of a `by (...)` or a `{label="..."}` selector
      for (const [name] of expr.replace(/by \([^)]*\)/g, '').matchAll(/\b(?:modelgate|gen_ai)_\w+\b(?!\s*[=!~])/g)) {
        t.ok(served.has(name.replace(/_(bucket|sum|count)$/, '')), `${p.title}: ${name}`)
      }
    }
  }
})

t.test('labels and stored fields come from the catalog, never from a client: random model names and field names grow neither /metrics nor a record', async (t) => {
  const mock = await startMockUpstream()
  const c = mockCatalog(mock)
  const providers = (c.providers as Array<Record<string, unknown>>).map((p) => p.id === 'mock-openai' ? { ...p, passthrough: true } : p)
  const app = await buildApp(testConfig({
    ...c, providers, admin: { token: ADMIN }, plugins: [{ name: 'auth' }, { name: 'usage' }], tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, passthrough: ['mock-openai'] }] }] }]
  }))
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { await app.close(); await mock.close() })
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  await post(base, '/v1/chat/completions', chat('openai/gpt-test'))
  await post(base, '/passthrough/mock-openai/chat/completions', chat('gpt-upstream-name'))
  const before = await scrape(base)
  const names: string[] = []
  for (let i = 0; i < 200; i++) {
    const name = `model-${i}-${Math.random().toString(36).slice(2)}${i === 0 ? 'x'.repeat(200_000) : ''}`
    names.push(name.slice(0, 40))
    t.equal((await post(base, '/passthrough/mock-openai/chat/completions', chat(name))).status, 404, 'a name that is no catalog model of the provider')
    t.equal((await post(base, '/v1/chat/completions', chat(name))).status, 404)
  }
  t.equal(mock.requests.length, 2, 'none reached the provider')
  const after = await scrape(base)
  for (const n of names) t.notOk(after.includes(n), 'no label of a client\'s model name')
  t.ok(after.length - before.length < 2_000, `/metrics grew ${after.length - before.length} bytes over 400 calls with unknown names: refusals are counted under model="other"`)
  t.match(after, /modelgate_requests_total\{route="passthrough",model="other"/)
  t.match(after, /modelgate_requests_total\{route="passthrough",model="openai\/gpt-test"/, 'an admitted pass-through call under its catalog model')
  t.equal((await app.gateway.store.usage.page({ status: ['ok'] }, 100)).length, 2, 'the two admitted calls recorded')
  const refused = await app.gateway.store.usage.page({ status: ['refused'] }, 1000)
  const unrecorded = Number(/modelgate_refusals_unrecorded_total\{code="model_not_found"\} (\d+)/.exec(after)?.[1] ?? 0)
  t.equal(refused.length + unrecorded, 400, `the refusals recorded up to ten a second for the key (${refused.length}), the rest counted (${unrecorded})`)
  t.ok(refused.every((r) => r.model.length <= 256 && r.error === 'model_not_found'), 'each under the name called, cut short')

  // fields a model does not take are dropped and named in the record: bounded in length and number
  const extra: Record<string, unknown> = { ['f'.repeat(200_000)]: 1 }
  for (let i = 0; i < 200; i++) extra[`field_${i}`] = i
  const res = await post(base, '/v1/chat/completions', { ...chat('openai/gpt-test'), ...extra })
  t.equal(res.status, 200)
  const [row] = await app.gateway.store.usage.page({}, 1)
  t.ok((row?.dropped_params.length ?? 0) <= 64 && (row?.dropped_params.length ?? 0) > 0, `${row?.dropped_params.length ?? 0} dropped names kept`)
  t.ok(row?.dropped_params.every((n) => n.length <= 256), 'each cut to 256 characters')
})
