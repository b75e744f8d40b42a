import t, { type Test } from 'tap'
import { join } from 'node:path'
import pg from 'pg'
import { PostgresStore } from '../../engine/store/postgres/index.js'
import { SqliteStore } from '../../engine/store/sqlite/index.js'
import { usageId, type CachedAnswer, type QuotaLimit, type Store, type UsageFilter, type UsageRow } from '../../engine/store/types.js'
import type { Config } from '../../config/schema.js'
import { KEY_A, testConfig } from '../helper.js'
import { tempDir } from '../temp-dir.js'
import { REDIS_URL, scratchDatabase, scratchRedisPrefix, servicesMissing } from '../scratch-services.js'
import { usageRow } from '../usage-row.js'

// The store interfaces' contract, one set of test bodies run against every backend: SQLite (a
// file) and PostgreSQL + Redis (a key prefix of their own, and a database migrated once for the
// file and emptied before each test, when both answer).
// "Processes" are several stores opened on the same backend (SQLite: one file; PostgreSQL: one
// database and prefix), each with its own leases and memory, as workers and instances have.
// What is particular to one backend (SQLite's checkpoints, PostgreSQL's migrations and fault
// handling) is tested beside it.

/** `n` stores on one fresh backend, closed when the test ends. */
type Open = (t: Test, n?: number) => Promise<Store[]>

const sqlite: Open = async (t, n = 1) => {
  const file = join(tempDir('contract'), 'gw.db')
  const stores = Array.from({ length: n }, () => new SqliteStore(file))
  t.teardown(async () => { for (const s of stores) await s.close() })
  return stores
}

/** A database migrated from nothing by a store, dropped when `t` ends: the database of every test, emptied before each. */
async function migratedDatabase (t: Test): Promise<string> {
  const url = await scratchDatabase(t)
  const store = new PostgresStore({ postgres: url, redis: REDIS_URL, prefix: scratchRedisPrefix(t, 'mgc') })
  await store.ready
  await store.close()
  return url
}

/** Every row the previous test left gone, its sequences reset: the database as the migrations left it. */
async function emptied (url: string): Promise<string> {
  const c = new pg.Client({ connectionString: url })
  await c.connect()
  try {
    const tables = (await c.query<{ name: string }>("SELECT quote_ident(tablename) AS name FROM pg_tables WHERE schemaname = 'public' AND tablename <> 'schema_migrations'")).rows.map((r) => r.name)
    if (tables.length === 0) throw new Error('the database has no tables: not migrated')
    await c.query(`TRUNCATE ${tables.join(', ')} RESTART IDENTITY CASCADE`)
  } finally { await c.end() }
  return url
}

const postgres = (database: string): Open => async (t, n = 1) => {
  const url = await emptied(database)
  const prefix = scratchRedisPrefix(t, 'mgc')
  const stores = Array.from({ length: n }, () => new PostgresStore({ postgres: url, redis: REDIS_URL, prefix }))
  t.teardown(async () => { for (const s of stores) await s.close() })
  // all open: migrated once, subscribed
  await Promise.all(stores.map(async (s) => { await s.ready }))
  return stores
}

const tenants = (balanceUsd: number, keys: Array<Record<string, unknown>> = [{ key: KEY_A, name: 'a' }]): ReturnType<typeof testConfig> =>
  testConfig({ tenants: [{ org: 'acme', balance_usd: balanceUsd, projects: [{ id: 'web', keys }] }] })

const row = (i: number): UsageRow => usageRow({
  id: `usage_${String(i).padStart(5, '0')}`,
  created_at: 1_700_000_000_000 + i * 1000,
  trace_id: `t${i}`,
  model: i % 2 === 0 ? 'm-even' : 'm-odd',
  cached_input_tokens: 2,
  cost_detail: { input: 100, cached_input: 0, cache_write: 0, output: 0, images: 0, per_request: 0, tool_call: 0, tier: null }
})

function contract (t: Test, open: Open): void {
  t.test('tenants: an org keeps its balance across syncs; config keys follow the config', async (t) => {
    const [store] = await open(t) as [Store]
    await store.syncTenants(tenants(25), 1)
    await store.orgs.credit('acme', 1_000)
    await store.syncTenants(tenants(99), 2)
    t.equal((await store.orgs.get('acme'))?.balance_nano, 25e9 + 1_000, 'the initial balance is written once')
    t.same((await store.orgs.projects('acme')).map((p) => p.id), ['web'])
    const key = await store.keys.verify(KEY_A)
    t.match(key, { org: 'acme', project: 'web', name: 'a', source: 'config', revoked: false })
    await store.syncTenants(tenants(25, []), 3)
    t.equal(await store.keys.verify(KEY_A), undefined, 'a key no longer in the config is revoked')
    const back = await store.syncTenants(tenants(25), 4)
    t.equal(await store.keys.verify(KEY_A), undefined, 'listed again, it stays revoked: a revocation is final')
    t.match(back.warnings, [new RegExp(`${key?.id ?? 'no key'}.*revoked`)], 'and the sync says so')
    t.match((await store.audit.page(10)).map((r) => [r.action, r.actor]), [['key.revoke', 'config'], ['key.create', 'config'], ['project.create', 'config'], ['org.create', 'config']], 'what the config did is in the audit log')
  })

  t.test('tenants: only apply changes what exists; missing only creates what is not there', async (t) => {
    const [store] = await open(t) as [Store]
    const quota = (tokens: number): Config => {
      const c = tenants(25)
      return { ...c, tenants: c.tenants.map((o) => ({ ...o, quota: { tokens, per: 'day' as const } })) }
    }
    await store.syncTenants(quota(100), 1, 'missing')
    t.match((await store.orgs.get('acme'))?.quota, { tokens: 100 }, 'missing creates with what the file says')
    await store.syncTenants(quota(200), 2, 'missing')
    t.match((await store.orgs.get('acme'))?.quota, { tokens: 100 }, 'and never changes what is there')
    await store.syncTenants(quota(200), 3, 'apply')
    t.match((await store.orgs.get('acme'))?.quota, { tokens: 200 }, 'apply does')
    const before = (await store.audit.page(100)).length
    await store.syncTenants(quota(200), 4, 'apply')
    t.equal((await store.audit.page(100)).length, before, 'applying an unchanged file writes nothing to the audit log')
    const key = await store.keys.verify(KEY_A)
    t.ok(await store.keys.revoke(key?.id ?? '', 5, 'admin'))
    await store.syncTenants(quota(200), 6, 'apply')
    t.equal(await store.keys.verify(KEY_A), undefined, 'a key revoked through the admin API stays revoked when the file is applied')
    t.ok(await store.orgs.remove('acme', 7, 'admin'))
    const report = await store.syncTenants(quota(300), 8, 'apply')
    t.equal(await store.orgs.get('acme'), undefined, 'a deleted organization stays deleted')
    t.ok(report.warnings.some((w) => w.includes('organization acme')), 'the sync warns of it')
  })

  t.test('keys: created once with a hash, listed without the secret, revoked for good', async (t) => {
    const [store] = await open(t) as [Store]
    await store.syncTenants(tenants(1), 1)
    const heard: string[] = []
    store.onChange((c) => { if (c.kind === 'key') heard.push(c.id) })
    const k = await store.keys.create({ org: 'acme', project: 'web', models: ['demo/*'], passthrough: ['p1'], mcp: ['docs/*'], name: 'svc', source: 'admin' }, 5)
    t.match(k.key, /^mg-/)
    t.match(await store.keys.verify(k.key), { id: k.id, models: ['demo/*'], passthrough: ['p1'], mcp: ['docs/*'], name: 'svc' })
    const other = await store.keys.create({ org: 'acme', project: 'web', source: 'admin' }, 5)
    t.same(other.mcp, [], 'no MCP grants by default')
    t.same((await store.keys.update(other.id, { mcp: ['docs/echo', 'files/*'] }, 6, 'admin'))?.mcp, ['docs/echo', 'files/*'], 'MCP grants changed')
    t.same((await store.keys.rotate(other.id, 6, 6, 'admin'))?.key.mcp, ['docs/echo', 'files/*'], 'and kept by a rotation')
    heard.length = 0
    t.notOk(JSON.stringify(await store.keys.list('acme')).includes(k.key))
    t.ok(await store.keys.revoke(k.id, 6))
    t.notOk(await store.keys.revoke(k.id, 7), 'a second revocation changes nothing')
    t.equal(await store.keys.verify(k.key), undefined)
    t.equal((await store.keys.get(k.id))?.revoked, true)
    t.same(heard, [k.id], 'change listeners heard it once, before it resolved')
  })

  t.test('balance: holds never overdraw; settling charges once and releases the rest', async (t) => {
    const [store] = await open(t) as [Store]
    await store.syncTenants(tenants(0.00001), 1) // 10,000 nano
    const holds = await Promise.all(Array.from({ length: 20 }, async () => await store.balance.hold('acme', 3_000, 1)))
    t.equal(holds.filter(Boolean).length, 3, 'three holds of 3,000 fit in 10,000')
    for (let i = 0; i < 3; i++) await store.balance.settle('acme', 3_000, 1_000, 2)
    await store.flush()
    t.match(await store.orgs.get('acme'), { balance_nano: 7_000, held_nano: 0, spent_nano: 3_000 })
    t.notOk(await store.balance.hold('missing-org', 1, 3), 'no org, no hold')
  })

  t.test('quota: counts add up per scope and window', async (t) => {
    const [store] = await open(t) as [Store]
    const limit = { tokens: 1_000_000 }
    await Promise.all(Array.from({ length: 50 }, async () => { await store.quota.count('org:acme', 3_600_000, 2, 5, limit) }))
    await store.quota.count('org:acme', 7_200_000, 1, 1, limit)
    t.same(await store.quota.used('org:acme', 3_600_000), { tokens: 100, cost_nano: 250 })
    t.same(await store.quota.used('org:acme', 7_200_000), { tokens: 1, cost_nano: 1 })
    t.same(await store.quota.used('org:other', 3_600_000), { tokens: 0, cost_nano: 0 })
  })

  t.test('idempotency: one taker, owner-checked release', async (t) => {
    const [store] = await open(t) as [Store]
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
    const [store] = await open(t) as [Store]
    const now = 1_800_000_000_000
    const hits = await Promise.all(Array.from({ length: 40 }, async () => await store.rateLimits.hit('1.2.3.4', now, 60_000, 10)))
    t.same(hits.map((h) => h.count).sort((a, b) => a - b), Array.from({ length: 40 }, (_, i) => i + 1))
    t.ok(hits.every((h) => h.resetAt > now && h.resetAt <= now + 60_000))
    t.equal((await store.rateLimits.hit('5.6.7.8', now, 60_000, 10)).count, 1, 'another key counts alone')
  })

  t.test('rate limit: two processes, sequential hits alternating: admitted up to the limit exactly, refused after', async (t) => {
    const [a, b] = await open(t, 2) as [Store, Store]
    const now = 1_800_000_000_000
    const max = 300
    const counts: number[] = []
    for (let i = 0; i < max + 40; i++) counts.push((await (i % 2 === 0 ? a : b).rateLimits.hit('9.9.9.9', now + i, 60_000, max)).count)
    t.ok(counts.slice(0, max).every((c) => c <= max), 'the first max hits are admitted')
    t.ok(counts.slice(max).every((c) => c > max), 'every later one is refused')
    t.equal(new Set(counts.slice(0, max)).size, max, 'each place in the window handed out once')
  })

  t.test('balance: two processes, sequential calls alternating: admitted while the balance pays, refused from the first it cannot', async (t) => {
    const [a, b] = await open(t, 2) as [Store, Store]
    await a.syncTenants(tenants(0.0000105), 1) // 10,500 nano
    // a long call in flight on each keeps their leases from going idle; then each call holds
    // 1,000 and is charged 700: 10,500 − 6,000 − 5 × 700 ≥ 1,000, so calls 1-6 fit and 7 does not
    t.ok(await a.balance.hold('acme', 3000, 0))
    t.ok(await b.balance.hold('acme', 3000, 0))
    const admitted: boolean[] = []
    for (let i = 0; i < 16; i++) {
      const s = i % 2 === 0 ? a : b
      const ok = await s.balance.hold('acme', 1000, i)
      admitted.push(ok)
      if (ok) await s.balance.settle('acme', 1000, 700, i)
    }
    t.same(admitted, [...Array(6).fill(true), ...Array(10).fill(false)], 'what a lease holds beyond its calls in flight is asked back')
    await a.balance.settle('acme', 3000, 0, 20)
    await b.balance.settle('acme', 3000, 0, 20)
    await a.flush()
    await b.flush()
    t.match(await a.orgs.get('acme'), { balance_nano: 10_500 - 6 * 700, held_nano: 0, spent_nano: 6 * 700 })
  })

  t.test('quota: two processes, sequential calls alternating: refused from the call after the count that reached the limit, from memory once the window is known', async (t) => {
    const [a, b] = await open(t, 2) as [Store, Store]
    const reads = [0, 0]
    for (const [i, s] of [a, b].entries()) {
      const used = s.quota.used.bind(s.quota)
      s.quota.used = (scope, windowStart) => { reads[i] = (reads[i] ?? 0) + 1; return used(scope, windowStart) }
    }
    const run = async (scope: string, limit: QuotaLimit): Promise<string[]> => {
      const seen: string[] = []
      for (let i = 0; i < 10; i++) {
        const s = i % 2 === 0 ? a : b
        const used = await s.quota.admit(scope, 3_600_000, limit)
        if (used !== null) { seen.push(`refused at ${used.tokens} tokens, ${used.cost_nano} nano`); continue }
        seen.push('admitted')
        await s.quota.count(scope, 3_600_000, 3, 7, limit)
      }
      return seen
    }
    // counts of 3 tokens: 3, 6, 9, 12 — the fourth reaches 10
    t.same(await run('project:acme/web', { tokens: 10 }), [...Array(4).fill('admitted'), ...Array(6).fill('refused at 12 tokens, 28 nano')])
    t.same(reads, [1, 1], 'each process read the window once')
    // 7 nano a call: 7, 14, 21 — the third reaches 20
    t.same(await run('org:acme', { costNano: 20 }), [...Array(3).fill('admitted'), ...Array(7).fill('refused at 9 tokens, 21 nano')])
    t.same(await b.quota.used('org:acme', 3_600_000), { tokens: 9, cost_nano: 21 }, 'as stored')
  })

  t.test('quota: a new window is read afresh; a changed limit is judged again; a process that never read the window reads it closed', async (t) => {
    const [a, b, c] = await open(t, 3) as [Store, Store, Store]
    const hour = 3_600_000
    t.equal(await a.quota.admit('org:acme', hour, { tokens: 10 }), null)
    await b.quota.count('org:acme', hour, 12, 5, { tokens: 10 })
    t.same(await a.quota.admit('org:acme', hour, { tokens: 10 }), { tokens: 12, cost_nano: 5 }, 'closed by the other process\'s count')
    t.equal(await a.quota.admit('org:acme', 2 * hour, { tokens: 10 }), null, 'the next window is open')
    t.equal(await a.quota.admit('org:acme', hour, { tokens: 100 }), null, 'a higher limit: open again')
    t.same(await a.quota.admit('org:acme', hour, { tokens: 12 }), { tokens: 12, cost_nano: 5 }, 'a limit at the usage: closed')
    t.equal(await a.quota.admit('org:acme', hour, { costNano: 6 }), null, 'a USD limit on the same window judges the cost')
    t.same(await c.quota.admit('org:acme', hour, { tokens: 10 }), { tokens: 12, cost_nano: 5 }, 'read from the store')
  })

  t.test('usage: recorded, paged newest first with a cursor, totals and buckets', async (t) => {
    const [store] = await open(t) as [Store]
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

  t.test('usage: cache writes, images and the cost by part kept as written; a record without them reads 0, 0 and null', async (t) => {
    const [store] = await open(t) as [Store]
    const detail = { input: 1_782_000_000, cached_input: 600_000, cache_write: 17_700_000, output: 225_000, images: 126_000_000, per_request: 81_600, tool_call: 0, tier: 200_000 }
    const full: UsageRow = { ...row(1), id: 'usage_parts', cache_write_tokens: 2000, images: 3, cost_nano: 1_926_606_600, cost_detail: detail }
    const none: UsageRow = { ...row(2), id: 'usage_none', cache_write_tokens: 0, images: 0, cost_detail: null }
    await store.usage.record(full)
    await store.usage.record(none)
    const read = new Map((await store.usage.page({}, 10)).map((r) => [r.id, r]))
    t.match(read.get('usage_parts'), { cache_write_tokens: 2000, images: 3, cost_nano: 1_926_606_600 })
    t.same(read.get('usage_parts')?.cost_detail, detail, 'every part and the tier')
    t.match(read.get('usage_none'), { cache_write_tokens: 0, images: 0, cost_detail: null })
  })

  t.test('usage: a refused call keeps its error code, is found by its status and counts as an error in the summary', async (t) => {
    const [store] = await open(t) as [Store]
    const refused: UsageRow = { ...row(3), id: 'usage_refused', status: 'refused', error: 'quota_exceeded', provider: null, prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, total_tokens: 0, cost_nano: 0, cost_detail: null }
    await store.usage.record(refused)
    await store.usage.record(row(4))
    t.same((await store.usage.page({ status: ['refused'] }, 10)), [refused], 'read back as written, error included')
    t.equal((await store.usage.page({ status: ['ok'] }, 10))[0]?.error, null, 'a call that was not refused has none')
    t.match(await store.usage.summary({}, ['key_id']), [{ key_id: 'k', calls: 2, errors: 1 }])
  })

  t.test('usage: the model a call named and its chain of fallbacks kept beside the model that answered; a record written without them reads none', async (t) => {
    const [store] = await open(t) as [Store]
    const fell: UsageRow = { ...row(5), id: 'usage_fell', model: 'big/chat', requested_model: 'smart', fallbacks: [{ model: 'small/chat', why: 'rate_limited' }, { model: 'mid/chat', why: 'context_length' }] }
    // as a writer from before the columns writes it
    const { requested_model: _r, fallbacks: _f, ...older } = { ...row(6), id: 'usage_older' }
    await store.usage.record(fell)
    await store.usage.record(older as UsageRow)
    const read = new Map((await store.usage.page({}, 10)).map((r) => [r.id, r]))
    t.same(read.get('usage_fell'), fell, 'read back as written: the answering model, the requested one, the chain in order')
    t.match(read.get('usage_older'), { model: 'm', requested_model: null }, 'no requested model')
    t.same(read.get('usage_older')?.fallbacks ?? [], [], 'no chain')
  })

  t.test('usage: attempts and dropped parameters kept; filtered by status, endpoint and provider; a record found by its trace id, with its content', async (t) => {
    const [store] = await open(t) as [Store]
    const trace = (i: number): string => `0190a1b2-c3d4-7e5f-8a9b-${String(i).padStart(12, '0')}`
    const statuses = ['ok', 'upstream_error', 'timeout', 'client_aborted'] as const
    const rows: UsageRow[] = Array.from({ length: 16 }, (_, i) => ({
      ...row(i),
      id: usageId(trace(i)),
      trace_id: trace(i),
      status: statuses[i % 4] as string,
      endpoint: i % 2 === 0 ? 'chat.completions' : 'messages',
      provider: i % 3 === 0 ? 'p-one' : 'p-two',
      attempts: i % 4 === 1
        ? [{ provider: 'p-dead', upstream_model: 'up-m', outcome: 'network_error', status: null, error: 'ECONNREFUSED', latency_ms: 3 },
            { provider: 'p-two', upstream_model: 'up-m', outcome: 'server_error', status: 503, error: 'server_error', latency_ms: 12 }]
        : [{ provider: i % 3 === 0 ? 'p-one' : 'p-two', upstream_model: 'up-m', outcome: 'ok', status: 200, error: null, latency_ms: 40 + i }],
      dropped_params: i % 5 === 0 ? ['seed', 'logit_bias'] : []
    }))
    await Promise.all(rows.map(async (r, i) => { await store.usage.record(r, i === 4 ? { usage_id: r.id, created_at: r.created_at, request: '{"model":"m"}', response: '{"id":"x"}' } : undefined) }))
    // a record written as an older instance writes them: without attempts or dropped parameters
    const { attempts: _a, dropped_params: _d, ...bare } = { ...row(99), id: usageId(trace(99)), trace_id: trace(99) }
    await store.usage.record(bare as UsageRow)

    const newestFirst = (list: UsageRow[]): string[] => list.slice().sort((a, b) => b.created_at - a.created_at).map((r) => r.id)
    const all = [...rows, { ...bare, attempts: [], dropped_params: [] } as UsageRow]
    const cases: UsageFilter[] = [
      { status: ['upstream_error'] }, { status: ['timeout', 'client_aborted'] }, { status: ['ok'] }, { status: ['ok', 'timeout'] },
      { endpoint: 'messages' }, { provider: 'p-one' }, { org: 'acme', status: ['upstream_error', 'timeout'], endpoint: 'chat.completions', provider: 'p-two' }
    ]
    for (const f of cases) {
      const want = all.filter((r) => (f.status === undefined || (f.status as string[]).includes(r.status)) && (f.endpoint === undefined || r.endpoint === f.endpoint) && (f.provider === undefined || r.provider === f.provider))
      t.same((await store.usage.page(f, 100)).map((r) => r.id), newestFirst(want), `page of ${JSON.stringify(f)}`)
      t.equal((await store.usage.totals(f)).calls, want.length, `totals of ${JSON.stringify(f)}`)
    }
    const failed = await store.usage.page({ status: ['upstream_error'] }, 2)
    const next = await store.usage.page({ status: ['upstream_error'] }, 10, { created_at: failed[1]?.created_at as number, id: failed[1]?.id as string })
    t.same([...failed, ...next].map((r) => r.id), newestFirst(rows.filter((r) => r.status === 'upstream_error')), 'a filtered page goes on after its cursor')

    const page = await store.usage.page({}, 100)
    for (const r of all) t.same(page.find((p) => p.id === r.id), r, `${r.id} reads back as written, attempts and dropped parameters included`)

    const one = await store.usage.byTrace(trace(4))
    t.same(one, { row: rows[4], content: { request: '{"model":"m"}', response: '{"id":"x"}' } }, 'found by its trace id, with its content')
    t.same(await store.usage.byTrace(trace(5)), { row: rows[5], content: null }, 'no content stored: null')
    t.same(await store.usage.byTrace(trace(99)), { row: { ...bare, attempts: [], dropped_params: [] }, content: null }, 'a record written without them reads []')
    t.equal(await store.usage.byTrace(trace(50)), undefined, 'no such call')
    t.equal(await store.usage.byTrace('not-a-trace-id'), undefined)
  })

  t.test('tenancy: orgs and projects made, given quotas, deleted; their keys refused; a deletion is final, whatever the config says', async (t) => {
    const [store] = await open(t) as [Store]
    await store.syncTenants(tenants(1), 1)
    t.ok(await store.orgs.create({ id: 'globex', balanceNano: 5, quota: { tokens: 10, per: 'day' } }, 2, 'admin'))
    t.notOk(await store.orgs.create({ id: 'globex', balanceNano: 5, quota: null }, 3, 'admin'), 'taken')
    t.equal(await store.orgs.createProject('globex', 'shop', { usd: 1.5, per: 'month' }, 4, 'cli'), 'created')
    t.equal(await store.orgs.createProject('globex', 'shop', null, 5, 'cli'), 'exists')
    t.equal(await store.orgs.createProject('ghost', 'shop', null, 5, 'cli'), 'no_org')
    t.same((await store.orgs.quotas()).sort((a, b) => String(a.project).localeCompare(String(b.project))), [
      { org: 'globex', project: null, quota: { tokens: 10, per: 'day' } }, { org: 'globex', project: 'shop', quota: { usd: 1.5, per: 'month' } }])
    const k = await store.keys.create({ org: 'globex', project: 'shop', source: 'admin' }, 6)
    t.ok(await store.keys.verify(k.key))
    t.ok(await store.orgs.setQuota('globex', null, 7, 'admin'))
    t.ok(await store.orgs.removeProject('globex', 'shop', 8, 'admin'))
    t.equal(await store.keys.verify(k.key), undefined, 'a key of a deleted project')
    t.same(await store.orgs.quotas(), [], 'no quota of a deleted project')
    t.notOk(await store.orgs.setProjectQuota('globex', 'shop', null, 9, 'admin'), 'a deleted project is not changed')
    t.ok(await store.orgs.remove('globex', 10, 'admin'))
    t.equal(await store.orgs.get('globex'), undefined)
    t.notOk(await store.orgs.credit('globex', 1, 11, 'admin'), 'a deleted organization gets no credits')
    t.ok(await store.orgs.remove('acme', 12, 'admin'))
    t.equal(await store.keys.verify(KEY_A), undefined, 'a key of a deleted organization')
    const report = await store.syncTenants(testConfig({ tenants: [{ org: 'acme', quota: { usd: 3, per: 'day' }, projects: [{ id: 'web', keys: [{ key: KEY_A, limits: { rpm: 7 }, expires_at: '2030-01-01' }] }] }] }), 13)
    t.equal(await store.orgs.get('acme'), undefined, 'a config organization deleted through the store stays deleted')
    t.equal(await store.keys.verify(KEY_A), undefined, 'and its key answers nothing')
    t.match(report.warnings, [/organization acme.*deleted/], 'the sync says so')
    t.same((await store.audit.page(100)).map((a) => [a.action, a.actor]), [
      ['key.update', 'config'], ['org.delete', 'admin'], ['org.delete', 'admin'], ['project.delete', 'admin'], ['org.update', 'admin'], ['key.create', 'admin'],
      ['project.create', 'cli'], ['org.create', 'admin'], ['key.create', 'config'], ['project.create', 'config'], ['org.create', 'config']
    ], 'every change, newest first, and who made it: the store\'s callers and the config')
  })

  t.test('tenancy: a config quota is applied to a live tenant, one it does not name is kept', async (t) => {
    const [store] = await open(t) as [Store]
    await store.syncTenants(testConfig({ tenants: [{ org: 'acme', quota: { usd: 3, per: 'day' }, projects: [{ id: 'web', keys: [{ key: KEY_A, limits: { rpm: 7 }, expires_at: '2030-01-01' }] }] }] }), 1)
    t.match(await store.orgs.get('acme'), { quota: { usd: 3, per: 'day' } }, 'the quota the config names')
    t.match(await store.keys.verify(KEY_A), { limits: { rpm: 7 }, expires_at: Date.UTC(2030, 0, 1) }, 'its key, with the limits and expiry the config names')
    await store.syncTenants(tenants(1), 2)
    t.match(await store.orgs.get('acme'), { quota: { usd: 3, per: 'day' } }, 'a quota the config does not name is kept')
    t.match(await store.keys.verify(KEY_A), { limits: { rpm: 7 } }, 'and so are limits')
  })

  t.test('keys: updated, rotated in a line, revoked; every process hears each change before it resolves', async (t) => {
    const [a, b] = await open(t, 2) as [Store, Store]
    await a.syncTenants(tenants(1), 1)
    const heard: string[] = []
    b.onChange((c) => { heard.push(c.kind === 'key' ? `key ${c.id}` : c.kind) })
    const k = await a.keys.create({ org: 'acme', project: 'web', source: 'admin', limits: { rpm: 5 }, budget: { nano: 100, per: 'day' }, expires_at: 1e13 }, 2)
    t.match(await b.keys.verify(k.key), { limits: { rpm: 5 }, budget: { nano: 100, per: 'day' }, expires_at: 1e13, lineage: k.id, replaces: null })
    const updated = await a.keys.update(k.id, { models: ['demo/*'], limits: { tpm: 9 }, budget: null }, 3, 'admin')
    t.match(updated, { models: ['demo/*'], limits: { tpm: 9 }, budget: null, expires_at: 1e13 })
    t.same(heard.filter((h) => h.startsWith('key')), [`key ${k.id}`], 'the update was heard by the other process before it resolved')
    t.match(await b.keys.get(k.id), { models: ['demo/*'], limits: { tpm: 9 }, budget: null })
    const r = await a.keys.rotate(k.id, 500, 4, 'cli')
    t.ok(r)
    t.match(r?.key, { org: 'acme', project: 'web', models: ['demo/*'], limits: { tpm: 9 }, expires_at: 1e13, replaces: k.id, lineage: k.id, source: 'cli' })
    t.equal(r?.old.expires_at, 500)
    t.equal((await b.keys.verify(k.key))?.expires_at, 500, 'the old secret expires at the end of its grace')
    const second = await b.keys.rotate(r?.key.id as string, 400, 5, 'admin')
    t.equal(second?.key.lineage, k.id, 'a line keeps its first key\'s id')
    t.equal(await a.keys.update('key_nope', { name: 'x' }, 6, 'admin'), undefined)
    t.ok(await a.keys.revoke(k.id, 7, 'admin'))
    t.equal(await a.keys.update(k.id, { name: 'x' }, 8, 'admin'), undefined, 'a revoked key is not changed')
    t.equal(await a.keys.rotate(k.id, 9, 9, 'admin'), undefined, 'nor rotated')
    t.same(heard.filter((h) => h.startsWith('key')), [`key ${k.id}`, `key ${k.id}`, `key ${r?.key.id as string}`, `key ${k.id}`])
    a.keys.touch(k.id, 1000)
    a.keys.touch(k.id, 900)
    await a.flush()
    t.equal((await b.keys.get(k.id))?.last_used_at, 1000, 'last use written behind, never moved back')
    const audit = await b.audit.page(3)
    t.same(audit.map((x) => `${x.action} ${x.actor}`), ['key.revoke admin', 'key.rotate admin', 'key.rotate cli'])
    const next = await b.audit.page(3, { created_at: audit[2]?.at as number, id: audit[2]?.id as string })
    t.same(next.map((x) => `${x.action} ${x.actor}`), ['key.update admin', 'key.create admin', 'key.create config'], 'the next page (the config\'s own key made by the sync before)')
    t.notOk(JSON.stringify(await b.audit.page(100)).includes(k.key), 'no secret in the audit log')
  })

  t.test('audit: a change by an identity keeps who made it; the CLI and the config have none', async (t) => {
    const [store] = await open(t) as [Store]
    await store.syncTenants(tenants(1), 1)
    const sso = { kind: 'sso' as const, sub: 'u-1', email: 'ann@example.com' }
    const k = await store.keys.create({ org: 'acme', project: 'web', source: 'admin', by: sso }, 2)
    await store.keys.update(k.id, { name: 'n' }, 3, { kind: 'token', name: 'acme-ci' })
    await store.orgs.credit('acme', 5, 4, { kind: 'token', name: 'finance', extra: 'dropped' } as never)
    await store.keys.rotate(k.id, 5, 5, sso)
    await store.keys.revoke(k.id, 6, 'cli')
    const lines = (await store.audit.page(5)).map((a) => [a.action, a.actor, a.identity])
    t.same(lines, [
      ['key.revoke', 'cli', null],
      ['key.rotate', 'admin', sso],
      ['credits.add', 'admin', { kind: 'token', name: 'finance' }],
      ['key.update', 'admin', { kind: 'token', name: 'acme-ci' }],
      ['key.create', 'admin', sso]
    ], 'each line says who; only the identity\'s own fields are written')
    t.equal((await store.keys.list('acme')).find((x) => x.replaces === k.id)?.source, 'admin', 'a key rotated by an operator is the admin API\'s')
  })

  t.test('audit: each line names its organization; one organization\'s lines are selected by the query, and its cursor pages on within them', async (t) => {
    const [a, b] = await open(t, 2) as [Store, Store]
    await a.syncTenants(tenants(1), 1)
    const admin = { kind: 'token' as const, name: 'admin' }
    await a.orgs.create({ id: 'zeta', balanceNano: 0, quota: null }, 2, admin)
    await a.orgs.createProject('zeta', 'app', null, 3, admin)
    const zk = await a.keys.create({ org: 'zeta', project: 'app', source: 'admin', by: admin }, 4)
    const ak = await a.keys.create({ org: 'acme', project: 'web', source: 'admin', by: admin }, 5)
    await a.orgs.credit('acme', 5, 6, admin)
    await a.keys.update(zk.id, { name: 'z' }, 7, admin)
    await a.audit.record({ action: 'reload', target: 'config', detail: {} }, 8, admin)
    await a.keys.rotate(zk.id, 9, 9, admin)
    await a.keys.revoke(zk.id, 10, admin)
    await a.orgs.setProjectQuota('zeta', 'app', { tokens: 5, per: 'day' }, 11, admin)
    await a.audit.record({ action: 'session.start', target: 'u-9', org: 'zeta', detail: {} }, 12, { kind: 'sso', sub: 'u-9', email: null })
    await a.keys.update(ak.id, { name: 'a' }, 13, admin)

    const all = await b.audit.page(100)
    t.same(all.slice(0, 10).map((r) => [r.action, r.org]), [
      ['key.update', 'acme'], ['session.start', 'zeta'], ['project.update', 'zeta'], ['key.revoke', 'zeta'], ['key.rotate', 'zeta'],
      ['reload', null], ['key.update', 'zeta'], ['credits.add', 'acme'], ['key.create', 'acme'], ['key.create', 'zeta']
    ], 'each line names the organization it is about; a reload none')
    t.same(all.filter((r) => r.at <= 3).map((r) => [r.action, r.org]), [['project.create', 'zeta'], ['org.create', 'zeta'], ['key.create', 'acme'], ['project.create', 'acme'], ['org.create', 'acme']], 'the config\'s own lines too')

    const first = await b.audit.page(3, undefined, 'zeta')
    t.same(first.map((r) => r.action), ['session.start', 'project.update', 'key.revoke'], 'a full page of zeta\'s lines, though the newest line is acme\'s')
    const last = first[2] as { at: number, id: string }
    const next = await a.audit.page(3, { created_at: last.at, id: last.id }, 'zeta')
    t.same(next.map((r) => r.action), ['key.rotate', 'key.update', 'key.create'], 'the next page of zeta\'s, by the cursor')
    const rest = await a.audit.page(3, { created_at: next[2]?.at as number, id: next[2]?.id as string }, 'zeta')
    t.same(rest.map((r) => r.action), ['project.create', 'org.create'], 'and the last')
    t.same((await b.audit.page(100, undefined, 'acme')).map((r) => r.action), ['key.update', 'credits.add', 'key.create', 'key.create', 'project.create', 'org.create'], 'acme\'s alone (the config\'s own lines among them)')
    t.same(await b.audit.page(100, undefined, 'nobody'), [], 'an organization with no line')
  })

  t.test('sessions: stored hashed, seen by every process, ended, expired; a sign-in under way is taken once', async (t) => {
    const [a, b] = await open(t, 2) as [Store, Store]
    const s = { sub: 'u-1', email: 'ann@example.com', name: 'Ann', role: 'admin' as const, org: null, csrf: 'c-1', created_at: 1000, expires_at: 5000, id_token: 'eyJ.the-id-token.sig' }
    await a.sessions.create('sid-one', s)
    await a.sessions.create('sid-two', { ...s, role: 'org_admin', org: 'acme', csrf: 'c-2', id_token: null })
    await a.sessions.create('sid-other', { ...s, sub: 'u-2', csrf: 'c-3' })
    t.same(await b.sessions.get('sid-one', 4999), s, 'another process sees it')
    t.equal(await b.sessions.get('sid-one', 5000), undefined, 'not once it has expired')
    t.equal(await b.sessions.get('sid-ONE', 1000), undefined, 'an id is matched exactly')
    t.equal(await b.sessions.endSubject('u-1', { role: 'org_admin', org: 'acme' }), 1, 'the sessions of another role end')
    t.equal(await a.sessions.get('sid-one', 1000), undefined)
    t.same(await a.sessions.get('sid-two', 1000), { ...s, role: 'org_admin', org: 'acme', csrf: 'c-2', id_token: null }, 'the one of the role kept stays (a session with no ID token kept)')
    t.ok(await b.sessions.end('sid-two'))
    t.notOk(await b.sessions.end('sid-two'), 'ended once')
    t.equal(await a.sessions.get('sid-two', 1000), undefined, 'a session ended by one process is gone for the other')
    t.ok(await a.sessions.get('sid-other', 1000), 'another subject\'s session is untouched')
    t.equal(await a.sessions.endSubject('u-2'), 1)
    const login = { state: 'st', nonce: 'no', verifier: 've', to: 'admin' as const, expires_at: 3000 }
    await a.sessions.begin('lid', login)
    await a.sessions.begin('lid-late', { ...login, to: 'developer' })
    t.same(await b.sessions.take('lid', 2999), login, 'another process takes it')
    t.equal(await a.sessions.take('lid', 1000), undefined, 'once')
    t.equal(await b.sessions.take('lid-late', 3000), undefined, 'not once it has expired')
    await a.sessions.create('sid-old', { ...s, expires_at: 2000 })
    await a.sessions.create('sid-new', { ...s, expires_at: 9000 })
    await b.sessions.sweep(2000)
    t.ok(await a.sessions.get('sid-new', 2000), 'a sweep keeps the live ones')
    // an admin's view: live sessions, newest first, by their handle, never the id or the CSRF token
    await a.sessions.create('sid-three', { ...s, sub: 'u-3', created_at: 3000, expires_at: 9000 })
    const live = await b.sessions.list(2000)
    t.same(live.map((x) => [x.sub, x.created_at]), [['u-3', 3000], ['u-1', 1000]], 'the live ones, newest first')
    t.same(Object.keys(live[0] ?? {}).sort(), ['created_at', 'email', 'expires_at', 'handle', 'name', 'org', 'role', 'sub'])
    t.notOk(JSON.stringify(live).includes('sid-') || JSON.stringify(live).includes('"c-1"') || JSON.stringify(live).includes('id-token'), 'neither an id, a CSRF token nor an ID token')
    const handle = live[0]?.handle as string
    t.match(handle, /^[0-9a-f]{64}$/)
    t.equal(await a.sessions.endHandle(handle, 9000), undefined, 'a session past its end is not ended by its handle (the sweep takes it)')
    t.match(await a.sessions.endHandle(handle, 2000), { handle, sub: 'u-3', role: 'admin' }, 'ended by its handle, by another process')
    t.equal(await b.sessions.get('sid-three', 2000), undefined, 'and gone for every process')
    t.equal(await b.sessions.endHandle(handle, 2000), undefined, 'once')
    t.equal(await b.sessions.endHandle('sid-new', 2000), undefined, 'a handle is not the id')
    t.ok(await a.sessions.get('sid-new', 2000), 'the others are untouched')
    if (a.kind === 'sqlite') {
      const rows = (a as SqliteStore).db.prepare('SELECT * FROM sessions').all() as Array<{ id_hash: string }>
      t.same(rows.map((r) => r.id_hash.length), [64], 'the swept one is gone; the table holds hashes')
      t.notOk(JSON.stringify(rows).includes('sid-new'), 'never the id itself')
    } else {
      const rows = (await (a as PostgresStore).conn.q<{ id_hash: string }>('SELECT id_hash FROM sessions')).rows
      t.same(rows.map((r) => r.id_hash.length), [64], 'the swept one is gone; the table holds hashes')
      t.notOk(JSON.stringify(rows).includes('sid-new'), 'never the id itself')
    }
  })

  t.test('usage summary: one aggregate, grouped and bucketed; sums exact past 2^53 nano-dollars', async (t) => {
    const [store] = await open(t) as [Store]
    const rows = Array.from({ length: 40 }, (_, i) => ({ ...row(i), key_id: i % 4 === 0 ? 'k2' : 'k', status: i % 10 === 2 ? 'upstream_error' : 'ok', cost_nano: 1_000_003 * i, saved_nano: i % 5 }))
    await Promise.all(rows.map(async (r) => { await store.usage.record(r) }))
    const grouped = await store.usage.summary({ org: 'acme' }, ['key_id', 'model'], 10_000)
    const expected = new Map<string, { calls: number, errors: number, cost: bigint, saved: bigint, prompt: number }>()
    for (const r of rows) {
      const k = `${Math.floor(r.created_at / 10_000) * 10_000} ${r.key_id} ${r.model}`
      const e = expected.get(k) ?? { calls: 0, errors: 0, cost: 0n, saved: 0n, prompt: 0 }
      e.calls++
      if (r.status !== 'ok') e.errors++
      e.cost += BigInt(r.cost_nano)
      e.saved += BigInt(r.saved_nano)
      e.prompt += r.prompt_tokens
      expected.set(k, e)
    }
    t.same(grouped.map((g) => [`${g.bucket_start as number} ${g.key_id as string} ${g.model as string}`, g.calls, g.errors, g.cost_nano, g.saved_nano, g.prompt_tokens]),
      [...expected].sort((x, y) => x[0].localeCompare(y[0])).map(([k, e]) => [k, e.calls, e.errors, e.cost, e.saved, e.prompt]))
    const [total] = await store.usage.summary({ key_id: 'k2', since: rows[8]?.created_at }, [])
    t.same(total, { calls: 8, errors: 2, prompt_tokens: 80, cached_input_tokens: 16, completion_tokens: 40, cost_nano: BigInt(rows.filter((r, i) => r.key_id === 'k2' && i >= 8).reduce((s, r) => s + r.cost_nano, 0)), saved_nano: BigInt(rows.filter((r, i) => r.key_id === 'k2' && i >= 8).reduce((s, r) => s + r.saved_nano, 0)) })
    const huge = 4_000_000_000_000_000
    await store.usage.record({ ...row(100), id: 'big1', cost_nano: huge + 1, model: 'm-big' })
    await store.usage.record({ ...row(101), id: 'big2', cost_nano: huge + 2, model: 'm-big' })
    await store.usage.record({ ...row(102), id: 'big3', cost_nano: huge + 4, model: 'm-big' })
    const [big] = await store.usage.summary({ model: 'm-big' }, ['provider'])
    t.equal(big?.cost_nano, 3n * BigInt(huge) + 7n, 'a sum past 2^53 is exact')
    t.same(await store.usage.summary({ org: 'nobody' }, ['org']), [])
  })

  const answer = (storedAt: number, ttlMs: number, value = `v${storedAt}`): CachedAnswer => ({ value, storedAt, expiresAt: storedAt + ttlMs })
  const T0 = 1_700_000_000_000

  t.test('cache: an answer serves until it expires, to lookups it is fresh enough for, on every process', async (t) => {
    const [a, b] = await open(t, 2) as [Store, Store]
    t.same(await a.cache.lookup('k1', { now: T0 }), { kind: 'miss' }, 'nothing stored: a miss, nothing claimed')
    await a.cache.put('k1', answer(T0, 60_000, 'the answer'), 100)
    t.same(await b.cache.lookup('k1', { now: T0 + 1000 }), { kind: 'hit', entry: { value: 'the answer', storedAt: T0, expiresAt: T0 + 60_000 } }, 'found by another process')
    t.same(await b.cache.lookup('k1', { now: T0 + 1000, storedSince: T0 + 1 }), { kind: 'miss' }, 'not for a lookup that wants a newer one')
    t.same(await a.cache.lookup('k1', { now: T0 + 60_000 }), { kind: 'miss' }, 'not once expired')
    t.same(await a.cache.lookup('k2', { now: T0 }), { kind: 'miss' }, 'another key is another answer')
    await a.cache.put('k1', answer(T0 + 60_000, 1000, 'newer'), 100)
    t.match(await b.cache.lookup('k1', { now: T0 + 60_500 }), { kind: 'hit', entry: { value: 'newer' } }, 'stored again: replaced')
  })

  t.test('cache: bounded by max entries, the oldest stored going first', async (t) => {
    const [store] = await open(t) as [Store]
    for (let i = 0; i < 8; i++) await store.cache.put(`k${i}`, answer(T0 + i, 60_000), 5)
    await store.cache.put('k7', answer(T0 + 8, 60_000), 5)
    const found: string[] = []
    for (let i = 0; i < 8; i++) if ((await store.cache.lookup(`k${i}`, { now: T0 + 10 })).kind === 'hit') found.push(`k${i}`)
    t.same(found, ['k3', 'k4', 'k5', 'k6', 'k7'], 'the five stored last; storing k7 again did not push out another')
  })

  t.test('cache: identical misses on two processes: one fills, the others wait for its answer; an abandoned fill lets them go on', async (t) => {
    const [a, b] = await open(t, 2) as [Store, Store]
    const fill = (owner: string): { owner: string, ttlMs: number } => ({ owner, ttlMs: 30_000 })
    t.same(await a.cache.lookup('k', { now: T0, fill: fill('r1') }), { kind: 'fill' }, 'the first miss fills')
    t.same(await a.cache.lookup('k', { now: T0, fill: fill('r2') }), { kind: 'wait' }, 'an identical one on the same process waits')
    t.same(await b.cache.lookup('k', { now: T0, fill: fill('r3') }), { kind: 'wait' }, 'and on another process')
    let woken = 0
    const waits = [a.cache.waitFill('k', 20_000), b.cache.waitFill('k', 20_000)].map(async (p) => { await p; woken++ })
    t.equal(woken, 0, 'waiting')
    await a.cache.put('k', answer(T0, 60_000, 'filled'), 100, 'r1')
    await Promise.all(waits)
    t.equal(woken, 2, 'both woke when the answer was stored, long before their time was up')
    t.match(await b.cache.lookup('k', { now: T0 + 1, fill: fill('r3') }), { kind: 'hit', entry: { value: 'filled' } })

    t.same(await b.cache.lookup('j', { now: T0, fill: fill('r4') }), { kind: 'fill' })
    t.same(await a.cache.lookup('j', { now: T0, fill: fill('r5') }), { kind: 'wait' })
    const waiting = a.cache.waitFill('j', 20_000)
    await b.cache.abandon('j', 'r4')
    await waiting
    t.same(await a.cache.lookup('j', { now: T0 + 1 }), { kind: 'miss' }, 'abandoned: no answer, and the waiter went on')
    t.same(await a.cache.lookup('j', { now: T0 + 1, fill: fill('r5') }), { kind: 'fill' }, 'the fill is free again')
    t.same(await b.cache.lookup('j', { now: T0 + 40_000, fill: fill('r6') }), { kind: 'fill' }, 'a fill past its time is taken over')
    await a.cache.abandon('j', 'r5')
    t.same(await b.cache.lookup('j', { now: T0 + 40_001, fill: fill('r7') }), { kind: 'wait' }, 'the late owner\'s end left the new fill alone')
  })

  t.test('provider objects: each is its maker\'s organization\'s, on every process; the first owner stays; forgotten when deleted', async (t) => {
    const [a, b] = await open(t, 2) as [Store, Store]
    const acme = { org: 'acme', project: 'web' }
    const rival = { org: 'rival', project: 'app' }
    t.same(await a.objects.owned('p1', 'acme', []), new Set(), 'asking for nothing finds nothing')
    await a.objects.claim('p1', [{ kind: 'files', id: 'file-1' }, { kind: 'batches', id: 'batch_1' }], acme, 1)
    await b.objects.claim('p1', [{ kind: 'files', id: 'file-2' }], rival, 2)
    t.same(await b.objects.owned('p1', 'acme', ['file-1', 'file-2', 'batch_1', 'nope']), new Set(['file-1', 'batch_1']), 'an organization owns what it made, as another process reads it')
    t.same(await a.objects.owned('p1', 'rival', ['file-1', 'file-2']), new Set(['file-2']))
    t.same(await a.objects.owned('p2', 'acme', ['file-1']), new Set(), 'ids are per provider')
    await b.objects.claim('p1', [{ kind: 'files', id: 'file-1' }], rival, 3)
    t.same(await a.objects.owned('p1', 'rival', ['file-1']), new Set(), 'a second claim of an id leaves it its first owner\'s')
    t.same(await a.objects.owned('p1', 'acme', ['file-1']), new Set(['file-1']))
    await a.objects.claim('p1', [], acme, 4)
    await b.objects.forget('p1', 'file-1')
    t.same(await a.objects.owned('p1', 'acme', ['file-1', 'batch_1']), new Set(['batch_1']), 'a forgotten object is no one\'s')
    const many = Array.from({ length: 500 }, (_, i) => ({ kind: 'files', id: `file-many-${i}` }))
    await a.objects.claim('p1', many, acme, 5)
    t.equal((await b.objects.owned('p1', 'acme', many.map((o) => o.id))).size, 500, 'many at once')
  })
}

t.test('SQLite', async (t) => { contract(t, sqlite) })

t.test('PostgreSQL + Redis', async (t) => {
  if (await servicesMissing() !== null) { t.plan(0, 'PostgreSQL or Redis not reachable'); return }
  contract(t, postgres(await migratedDatabase(t)))
})
