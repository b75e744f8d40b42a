import t, { type Test } from 'tap'
import { randomBytes } from 'node:crypto'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { PostgresStore } from '../../engine/store/postgres/index.js'
import type { UsageRow } from '../../engine/store/types.js'
import { childEnv, eventually, KEY_A, testConfig } from '../helper.js'
import { tempDir } from '../temp-dir.js'
import { REDIS_URL, scratchDatabase as database, scratchRedisPrefix as prefix, servicesMissing as services } from '../scratch-services.js'
import { usageRow } from '../usage-row.js'

// The PostgreSQL + Redis store, against the machine's PostgreSQL (127.0.0.1:5432) and Redis
// (127.0.0.1:6379). Each test gets a database of its own (created and dropped here) and a Redis
// key prefix of its own. "Instances" are several stores, or several gateway apps, on the same
// database: what one does, the others must see, exactly.

const tenants = (balanceUsd: number, quota?: Record<string, unknown>): Array<Record<string, unknown>> => [{ org: 'acme', balance_usd: balanceUsd, projects: [{ id: 'web', ...(quota === undefined ? {} : { quota }), keys: [{ key: KEY_A }] }] }]

async function stores (t: Test, n: number, balanceUsd = 25): Promise<PostgresStore[]> {
  const url = await database(t)
  const p = prefix(t)
  const list = Array.from({ length: n }, () => new PostgresStore({ postgres: url, redis: REDIS_URL, prefix: p }))
  t.teardown(async () => { await Promise.all(list.map(async (s) => await s.close())) })
  // all open at once: the migrations run exactly once
  await Promise.all(list.map(async (s) => { await s.syncTenants(testConfig({ tenants: tenants(balanceUsd) }), Date.now()) }))
  return list
}

const row = (i: number, org = 'acme'): UsageRow => usageRow({
  id: `usage_${i}_${randomBytes(3).toString('hex')}`,
  created_at: 1_700_000_000_000 + i,
  trace_id: `t${i}`,
  org_id: org,
  cost_nano: 100 + i
})

t.test('PostgreSQL + Redis store', async (t) => {
  const missing = await services()
  if (missing !== null) { t.plan(0, `PostgreSQL or Redis not reachable (${missing})`); return }

  t.test('balance: 50 concurrent holds on three instances against a balance that pays for 5', async (t) => {
    const hold = 1_000_000
    const all = await stores(t, 3, 5 * hold / 1e9)
    const results = await Promise.all(Array.from({ length: 50 }, async (_, i) => await (all[i % 3] as PostgresStore).balance.hold('acme', hold, Date.now())))
    const taken = results.filter(Boolean).length
    // an instance's lease may keep a part another instance's call would need while its own calls run
    t.ok(taken >= 1 && taken <= 5, `${taken} holds taken: never more than the balance pays for`)
    const org = await all[1]?.orgs.get('acme')
    t.ok((org?.held_nano ?? Infinity) <= 5 * hold, 'never more held than the balance')
    // each instance settles its own holds at a charge below the hold
    for (const [i, ok] of results.entries()) if (ok) await (all[i % 3] as PostgresStore).balance.settle('acme', hold, 400_000, Date.now())
    for (const s of all) await s.flush()
    const after = await all[2]?.orgs.get('acme')
    t.match(after, { held_nano: 0, spent_nano: taken * 400_000 }, 'every charge applied once, every lease given back')
    t.equal((after?.balance_nano ?? 0) + (after?.spent_nano ?? 0), 5 * hold, 'balance + spent = initial')
  })

  t.test('balance: holds come out of the instance\'s lease; the store is asked only to refill it', async (t) => {
    const [a] = await stores(t, 1)
    let refills = 0
    const query = a.conn.pool.query.bind(a.conn.pool) as (...args: unknown[]) => unknown
    ;(a.conn.pool as unknown as { query: unknown }).query = (...args: unknown[]) => {
      if (typeof args[0] === 'string' && args[0].includes('modelgate_refill_lease')) refills++
      return query(...args)
    }
    const held = await Promise.all(Array.from({ length: 16 }, async () => await a.balance.hold('acme', 1_000_000, Date.now())))
    t.ok(held.every(Boolean))
    t.equal(refills, 1, '16 holds in flight, one refill')
    t.equal(a.balance.hold('acme', 1_000_000, Date.now()), true, 'the next one is answered at once, without a promise')
    for (let i = 0; i < 17; i++) await a.balance.settle('acme', 1_000_000, 300_000, Date.now())
    await a.flush()
    t.match(await a.orgs.get('acme'), { held_nano: 0, spent_nano: 17 * 300_000 }, 'charged, and the idle lease given back')
  })

  t.test('idempotency: 100 concurrent takes of one key on two instances, one wins; keep and release check the owner', async (t) => {
    const [a, b] = await stores(t, 2) as [PostgresStore, PostgresStore]
    const wins = await Promise.all(Array.from({ length: 100 }, async (_, i) => await (i % 2 === 0 ? a : b).idempotency.take('key_1', 'k', `owner-${i}`, Date.now(), 60_000)))
    t.equal(wins.filter(Boolean).length, 1)
    const owner = `owner-${wins.indexOf(true)}`
    await b.idempotency.release('key_1', 'k', 'someone-else')
    t.notOk(await a.idempotency.take('key_1', 'k', 'late', Date.now(), 60_000), 'another owner cannot release it')
    await a.idempotency.release('key_1', 'k', owner)
    t.ok(await b.idempotency.take('key_1', 'k', 'next', Date.now(), 60_000), 'free again once its owner released it')
  })

  t.test('rate limit: 200 concurrent hits on two instances: the window admits 100 at most, each place once', async (t) => {
    const [a, b] = await stores(t, 2) as [PostgresStore, PostgresStore]
    const now = Date.now()
    const hits = await Promise.all(Array.from({ length: 200 }, async (_, i) => await (i % 2 === 0 ? a : b).rateLimits.hit('10.0.0.1', now, 60_000, 100)))
    const admitted = hits.map((h) => h.count).filter((c) => c <= 100)
    t.equal(new Set(admitted).size, admitted.length, 'no place handed out twice')
    // hits an instance took and did not hand out before the other reached the limit go unused
    t.ok(admitted.length > 100 - 2 * 6 && admitted.length <= 100, `${admitted.length} admitted`)
    t.equal((await a.rateLimits.hit('10.0.0.1', now + 60_000, 60_000, 100)).count, 1, 'the next window starts again')
  })

  t.test('rate limit: far from the limit one script takes a sixteenth of what remains; near it, one hit', async (t) => {
    const [a] = await stores(t, 1)
    const now = Date.now()
    const counter = async (): Promise<number> => Number(await a.conn.redis.get(a.conn.key('rl', '10.0.0.2', Math.floor(now / 60_000) * 60_000)))
    t.equal((await a.rateLimits.hit('10.0.0.2', now, 60_000, 1000)).count, 1)
    t.equal(await counter(), 62, 'the first hit took 1000 / 16 = 62')
    for (let i = 2; i <= 62; i++) await a.rateLimits.hit('10.0.0.2', now, 60_000, 1000)
    t.equal(await counter(), 62, 'handed out without Redis')
    await a.rateLimits.hit('10.0.0.2', now, 60_000, 1000)
    t.equal(await counter(), 62 + 58, 'then (1000 − 62) / 16 = 58 more')
    const [b] = await stores(t, 1)
    const near = async (): Promise<number> => Number(await b.conn.redis.get(b.conn.key('rl', '10.0.0.3', Math.floor(now / 60_000) * 60_000)))
    await b.rateLimits.hit('10.0.0.3', now, 60_000, 20)
    t.equal(await near(), 1, 'a limit of 20: one at a time')
  })

  t.test('quota: concurrent counts from two instances add up exactly', async (t) => {
    const [a, b] = await stores(t, 2) as [PostgresStore, PostgresStore]
    await Promise.all(Array.from({ length: 100 }, async (_, i) => { await (i % 2 === 0 ? a : b).quota.count('project:acme/web', 0, 7, 3, { tokens: 1_000_000 }) }))
    t.same(await b.quota.used('project:acme/web', 0), { tokens: 700, cost_nano: 300 })
  })

  t.test('a revocation on one instance is heard by the others before it resolves', async (t) => {
    const [a, b] = await stores(t, 2) as [PostgresStore, PostgresStore]
    const heard: string[] = []
    b.onChange((c) => { if (c.kind === 'key') heard.push(c.id) })
    const k = await a.keys.create({ org: 'acme', project: 'web', source: 'admin' }, Date.now())
    t.ok(await b.keys.verify(k.key), 'the other instance knows the key')
    t.ok(await a.keys.revoke(k.id, Date.now()))
    t.ok(heard.includes(k.id), 'heard by the other instance')
    t.equal(await b.keys.verify(k.key), undefined, 'and refused there')
  })

  t.test('usage: 1,000 records from two instances, batched, all there; pages and totals', async (t) => {
    const [a, b] = await stores(t, 2) as [PostgresStore, PostgresStore]
    const rows = Array.from({ length: 1000 }, (_, i) => row(i))
    await Promise.all(rows.map(async (r, i) => { await (i % 2 === 0 ? a : b).usage.record(r) }))
    const totals = await a.usage.totals({ org: 'acme' })
    t.match(totals, { calls: 1000, prompt_tokens: 10_000, cost_nano: rows.reduce((s, r) => s + r.cost_nano, 0) })
    let seen = 0
    let cursor
    for (;;) {
      const page = await b.usage.page({ org: 'acme' }, 300, cursor)
      seen += page.length
      if (page.length < 300) break
      const last = page[page.length - 1] as UsageRow
      cursor = { created_at: last.created_at, id: last.id }
    }
    t.equal(seen, 1000, 'paged through every record once')
  })

  t.test('migration 006: records written before it read attempts and dropped_params [], the end-of-call batch writes both, failed calls have their index', async (t) => {
    const { copyFileSync, mkdirSync, readdirSync } = await import('node:fs')
    const { join } = await import('node:path')
    const { fromRoot } = await import('../../paths.js')
    const { migrate, pgPool } = await import('../../engine/store/postgres/db.js')
    const url = await database(t)
    // the database as a release that stopped at migration 005 left it, with a record its batch wrote
    const upTo = join(tempDir('pg-migrations'), 'migrations')
    mkdirSync(upTo)
    const all = fromRoot('engine', 'store', 'postgres', 'migrations')
    for (const f of readdirSync(all).filter((f) => Number(f.slice(0, 3)) <= 5)) copyFileSync(join(all, f), join(upTo, f))
    const pool = pgPool(url, 1)
    await migrate(pool, upTo)
    const { attempts: _a, dropped_params: _d, ...old } = row(1)
    await pool.query('SELECT * FROM modelgate_end_batch($1)', [JSON.stringify({ leases: [], charges: [], quotas: [], touches: [], usage: [old], contents: [] })])
    await pool.end()

    const s = new PostgresStore({ postgres: url, redis: REDIS_URL, prefix: prefix(t) })
    t.teardown(async () => { await s.close() })
    const written = { ...row(2), attempts: [{ provider: 'p', upstream_model: 'm-up', outcome: 'timeout', status: null, error: 'UND_ERR_HEADERS_TIMEOUT', latency_ms: 5000 }], dropped_params: ['seed'] }
    await s.usage.record(written)
    const rows = await s.usage.page({}, 10)
    t.same(rows.find((r) => r.id === old.id), { ...old, attempts: [], dropped_params: [] }, 'the older record reads []')
    t.same(rows.find((r) => r.id === written.id), written, 'the batch wrote both columns')
    const versions = (await s.conn.q<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version')).rows.map((r) => r.version)
    t.same(versions.filter((v) => v >= 5 && v <= 6), [5, 6], 'migration 006 applied after 005')
    // (on a table this small PostgreSQL would rather scan it: sequential scans are switched off to see the index is usable)
    const client = await s.conn.pool.connect()
    try {
      await client.query('SET enable_seqscan = off')
      const plan = (await client.query<{ 'QUERY PLAN': string }>("EXPLAIN SELECT * FROM usage_records WHERE status = ANY('{timeout}'::text[]) AND status <> 'ok' ORDER BY created_at DESC, id DESC LIMIT 10")).rows.map((r) => r['QUERY PLAN']).join('\n')
      t.match(plan, /usage_failed_time/, `the failed calls' pages can read their partial index: ${plan}`)
      await client.query('RESET enable_seqscan')
    } finally {
      client.release()
    }
  })

  t.test('migration 013: records written before it carry no tags; the end-of-call batch writes them; the outbox is there', async (t) => {
    const { copyFileSync, mkdirSync, readdirSync } = await import('node:fs')
    const { join } = await import('node:path')
    const { fromRoot } = await import('../../paths.js')
    const { migrate, pgPool } = await import('../../engine/store/postgres/db.js')
    const url = await database(t)
    const upTo = join(tempDir('pg-migrations'), 'migrations')
    mkdirSync(upTo)
    const all = fromRoot('engine', 'store', 'postgres', 'migrations')
    for (const f of readdirSync(all).filter((f) => Number(f.slice(0, 3)) <= 12)) copyFileSync(join(all, f), join(upTo, f))
    const pool = pgPool(url, 1)
    await migrate(pool, upTo)
    await pool.query(`INSERT INTO usage_records (id, created_at, trace_id, org_id, project_id, key_id, endpoint, model, stream, status, prompt_tokens, cached_input_tokens, completion_tokens, total_tokens, cost_nano, latency_ms)
      VALUES ('u_old', 5, 'u_old', 'acme', 'web', 'k', 'chat.completions', 'm', 0, 'ok', 1, 0, 1, 2, 7, 1)`)
    await pool.end()
    const s = new PostgresStore({ postgres: url, redis: REDIS_URL, prefix: prefix(t) })
    t.teardown(async () => { await s.close() })
    await s.ready
    await s.usage.record(usageRow({ id: 'u_new', created_at: 6, tags: ['team-a', 'x'] }))
    t.same((await s.usage.page({}, 10)).map((r) => [r.id, r.tags]), [['u_new', ['team-a', 'x']], ['u_old', []]])
    t.same((await s.usage.summary({}, ['tag'])).map((r) => [r.tag, r.calls, r.cost_nano]), [['team-a', 1, 100n], ['x', 1, 100n], [null, 1, 7n]], 'untagged: tag null (last, as PostgreSQL orders nulls)')
    t.same((await s.usage.page({ tag: 'team-a' }, 10)).map((r) => r.id), ['u_new'])
    const row = { id: 'msg_1', crossing: 'c', webhook: 'http://127.0.0.1/', type: 'balance.low', payload: '{}', created_at: 1 }
    t.equal(await s.alerts.raise([row]), 1)
    t.equal(await s.alerts.raise([{ ...row, id: 'msg_2' }]), 0, 'a crossing once per webhook')
    t.match(await s.alerts.claim(1, 100, 10), [{ id: 'msg_1', attempts: 1 }])
    t.same(await s.alerts.claim(50, 150, 10), [], 'held by its claim')
  })

  t.test('migration 014: records written before it read error null; the end-of-call batch writes a refused call\'s code', async (t) => {
    const { copyFileSync, mkdirSync, readdirSync } = await import('node:fs')
    const { join } = await import('node:path')
    const { fromRoot } = await import('../../paths.js')
    const { migrate, pgPool } = await import('../../engine/store/postgres/db.js')
    const url = await database(t)
    const upTo = join(tempDir('pg-migrations'), 'migrations')
    mkdirSync(upTo)
    const all = fromRoot('engine', 'store', 'postgres', 'migrations')
    for (const f of readdirSync(all).filter((f) => Number(f.slice(0, 3)) <= 13)) copyFileSync(join(all, f), join(upTo, f))
    const pool = pgPool(url, 1)
    await migrate(pool, upTo)
    const { error: _e, ...old } = row(1)
    await pool.query('SELECT * FROM modelgate_end_batch($1)', [JSON.stringify({ leases: [], charges: [], quotas: [], touches: [], usage: [old], contents: [] })])
    await pool.end()

    const s = new PostgresStore({ postgres: url, redis: REDIS_URL, prefix: prefix(t) })
    t.teardown(async () => { await s.close() })
    const refused = { ...row(2), provider: null, status: 'refused', error: 'insufficient_balance', prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, total_tokens: 0, cost_nano: 0, cost_detail: null }
    await s.usage.record(refused)
    const rows = await s.usage.page({}, 10)
    t.same(rows.find((r) => r.id === old.id), { ...old, error: null }, 'the older record reads error null')
    t.same(rows.find((r) => r.id === refused.id), refused, 'the batch wrote the refusal\'s code')
    t.same((await s.usage.page({ status: ['refused'] }, 10)).map((r) => r.id), [refused.id], 'found by its status')
    const versions = (await s.conn.q<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version')).rows.map((r) => r.version)
    t.ok(versions.includes(14), 'migration 014 applied')
  })

  t.test('migration 012: audit lines written before it name their organization, from their target; an org_admin\'s page reads its index', async (t) => {
    const { copyFileSync, mkdirSync, readdirSync } = await import('node:fs')
    const { join } = await import('node:path')
    const { fromRoot } = await import('../../paths.js')
    const { migrate, pgPool } = await import('../../engine/store/postgres/db.js')
    const url = await database(t)
    const upTo = join(tempDir('pg-migrations'), 'migrations')
    mkdirSync(upTo)
    const all = fromRoot('engine', 'store', 'postgres', 'migrations')
    for (const f of readdirSync(all).filter((f) => Number(f.slice(0, 3)) <= 11)) copyFileSync(join(all, f), join(upTo, f))
    const pool = pgPool(url, 1)
    await migrate(pool, upTo)
    await pool.query("INSERT INTO organizations (id, created_at) VALUES ('acme', 1), ('zeta', 1)")
    await pool.query("INSERT INTO projects (org_id, id, created_at) VALUES ('zeta', 'app', 1)")
    await pool.query("INSERT INTO api_keys (id, hash, hint, org_id, project_id, source, created_at) VALUES ('key_z', 'h', 'mg-…', 'zeta', 'app', 'admin', 1)")
    const lines: Array<[string, string, string]> = [
      ['org.create', 'zeta', '{}'], ['credits.add', 'acme', '{}'], ['project.update', 'zeta/app', '{}'], ['key.rotate', 'key_z', '{}'],
      ['key.revoke', 'key_gone', '{}'], ['reload', 'config', '{}'], ['session.start', 'u-1', '{"role":"org_admin","org":"zeta"}'],
      ['session.start', 'u-2', '{"role":"admin","org":null}'], ['session.end', 'u-1', '{}']
    ]
    for (const [i, [action, target, detail]] of lines.entries()) await pool.query("INSERT INTO audit_log (id, at, action, target, actor, detail) VALUES ($1, $2, $3, $4, 'admin', $5)", [`aud_${i}`, 10 + i, action, target, detail])
    await pool.end()

    const s = new PostgresStore({ postgres: url, redis: REDIS_URL, prefix: prefix(t) })
    t.teardown(async () => { await s.close() })
    await s.ready
    t.same((await s.audit.page(100)).map((r) => [r.action, r.target, r.org]).reverse(), [
      ['org.create', 'zeta', 'zeta'], ['credits.add', 'acme', 'acme'], ['project.update', 'zeta/app', 'zeta'], ['key.rotate', 'key_z', 'zeta'],
      ['key.revoke', 'key_gone', null], ['reload', 'config', null], ['session.start', 'u-1', 'zeta'], ['session.start', 'u-2', null], ['session.end', 'u-1', null]
    ], 'each from its target (a key by its organization) or its sign-in\'s role; the gateway\'s own lines none')
    t.same((await s.audit.page(100, undefined, 'zeta')).map((r) => r.id), ['aud_6', 'aud_3', 'aud_2', 'aud_0'])
    const client = await s.conn.pool.connect()
    try {
      // with nine rows the planner may as well filter the time index; without it (dropped inside a
      // transaction that is rolled back) the organization's index must serve the page, unsorted
      await client.query('BEGIN')
      await client.query('DROP INDEX audit_time')
      await client.query('SET LOCAL enable_seqscan = off')
      const plan = (await client.query<{ 'QUERY PLAN': string }>("EXPLAIN SELECT * FROM audit_log WHERE org_id = 'zeta' ORDER BY at DESC, id DESC LIMIT 10")).rows.map((r) => r['QUERY PLAN']).join('\n')
      await client.query('ROLLBACK')
      t.match(plan, /audit_org_time/, `an organization's page can read its index: ${plan}`)
      t.notMatch(plan, /Sort/, 'in its order')
    } finally {
      client.release()
    }
  })

  t.test('an instance that stops beating has its holds released by the others', async (t) => {
    const [a, b] = await stores(t, 2) as [PostgresStore, PostgresStore]
    t.ok(await a.balance.hold('acme', 5_000_000, Date.now()))
    t.ok(((await b.orgs.get('acme'))?.held_nano ?? 0) >= 5_000_000, 'a holds a lease')
    // a dies without settling (its heartbeat stops); b, later, takes it for dead
    const released = await b.releaseDeadHolders(Date.now() + 60_000)
    t.equal(released, 1)
    t.equal((await b.orgs.get('acme'))?.held_nano, 0, 'the lease is released')
    // should a itself come back and settle, the charge still applies, once
    await a.balance.settle('acme', 5_000_000, 1_000, Date.now())
    await a.flush()
    t.match(await b.orgs.get('acme'), { held_nano: 0, spent_nano: 1_000 })
  })

  t.test('three gateway apps on one PostgreSQL and Redis: idempotency, balance, quota, rate limit, revocation', async (t) => {
    const url = await database(t)
    // a Redis key prefix of this test's own
    const redisPrefix = prefix(t)
    const redis = REDIS_URL
    const apps: FastifyInstance[] = []
    for (let i = 0; i < 3; i++) {
      const app = await buildApp(testConfig({
        store: { postgres: url, redis, redis_prefix: redisPrefix },
        admin: { token: 'multi-admin-token-0123456789' },
        plugins: [{ name: 'rate-limit', options: { max: 1000, window_s: 60 } }, { name: 'auth', options: { cache_ttl_s: 60 } }, { name: 'idempotency' }, { name: 'quota' }, { name: 'balance' }, { name: 'usage' }],
        tenants: [{ org: 'acme', balance_usd: 25, projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }, { org: 'poor', balance_usd: 0, projects: [{ id: 'p', quota: { tokens: 1, per: 'hour' }, keys: [{ key: 'mg-test-key-poor-0123456789abcdef' }] }] },
          { org: 'tight', balance_usd: 0.0005, projects: [{ id: 't', keys: [{ key: 'mg-test-key-tight-0123456789abcdef' }] }] }]
      }), { logger: false })
      apps.push(app)
    }
    t.teardown(async () => { for (const app of apps) await app.close() })
    const chat = async (i: number, key = KEY_A, headers: Record<string, string> = {}, extra: Record<string, unknown> = {}) => await (apps[i % 3] as FastifyInstance).inject({ method: 'POST', url: '/v1/chat/completions', headers: { authorization: `Bearer ${key}`, ...headers }, payload: { model: 'demo/gpt', max_tokens: 50, messages: [{ role: 'user', content: 'hi' }], ...extra } })

    const dup = await Promise.all(Array.from({ length: 12 }, async (_, i) => (await chat(i, KEY_A, { 'idempotency-key': 'once' })).statusCode))
    t.equal(dup.filter((s) => s === 200).length, 1, 'one Idempotency-Key, three instances: one call')
    t.equal(dup.filter((s) => s === 409).length, 11)

    const poor = 'mg-test-key-poor-0123456789abcdef'
    const free = { model: 'openai/no-price' }
    t.equal((await chat(0, poor, {}, free)).statusCode, 200, 'a free model under the quota')
    const after = await Promise.all([1, 2, 3].map(async (i) => (await chat(i, poor, {}, free)).statusCode))
    t.same(after, [429, 429, 429], 'once an ended call reached the quota, every instance refuses')

    // a balance that covers a few holds at most: 60 concurrent calls over the three instances
    const admin = { authorization: 'Bearer multi-admin-token-0123456789' }
    const tight = 'mg-test-key-tight-0123456789abcdef'
    const burst = await Promise.all(Array.from({ length: 60 }, async (_, i) => (await chat(i, tight)).statusCode))
    t.ok(burst.filter((c) => c === 200).length >= 1, `${burst.filter((c) => c === 200).length} answered`)
    t.same([...new Set(burst)].filter((c) => c !== 200 && c !== 402), [], 'the others refused with 402')
    for (const app of apps) await app.gateway.store.flush()
    const ledger = (await (apps[2] as FastifyInstance).inject({ method: 'GET', url: '/admin/v1/orgs/tight', headers: admin })).json() as { balance_usd: string, held_usd: string, spent_usd: string }
    t.equal(Number(ledger.held_usd), 0, 'every hold settled')
    t.ok(Number(ledger.balance_usd) >= 0, 'never overdrawn')
    t.equal(Math.round((Number(ledger.balance_usd) + Number(ledger.spent_usd)) * 1e9), 500_000, 'balance + spent = initial')

    const created = (await (apps[1] as FastifyInstance).inject({ method: 'POST', url: '/admin/v1/keys', headers: admin, payload: { org: 'acme', project: 'web', name: 'doomed' } })).json() as { id: string, key: string }
    t.same(await Promise.all([0, 1, 2].map(async (i) => (await chat(i, created.key)).statusCode)), [200, 200, 200], 'the new key works everywhere (and is cached)')
    t.equal((await (apps[1] as FastifyInstance).inject({ method: 'DELETE', url: `/admin/v1/keys/${created.id}`, headers: admin })).statusCode, 200)
    const until = Date.now() + 1000
    let codes: number[] = []
    do {
      codes = await Promise.all([0, 1, 2].map(async (i) => (await chat(i, created.key)).statusCode))
    } while (codes.some((c) => c !== 401) && Date.now() < until)
    t.same(codes, [401, 401, 401], 'revoked on one instance, refused by all three within a second')
  })
})

/** A TCP relay to a real service that a test can cut and restore, on the same port. */
/**
 * A TCP relay to a local service that can be cut (every connection dropped, new ones refused:
 * counted, so a test can wait until a client has tried) and restored on the same port.
 */
async function relay (t: Test, target: number): Promise<{ port: number, cut: () => Promise<void>, restore: () => Promise<void>, refused: () => number }> {
  const { createServer, connect } = await import('node:net')
  const sockets = new Set<import('node:net').Socket>()
  let open = true
  let refused = 0
  const server = createServer((client) => {
    if (!open) { refused++; client.destroy(); return }
    const upstream = connect(target, '127.0.0.1')
    sockets.add(client); sockets.add(upstream)
    client.pipe(upstream).pipe(client)
    const drop = (): void => { client.destroy(); upstream.destroy(); sockets.delete(client); sockets.delete(upstream) }
    client.on('error', drop); upstream.on('error', drop); client.on('close', drop); upstream.on('close', drop)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  t.teardown(() => { for (const s of sockets) s.destroy(); server.close() })
  return {
    port,
    cut: async () => { open = false; for (const s of sockets) s.destroy() },
    restore: async () => { open = true },
    refused: () => refused
  }
}

t.test('PostgreSQL or Redis gone: 503 store_unavailable with Retry-After, /readyz not ready, and back without a restart', async (t) => {
  const missing = await services()
  if (missing !== null) { t.plan(0, `PostgreSQL or Redis not reachable (${missing})`); return }
  const url = await database(t)
  const pgRelay = await relay(t, 5432)
  const redisRelay = await relay(t, 6379)
  const redisPrefix = prefix(t)
  const app = await buildApp(testConfig({
    store: { postgres: url.replace(':5432/', `:${pgRelay.port}/`), redis: `redis://127.0.0.1:${redisRelay.port}`, redis_prefix: redisPrefix },
    plugins: [{ name: 'rate-limit', options: { max: 1000, window_s: 60 } }, { name: 'auth', options: { cache_size: 0 } }, { name: 'idempotency' }, { name: 'balance' }, { name: 'usage' }],
    tenants: tenants(25)
  }), { logger: process.env.PGT_LOG === '1' ? { level: 'error' } : false })
  t.teardown(async () => { await app.close() })
  // each call takes an Idempotency-Key, so each needs Redis as well as PostgreSQL
  let n = 0
  const chat = async (): Promise<{ status: number, body: { error?: { code?: unknown, type?: string } }, retry: string | undefined }> => {
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { authorization: `Bearer ${KEY_A}`, 'idempotency-key': `k${n++}` }, payload: { model: 'demo/gpt', messages: [{ role: 'user', content: 'hi' }] } })
    return { status: res.statusCode, body: res.json(), retry: res.headers['retry-after'] as string | undefined }
  }
  t.equal((await chat()).status, 200)
  t.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200)

  for (const [name, r] of [['Redis', redisRelay], ['PostgreSQL', pgRelay]] as const) {
    await r.cut()
    const down = await chat()
    t.equal(down.status, 503, `${name} gone: 503`)
    t.match(down.body, { error: { code: 503, type: 'overloaded_error' } })
    t.equal(down.retry, '1', 'with Retry-After')
    t.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 503, '/readyz: not ready')
    await r.restore()
    let back = 0
    const until = Date.now() + 5000
    while (back !== 200 && Date.now() < until) {
      back = (await chat()).status
      if (back !== 200) await new Promise((resolve) => setTimeout(resolve, 100))
    }
    t.equal(back, 200, `${name} back: served again without a restart`)
  }
  await app.gateway.store.flush()
  const org = await app.gateway.store.orgs.get('acme')
  t.equal(org?.held_nano, 0, 'nothing left held by the failed calls')

  // an answered call's record and charge wait for PostgreSQL rather than being dropped
  t.ok(await app.gateway.store.balance.hold('acme', 5_000, Date.now()))
  await pgRelay.cut()
  const kept = row(424242)
  let committed = false
  const writes = Promise.all([app.gateway.store.usage.record(kept), app.gateway.store.balance.settle('acme', 5_000, 1_234, Date.now())]).then(() => { committed = true })
  const before = pgRelay.refused()
  await eventually(10_000, async () => pgRelay.refused(), (n) => n > before + 1)
  t.notOk(committed, 'not committed while PostgreSQL is away (the store has tried again), and not given up either')
  await pgRelay.restore()
  await writes
  t.ok(committed, 'committed once it is back')
  t.ok((await app.gateway.store.usage.page({ org: 'acme' }, 500)).some((r) => r.id === kept.id), 'the record is there')
  await app.gateway.store.flush()
  t.match(await app.gateway.store.orgs.get('acme'), { held_nano: 0 }, 'the hold settled, the idle lease given back')
})

t.test('PostgreSQL away: a hold the lease covers and a quota window known open are refused with 503 until it answers again', async (t) => {
  const missing = await services()
  if (missing !== null) { t.plan(0, `PostgreSQL or Redis not reachable (${missing})`); return }
  const url = await database(t)
  const pgRelay = await relay(t, 5432)
  const store = new PostgresStore({ postgres: url.replace(':5432/', `:${pgRelay.port}/`), redis: REDIS_URL, prefix: prefix(t) })
  t.teardown(async () => { await store.close() })
  await store.syncTenants(testConfig({ tenants: tenants(25) }), Date.now())
  t.ok(await store.balance.hold('acme', 1000, Date.now()))
  t.equal(store.balance.hold('acme', 1000, Date.now()), true, 'the second hold comes out of the lease')
  t.equal(await store.quota.admit('org:acme', 0, { tokens: 10 }), null)
  await pgRelay.cut()
  await t.rejects(store.orgs.get('acme'), { code: 'MG_STORE_UNAVAILABLE' }, 'PostgreSQL found away')
  t.throws(() => store.balance.hold('acme', 1000, Date.now()), { code: 'MG_STORE_UNAVAILABLE' }, 'a hold the lease covers is refused: the call could not be charged')
  await t.rejects(async () => await store.quota.admit('org:acme', 0, { tokens: 10 }), { code: 'MG_STORE_UNAVAILABLE' }, 'a window known open is read again, and refused')
  await pgRelay.restore()
  const until = Date.now() + 5000
  let back = false
  while (!back && Date.now() < until) {
    try { back = await store.balance.hold('acme', 1000, Date.now()) } catch { await new Promise((resolve) => setTimeout(resolve, 50)) }
  }
  t.ok(back, 'back: holds are taken again')
  t.equal(await store.quota.admit('org:acme', 0, { tokens: 10 }), null)
  for (let i = 0; i < 3; i++) await store.balance.settle('acme', 1000, 10, Date.now())
  await store.flush()
  t.match(await store.orgs.get('acme'), { held_nano: 0, spent_nano: 30 })
})

t.test('modelgate store migrate copies a SQLite store into PostgreSQL and checks the totals', async (t) => {
  const missing = await services()
  if (missing !== null) { t.plan(0, `PostgreSQL or Redis not reachable (${missing})`); return }
  const { join } = await import('node:path')
  const { execFile } = await import('node:child_process')
  const { SqliteStore } = await import('../../engine/store/sqlite/index.js')
  const { fromRoot } = await import('../../paths.js')
  const file = join(tempDir('migrate'), 'gw.db')
  // a SQLite store with tenants, a created key, a revoked one, credits, charges, records and a hold left open
  const sqlite = new SqliteStore(file)
  await sqlite.syncTenants(testConfig({ tenants: tenants(25) }), Date.now())
  const made = sqlite.keys.create({ org: 'acme', project: 'web', source: 'cli', passthrough: ['x'], mcp: ['docs/*'] }, Date.now())
  const revoked = sqlite.keys.create({ org: 'acme', project: 'web', source: 'admin' }, Date.now())
  await sqlite.keys.revoke(revoked.id, Date.now())
  sqlite.orgs.credit('acme', 1_500_000_000)
  for (let i = 0; i < 3; i++) {
    t.ok(await sqlite.balance.hold('acme', 2_000_000, Date.now()))
    await sqlite.balance.settle('acme', 2_000_000, 700_000 + i, Date.now())
  }
  const detailed = { ...row(7), attempts: [{ provider: 'p', upstream_model: 'm-up', outcome: 'ok', status: 200, error: null, latency_ms: 9 }], dropped_params: ['seed'] }
  await Promise.all(Array.from({ length: 2500 }, async (_, i) => {
    const r = i === 7 ? detailed : row(i)
    await sqlite.usage.record(r, i % 100 === 0 ? { usage_id: r.id, created_at: r.created_at, request: 'q', response: 'a' } : undefined)
  }))
  await sqlite.quota.count('project:acme/web', 0, 123, 456, { tokens: 1_000_000 })
  sqlite.flush()
  await sqlite.close()
  // and a hold left open by a process that died (a lease of a gateway killed mid-call)
  const { default: Database } = await import('better-sqlite3')
  const raw = new Database(file)
  raw.prepare("INSERT INTO holds (id, org_id, amount_nano, created_at, holder) VALUES ('lease:dead', 'acme', 3000000, 1, 'dead:1')").run()
  raw.prepare("UPDATE organizations SET held_nano = held_nano + 3000000 WHERE id = 'acme'").run()
  // and a usage record still in the journal (committed by a gateway killed before it moved it)
  raw.prepare("INSERT INTO usage_journal SELECT * FROM usage_records WHERE trace_id = 't1'").run()
  raw.prepare("UPDATE usage_journal SET id = 'u-left', trace_id = 'u-left'").run()
  raw.close()

  const url = await database(t)
  const run = async (): Promise<{ code: number, out: string }> => await new Promise((resolve) => {
    execFile(process.execPath, [fromRoot('dist', 'cli', 'index.js'), 'store', 'migrate', '--from', file, '--to', url], { env: childEnv() }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : (err as { code?: number }).code ?? 1, out: stdout + stderr })
    })
  })
  const first = await run()
  t.equal(first.code, 0, first.out)
  t.match(first.out, /every total matches/)
  t.match(first.out, /usage_records\s+2501\s+2501/, 'the record left in the journal came along')

  const p = prefix(t)
  const store = new PostgresStore({ postgres: url, redis: REDIS_URL, prefix: p })
  t.teardown(async () => { await store.close() })
  t.equal((await store.keys.verify(made.key))?.id, made.id, 'a key made on SQLite works on PostgreSQL')
  t.same((await store.keys.get(made.id))?.passthrough, ['x'])
  t.same((await store.keys.get(made.id))?.mcp, ['docs/*'], 'with its MCP grants')
  t.equal(await store.keys.verify(revoked.key), undefined, 'a revoked key stays revoked')
  const org = await store.orgs.get('acme')
  t.equal(org?.held_nano, 3_000_000, 'the open hold came along')
  t.equal((org?.balance_nano ?? 0) + (org?.spent_nano ?? 0), 26_500_000_000, 'balance + spent = initial + credits')
  t.same(await store.quota.used('project:acme/web', 0), { tokens: 123, cost_nano: 456 })
  const acmeLines = (await store.audit.page(100, undefined, 'acme')).map((r) => `${r.action} ${r.target}`)
  t.ok([`key.create ${made.id}`, `key.create ${revoked.id}`].every((l) => acmeLines.includes(l)), 'the audit log came along, each line with its organization')
  t.equal(await store.releaseDeadHolders(Date.now() + 1), 1, 'the migrated hold is released like a silent instance\'s')
  t.equal((await store.orgs.get('acme'))?.held_nano, 0)
  t.same((await store.usage.page({ until: detailed.created_at + 1, since: detailed.created_at }, 10)).find((r) => r.id === detailed.id), detailed, 'a record\'s attempts and dropped parameters came along')

  const again = await run()
  t.equal(again.code, 1, 'a second run refuses a database that is not empty')
  t.match(again.out, /already holds 1 organization/)
})
