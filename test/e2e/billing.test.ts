import t, { type Test } from 'tap'
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { estimatePromptTokens } from '../../engine/gateway/billing.js'
import { startMockUpstream, type MockUpstream } from '../mock-upstream.js'
import { KEY_A, KEY_B, mockCatalog, settled, spawnGateway, testConfig, sqliteOf } from '../helper.js'
import { tempDir } from '../temp-dir.js'

async function start (t: Test, overrides: Record<string, unknown>) {
  const mock: MockUpstream = await startMockUpstream()
  const app: FastifyInstance = await buildApp(testConfig({ ...mockCatalog(mock), ...overrides }))
  await app.listen({ host: '127.0.0.1', port: 0 })
  const base = `http://127.0.0.1:${(app.server.address() as { port: number }).port}`
  t.teardown(async () => { await app.close(); await mock.close() })
  const post = (body: unknown, headers: Record<string, string> = {}, key = KEY_A) =>
    fetch(`${base}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) })
  return { app, mock, base, post }
}

const chat = (content = 'hello', extra: Record<string, unknown> = {}) => ({ model: 'openai/gpt-test', messages: [{ role: 'user', content }], ...extra })

t.test('20 concurrent requests with one Idempotency-Key: exactly one reaches the upstream', async (t) => {
  const { mock, post } = await start(t, { plugins: [{ name: 'auth' }, { name: 'idempotency' }] })
  mock.faults = { delayMs: 100 }
  const results = await Promise.all(Array.from({ length: 20 }, async () => { const r = await post(chat(), { 'idempotency-key': 'same-key' }); await r.text(); return r }))
  const statuses = results.map((r) => r.status).sort()
  t.equal(statuses.filter((s) => s === 200).length, 1)
  t.equal(statuses.filter((s) => s === 409).length, 19)
  t.equal(mock.requests.length, 1, 'one went upstream')
  const other = await post(chat(), { 'idempotency-key': 'same-key' }, KEY_B.replace('-b-', '-a-'))
  t.equal(other.status, 409, 'the same API key still sees it')
})

t.test('50 concurrent calls on a balance that covers 5: never below zero, all holds released', async (t) => {
  // worst case of one call: (prompt estimate + max_tokens 100) × $15/M at the output rate
  const tenants = [{ org: 'acme', balance_usd: 0, projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
  const { app, mock, post } = await start(t, { tenants, plugins: [{ name: 'auth' }, { name: 'balance' }, { name: 'usage' }] })
  const body = chat('covers five', { max_tokens: 100 })
  const oneHold = (estimatePromptTokens(body) + 100) * 15_000
  await app.gateway.store.orgs.credit('acme', oneHold * 5 + Math.floor(oneHold / 2))
  // the admitted calls wait upstream until every call has been admitted or refused, so that no
  // call ends (and frees its hold) while others are still being decided
  let release!: () => void
  const gate = new Promise<void>((resolve) => { release = resolve })
  let answered = 0
  let everyoneIn!: () => void
  const allDecided = new Promise<void>((resolve) => { everyoneIn = resolve })
  const check = (): void => { if (answered + mock.requests.length >= 50) everyoneIn() }
  mock.script(async () => { check(); await gate; return undefined })
  const all = Promise.all(Array.from({ length: 50 }, async () => { const r = await post(body); await r.text(); answered++; check(); return r }))
  await allDecided
  release()
  const results = await all
  const ok = results.filter((r) => r.status === 200).length
  const refused = results.filter((r) => r.status === 402).length
  t.equal(ok, 5, 'five calls admitted at once')
  t.equal(refused, 45)
  await settled()
  await app.gateway.store.flush()
  const org = (await app.gateway.store.orgs.get('acme'))!
  t.equal(org.held_nano, 0, 'every hold settled')
  t.ok(org.balance_nano >= 0)
  t.equal(org.balance_nano + org.spent_nano, oneHold * 5 + Math.floor(oneHold / 2), 'what was spent is what left the balance')
  const spent = (await app.gateway.store.usage.totals({ org: 'acme' })).cost_nano
  t.equal(org.spent_nano, spent, 'the ledger agrees with the usage records')
  t.strictSame(sqliteOf(app).db.prepare('SELECT count(*) AS n FROM holds').get(), { n: 0 }, 'no hold left')
})

t.test('by default no prompt or completion text reaches the SQLite files; store_content keeps it', async (t) => {
  const dir = tempDir('content')
  const secret = 'Zanzibar-purple-elephant-1984'
  for (const store of [false, true]) {
    const file = join(dir, `gw-${String(store)}.db`)
    const { app, post } = await start(t, { store: { sqlite: file }, plugins: [{ name: 'auth' }, { name: 'usage', options: { store_content: store } }] })
    for (const stream of [false, true]) {
      const res = await post(chat(secret, { stream }))
      t.equal(res.status, 200)
      await res.text()
    }
    await settled()
    await app.close()
    const bytes = readdirSync(dir).filter((f) => f.startsWith(`gw-${String(store)}.db`)).map((f) => readFileSync(join(dir, f)).toString('latin1')).join('')
    t.equal(bytes.includes(secret), store, store ? 'kept with store_content' : 'nothing stored by default')
  }
})

t.test('store_content keeps the prompt and exactly what the client received, streamed or not, translated or not', async (t) => {
  const { app, post } = await start(t, { plugins: [{ name: 'auth' }, { name: 'usage', options: { store_content: true } }] })
  const received: string[] = []
  for (const model of ['openai/gpt-test', 'anthropic/claude-test']) {
    for (const stream of [false, true]) {
      const res = await post(chat('Remember the blue heron', { model, stream }))
      t.equal(res.status, 200)
      received.push(await res.text())
    }
  }
  const store = sqliteOf(app)
  const rows = store.db.prepare('SELECT r.stream, r.model, c.request, c.response FROM usage_records r JOIN usage_content c ON c.usage_id = r.id ORDER BY r.created_at, r.id').all() as Array<{ stream: number, model: string, request: string, response: string }>
  t.equal(rows.length, 4, 'every call has its content')
  t.same(rows.map((r) => r.response).sort(), [...received].sort(), 'the stored answer is byte for byte what the client got')
  for (const r of rows) {
    t.match(JSON.parse(r.request), { messages: [{ role: 'user', content: 'Remember the blue heron' }] }, 'the prompt in the client\'s own shape')
    if (r.stream === 1) t.match(r.response, /^data: /, 'a stream is kept as the events sent')
    else t.equal(JSON.parse(r.response).object, 'chat.completion', 'a JSON answer in the client\'s protocol, even from a Messages upstream')
  }
})

t.test('a SIGTERM during load loses no record of a completed response', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const db = join(tempDir('kill'), 'gw.db')
  const c = mockCatalog(mock)
  // two workers: records written by both land in the one SQLite file
  const gw = await spawnGateway(t, {
    store: { sqlite: db },
    plugins: [{ name: 'auth' }, { name: 'usage' }],
    providers: c.providers,
    models: c.models,
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
  }, ['--workers', '2'])
  const port = gw.port
  let completed = 0
  let stop = false
  let loaded!: () => void
  const underLoad = new Promise<void>((resolve) => { loaded = resolve })
  const worker = async (): Promise<void> => {
    // eslint-disable-next-line no-unmodified-loop-condition -- `stop` is set by the test once the load has run long enough
    while (!stop) {
      try {
        const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: JSON.stringify(chat('load')) })
        const text = await res.text()
        if (res.status === 200 && text.includes('chat.completion') && ++completed === 40) loaded()
      } catch { return }
    }
  }
  const workers = Array.from({ length: 8 }, worker)
  // the signal comes once the load is under way, with calls in flight
  await Promise.race([underLoad, Promise.all(workers)])
  gw.kill('SIGTERM')
  const code = await gw.exited
  stop = true
  await Promise.all(workers)
  t.equal(code, 0, 'a graceful exit')
  t.ok(completed > 10, `${completed} completed responses`)
  const raw = new Database(db, { readonly: true })
  const n = (raw.prepare('SELECT count(*) AS n FROM usage_records_all').get() as { n: number }).n
  raw.close()
  t.ok(n >= completed, `every completed response has its record (${n} records, ${completed} responses)`)
})

t.test('a charge beyond what the balance holds is not written off: the record keeps it, the rest is uncollected, and a top-up pays it first', async (t) => {
  const ADMIN = 'uncollected-admin-token-0123456789'
  const tenants = [{ org: 'acme', balance_usd: 5, projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
  const { app, mock, base, post } = await start(t, { tenants, admin: { token: ADMIN }, plugins: [{ name: 'auth' }, { name: 'balance' }, { name: 'usage' }] })
  // the provider reports far more than max_tokens foresaw: 10M in at $3/M and 2/3M out at $15/M is $40
  mock.script(() => ({ body: { id: 'c', object: 'chat.completion', created: 1, model: 'gpt-upstream-name', choices: [{ index: 0, message: { role: 'assistant', content: 'hi' }, finish_reason: 'stop' }], usage: { prompt_tokens: 10_000_000, completion_tokens: 666_667, total_tokens: 10_666_667 } } }))
  const res = await post(chat('hello', { max_tokens: 10 }))
  t.equal(res.status, 200)
  await res.text()
  await settled()
  await app.gateway.store.flush()
  const admin = async (method: string, path: string, body?: unknown): Promise<any> => await (await fetch(`${base}/admin/v1${path}`, { method, headers: { authorization: `Bearer ${ADMIN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: body === undefined ? undefined : JSON.stringify(body) })).json()
  const [row] = await app.gateway.store.usage.page({}, 1)
  t.equal(row?.cost_nano, 40_000_005_000, 'the record keeps the whole charge')
  t.match(await admin('GET', '/orgs/acme'), { balance_usd: '0', spent_usd: '5', uncollected_usd: '35.000005' }, 'the balance went to 0, and the rest is owed')
  t.equal((await post(chat())).status, 402, 'refused until a top-up covers it')
  t.match(await admin('POST', '/orgs/acme/credits', { amount_usd: 20 }), { balance_usd: '0', spent_usd: '25', uncollected_usd: '15.000005' }, 'a top-up pays what is owed first')
  t.equal((await post(chat())).status, 402)
  t.match(await admin('POST', '/orgs/acme/credits', { amount_usd: 20 }), { balance_usd: '4.999995', spent_usd: '40.000005', uncollected_usd: '0' })
  mock.script(null)
  t.equal((await post(chat())).status, 200, 'and then calls go again')
})
