import t from 'tap'
import { estimatePromptTokens } from '../../engine/gateway/billing.js'
import type { MockUpstream } from '../mock-upstream.js'
import { eventually, KEY_A } from '../helper.js'
import { ADMIN, chat, INITIAL_USD, ledger, twoWorkers } from './two-workers.js'

// Races against `modelgate serve --workers 2`: two processes sharing one SQLite file, driven
// with many connections at once (a fresh connection per call, so the kernel spreads them over
// both workers). Quota, balance and key revocation must hold whichever worker serves a call
// (one gateway for the three, an organization each). (races-kill.slow.test.ts: a worker killed
// with SIGKILL under load.)

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
    await g.mock.waitForRequests(10 + 10, 60_000)
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
