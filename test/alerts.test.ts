import t from 'tap'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../app.js'
import { HealthBook } from '../engine/upstream/health.js'
import { CLAIM_MS } from '../engine/alerts/index.js'
import { openStore } from '../engine/store/index.js'
import { bearer, FakeClock, KEY_A, testConfig, watchAnswers, type Teardown } from './helper.js'
import { tempDir } from './temp-dir.js'
import { WEBHOOK_SECRET, webhookReceiver, type Receiver } from './webhook-receiver.js'

// The alerts: events on the Standard Webhooks specification, verified by a receiver with its
// library; written to the store's outbox before they are sent; each crossing once per window,
// also with two apps (two workers) on one file; retried with backoff on a fake clock for 24 hours.

const START = Date.UTC(2026, 0, 15, 12, 0, 0)
const ADMIN = 'test-admin-token-0123456789'
const chat = { model: 'demo/gpt', messages: [{ role: 'user', content: 'Say something rather long, please' }] }

async function receiver (t: Teardown): Promise<Receiver> {
  const r = await webhookReceiver()
  t.teardown(() => r.close())
  return r
}

interface AppOpts { clock: FakeClock, url: string, file?: string, alerts?: Record<string, unknown>, tenants?: unknown[], health?: HealthBook }

async function app (t: Teardown, o: AppOpts): Promise<FastifyInstance> {
  const config = testConfig({
    store: { sqlite: o.file ?? ':memory:' },
    admin: { token: ADMIN },
    plugins: [{ name: 'auth' }, { name: 'quota' }, { name: 'balance' }, { name: 'usage' }],
    alerts: { thresholds: [0.5, 1], webhooks: [{ url: o.url, secret: WEBHOOK_SECRET }], ...o.alerts },
    ...(o.tenants === undefined ? {} : { tenants: o.tenants })
  })
  const a = await buildApp(config, { logger: false, clock: o.clock, alerts: { timers: false } })
  watchAnswers(a) // the admin answers as their response schemas send them, nothing lost
  if (o.health !== undefined) a.alerts.start(o.health, { tickMs: 3_600_000, scanMs: 3_600_000 })
  t.teardown(() => a.close())
  return a
}

const budgetTenants = (usd: number): unknown[] => [{ org: 'acme', balance_usd: 25, projects: [{ id: 'web', keys: [{ key: KEY_A, budget: { usd, per: 'day' } }] }] }]

/** Calls until the key is refused; how many were admitted. */
async function spendUntilRefused (apps: FastifyInstance[]): Promise<number> {
  for (let i = 0; i < 400; i++) {
    const res = await (apps[i % apps.length] as FastifyInstance).inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat })
    if (res.statusCode === 429) return i
    if (res.statusCode !== 200) throw new Error(`call answered ${res.statusCode}: ${res.body}`)
  }
  throw new Error('never refused')
}

t.test('a key\'s budget: each threshold raises budget.threshold once per window, signed and verified with the Standard Webhooks library', async (t) => {
  const clock = new FakeClock(START)
  const r = await receiver(t)
  const a = await app(t, { clock, url: r.url, tenants: budgetTenants(0.0005) })
  const admitted = await spendUntilRefused([a])
  t.ok(admitted >= 3, `${admitted} calls before the budget`)
  await a.alerts.tick()
  t.equal(r.rejected, 0, 'every signature verified')
  const events = r.received.filter((e) => e.type === 'budget.threshold')
  t.same(events.map((e) => e.data.threshold), [0.5, 1], 'each threshold once, though every later call was past it')
  const first = events[0]?.data as Record<string, unknown>
  t.match(first, { scope: 'key', threshold: 0.5, limit_usd: '0.0005', window_resets_at: '2026-01-16T00:00:00.000Z' })
  t.match(first.id, /^key_/)
  t.match(first.used_usd, /^0\.000\d+$/, 'money as a decimal string')
  t.ok(Number(first.used_usd) >= 0.00025)
  t.equal(new Set(events.map((e) => e.id)).size, 2, 'an id per event')

  const list = await a.inject({ method: 'GET', url: '/admin/v1/alerts/deliveries', headers: bearer(ADMIN) })
  t.equal(list.statusCode, 200, list.body)
  const rows = list.json().data as Array<Record<string, unknown>>
  t.equal(rows.length, 2)
  t.match(rows[0], { type: 'budget.threshold', status: 'delivered', attempts: 1, last_status: 200, webhook: r.url, next_attempt_at: null })

  // the next UTC day is a new window: the thresholds are raised again
  clock.advance(12 * 3_600_000)
  await spendUntilRefused([a])
  await a.alerts.tick()
  t.same(r.received.filter((e) => e.type === 'budget.threshold').map((e) => e.data.threshold), [0.5, 1, 0.5, 1])
})

t.test('two apps on one SQLite file (two workers): a crossing is raised and sent once', async (t) => {
  const clock = new FakeClock(START)
  const r = await receiver(t)
  const file = join(tempDir('alerts'), 'gw.db')
  const tenants = [{ org: 'acme', balance_usd: 25, quota: { usd: 0.0005, per: 'day' }, projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
  const a = await app(t, { clock, url: r.url, file, tenants })
  const b = await app(t, { clock, url: r.url, file, tenants })
  await spendUntilRefused([a, b])
  await Promise.all([a.alerts.tick(), b.alerts.tick(), a.alerts.tick(), b.alerts.tick()])
  const events = r.received.filter((e) => e.type === 'quota.threshold')
  t.same(events.map((e) => e.data.threshold).sort(), [0.5, 1], 'each threshold once across both')
  t.match(events[0]?.data, { scope: 'org', id: 'acme', unit: 'usd', limit: '0.0005' })
  t.equal(r.hits, 2, 'and sent once')
})

t.test('a failed delivery is retried with backoff on the store\'s clock, for 24 hours, then marked failed', async (t) => {
  const clock = new FakeClock(START)
  const r = await receiver(t)
  let answer = 503
  r.status = () => answer
  const a = await app(t, { clock, url: r.url })
  await a.alerts.raise('balance.low', 'test:1', { org: 'acme', balance_usd: '1' })
  await a.alerts.tick()
  t.equal(r.hits, 1, 'sent at once')
  await a.alerts.tick()
  t.equal(r.hits, 1, 'not again before its backoff')
  clock.advance(5_000)
  await a.alerts.tick()
  t.equal(r.hits, 2, 'again after 5 s')
  const admin = bearer(ADMIN)
  let row = (await a.inject({ method: 'GET', url: '/admin/v1/alerts/deliveries', headers: admin })).json().data[0]
  t.match(row, { status: 'pending', attempts: 2, last_status: 503, next_attempt_at: new Date(START + 5_000 + 30_000).toISOString() })
  answer = 200
  clock.advance(30_000)
  await a.alerts.tick()
  t.equal(r.received.length, 1)
  row = (await a.inject({ method: 'GET', url: '/admin/v1/alerts/deliveries', headers: admin })).json().data[0]
  t.match(row, { status: 'delivered', attempts: 3, last_status: 200 })

  // a receiver that never answers well: tried until 24 hours after the event, then failed
  answer = 500
  await a.alerts.raise('balance.low', 'test:2', { org: 'acme', balance_usd: '1' })
  const before = r.hits
  for (let i = 0; i < 60; i++) { await a.alerts.tick(); clock.advance(3_600_000) }
  row = (await a.inject({ method: 'GET', url: '/admin/v1/alerts/deliveries', headers: admin })).json().data[0]
  t.equal(row.status, 'failed')
  t.ok(r.hits - before >= 8 && r.hits - before <= 14, `${r.hits - before} attempts in 24 hours`)
})

t.test('balance.low once per top-up; key.expiring 7 days and 1 day before', async (t) => {
  const clock = new FakeClock(START)
  const r = await receiver(t)
  const expires = new Date(START + 6 * 86_400_000).toISOString()
  const tenants = [{ org: 'acme', balance_usd: 5, projects: [{ id: 'web', keys: [{ key: KEY_A, expires_at: expires }] }] }]
  const a = await app(t, { clock, url: r.url, tenants, alerts: { balance_low_usd: 10 } })
  await a.alerts.scan()
  await a.alerts.scan()
  await a.alerts.tick()
  const types = (): string[] => r.received.map((e) => e.type).sort()
  t.same(types(), ['balance.low', 'key.expiring'])
  t.match(r.received.find((e) => e.type === 'balance.low')?.data, { org: 'acme', balance_usd: '5' })
  t.match(r.received.find((e) => e.type === 'key.expiring')?.data, { expires_at: expires })
  const admin = bearer(ADMIN)
  // a top-up that leaves it low starts a new episode
  t.equal((await a.inject({ method: 'POST', url: '/admin/v1/orgs/acme/credits', headers: admin, payload: { amount_usd: 1 } })).statusCode, 200)
  clock.advance(5 * 86_400_000 + 1)
  await a.alerts.scan()
  await a.alerts.tick()
  t.same(types(), ['balance.low', 'balance.low', 'key.expiring', 'key.expiring'], 'a new balance episode, and the 1-day notice')
})

t.test('provider.down when a breaker opens, provider.up when it closes, once each', async (t) => {
  const clock = new FakeClock(START)
  const r = await receiver(t)
  const health = new HealthBook(clock)
  const a = await app(t, { clock, url: r.url, health })
  for (let i = 0; i < 5; i++) health.failure('demo', { status: 503, error: 'server_error' })
  await eventuallyTrue(async () => { await a.alerts.tick(); return r.received.length === 1 })
  t.match(r.received[0], { type: 'provider.down', data: { provider: 'demo', reason: /opened after HTTP 503/ } })
  clock.advance(30_000)
  t.ok(health.admit('demo'), 'a probe')
  health.success('demo')
  await eventuallyTrue(async () => { await a.alerts.tick(); return r.received.length === 2 })
  t.match(r.received[1], { type: 'provider.up', data: { provider: 'demo' } })
})

t.test('webhook URLs: link-local and cloud metadata addresses refused at config check and at send time', async (t) => {
  for (const url of ['http://169.254.169.254/latest', 'http://[fd00:ec2::254]/', 'http://[fe80::1]/x', 'http://[::ffff:169.254.1.1]/', 'ftp://example.com/']) {
    t.throws(() => testConfig({ alerts: { webhooks: [{ url, secret: WEBHOOK_SECRET }] } }), /alerts\.webhooks\[0\]\.url/, url)
  }
  t.throws(() => testConfig({ alerts: { webhooks: [{ url: 'http://127.0.0.1/', secret: 'whsec_c2hvcnQ=' }] } }), /alerts\.webhooks\[0\]\.secret/)
  t.doesNotThrow(() => testConfig({ alerts: { webhooks: [{ url: 'http://10.0.0.5:8080/hooks', secret: WEBHOOK_SECRET }] } }), 'a private address is the operator\'s own')

  const clock = new FakeClock(START)
  const config = testConfig({ admin: { token: ADMIN }, alerts: { webhooks: [{ url: 'http://hooks.example.com/in', secret: WEBHOOK_SECRET }] } })
  const a = await buildApp(config, { logger: false, clock, alerts: { timers: false, lookup: async () => ['169.254.169.254'] } })
  t.teardown(() => a.close())
  await a.alerts.raise('balance.low', 'test:rebind', { org: 'acme', balance_usd: '1' })
  await a.alerts.tick()
  const row = (await a.inject({ method: 'GET', url: '/admin/v1/alerts/deliveries', headers: bearer(ADMIN) })).json().data[0]
  t.match(row, { status: 'pending', last_status: null, last_error: /resolves to 169\.254\.169\.254/ })
})

t.test('the outbox survives a restart: an event written and not sent is sent by the next process', async (t) => {
  const clock = new FakeClock(START)
  const r = await receiver(t)
  const file = join(tempDir('alerts-restart'), 'gw.db')
  const first = await app(t, { clock, url: r.url, file })
  await first.alerts.raise('balance.low', 'test:restart', { org: 'acme', balance_usd: '1' })
  // closed without ever sending (its sender's timers are off)
  await first.close()
  t.equal(r.hits, 0)
  const second = await app(t, { clock, url: r.url, file })
  await second.alerts.tick()
  t.equal(r.received.length, 1)
  t.match(r.received[0], { type: 'balance.low' })
  const store = openStore(testConfig({ store: { sqlite: file } }))
  t.teardown(() => store.close())
  t.match((await store.alerts.page(10))[0], { status: 'delivered', attempts: 1 })

  // a sender that claimed an event and died before sending it: the claim lapses, another sends it
  await second.alerts.raise('balance.low', 'test:claimed', { org: 'acme', balance_usd: '1' })
  t.equal((await store.alerts.claim(clock.now(), clock.now() + CLAIM_MS, 20)).length, 1, 'claimed by a sender about to die')
  await second.alerts.tick()
  t.equal(r.received.length, 1, 'not sent while the claim holds')
  clock.advance(CLAIM_MS)
  await second.alerts.tick()
  t.equal(r.received.length, 2, 'sent once it lapsed')
  t.match((await store.alerts.page(10)).find((d) => d.crossing === 'test:claimed'), { status: 'delivered', attempts: 2 })
})

async function eventuallyTrue (check: () => Promise<boolean>, ms = 5000): Promise<void> {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error('not within 5 s')
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}
