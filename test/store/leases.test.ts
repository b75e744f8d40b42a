import t from 'tap'
import { join } from 'node:path'
import { Leases, type LeaseLedger } from '../../engine/store/leases.js'
import { SqliteStore } from '../../engine/store/sqlite/index.js'
import { sqliteLeaseLedger } from '../../engine/store/sqlite/ledger.js'
import { FakeClock, testConfig, type Teardown } from '../helper.js'
import { tempDir } from '../temp-dir.js'

// Balance leases: one process's holds come out of an amount reserved in the store, so most holds
// cost no write; two processes on one file never hand out more than the balance between them;
// the leases of a process that stopped are released by the others.

const org = (s: SqliteStore) => s.orgs.get('acme')!
const leaseRows = (s: SqliteStore): number => (s.db.prepare('SELECT count(*) AS n FROM holds').get() as { n: number }).n

async function open (t: Teardown, file: string, balance?: number, opts: ConstructorParameters<typeof SqliteStore>[1] = {}): Promise<SqliteStore> {
  const store = new SqliteStore(file, opts)
  t.teardown(() => store.close())
  await store.syncTenants(testConfig(), 0)
  if (balance !== undefined) store.db.prepare('UPDATE organizations SET balance_nano = ? WHERE id = ?').run(balance, 'acme')
  return store
}

/** A store on ':memory:' whose org 'acme' has `balance`; `reserved` gets the amount of each lease reservation. */
async function watched (t: Teardown, balance: number): Promise<{ store: SqliteStore, reserved: number[] }> {
  const store = await open(t, ':memory:', balance)
  const reserved: number[] = []
  const lease = store.ledger.lease
  Object.defineProperty(store.ledger, 'lease', { value: (...a: Parameters<typeof lease>) => { const n = lease(...a); reserved.push(n); return n } })
  return { store, reserved }
}

/** Commits the writes the store delays (lease give-backs) now. */
async function later (store: SqliteStore): Promise<void> {
  store.flush()
}

t.test('ledger leases: reserved under the balance guard, at most an eighth of the rest ahead', async (t) => {
  const s = await open(t, ':memory:', 1000)
  t.equal(s.ledger.lease('L', 'h', 'acme', 100, 10_000, 0), 100 + Math.floor(900 / 8), 'need plus an eighth of what is left')
  t.equal(s.ledger.lease('L', 'h', 'acme', 2000, 2000, 0), 0, 'more than is free: nothing')
  t.equal(org(s).held_nano, 212)
  t.equal(s.ledger.consume('L', 'acme', 50, 80, 5), 80, 'the whole charge is debited')
  t.match(org(s), { balance_nano: 920, held_nano: 162, spent_nano: 80 })
  s.ledger.giveBack('L', 'acme', 162)
  t.match(org(s), { held_nano: 0 })
  t.equal(leaseRows(s), 0, 'an empty lease leaves no row')
})

t.test('a busy process takes few leases; an idle one gives its lease back', async (t) => {
  const { store, reserved } = await watched(t, 1_000_000_000)
  const held = await Promise.all(Array.from({ length: 100 }, async () => await store.balance.hold('acme', 1000, 0)))
  t.equal(held.filter(Boolean).length, 100)
  t.ok(reserved.length <= 100 / 16, `100 holds in flight took ${reserved.length} reservations`)
  await Promise.all(Array.from({ length: 100 }, async () => { await store.balance.settle('acme', 1000, 400, 0) }))
  await later(store)
  t.match(org(store), { balance_nano: 1_000_000_000 - 40_000, held_nano: 0, spent_nano: 40_000 }, 'charges debited, lease given back')
  t.equal(leaseRows(store), 0)
})

t.test('a hold the lease covers needs no store write and no promise', async (t) => {
  const { store, reserved } = await watched(t, 1_000_000_000)
  t.equal(await store.balance.hold('acme', 1000, 0), true)
  t.equal(store.balance.hold('acme', 1000, 0), true, 'answered at once from the lease')
  t.equal(reserved.length, 1)
  await store.balance.settle('acme', 1000, 0, 0)
  await store.balance.settle('acme', 1000, 0, 0)
})

t.test('under a steady load the lease grows, so reservations get rare; it is sized afresh after idling', async (t) => {
  const { store, reserved: sizes } = await watched(t, 1_000_000_000_000)
  // 32 calls in flight; each one that ends is charged 90% of its hold and a new one starts
  const CALLS = 4000
  let refused = 0
  for (let i = 0; i < 32; i++) if (!await store.balance.hold('acme', 1000, 0)) refused++
  for (let i = 32; i < CALLS; i++) {
    void store.balance.settle('acme', 1000, 900, 0)
    if (!await store.balance.hold('acme', 1000, 0)) refused++
  }
  t.equal(refused, 0)
  // with a fixed 16 calls ahead this took one reservation every 18 calls or so (about 220)
  t.ok(sizes.length <= CALLS / 128, `${CALLS} calls took ${sizes.length} reservations`)
  t.ok(Math.max(...sizes) <= 1000 * (1 + 256), 'no reservation beyond 256 calls ahead')
  await Promise.all(Array.from({ length: 32 }, async () => { await store.balance.settle('acme', 1000, 900, 0) }))
  await later(store)
  t.match(org(store), { balance_nano: 1_000_000_000_000 - CALLS * 900, held_nano: 0, spent_nano: CALLS * 900 }, 'every charge debited, the lease given back')
  t.equal(leaseRows(store), 0)
  sizes.length = 0
  t.ok(await store.balance.hold('acme', 1000, 0))
  t.same(sizes, [1000 * 17], 'after idling, a lease starts again at 16 calls ahead')
  await store.balance.settle('acme', 1000, 0, 0)
})

t.test('an idle lease is given back with a later group, unless a call takes from it first', async (t) => {
  const { store, reserved } = await watched(t, 1_000_000_000)
  t.ok(await store.balance.hold('acme', 1000, 0))
  await store.balance.settle('acme', 1000, 400, 0) // nothing in flight: the give-back is queued
  t.ok(await store.balance.hold('acme', 1000, 0), 'a call before the give-back')
  t.equal(reserved.length, 1, 'takes from the same lease: no second reservation')
  await later(store)
  t.ok(org(store).held_nano >= 1000, 'the give-back keeps the lease, which is in use again')
  t.equal(leaseRows(store), 1)
  await store.balance.settle('acme', 1000, 400, 0)
  await later(store)
  t.match(org(store), { balance_nano: 1_000_000_000 - 800, held_nano: 0, spent_nano: 800 }, 'idle through a group: given back')
  t.equal(leaseRows(store), 0)
  t.ok(await store.balance.hold('acme', 1000, 0))
  t.equal(reserved.length, 2, 'a lease given back is forgotten: the next call reserves anew')
  await store.balance.settle('acme', 1000, 0, 0)
  await later(store)
  t.equal(org(store).held_nano, 0)
})

/** Leases over `store`'s ledger whose refills and give-backs are counted; `idleMs` as Leases takes it. */
function counted (t: Teardown, store: SqliteStore, idleMs: number): { leases: Leases, counts: { refills: number, giveBacks: number } } {
  const ledger = sqliteLeaseLedger(store.ledger, store.commit, store.holder)
  const counts = { refills: 0, giveBacks: 0 }
  const spy: LeaseLedger = {
    ...ledger,
    refill: (...a) => { counts.refills++; return ledger.refill(...a) },
    giveBackLater: (...a) => { counts.giveBacks++; ledger.giveBackLater(...a) }
  }
  const leases = new Leases(spy, store.holder, null, () => {}, { idleMs })
  t.teardown(() => { leases.stop() })
  return { leases, counts }
}

t.test('calls one after another keep their lease: no give-back between them, and it grows as they run it dry', async (t) => {
  const store = await open(t, ':memory:', 1_000_000_000_000)
  const { leases, counts } = counted(t, store, 60_000)
  const CALLS = 500
  let refused = 0
  for (let i = 0; i < CALLS; i++) {
    if (!await leases.hold('acme', 1000, 0)) refused++
    await leases.settle('acme', 1000, 900, 0) // none in flight until the next call
  }
  t.equal(refused, 0)
  t.equal(counts.giveBacks, 0, 'no give-back while calls keep taking from the lease')
  // 16, 32, 64, 128 and 256 calls ahead: a reservation every 16 calls would take 32
  t.ok(counts.refills <= 6, `${CALLS} calls one after another took ${counts.refills} reservations`)
  t.ok(org(store).held_nano > 0, 'the lease is kept')
  leases.flushIdle()
  store.flush()
  t.match(org(store), { balance_nano: 1_000_000_000_000 - CALLS * 900, held_nano: 0, spent_nano: CALLS * 900 }, 'flushed: every charge debited, the lease given back')
  t.equal(leaseRows(store), 0)
})

t.test('a lease nobody took from for the idle time is given back without a flush', async (t) => {
  const store = await open(t, ':memory:', 1_000_000_000)
  const { leases, counts } = counted(t, store, 20)
  t.ok(await leases.hold('acme', 1000, 0))
  await leases.settle('acme', 1000, 400, 0)
  t.ok(org(store).held_nano > 0, 'kept right after the call')
  for (let waited = 0; org(store).held_nano > 0 && waited < 10_000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10))
  t.match(org(store), { balance_nano: 1_000_000_000 - 400, held_nano: 0, spent_nano: 400 }, 'given back once idle')
  t.equal(counts.giveBacks, 1)
  t.equal(leaseRows(store), 0)
})

t.test('a give-back in a group that rolls back is written again, with the amount decided', async (t) => {
  const store = await open(t, ':memory:', 1_000_000)
  t.ok(await store.balance.hold('acme', 1000, 0))
  const settled = store.balance.settle('acme', 1000, 300, 0)
  const bad = store.commit.run(() => { throw new Error('a bad write in the same group') })
  await t.rejects(bad, /a bad write/, 'the bad write alone failed')
  await settled
  await later(store)
  t.match(org(store), { balance_nano: 1_000_000 - 300, held_nano: 0, spent_nano: 300 }, 'charge debited, lease given back')
  t.equal(leaseRows(store), 0)
})

t.test('two processes on one file never hold more than the balance', async (t) => {
  const file = join(tempDir('leases'), 'gw.db')
  const a = await open(t, file, 10_500)
  const b = await open(t, file)
  const admitted = { a: 0, b: 0 }
  for (let i = 0; i < 40; i++) {
    if (await a.balance.hold('acme', 1000, 0)) admitted.a++
    if (await b.balance.hold('acme', 1000, 0)) admitted.b++
  }
  t.equal(admitted.a + admitted.b, 10, `ten holds of 1,000 in 10,500 (${admitted.a} + ${admitted.b})`)
  t.ok(admitted.a > 0 && admitted.b > 0, 'both got some')
  t.ok(org(a).held_nano <= 10_500)
  for (let i = 0; i < admitted.a; i++) await a.balance.settle('acme', 1000, 1000, 0)
  for (let i = 0; i < admitted.b; i++) await b.balance.settle('acme', 1000, 0, 0)
  await later(a)
  await later(b)
  t.match(org(a), { balance_nano: 10_500 - admitted.a * 1000, held_nano: 0, spent_nano: admitted.a * 1000 })
  t.equal(leaseRows(a), 0)
})

t.test('the leases of a process that stopped beating are released by another within the holder timeout', async (t) => {
  const file = join(tempDir('leases'), 'gw.db')
  const clock = new FakeClock()
  const dead = await open(t, file, 100_000, { now: clock.now })
  const live = await open(t, file, undefined, { now: clock.now, holderTimeoutMs: 30_000 })
  t.ok(await dead.balance.hold('acme', 1000, clock.now()))
  t.ok(org(live).held_nano >= 1000, 'the dead process holds a lease')
  clock.advance(29_000)
  t.equal(live.releaseDeadHolders(), 0, 'within the timeout it is still taken for alive')
  t.ok(org(live).held_nano >= 1000)
  clock.advance(2_000)
  t.equal(live.releaseDeadHolders(), 1, 'silent past the timeout: its lease is released')
  t.equal(org(live).held_nano, 0)
  t.equal(leaseRows(live), 0)
  live.ledger.heartbeat(live.holder, clock.now())
  t.equal(dead.releaseDeadHolders(), 0, 'a live holder is never released by another')
})

t.test('a lease from before holders were recorded is released as stale', async (t) => {
  const store = await open(t, ':memory:', 100_000)
  t.equal(store.ledger.lease('old', null, 'acme', 1000, 1000, 1000), 1000)
  t.equal(store.ledger.releaseOlderThan(5000), 1)
  t.equal(org(store).held_nano, 0)
})

t.test('a store that closes gives its leases back', async (t) => {
  const file = join(tempDir('leases'), 'gw.db')
  const a = new SqliteStore(file)
  await a.syncTenants(testConfig(), 0)
  a.db.prepare('UPDATE organizations SET balance_nano = 100000 WHERE id = ?').run('acme')
  t.ok(await a.balance.hold('acme', 1000, 0))
  await a.close()
  const b = await open(t, file)
  t.equal(org(b).held_nano, 0)
  t.equal(leaseRows(b), 0)
})

t.test('an idle lease whose give-back ran while a refused refill was under way is given back after it', async (t) => {
  const store = await open(t, ':memory:', 1000)
  t.ok(await store.balance.hold('acme', 1000, 0))
  await store.balance.settle('acme', 1000, 0, 0) // idle: its give-back is queued
  const refused = store.balance.hold('acme', 1001, 0) // needs a refill, which cannot be met
  store.flush() // the give-back runs in the same group, after the refill: it keeps the lease
  t.equal(await refused, false)
  await later(store)
  t.match(org(store), { balance_nano: 1000, held_nano: 0 }, 'nothing left held')
  t.equal(leaseRows(store), 0)
})

t.test('a process taken for dead that then settles its calls: the charge applies, held never goes below zero', async (t) => {
  const file = join(tempDir('leases'), 'gw.db')
  const clock = new FakeClock()
  const slow = await open(t, file, 100_000, { now: clock.now })
  const live = await open(t, file, undefined, { now: clock.now, holderTimeoutMs: 30_000 })
  t.ok(await slow.balance.hold('acme', 1000, clock.now()))
  clock.advance(31_000)
  t.equal(live.releaseDeadHolders(), 1, 'silent past the timeout: its lease is released')
  t.equal(org(live).held_nano, 0)
  // it was only slow: its call ends now and is charged
  await slow.balance.settle('acme', 1000, 600, clock.now())
  slow.flush()
  const o = org(live)
  t.equal(o.held_nano, 0, 'the released lease gives nothing back twice')
  t.equal(o.spent_nano, 600, 'the call is charged all the same')
  t.equal(o.balance_nano + o.spent_nano, 100_000, 'balance + spent = initial')
})
