import t from 'tap'
import Database from 'better-sqlite3'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../app.js'
import { CLAIM_MS } from '../engine/alerts/index.js'
import { bearer, eventually, FakeClock, KEY_A, KEY_B, spawnGateway, testConfig, type Teardown } from './helper.js'
import { REDIS_URL, scratchDatabase, scratchRedisPrefix, servicesMissing } from './scratch-services.js'
import { tempDir } from './temp-dir.js'
import { WEBHOOK_SECRET, webhookReceiver } from './webhook-receiver.js'

// The slow part of the alerts' promises: a delivery outlives a kill -9 of the gateway between
// writing its event and getting an answer; and on PostgreSQL and Redis, two instances raise a
// crossing once, sum tags exactly and agree on the rate-limit headers.

const ADMIN = 'test-admin-token-0123456789'

t.test('a delivery survives kill -9 of the gateway between write and send', async (t) => {
  const r = await webhookReceiver()
  t.teardown(() => r.close())
  r.status = () => 0 // the first receiver hangs: the gateway is killed while its attempt waits
  const dir = tempDir('alerts-kill')
  const config = {
    server: { port: 0, host: '127.0.0.1' },
    admin: { token: ADMIN },
    plugins: [{ name: 'auth' }],
    providers: [{ id: 'demo', protocol: 'openai', builtin: 'demo' }],
    tenants: [{ org: 'acme', balance_usd: 5, projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }],
    alerts: { balance_low_usd: 10, webhooks: [{ url: r.url, secret: WEBHOOK_SECRET }] }
  }
  const first = await spawnGateway(t, config, [], {}, dir)
  // the scan at start raises balance.low; the sender claims and sends it
  await eventually(10_000, () => r.hits, (n) => n >= 1)
  const db = new Database(join(dir, 'gw.db'), { readonly: true })
  const row = db.prepare('SELECT status, attempts FROM alert_deliveries').get() as { status: string, attempts: number }
  db.close()
  t.same(row, { status: 'pending', attempts: 1 }, 'written before it was sent, not settled')
  first.kill('SIGKILL')
  await first.exited
  t.equal(r.received.length, 0, 'nothing answered')

  r.status = () => 200
  const started = Date.now()
  const second = await spawnGateway(t, config, [], {}, dir)
  await eventually(CLAIM_MS + 15_000, () => r.received.length, (n) => n >= 1, 100)
  t.ok(Date.now() - started < CLAIM_MS + 15_000, 'sent once the dead sender\'s claim lapsed')
  t.match(r.received[0], { type: 'balance.low', data: { org: 'acme', balance_usd: '5' } })
  const list = await fetch(`http://127.0.0.1:${second.port}/admin/v1/alerts/deliveries`, { headers: bearer(ADMIN) })
  const data = (await list.json() as { data: Array<Record<string, unknown>> }).data
  t.equal(data.length, 1, 'one event: the restart did not raise it again')
  t.match(data[0], { status: 'delivered', attempts: 2 })
  second.kill('SIGTERM')
  await second.exited
})

t.test('two workers of one gateway raise a threshold and send it once', async (t) => {
  const r = await webhookReceiver()
  t.teardown(() => r.close())
  const config = {
    server: { port: 0, host: '127.0.0.1' },
    admin: { token: ADMIN },
    plugins: [{ name: 'auth' }, { name: 'quota' }, { name: 'usage' }],
    providers: [{ id: 'demo', protocol: 'openai', builtin: 'demo' }],
    models: [{ id: 'demo/gpt', name: 'demo', provider: 'demo', upstream_model: 'gpt-sim', context_length: 128000, pricing: { input: 1, output: 2 } }],
    tenants: [{ org: 'acme', quota: { usd: 0.0005, per: 'day' }, projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }],
    alerts: { thresholds: [0.5, 1], webhooks: [{ url: r.url, secret: WEBHOOK_SECRET }] }
  }
  const gw = await spawnGateway(t, config, ['--workers', '2'])
  let refused = false
  for (let i = 0; i < 400 && !refused; i++) {
    // a connection of its own each: the workers share the calls
    const call = await fetch(`http://127.0.0.1:${gw.port}/v1/chat/completions`, {
      method: 'POST',
      headers: { ...bearer(KEY_A), 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ model: 'demo/gpt', messages: [{ role: 'user', content: 'Say something rather long, please' }] })
    })
    await call.arrayBuffer()
    if (call.status === 429) refused = true
    else t.equal(call.status, 200)
  }
  t.ok(refused, 'the quota was reached')
  await eventually(10_000, () => r.received.length, (n) => n >= 2, 100)
  // both workers send every second: a duplicate would show within a few ticks
  await new Promise((resolve) => setTimeout(resolve, 3000))
  t.same(r.received.map((e) => e.data.threshold).sort(), [0.5, 1], 'each threshold once')
  t.equal(r.hits, 2, 'sent once each')
})

t.test('PostgreSQL and Redis, two instances', async (t) => {
  const missing = await servicesMissing()
  if (missing !== null) { t.comment(`skipped: ${missing}`); return }

  async function instances (t: Teardown, clock: FakeClock, url: string, redisPrefix: string, receiverUrl: string, tenants: unknown[]): Promise<FastifyInstance[]> {
    const apps: FastifyInstance[] = []
    for (let i = 0; i < 2; i++) {
      const a = await buildApp(testConfig({
        store: { postgres: url, redis: REDIS_URL, redis_prefix: redisPrefix },
        admin: { token: ADMIN },
        plugins: [{ name: 'auth' }, { name: 'quota' }, { name: 'usage' }],
        alerts: { thresholds: [0.5, 1], webhooks: [{ url: receiverUrl, secret: WEBHOOK_SECRET }] },
        tenants
      }), { logger: false, clock, alerts: { timers: false } })
      t.teardown(() => a.close())
      apps.push(a)
    }
    return apps
  }

  t.test('a quota threshold is raised and sent once; tags sum exactly; rate-limit headers agree', async (t) => {
    const r = await webhookReceiver()
    t.teardown(() => r.close())
    const clock = new FakeClock(Date.UTC(2026, 0, 15, 12, 0, 0))
    const url = await scratchDatabase(t)
    const tenants = [
      { org: 'acme', balance_usd: 25, quota: { usd: 0.0005, per: 'day' }, projects: [{ id: 'web', keys: [{ key: KEY_A, limits: { rpm: 1000 } }] }] },
      { org: 'zeta', projects: [{ id: 'app', keys: [{ key: KEY_B, limits: { rpm: 6 } }] }] }
    ]
    const [a, b] = await instances(t, clock, url, scratchRedisPrefix(t), r.url, tenants) as [FastifyInstance, FastifyInstance]
    const chat = { model: 'demo/gpt', messages: [{ role: 'user', content: 'Say something rather long, please' }] }
    const remaining: number[] = []
    let refused = 0
    for (let i = 0; i < 200 && refused === 0; i++) {
      const res = await (i % 2 === 0 ? a : b).inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(KEY_A), 'X-SVC-Tags': i % 3 === 0 ? 'team-a,batch' : 'team-b' }, payload: chat })
      if (res.statusCode === 429) refused++
      else remaining.push(Number(res.headers['x-ratelimit-remaining-requests']))
    }
    t.equal(refused, 1, 'the quota was reached')
    t.equal(new Set(remaining).size, remaining.length, 'each call a place of its own in the shared rpm counter')
    t.ok(remaining.every((n) => n >= 0 && n < 1000))
    await Promise.all([a.alerts.tick(), b.alerts.tick()])
    await Promise.all([a.alerts.tick(), b.alerts.tick()])
    t.same(r.received.filter((e) => e.type === 'quota.threshold').map((e) => e.data.threshold).sort(), [0.5, 1], 'each threshold once across both instances')
    t.equal(r.hits, 2, 'sent once each')
    t.equal(r.rejected, 0)

    // at the limit the headers are exact: six places, 5 to 0, then 429s saying 0
    const places: number[] = []
    const refusals: string[] = []
    for (let i = 0; i < 10; i++) {
      const res = await (i % 2 === 0 ? a : b).inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_B), payload: chat })
      if (res.statusCode === 200) places.push(Number(res.headers['x-ratelimit-remaining-requests']))
      else { t.equal(res.statusCode, 429); refusals.push(String(res.headers['x-ratelimit-remaining-requests'])) }
    }
    t.same([...places].sort((x, y) => x - y), [0, 1, 2, 3, 4, 5])
    t.same(refusals, ['0', '0', '0', '0'])

    const admin = bearer(ADMIN)
    const records = (await a.inject({ method: 'GET', url: '/admin/v1/usage?limit=1000', headers: admin })).json().data as Array<{ tags: string[], cost_usd: string }>
    const summary = (await b.inject({ method: 'GET', url: '/admin/v1/usage/summary?group_by=tag', headers: admin })).json().data as Array<{ tag: string | null, calls: number, cost_usd: string }>
    const nano = (usd: string): bigint => { const [w, f = ''] = usd.split('.'); return BigInt(w as string) * 1_000_000_000n + BigInt((f + '000000000').slice(0, 9)) }
    t.same(summary.map((s) => String(s.tag)).sort(), ['batch', 'null', 'team-a', 'team-b'], 'zeta\'s calls carry no tag')
    for (const s of summary) {
      const mine = records.filter((rec) => s.tag === null ? rec.tags.length === 0 : rec.tags.includes(s.tag))
      t.equal(s.calls, mine.length, `calls of ${s.tag}`)
      t.equal(nano(s.cost_usd), mine.reduce((sum, rec) => sum + nano(rec.cost_usd), 0n), `cost of ${s.tag}, exact`)
    }
    const batch = (await a.inject({ method: 'GET', url: '/admin/v1/usage?tag=batch&limit=1000', headers: admin })).json().data as unknown[]
    t.equal(batch.length, summary.find((s) => s.tag === 'batch')?.calls)
  })

  t.test('a provider going down is raised once whichever instance sees it first', async (t) => {
    const r = await webhookReceiver()
    t.teardown(() => r.close())
    const clock = new FakeClock(Date.UTC(2026, 0, 15, 12, 0, 0))
    const url = await scratchDatabase(t)
    const [a, b] = await instances(t, clock, url, scratchRedisPrefix(t), r.url, []) as [FastifyInstance, FastifyInstance]
    // each instance's store records the change; only the first write makes it
    const [x, y] = await Promise.all([a.gateway.store.alerts.transition('provider:demo', 'down', 'up'), b.gateway.store.alerts.transition('provider:demo', 'down', 'up')])
    t.same([x, y].filter((e) => e !== null), [1], 'one change, one episode')
    t.equal(await a.gateway.store.alerts.transition('provider:demo', 'up', 'up'), 2)
    t.equal(await b.gateway.store.alerts.transition('provider:new', 'up', 'up'), null, 'a provider first seen up is no news')
  })
})
