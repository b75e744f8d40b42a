import t from 'tap'
import { definePlugin } from '../../plugins/api/index.js'
import auth from '../../plugins/auth.js'
import balance from '../../plugins/balance.js'
import { estimatePromptTokens } from '../../engine/gateway/billing.js'
import { bareGateway, bearer, build, mockCatalog } from '../helper.js'
import { startMockUpstream } from '../mock-upstream.js'

// The balance plugin, with auth, on a bare Fastify with the test gateway: a hold of the call's
// worst-case cost at admission (402 when the org cannot cover it, 403 without an org), settled
// to the real charge when the call ends, or given back when nothing was billed.
// (Concurrent calls against a balance: test/e2e/billing.test.ts and test/e2e/races.test.ts.)

const KEY = 'mg-test-gateway-key-0123456789abcdef'
const tenant = (balanceUsd: number) => [{ org: 'acme', balance_usd: balanceUsd, projects: [{ id: 'web', keys: [{ key: KEY }] }] }]
const chat = (extra: Record<string, unknown> = {}) => ({ model: 'test/echo', max_tokens: 100, messages: [{ role: 'user', content: 'Count to three' }], ...extra })

t.test('402 when the org cannot pay, in both shapes; served after a top-up, the hold settled to the charge', async (t) => {
  const gw = await bareGateway(t, [auth, balance], { config: { tenants: tenant(0) } })
  const post = () => gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY), payload: chat() })
  const refused = await post()
  t.equal(refused.statusCode, 402)
  t.equal(refused.json().error.code, 402)
  t.equal(refused.headers['x-should-retry'], 'false')
  const m = await gw.app.inject({ method: 'POST', url: '/v1/messages', headers: bearer(KEY), payload: { model: 'test/claude', max_tokens: 100, messages: [{ role: 'user', content: 'hi' }] } })
  t.equal(m.statusCode, 402)
  t.equal(m.json().error.type, 'billing_error')
  await gw.gateway.store.orgs.credit('acme', 1_000_000_000)
  t.equal((await post()).statusCode, 200)
  await gw.gateway.store.flush()
  const org = (await gw.gateway.store.orgs.get('acme'))!
  t.equal(org.held_nano, 0, 'the hold was settled')
  t.ok(org.spent_nano > 0, `charged ${org.spent_nano} nano-dollars`)
  t.equal(org.balance_nano, 1_000_000_000 - org.spent_nano, 'the real charge was debited, not the hold')
})

t.test('the hold is the worst case: the prompt estimate plus max_tokens at the higher rate', async (t) => {
  // test/echo: $1 per million input tokens, $2 per million output tokens
  const body = chat()
  const hold = (estimatePromptTokens(body) + 100) * 2_000
  const gw = await bareGateway(t, [auth, balance], { config: { tenants: tenant((hold - 1) / 1e9) } })
  const post = (payload: Record<string, unknown>) => gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY), payload })
  t.equal((await post(body)).statusCode, 402, 'one nano-dollar short of the hold')
  t.equal((await post(chat({ max_tokens: 50 }))).statusCode, 200, 'a smaller max_tokens holds less')
})

t.test('a call that was not billed gives its hold back and costs nothing', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const gw = await bareGateway(t, [auth, balance], { config: { ...mockCatalog(mock), tenants: tenant(1), upstream: { retry: { attempts: 0 } } } })
  mock.faults = { status: { status: 500, times: 1 } }
  const res = await gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY), payload: chat({ model: 'openai/gpt-test' }) })
  t.equal(res.statusCode, 502)
  await gw.gateway.store.flush()
  t.match(await gw.gateway.store.orgs.get('acme'), { balance_nano: 1_000_000_000, held_nano: 0, spent_nano: 0 })
})

t.test('a model without a price needs no balance', async (t) => {
  const free = { id: 'test/free', name: 'free', provider: 'test-openai', context_length: 1000, architecture: { input_modalities: ['text'], output_modalities: ['text'] } }
  const priced = { id: 'test/echo', name: 'echo', provider: 'test-openai', context_length: 1000, pricing: { input: 1, output: 2 }, architecture: { input_modalities: ['text'], output_modalities: ['text'] } }
  const gw = await bareGateway(t, [auth, balance], { config: { tenants: tenant(0), models: [free, priced] } })
  const post = (model: string) => gw.app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY), payload: chat({ model }) })
  t.equal((await post('test/free')).statusCode, 200)
  t.equal((await post('test/echo')).statusCode, 402, 'a priced one does')
})

t.test('balance needs auth before it: a config without it is refused; with no organization a call is 403', async (t) => {
  await t.rejects(build(t, { plugins: [{ name: 'balance' }] }), { name: 'ConfigError', problems: ['plugins[0]: balance needs auth enabled before it'] })
  await t.rejects(bareGateway(t, [balance]), { name: 'ConfigError', problems: ['plugin balance: balance needs auth enabled before it'] }, 'the test gateway checks the chain as serving does')
  // behind a stand-in auth that names no caller, it refuses the call
  const noCaller = definePlugin({ name: 'auth', plugin: async () => {} })
  const gw = await bareGateway(t, [noCaller, balance])
  const res = await gw.app.inject({ method: 'POST', url: '/v1/chat/completions', payload: chat() })
  t.equal(res.statusCode, 403)
  t.equal(res.json().error.type, 'permission_error')
})
