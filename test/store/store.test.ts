import t from 'tap'
import { chmodSync, copyFileSync, mkdirSync, readdirSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { spawn } from 'node:child_process'
import { pathToFileURL } from 'node:url'
import Database from 'better-sqlite3'
import { fromRoot } from '../../paths.js'
import { migrate, openDatabase, walMode } from '../../engine/store/sqlite/db.js'
import { SqliteStore as Store } from '../../engine/store/sqlite/index.js'
import { hashKey } from '../../engine/store/tenants.js'
import { testConfig, KEY_A } from '../helper.js'
import { tempDir } from '../temp-dir.js'
import { usageRow } from '../usage-row.js'

t.test('a file database is in WAL mode and migrations apply once', async (t) => {
  const dir = tempDir('store')
  const file = join(dir, 'sub', 'gw.db')
  const a = new Store(file)
  const b = new Store(file) // a second worker opening the same file
  t.equal(a.db.pragma('journal_mode', { simple: true }), 'wal')
  const version = a.db.pragma('user_version', { simple: true })
  t.ok(Number(version) >= 2)
  t.equal(b.db.pragma('user_version', { simple: true }), version)
  await a.close(); await b.close()
  const raw = new Database(file)
  t.ok(raw.prepare("SELECT name FROM sqlite_master WHERE name = 'api_keys'").get())
  raw.close()
})

t.test('a database that has every migration is opened without its write lock: a command opens it while a gateway writes', async (t) => {
  const dir = tempDir('store')
  const file = join(dir, 'gw.db')
  openDatabase(file).close()
  // another connection in the middle of a write, for longer than the opener's busy timeout
  const writer = new Database(file)
  writer.exec('BEGIN IMMEDIATE')
  t.teardown(() => { writer.exec('ROLLBACK'); writer.close() })
  const db = openDatabase(file)
  t.teardown(() => db.close())
  t.ok(Number(db.pragma('user_version', { simple: true })) >= 19, 'opened, at the last migration')
  t.same(db.prepare('SELECT count(*) AS n FROM organizations').get(), { n: 0 }, 'and readable')
})

t.test('the store\'s files are the gateway\'s own: the folder it makes 0700, the database and its -wal and -shm 0600, an older readable file made private', async (t) => {
  const dir = tempDir('store')
  const file = join(dir, 'made', 'gw.db')
  const store = new Store(file)
  t.teardown(() => store.close())
  await store.syncTenants(testConfig(), 1)
  store.keys.touch('key_x', 2)
  store.flush()
  const mode = (f: string): string => (statSync(f).mode & 0o777).toString(8)
  t.equal(mode(join(dir, 'made')), '700')
  for (const f of [file, `${file}-wal`, `${file}-shm`]) t.equal(mode(f), '600', f)

  const old = join(dir, 'old.db')
  const raw = new Database(old)
  raw.pragma('journal_mode = WAL')
  raw.close()
  chmodSync(old, 0o644)
  const reopened = new Store(old)
  t.teardown(() => reopened.close())
  t.equal(mode(old), '600', 'a file left readable by an older version')
})

/** A database file as a release that stopped at migration `version` left it, still open. */
function databaseAt (version: number): { file: string, old: Database.Database } {
  const dir = tempDir('store')
  const upTo = join(dir, 'migrations')
  const all = fromRoot('engine', 'store', 'sqlite', 'migrations')
  mkdirSync(upTo)
  for (const f of readdirSync(all).filter((f) => Number(f.slice(0, 3)) <= version)) copyFileSync(join(all, f), join(upTo, f))
  const file = join(dir, 'gw.db')
  const old = new Database(file)
  if (migrate(old, upTo) !== version) throw new Error(`migrations up to ${version} did not apply`)
  return { file, old }
}

t.test('migration 004 keeps the idempotency keys of a database made before it', async (t) => {
  const { file, old } = databaseAt(3)
  old.prepare("INSERT INTO idempotency_keys (scope, idem_key, state, trace_id, created_at, expires_at) VALUES ('key_1', 'k', 'done', 'tr', 1, 100)").run()
  old.close()
  const db = openDatabase(file)
  t.teardown(() => db.close())
  t.ok(Number(db.pragma('user_version', { simple: true })) >= 4)
  t.same(db.prepare('SELECT * FROM idempotency_keys').all(), [{ scope: 'key_1', idem_key: 'k', trace_id: 'tr', created_at: 1, expires_at: 100 }], 'the row is kept, without its state')
})

t.test('migration 005 turns the usage indexes ascending and keeps the records', async (t) => {
  const { file, old } = databaseAt(4)
  const insert = old.prepare(`INSERT INTO usage_records (id, created_at, trace_id, org_id, project_id, key_id, endpoint, model, provider, stream, status,
    prompt_tokens, cached_input_tokens, completion_tokens, total_tokens, cost_nano, latency_ms, ttft_ms) VALUES (?, ?, ?, 'acme', 'web', 'k', 'messages', 'm', 'p', 0, 'ok', 1, 0, 1, 2, 3, 4, null)`)
  for (let i = 0; i < 3; i++) insert.run(`u${i}`, 1000 + i, `t${i}`)
  old.close()
  const store = new Store(file)
  t.teardown(() => store.close())
  t.ok(Number(store.db.pragma('user_version', { simple: true })) >= 5)
  const indexes = store.db.prepare("SELECT name, sql FROM sqlite_master WHERE type = 'index' AND tbl_name = 'usage_records' AND sql IS NOT NULL ORDER BY name").all() as Array<{ name: string, sql: string }>
  t.same(indexes.map((i) => i.name), ['usage_failed_time', 'usage_key_time', 'usage_org_time', 'usage_project_time', 'usage_tagged_time', 'usage_time'])
  for (const i of indexes) t.notMatch(i.sql, /DESC/, `${i.name} is ascending`)
  t.same(store.usage.page({ org: 'acme' }, 10).map((r) => r.id), ['u2', 'u1', 'u0'], 'the records are kept, newest first')
})

t.test('migration 010: records made before it read attempts and dropped_params [], new ones keep theirs', async (t) => {
  const { file, old } = databaseAt(9)
  old.prepare(`INSERT INTO usage_records (id, created_at, trace_id, org_id, project_id, key_id, endpoint, model, provider, stream, status,
    prompt_tokens, cached_input_tokens, completion_tokens, total_tokens, cost_nano, latency_ms, ttft_ms) VALUES ('usage_old', 1000, 'old', 'acme', 'web', 'k', 'messages', 'm', 'p', 0, 'timeout', 1, 0, 1, 2, 3, 4, null)`).run()
  old.close()
  const store = new Store(file)
  t.teardown(() => store.close())
  t.ok(Number(store.db.pragma('user_version', { simple: true })) >= 10)
  const fresh = usageRow({
    id: 'usage_new',
    created_at: 2000,
    trace_id: 'new',
    prompt_tokens: 1,
    completion_tokens: 1,
    total_tokens: 2,
    cost_nano: 3,
    latency_ms: 4,
    ttft_ms: 2,
    attempts: [{ provider: 'p', upstream_model: 'm-up', outcome: 'ok', status: 200, error: null, latency_ms: 2 }],
    dropped_params: ['seed'],
    cost_detail: { input: 3, cached_input: 0, cache_write: 0, output: 0, images: 0, per_request: 0, tool_call: 0, tier: null }
  })
  await store.usage.record(fresh)
  const rows = store.usage.page({}, 10)
  t.match(rows[1], { id: 'usage_old', attempts: [], dropped_params: [] }, 'the older record reads []')
  t.same(rows[0], fresh, 'the new one reads back as written')
  t.same(store.usage.page({ status: ['timeout'] }, 10).map((r) => r.id), ['usage_old'], 'the failed calls\' index holds the older failed record')
})

t.test('migration 012: records made before it read no cache writes, no images and cost_detail null; new ones keep their parts', async (t) => {
  const { file, old } = databaseAt(11)
  old.prepare(`INSERT INTO usage_records (id, created_at, trace_id, org_id, project_id, key_id, endpoint, model, provider, stream, status,
    prompt_tokens, cached_input_tokens, completion_tokens, total_tokens, cost_nano, latency_ms, ttft_ms) VALUES ('usage_old', 1000, 'old', 'acme', 'web', 'k', 'messages', 'm', 'p', 0, 'ok', 1, 0, 1, 2, 3, 4, null)`).run()
  old.close()
  const store = new Store(file)
  t.teardown(() => store.close())
  t.ok(Number(store.db.pragma('user_version', { simple: true })) >= 12)
  const fresh = usageRow({
    id: 'usage_new',
    created_at: 2000,
    trace_id: 'new',
    endpoint: 'messages',
    stream: 1,
    prompt_tokens: 300_000,
    cached_input_tokens: 1000,
    completion_tokens: 10,
    total_tokens: 300_010,
    cost_nano: 1_800_606_600,
    latency_ms: 4,
    ttft_ms: 2,
    cache_write_tokens: 2000,
    cost_detail: { input: 1_782_000_000, cached_input: 600_000, cache_write: 17_700_000, output: 225_000, images: 0, per_request: 81_600, tool_call: 0, tier: 200_000 }
  })
  await store.usage.record(fresh)
  const rows = store.usage.page({}, 10)
  t.match(rows[1], { id: 'usage_old', cache_write_tokens: 0, images: 0, cost_detail: null }, 'the older record has no parts')
  t.same(rows[0], fresh, 'the new one reads back as written')
})

t.test('migration 018: records written before it carry no tags; new ones keep theirs, the journal\'s too; the outbox is there', async (t) => {
  const { file, old } = databaseAt(17)
  const insert = (table: string, id: string): void => { old.prepare(`INSERT INTO ${table} (id, created_at, trace_id, org_id, project_id, key_id, endpoint, model, stream, status, prompt_tokens, cached_input_tokens, completion_tokens, total_tokens, cost_nano, latency_ms) VALUES (?, 5, ?, 'acme', 'web', 'k', 'chat.completions', 'm', 0, 'ok', 1, 0, 1, 2, 7, 1)`).run(id, id) }
  insert('usage_records', 'u_old')
  insert('usage_journal', 'u_journal')
  old.close()
  const store = new Store(file)
  t.teardown(() => store.close())
  t.ok(Number(store.db.pragma('user_version', { simple: true })) >= 18)
  await store.usage.record(usageRow({ id: 'u_new', created_at: 6, tags: ['team-a', 'x'] }))
  t.same(store.usage.page({}, 10).map((r) => [r.id, r.tags]), [['u_new', ['team-a', 'x']], ['u_old', []], ['u_journal', []]])
  t.same(store.usage.summary({}, ['tag']).map((r) => [r.tag, r.calls, r.cost_nano]), [[null, 2, 14n], ['team-a', 1, 100n], ['x', 1, 100n]])
  t.same(store.usage.page({ tag: 'x' }, 10).map((r) => r.id), ['u_new'])
  t.equal(store.alerts.raise([{ id: 'msg_1', crossing: 'c', webhook: 'http://127.0.0.1/', type: 'balance.low', payload: '{}', created_at: 1 }]), 1)
  t.equal(store.alerts.raise([{ id: 'msg_2', crossing: 'c', webhook: 'http://127.0.0.1/', type: 'balance.low', payload: '{}', created_at: 2 }]), 0, 'a crossing once per webhook')
})

t.test('migration 019: records made before it read error null, in the table and in the journal; a refused one keeps its code', async (t) => {
  const { file, old } = databaseAt(17)
  old.prepare(`INSERT INTO usage_records (id, created_at, trace_id, org_id, project_id, key_id, endpoint, model, provider, stream, status,
    prompt_tokens, cached_input_tokens, completion_tokens, total_tokens, cost_nano, latency_ms, ttft_ms) VALUES ('usage_old', 1000, 'old', 'acme', 'web', 'k', 'messages', 'm', 'p', 0, 'ok', 1, 0, 1, 2, 3, 4, null)`).run()
  old.prepare(`INSERT INTO usage_journal (id, created_at, trace_id, org_id, project_id, key_id, endpoint, model, provider, stream, status,
    prompt_tokens, cached_input_tokens, completion_tokens, total_tokens, cost_nano, latency_ms, ttft_ms) VALUES ('usage_journaled', 1500, 'journaled', 'acme', 'web', 'k', 'messages', 'm', 'p', 0, 'ok', 1, 0, 1, 2, 3, 4, null)`).run()
  old.close()
  const store = new Store(file)
  t.teardown(() => store.close())
  t.ok(Number(store.db.pragma('user_version', { simple: true })) >= 19)
  const refused = usageRow({ id: 'usage_refused', created_at: 2000, provider: null, status: 'refused', error: 'key_rate_limited', prompt_tokens: 0, completion_tokens: 0, total_tokens: 0, cost_nano: 0 })
  await store.usage.record(refused)
  const rows = store.usage.page({}, 10)
  t.same(rows.map((r) => [r.id, r.error]), [['usage_refused', 'key_rate_limited'], ['usage_journaled', null], ['usage_old', null]])
  t.same(rows[0], refused, 'the refused record reads back as written')
})

t.test('migration 017: audit lines written before it name their organization, from their target; an org_admin\'s page selects them', async (t) => {
  const { file, old } = databaseAt(16)
  old.prepare("INSERT INTO organizations (id, created_at) VALUES ('acme', 1), ('zeta', 1)").run()
  old.prepare("INSERT INTO projects (org_id, id, created_at) VALUES ('zeta', 'app', 1)").run()
  old.prepare("INSERT INTO api_keys (id, hash, hint, org_id, project_id, source, created_at) VALUES ('key_z', 'h', 'mg-…', 'zeta', 'app', 'admin', 1)").run()
  const line = old.prepare("INSERT INTO audit_log (id, at, action, target, actor, detail) VALUES (?, ?, ?, ?, 'admin', ?)")
  const lines: Array<[string, string, string]> = [
    ['org.create', 'zeta', '{}'], ['credits.add', 'acme', '{}'], ['project.update', 'zeta/app', '{}'], ['key.rotate', 'key_z', '{}'],
    ['key.revoke', 'key_gone', '{}'], ['reload', 'config', '{}'], ['session.start', 'u-1', '{"role":"org_admin","org":"zeta"}'],
    ['session.start', 'u-2', '{"role":"admin","org":null}'], ['session.end', 'u-1', '{}']
  ]
  lines.forEach(([action, target, detail], i) => line.run(`aud_${i}`, 10 + i, action, target, detail))
  old.close()
  const store = new Store(file)
  t.teardown(() => store.close())
  t.ok(Number(store.db.pragma('user_version', { simple: true })) >= 17)
  t.same(store.audit.page(100).map((r) => [r.action, r.target, r.org]).reverse(), [
    ['org.create', 'zeta', 'zeta'], ['credits.add', 'acme', 'acme'], ['project.update', 'zeta/app', 'zeta'], ['key.rotate', 'key_z', 'zeta'],
    ['key.revoke', 'key_gone', null], ['reload', 'config', null], ['session.start', 'u-1', 'zeta'], ['session.start', 'u-2', null], ['session.end', 'u-1', null]
  ], 'each from its target (a key by its organization) or its sign-in\'s role; the gateway\'s own lines none')
  t.same(store.audit.page(100, undefined, 'zeta').map((r) => r.id), ['aud_6', 'aud_3', 'aud_2', 'aud_0'])
  const plan = store.db.prepare("EXPLAIN QUERY PLAN SELECT * FROM audit_log WHERE org_id = 'zeta' ORDER BY at DESC, id DESC LIMIT 10").all() as Array<{ detail: string }>
  t.match(plan.map((p) => p.detail).join('\n'), /audit_org_time/, 'an organization\'s page reads its index')
})

t.test('tenants sync: orgs keep their balance across restarts, config keys follow the config', async (t) => {
  const store = new Store(':memory:')
  t.teardown(() => store.close())
  const config = testConfig()
  await store.syncTenants(config, 1000)
  t.equal(store.orgs.get('acme')?.balance_nano, 25_000_000_000)
  store.orgs.credit('acme', 5)
  await store.syncTenants(config, 2000)
  t.equal(store.orgs.get('acme')?.balance_nano, 25_000_000_005, 'a restart does not reset the balance')
  const id = store.keys.verify(KEY_A)?.id
  t.ok(id)
  await store.syncTenants(config, 3000)
  t.equal(store.keys.verify(KEY_A)?.id, id, 'config keys keep their id')

  const without = testConfig({ tenants: [{ org: 'acme', projects: [{ id: 'web' }] }] })
  await store.syncTenants(without, 4000)
  t.equal(store.keys.verify(KEY_A), undefined, 'a key removed from the config is revoked')
})

t.test('created keys: shown once, stored as a hash, revocable', async (t) => {
  const store = new Store(':memory:')
  t.teardown(() => store.close())
  await store.syncTenants(testConfig(), 1000)
  const k = store.keys.create({ org: 'acme', project: 'web', models: ['demo/*'], name: 'cli', source: 'cli' }, 1000)
  t.match(k.key, /^mg-[A-Za-z0-9_-]{43}$/)
  t.equal(store.keys.verify(k.key)?.id, k.id)
  t.same(store.keys.verify(k.key)?.models, ['demo/*'])
  const row = store.db.prepare('SELECT hash FROM api_keys WHERE id = ?').get(k.id) as { hash: string }
  t.equal(row.hash, hashKey(k.key))
  t.ok(await store.keys.revoke(k.id, 2000))
  t.equal(store.keys.verify(k.key), undefined)
  t.notOk(await store.keys.revoke(k.id, 3000), 'revoking twice changes nothing')
})

t.test('a change made by a process on no bus with the serving ones (a CLI command) is heard by them within a second', async (t) => {
  const file = join(tempDir('store'), 'gw.db')
  const silent = { broadcast: async () => {}, on: () => {} }
  const cli = new Store(file, { bus: silent })
  const worker = new Store(file, { bus: { broadcast: async () => {}, on: () => {} } })
  t.teardown(async () => { await cli.close(); await worker.close() })
  await cli.syncTenants(testConfig(), 1)
  const heard: string[] = []
  worker.onChange((c) => { heard.push(c.kind === 'key' ? `key ${c.id}` : c.kind === 'project' ? `project ${c.org}/${c.id}` : `${c.kind}`) })
  const k = cli.keys.create({ org: 'acme', project: 'web', source: 'cli' }, 2)
  await cli.keys.update(k.id, { models: ['demo/*'] }, 3, 'cli')
  await cli.orgs.removeProject('acme', 'web', 4, 'cli')
  const until = Date.now() + 1500
  while (heard.length < 2 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 20))
  t.same(heard, [`key ${k.id}`, 'project acme/web'], 'read from the table, in order')
  t.equal(worker.changes.sweep(Date.now()), 3, 'swept once old (the sync, the update, the deletion)')
})

t.test('the bus: each topic carries its own message; one from another process that does not fit its topic reaches no handler', async (t) => {
  const { LocalBus, Topics } = await import('../../engine/store/bus.js')
  const a = new LocalBus(':memory:bus-topics')
  const b = new LocalBus(':memory:bus-topics')
  t.teardown(() => { a.leave(); b.leave() })
  const heard: string[] = []
  b.on('quota', (m) => { heard.push(`quota ${m.scope} ${m.window} ${m.tokens + m.cost_nano}`) })
  b.on('tenancy', (c) => { heard.push(c.kind === 'project' ? `project ${c.org}/${c.id}` : c.kind) })
  b.on('lease', (m) => { heard.push(`lease ${m.org}`) })
  await a.broadcast('quota', { scope: 'org:acme', window: 60, tokens: 5, cost_nano: 2 })
  await a.broadcast('tenancy', { kind: 'project', org: 'acme', id: 'web' })
  await a.broadcast('lease', { org: 'acme' })
  // what the compiler refuses: a topic no one handles, a message of another topic's shape
  // @ts-expect-error an unknown topic
  await a.broadcast('quotas', { org: 'acme' })
  // @ts-expect-error a quota message without its window
  await a.broadcast('quota', { scope: 'org:acme', tokens: 5, cost_nano: 2 })
  // @ts-expect-error a handler of a lease reads no scope
  b.on('lease', (m) => { heard.push(m.scope) })
  t.same(heard, ['quota org:acme 60 7', 'project acme/web', 'lease acme'], 'each handler got its topic\'s message')

  // what another process may send: read by the topic's shape before any handler runs
  const topics = new Topics()
  const got: unknown[] = []
  topics.on('quota', (m) => { got.push(m) })
  topics.on('cache.fill-ended', (m) => { got.push(m.key.length) })
  const failed: unknown[] = []
  for (const [topic, message] of [['quota', { scope: 'x', window: '60', tokens: 1, cost_nano: 1 }], ['quota', null], ['quota', []], ['cache.fill-ended', { key: 7 }], ['__proto__', {}], ['nope', { key: 'k' }]] as const) {
    await topics.deliver(topic, message, (err) => failed.push(err))
  }
  t.same(got, [], 'a message that does not fit, or of an unknown topic, runs no handler')
  await topics.deliver('quota', { scope: 'x', window: 60, tokens: 1, cost_nano: 1, extra: 'dropped' }, (err) => failed.push(err))
  await topics.deliver('cache.fill-ended', { key: 'abc' }, (err) => failed.push(err))
  t.same(got, [{ scope: 'x', window: 60, tokens: 1, cost_nano: 1 }, 3], 'one that fits arrives as its topic says, nothing more')
  t.same(failed, [])
})

t.test('the switch to WAL mode is tried again while another connection\'s lock answers SQLITE_BUSY at once; any other error is not', async (t) => {
  const busy = Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' })
  let calls = 0
  walMode({ pragma: () => { if (++calls <= 2) throw busy; return 'wal' } })
  t.equal(calls, 3, 'busy twice, then switched')
  calls = 0
  t.throws(() => { walMode({ pragma: () => { calls++; throw Object.assign(new Error('disk I/O error'), { code: 'SQLITE_IOERR' }) } }) }, { code: 'SQLITE_IOERR' })
  t.equal(calls, 1, 'another error: at once')
  t.throws(() => { walMode({ pragma: () => { throw busy } }, 20) }, { code: 'SQLITE_BUSY' }, 'still busy at the end of the wait: the error')
})

t.test('six processes opening one new file together all open it (the start of a gateway\'s workers)', async (t) => {
  const module = pathToFileURL(fromRoot('.build', 'engine', 'store', 'sqlite', 'db.js')).href
  for (let round = 0; round < 4; round++) {
    const file = join(tempDir('store-open'), 'gw.db')
    const opened = await Promise.all(Array.from({ length: 6 }, async () => await new Promise<string>((resolve) => {
      const child = spawn(process.execPath, ['--input-type=module', '-e', `const { openDatabase } = await import(${JSON.stringify(module)})
        try { openDatabase(process.env.FILE).close(); console.log('opened') } catch (err) { console.log(err.code) }`], { env: { ...process.env, FILE: file }, stdio: ['ignore', 'pipe', 'inherit'] })
      let out = ''
      child.stdout.on('data', (d: Buffer) => { out += d.toString() })
      child.once('exit', () => { resolve(out.trim()) })
    })))
    t.same(opened, Array(6).fill('opened'), `round ${round + 1}`)
  }
})
