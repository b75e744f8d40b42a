import t, { type Test } from 'tap'
import Database from 'better-sqlite3'
import { execFileSync } from 'node:child_process'
import { join } from 'node:path'
import { estimatePromptTokens } from '../../plugins/gateway/billing.js'
import { startMockUpstream, type MockUpstream } from '../mock-upstream.js'
import { eventually, KEY_A, mockCatalog, spawnGateway, type SpawnedGateway } from '../helper.js'
import { tempDir } from '../temp-dir.js'

// Races against `modelgate serve --workers 2`: two processes sharing one SQLite file, driven
// with many connections at once (a fresh connection per call, so the kernel spreads them over
// both workers). Quota, balance and key revocation must hold whichever worker serves a call
// (one gateway for the three, an organization each); a worker killed with SIGKILL under load
// loses no record of a response its clients completed, leaves the ledger balanced, is replaced
// by the primary, and its balance lease is released by the live worker within stale_hold_s.

const ADMIN = 'races-admin-token-0123456789abcdef'
const INITIAL_USD = 25

interface Gateway { gw: SpawnedGateway, mock: MockUpstream, db: string, base: string }

// A live worker must never be taken for dead: stale_hold_s is kept well above how long a loaded
// machine may hold a worker's event loop (a lock wait can take busy_timeout, 5 s), except where a
// dead worker's lease must be seen released within the test.
async function twoWorkers (t: Test, extra: Record<string, unknown> = {}, tenants?: unknown[], env: Record<string, string> = {}, staleHoldS = 10): Promise<Gateway> {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const c = mockCatalog(mock)
  const db = join(tempDir('races'), 'gw.db')
  const gw = await spawnGateway(t, {
    store: { sqlite: db, stale_hold_s: staleHoldS },
    admin: { token: ADMIN },
    plugins: [{ name: 'auth', options: { cache_ttl_s: 60 } }, { name: 'quota' }, { name: 'balance' }, { name: 'usage' }],
    providers: c.providers,
    models: c.models,
    tenants: tenants ?? [{ org: 'acme', balance_usd: INITIAL_USD, projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }],
    ...extra
  }, ['--workers', '2'], env)
  return { gw, mock, db, base: `http://127.0.0.1:${gw.port}` }
}

let timedOut = 0

async function chat (g: Gateway, key = KEY_A, extra: Record<string, unknown> = {}): Promise<{ status: number, text: string, trace: string }> {
  try {
    const res = await fetch(`${g.base}/v1/chat/completions`, {
      method: 'POST',
      signal: AbortSignal.timeout(5000),
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ model: 'openai/gpt-test', max_tokens: 200, messages: [{ role: 'user', content: 'x' }], ...extra })
    })
    return { status: res.status, text: await res.text(), trace: res.headers.get('x-svc-trace-id') ?? '' }
  } catch (err) {
    if ((err as Error).name === 'TimeoutError') timedOut++
    return { status: 0, text: '', trace: '' }
  }
}

function ledger (db: string, orgId = 'acme'): { balance: number, held: number, spent: number, recorded: number, records: number, refused: number } {
  const raw = new Database(db, { readonly: true, fileMustExist: true })
  try {
    const org = raw.prepare('SELECT balance_nano AS balance, held_nano AS held, spent_nano AS spent FROM organizations WHERE id = ?').get(orgId) as { balance: number, held: number, spent: number }
    // the calls that were answered (or failed at a provider), and the calls refused before any
    const usage = raw.prepare("SELECT coalesce(sum(status <> 'refused'), 0) AS records, coalesce(sum(status = 'refused'), 0) AS refused, coalesce(sum(cost_nano), 0) AS recorded FROM usage_records_all WHERE org_id = ?").get(orgId) as { records: number, refused: number, recorded: number }
    return { ...org, ...usage }
  } finally {
    raw.close()
  }
}

/** Polls `check` until it holds or `ms` of wall time passed; returns its last answer. */

/**
 * Holds every request that reaches the mock upstream until `open()` is called, or until
 * `ready(arrived)` holds (asked on each arrival and on `check()`); then answers them as usual.
 */
function holdUpstream (mock: MockUpstream, ready: (arrived: number) => boolean): { open: () => void, check: () => void } {
  let open!: () => void
  const gate = new Promise<void>((resolve) => { open = resolve })
  let arrived = 0
  const check = (): void => { if (ready(arrived)) open() }
  mock.script(async () => { arrived++; check(); await gate; return undefined })
  return { open, check }
}

const workerPids = (primary: number): number[] => {
  try {
    return execFileSync('ps', ['-o', 'pid=', '--ppid', String(primary)], { encoding: 'utf8' }).split('\n').map((s) => Number(s.trim())).filter((n) => n > 0)
  } catch {
    return []
  }
}

// a hold is the worst case: (the prompt's estimate + 200 max_tokens) at the output rate, $15 per million
const HOLD = (estimatePromptTokens({ messages: [{ role: 'user', content: 'x' }] }) + 200) * 15_000
const KEY_POOR = 'mg-test-key-poor-0123456789abcdef'
const KEY_QUOTA = 'mg-test-key-quota-0123456789abcdef'
const KEY_COUNTED = 'mg-test-key-counted-0123456789abcdef'

t.test('two workers, an organization per case', async (t) => {
  const g = await twoWorkers(t, {}, [
    { org: 'poor', balance_usd: (5 * HOLD + 1000) / 1e9, projects: [{ id: 'web', keys: [{ key: KEY_POOR }] }] },
    { org: 'limited', balance_usd: INITIAL_USD, projects: [{ id: 'web', quota: { tokens: 1, per: 'hour' }, keys: [{ key: KEY_QUOTA }] }] },
    { org: 'counted', balance_usd: INITIAL_USD, projects: [{ id: 'web', quota: { tokens: 45, per: 'hour' }, keys: [{ key: KEY_COUNTED }] }] },
    { org: 'acme', balance_usd: INITIAL_USD, projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }
  ], { LOG_LEVEL: 'info' }) // the request log lines say which worker served a call
  t.beforeEach(() => { g.mock.reset() })

  t.test('balance: 50 concurrent calls against a balance that pays for 5 holds', async (t) => {
    // the admitted calls wait upstream until every call has been admitted or refused, so that no
    // call ends (and frees its hold) while others are still being decided
    let refusedSoFar = 0
    const gate = holdUpstream(g.mock, (arrived) => arrived + refusedSoFar >= 50)
    const results = await Promise.all(Array.from({ length: 50 }, async () => {
      const r = await chat(g, KEY_POOR)
      if (r.status !== 200) { refusedSoFar++; gate.check() }
      return r
    }))
    const ok = results.filter((r) => r.status === 200).length
    const refused = results.filter((r) => r.status === 402).length
    t.ok(ok >= 1 && ok <= 5, `${ok} admitted: never more than the balance can hold`)
    t.equal(ok + refused, 50, 'the others refused with 402')
    const l = await eventually(5000, () => ledger(g.db, 'poor'), (v) => v.held === 0)
    t.equal(l.held, 0, 'every hold settled or given back')
    t.ok(l.balance >= 0, 'never overdrawn')
    t.equal(l.balance + l.spent, 5 * HOLD + 1000, 'balance + spent = initial')
    t.equal(l.spent, l.recorded, 'spent is the sum of the recorded costs')
    t.equal(l.records, ok, 'one record per answered call')
    t.ok(l.refused >= 1 && l.refused <= refused, `the refusals recorded, up to ten a second per key and worker (${l.refused} of ${refused})`)
  })

  t.test('quota: once an ended call reached it, both workers refuse the next call', async (t) => {
    t.equal((await chat(g, KEY_QUOTA)).status, 200, 'the first call is under the quota')
    const next = await Promise.all(Array.from({ length: 20 }, async () => await chat(g, KEY_QUOTA)))
    t.same(next.map((r) => r.status), Array(20).fill(429), 'every later call, on either worker, is refused')
  })

  t.test('quota: sequential calls alternating between the workers are refused from the one after the call that reached it', async (t) => {
    // each call uses 10 tokens (8 prompt, 2 completion): the fifth takes the hour to 50 of 45
    const calls: Array<Awaited<ReturnType<typeof chat>>> = []
    // a connection per call (connection: close): the primary hands them to the workers in turn
    for (let i = 0; i < 10; i++) calls.push(await chat(g, KEY_COUNTED))
    t.equal((JSON.parse((calls[0] as { text: string }).text) as { usage: { total_tokens: number } }).usage.total_tokens, 10, 'ten tokens a call')
    t.same(calls.map((c) => c.status), [...Array(5).fill(200), ...Array(5).fill(429)], 'refused right at the quota')
    // which worker served each call: the pid on its request's log lines
    const out = await g.gw.stdout(new RegExp((calls[9] as { trace: string }).trace))
    const pidOf = (trace: string): number | undefined => {
      for (const line of out.split('\n')) {
        if (!line.includes(trace)) continue
        try {
          const pid = (JSON.parse(line) as { pid?: unknown }).pid
          if (typeof pid === 'number') return pid
        } catch {}
      }
      return undefined
    }
    const pids = calls.map((c) => pidOf(c.trace))
    t.equal(new Set(pids.filter((p) => p !== undefined)).size, 2, `both workers served (${pids.join(', ')})`)
    const reached = pids[4]
    const other = pids.findIndex((p, i) => i > 4 && p !== reached)
    t.ok(other > 4, 'the worker that did not count the fifth call served a later one')
    t.equal(calls[other]?.status, 429, 'and refused it: the count closed its window before the fifth answer ended')
  })

  t.test('revocation in flight: once the admin API answered, neither worker accepts the key', async (t) => {
    const created = await fetch(`${g.base}/admin/v1/keys`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN}`, 'content-type': 'application/json' }, body: JSON.stringify({ org: 'acme', project: 'web', name: 'doomed' }) })
    const { id, key } = await created.json() as { id: string, key: string }
    // warm both workers' caches (cache_ttl_s 60): without revocation messages they would keep trusting it
    const warm = await Promise.all(Array.from({ length: 10 }, async () => await chat(g, key)))
    t.same(warm.map((r) => r.status), Array(10).fill(200))
    // ten calls in flight (held upstream) while the key is revoked
    const gate = holdUpstream(g.mock, () => false)
    const inFlight = Array.from({ length: 10 }, async () => await chat(g, key))
    await g.mock.waitForRequests(10 + 10, 5000)
    const revoked = await fetch(`${g.base}/admin/v1/keys/${id}`, { method: 'DELETE', headers: { authorization: `Bearer ${ADMIN}`, connection: 'close' } })
    t.equal(revoked.status, 200)
    gate.open()
    await Promise.all(inFlight)
    g.mock.script(null)
    // every worker drops it within a second: poll until twenty calls in a row are refused
    const statuses = await eventually(1000, async () => (await Promise.all(Array.from({ length: 20 }, async () => await chat(g, key)))).map((r) => r.status), (s) => s.every((x) => x === 401))
    t.same(statuses, Array(20).fill(401), 'refused by both workers within a second')
  })
})

t.test('kill -9 of a worker under load: completed responses all recorded, ledger balanced, worker replaced, lease released', async (t) => {
  const g = await twoWorkers(t, {}, undefined, {}, 1.5)
  await eventually(5000, () => workerPids(g.gw.pid), (p) => p.length === 2)
  const before = workerPids(g.gw.pid)
  t.equal(before.length, 2, 'two workers')
  g.mock.faults = { delayMs: 20 }
  const completed: string[] = []
  let failed = 0
  let stop = false
  const client = async (): Promise<void> => {
    // eslint-disable-next-line no-unmodified-loop-condition -- `stop` is set by the test once the load has run long enough
    while (!stop) {
      const r = await chat(g)
      if (r.status === 200 && r.text.includes('chat.completion')) completed.push(r.trace)
      else failed++
    }
  }
  const clients = Array.from({ length: 12 }, client)
  await eventually(20_000, () => completed.length, (n) => n >= 60)
  const victim = before[0] as number
  process.kill(victim, 'SIGKILL')
  const atKill = completed.length
  // the load goes on, served by the live worker and then by the replacement too
  await eventually(20_000, () => completed.length, (n) => n >= atKill + 60)
  const after = await eventually(15_000, () => workerPids(g.gw.pid), (p) => p.length === 2 && !p.includes(victim))
  stop = true
  await Promise.all(clients)
  t.equal(after.length, 2, 'the primary forked a replacement')
  t.notOk(after.includes(victim), 'the dead worker is gone')
  t.comment(`${completed.length} completed responses, ${failed} calls cut or refused around the kill, ${timedOut} with no answer in 5 s`)

  // the dead worker's lease is released by the live ones once it has been silent for stale_hold_s
  const l = await eventually(8000, () => ledger(g.db), (v) => v.held === 0)
  t.equal(l.held, 0, 'no hold left after stale_hold_s')
  t.equal(l.balance + l.spent, INITIAL_USD * 1e9, 'balance + spent = initial')
  t.equal(l.spent, l.recorded, 'every charge has its record, and every record its charge')
  const raw = new Database(g.db, { readonly: true })
  const recorded = new Set((raw.prepare('SELECT trace_id FROM usage_records_all').all() as Array<{ trace_id: string }>).map((r) => r.trace_id))
  raw.close()
  const missing = completed.filter((trace) => !recorded.has(trace))
  t.same(missing, [], 'every completed response has its usage record')
})
