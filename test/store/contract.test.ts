import t from 'tap'
import pg from 'pg'
import { Redis } from 'ioredis'
import { randomBytes } from 'node:crypto'
import { join } from 'node:path'
import { PostgresStore } from '../../plugins/store/postgres/index.js'
import { SqliteStore } from '../../plugins/store/sqlite/index.js'
import type { Store, UsageRow } from '../../plugins/store/types.js'
import { KEY_A, testConfig } from '../helper.js'
import { tempDir } from '../temp-dir.js'

// The store interfaces' contract, one set of test bodies run against every backend: SQLite (a
// file) and PostgreSQL + Redis (a database and a key prefix of their own, when both answer).
// What is particular to one backend (SQLite's leases and checkpoints, PostgreSQL's migrations
// and fault handling) is tested beside it.

const ADMIN_URL = process.env.PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

type Open = (t: Tap.Test) => Promise<Store>

const sqlite: Open = async (t) => {
  const store = new SqliteStore(join(tempDir('contract'), 'gw.db'))
  t.teardown(async () => { await store.close() })
  return store
}

async function postgresReachable (): Promise<boolean> {
  const c = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 2000 })
  try { await c.connect() } catch { return false } finally { await c.end().catch(() => {}) }
  const r = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  try { await r.connect(); await r.ping(); return true } catch { return false } finally { r.disconnect() }
}

const postgres: Open = async (t) => {
  const name = `mg_test_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: ADMIN_URL })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  const prefix = `mgc:${randomBytes(4).toString('hex')}:`
  const store = new PostgresStore({ postgres: ADMIN_URL.replace(/\/postgres$/, `/${name}`), redis: REDIS_URL, prefix })
  t.teardown(async () => {
    await store.close()
    const c = new pg.Client({ connectionString: ADMIN_URL })
    await c.connect()
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await c.end()
    const r = new Redis(REDIS_URL)
    const keys = await r.keys(`${prefix}*`)
    if (keys.length > 0) await r.del(...keys)
    r.disconnect()
  })
  return store
}

const tenants = (balanceUsd: number, keys: Array<Record<string, unknown>> = [{ key: KEY_A, name: 'a' }]): ReturnType<typeof testConfig> =>
  testConfig({ tenants: [{ org: 'acme', balance_usd: balanceUsd, projects: [{ id: 'web', keys }] }] })

const row = (i: number): UsageRow => ({
  id: `usage_${String(i).padStart(5, '0')}`, created_at: 1_700_000_000_000 + i * 1000, trace_id: `t${i}`, org_id: 'acme', project_id: 'web', key_id: 'k', endpoint: 'chat.completions',
  model: i % 2 === 0 ? 'm-even' : 'm-odd', provider: 'p', stream: 0, status: 'ok', prompt_tokens: 10, cached_input_tokens: 2, completion_tokens: 5, total_tokens: 15, cost_nano: 100, latency_ms: 1, ttft_ms: null
})

function contract (t: Tap.Test, open: Open): void {
  t.test('tenants: an org keeps its balance across syncs; config keys follow the config', async (t) => {
    const store = await open(t)
    await store.syncTenants(tenants(25), 1)
    await store.orgs.credit('acme', 1_000)
    await store.syncTenants(tenants(99), 2)
    t.equal((await store.orgs.get('acme'))?.balance_nano, 25e9 + 1_000, 'the initial balance is written once')
    t.same((await store.orgs.projects('acme')).map((p) => p.id), ['web'])
    const key = await store.keys.verify(KEY_A)
    t.match(key, { org: 'acme', project: 'web', name: 'a', source: 'config', revoked: false })
    await store.syncTenants(tenants(25, []), 3)
    t.equal(await store.keys.verify(KEY_A), undefined, 'a key no longer in the config is revoked')
    await store.syncTenants(tenants(25), 4)
    t.equal((await store.keys.verify(KEY_A))?.id, key?.id, 'and back, with the same id')
  })

  t.test('keys: created once with a hash, listed without the secret, revoked for good', async (t) => {
    const store = await open(t)
    await store.syncTenants(tenants(1), 1)
    const heard: string[] = []
    store.keys.onRevoked((id) => { heard.push(id) })
    const k = await store.keys.create({ org: 'acme', project: 'web', models: ['demo/*'], passthrough: ['p1'], name: 'svc', source: 'admin' }, 5)
    t.match(k.key, /^mg-/)
    t.match(await store.keys.verify(k.key), { id: k.id, models: ['demo/*'], passthrough: ['p1'], name: 'svc' })
    t.notOk(JSON.stringify(await store.keys.list('acme')).includes(k.key))
    t.ok(await store.keys.revoke(k.id, 6))
    t.notOk(await store.keys.revoke(k.id, 7), 'a second revocation changes nothing')
    t.equal(await store.keys.verify(k.key), undefined)
    t.equal((await store.keys.get(k.id))?.revoked, true)
    const until = Date.now() + 1500
    while (!heard.includes(k.id) && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20))
    t.ok(heard.includes(k.id), 'revocation listeners hear it')
  })

  t.test('balance: holds never overdraw; settling charges once and releases the rest', async (t) => {
    const store = await open(t)
    await store.syncTenants(tenants(0.00001), 1) // 10,000 nano
    const holds = await Promise.all(Array.from({ length: 20 }, async () => await store.balance.hold('acme', 3_000, 1)))
    t.equal(holds.filter(Boolean).length, 3, 'three holds of 3,000 fit in 10,000')
    for (let i = 0; i < 3; i++) await store.balance.settle('acme', 3_000, 1_000, 2)
    await store.flush()
    t.match(await store.orgs.get('acme'), { balance_nano: 7_000, held_nano: 0, spent_nano: 3_000 })
    t.notOk(await store.balance.hold('missing-org', 1, 3), 'no org, no hold')
  })

  t.test('quota: counts add up per scope and window', async (t) => {
    const store = await open(t)
    await Promise.all(Array.from({ length: 50 }, async () => { await store.quota.count('org:acme', 3_600_000, 2, 5) }))
    await store.quota.count('org:acme', 7_200_000, 1, 1)
    t.same(await store.quota.used('org:acme', 3_600_000), { tokens: 100, cost_nano: 250 })
    t.same(await store.quota.used('org:acme', 7_200_000), { tokens: 1, cost_nano: 1 })
    t.same(await store.quota.used('org:other', 3_600_000), { tokens: 0, cost_nano: 0 })
  })

  t.test('idempotency: one taker, owner-checked release', async (t) => {
    const store = await open(t)
    const now = Date.now()
    const wins = await Promise.all(Array.from({ length: 30 }, async (_, i) => await store.idempotency.take('key_1', 'k', `o${i}`, now, 60_000)))
    t.equal(wins.filter(Boolean).length, 1)
    const owner = `o${wins.indexOf(true)}`
    await store.idempotency.keep('key_1', 'k', owner, now + 120_000)
    await store.idempotency.release('key_1', 'k', 'not-the-owner')
    t.notOk(await store.idempotency.take('key_1', 'k', 'late', now, 60_000))
    await store.idempotency.release('key_1', 'k', owner)
    t.ok(await store.idempotency.take('key_1', 'k', 'late', now, 60_000))
    t.ok(await store.idempotency.take('key_2', 'k', 'other-scope', now, 60_000), 'scopes are apart')
  })

  t.test('rate limit: hits counted once each, per key and window', async (t) => {
    const store = await open(t)
    const now = 1_800_000_000_000
    const hits = await Promise.all(Array.from({ length: 40 }, async () => await store.rateLimits.hit('1.2.3.4', now, 60_000, 10)))
    t.same(hits.map((h) => h.count).sort((a, b) => a - b), Array.from({ length: 40 }, (_, i) => i + 1))
    t.ok(hits.every((h) => h.resetAt > now && h.resetAt <= now + 60_000))
    t.equal((await store.rateLimits.hit('5.6.7.8', now, 60_000, 10)).count, 1, 'another key counts alone')
  })

  t.test('usage: recorded, paged newest first with a cursor, totals and buckets', async (t) => {
    const store = await open(t)
    await Promise.all(Array.from({ length: 30 }, async (_, i) => { await store.usage.record(row(i), i === 0 ? { usage_id: row(0).id, created_at: row(0).created_at, request: 'q', response: 'a' } : undefined) }))
    const first = await store.usage.page({ org: 'acme' }, 10)
    t.same(first.map((r) => r.id), Array.from({ length: 10 }, (_, i) => row(29 - i).id))
    const last = first[9] as UsageRow
    const second = await store.usage.page({ org: 'acme' }, 10, { created_at: last.created_at, id: last.id })
    t.equal(second[0]?.id, row(19).id)
    t.match(await store.usage.totals({ org: 'acme', model: 'm-even' }), { calls: 15, prompt_tokens: 150, cached_input_tokens: 30, completion_tokens: 75, total_tokens: 225, cost_nano: 1500 })
    t.match(await store.usage.totals({ org: 'acme', since: row(20).created_at }), { calls: 10 })
    const buckets = await store.usage.buckets('acme', 'web', row(0).created_at, 10_000)
    t.equal(buckets.reduce((a, b) => a + b.calls, 0), 30)
    t.equal(await store.usage.sweepContent(row(0).created_at + 1), 1, 'stored content swept by age')
  })
}

t.test('SQLite', async (t) => { contract(t, sqlite) })

t.test('PostgreSQL + Redis', async (t) => {
  if (!await postgresReachable()) { t.skip('PostgreSQL or Redis not reachable'); return }
  contract(t, postgres)
})
