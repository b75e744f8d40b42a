import t from 'tap'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Leases } from '../../plugins/store/leases.js'
import { DeferredWriter } from '../../plugins/store/deferred.js'
import { Store } from '../../plugins/store/index.js'
import { testConfig, type Teardown } from '../helper.js'

// Balance leases: one worker's holds come out of an amount reserved in the store, so most holds
// cost no write; two workers on one file never hand out more than the balance between them.

function worker (file: string, onError = (err: unknown): void => { throw err }): { store: Store, writer: DeferredWriter, leases: Leases } {
  const store = new Store(file)
  const writer = new DeferredWriter(store.db, 1000, 100_000, onError)
  return { store, writer, leases: new Leases(store.ledger, writer) }
}

const org = (s: Store) => s.orgs.get('acme')!
const leaseRows = (s: Store): number => (s.db.prepare('SELECT count(*) AS n FROM holds').get() as { n: number }).n

/** One worker on ':memory:' whose org 'acme' has `balance`; `reserved` gets the amount of each lease reservation. */
function watchedWorker (t: Teardown, balance: number): ReturnType<typeof worker> & { reserved: number[] } {
  const w = worker(':memory:')
  t.teardown(() => w.store.close())
  w.store.syncTenants(testConfig(), 0)
  w.store.db.prepare('UPDATE organizations SET balance_nano = ? WHERE id = ?').run(balance, 'acme')
  const reserved: number[] = []
  const lease = w.store.ledger.lease
  Object.defineProperty(w.store.ledger, 'lease', { value: (...a: Parameters<typeof lease>) => { const n = lease(...a); reserved.push(n); return n } })
  return { ...w, reserved }
}

t.test('ledger leases: reserved under the balance guard, at most an eighth of the rest ahead', async (t) => {
  const s = new Store(':memory:')
  t.teardown(() => s.close())
  s.syncTenants(testConfig(), 0)
  s.db.prepare('UPDATE organizations SET balance_nano = 1000 WHERE id = ?').run('acme')
  t.equal(s.ledger.lease('L', 'acme', 100, 10_000, 0), 100 + Math.floor(900 / 8), 'need plus an eighth of what is left')
  t.equal(s.ledger.lease('L', 'acme', 2000, 2000, 0), 0, 'more than is free: nothing')
  t.equal(org(s).held_nano, 212)
  t.equal(s.ledger.consume('L', 'acme', 50, 80, 5), 80, 'the whole charge is debited')
  t.match(org(s), { balance_nano: 920, held_nano: 162, spent_nano: 80 })
  s.ledger.giveBack('L', 'acme', 162)
  t.match(org(s), { held_nano: 0 })
  t.equal(leaseRows(s), 0, 'an empty lease leaves no row')
})

t.test('a busy worker takes few leases; an idle one gives its lease back', async (t) => {
  const { store, writer, leases, reserved } = watchedWorker(t, 1_000_000_000)
  let held = 0
  for (let i = 0; i < 100; i++) if (leases.hold('acme', 1000, 0)) held++
  t.equal(held, 100)
  t.ok(reserved.length <= 100 / 16, `100 holds in flight took ${reserved.length} reservations`)
  for (let i = 0; i < 100; i++) leases.end('acme', 1000, 400, 0)
  writer.flush()
  t.match(org(store), { balance_nano: 1_000_000_000 - 40_000, held_nano: 0, spent_nano: 40_000 }, 'charges debited, lease given back')
  t.equal(leaseRows(store), 0)
})

t.test('under a steady load the lease grows, so reservations get rare; it is sized afresh after idling', async (t) => {
  const { store, writer, leases, reserved: sizes } = watchedWorker(t, 1_000_000_000_000)
  // 32 calls in flight; each one that ends is charged 90% of its hold and a new one starts
  const CALLS = 4000
  let refused = 0
  for (let i = 0; i < 32; i++) if (!leases.hold('acme', 1000, 0)) refused++
  for (let i = 32; i < CALLS; i++) {
    leases.end('acme', 1000, 900, 0)
    if (!leases.hold('acme', 1000, 0)) refused++
  }
  t.equal(refused, 0)
  // with a fixed 16 calls ahead this took one reservation every 18 calls or so (about 220)
  t.ok(sizes.length <= CALLS / 128, `${CALLS} calls took ${sizes.length} reservations`)
  t.ok(Math.max(...sizes) <= 1000 * (1 + 256), 'no reservation beyond 256 calls ahead')
  for (let i = 0; i < 32; i++) leases.end('acme', 1000, 900, 0)
  writer.flush()
  t.match(org(store), { balance_nano: 1_000_000_000_000 - CALLS * 900, held_nano: 0, spent_nano: CALLS * 900 }, 'every charge debited, the lease given back')
  t.equal(leaseRows(store), 0)
  sizes.length = 0
  t.ok(leases.hold('acme', 1000, 0))
  t.same(sizes, [1000 * 17], 'after idling, a lease starts again at 16 calls ahead')
  leases.end('acme', 1000, 0, 0)
})

t.test('an idle lease is given back with the next batch, unless a call takes from it first', async (t) => {
  const { store, writer, leases, reserved } = watchedWorker(t, 1_000_000_000)
  t.ok(leases.hold('acme', 1000, 0))
  leases.end('acme', 1000, 400, 0) // nothing in flight: the give-back is queued
  t.ok(leases.hold('acme', 1000, 0), 'a call before the batch')
  t.equal(reserved.length, 1, 'takes from the same lease: no second reservation')
  writer.flush()
  t.ok(org(store).held_nano >= 1000, 'the batch keeps the lease, which is in use again')
  t.equal(leaseRows(store), 1)
  leases.end('acme', 1000, 400, 0)
  writer.flush()
  t.match(org(store), { balance_nano: 1_000_000_000 - 800, held_nano: 0, spent_nano: 800 }, 'idle through a batch: given back')
  t.equal(leaseRows(store), 0)
  t.ok(leases.hold('acme', 1000, 0))
  t.equal(reserved.length, 2, 'a lease given back is forgotten: the next call reserves anew')
  leases.end('acme', 1000, 0, 0)
  writer.flush()
  t.equal(org(store).held_nano, 0)
})

t.test('a give-back in a batch that rolls back is written again, with the amount decided', async (t) => {
  const errors: unknown[] = []
  const { store, writer, leases } = worker(':memory:', (err) => { errors.push(err) })
  t.teardown(() => store.close())
  store.syncTenants(testConfig(), 0)
  store.db.prepare('UPDATE organizations SET balance_nano = 1000000 WHERE id = ?').run('acme')
  t.ok(leases.hold('acme', 1000, 0))
  leases.end('acme', 1000, 300, 0)
  writer.add(() => { throw new Error('a bad write in the same batch') })
  writer.flush()
  t.equal(errors.length, 1, 'the bad write alone failed')
  t.match(org(store), { balance_nano: 1_000_000 - 300, held_nano: 0, spent_nano: 300 }, 'charge debited, lease given back')
  t.equal(leaseRows(store), 0)
})

t.test('two workers on one file never hold more than the balance', async (t) => {
  const file = join(mkdtempSync(join(tmpdir(), 'mg-leases-')), 'gw.db')
  const a = worker(file)
  const b = worker(file)
  t.teardown(() => { a.store.close(); b.store.close() })
  a.store.syncTenants(testConfig(), 0)
  a.store.db.prepare('UPDATE organizations SET balance_nano = 10500 WHERE id = ?').run('acme')
  const admitted = { a: 0, b: 0 }
  for (let i = 0; i < 40; i++) {
    if (a.leases.hold('acme', 1000, 0)) admitted.a++
    if (b.leases.hold('acme', 1000, 0)) admitted.b++
  }
  t.equal(admitted.a + admitted.b, 10, `ten holds of 1,000 in 10,500 (${admitted.a} + ${admitted.b})`)
  t.ok(admitted.a > 0 && admitted.b > 0, 'both workers got some')
  t.ok(org(a.store).held_nano <= 10_500)
  for (let i = 0; i < admitted.a; i++) a.leases.end('acme', 1000, 1000, 0)
  for (let i = 0; i < admitted.b; i++) b.leases.end('acme', 1000, 0, 0)
  a.writer.flush()
  b.writer.flush()
  t.match(org(a.store), { balance_nano: 10_500 - admitted.a * 1000, held_nano: 0, spent_nano: admitted.a * 1000 })
  t.equal(leaseRows(a.store), 0)
})

t.test('a dead worker\'s lease is released as stale', async (t) => {
  const { store, leases } = worker(':memory:')
  t.teardown(() => store.close())
  store.syncTenants(testConfig(), 0)
  store.db.prepare('UPDATE organizations SET balance_nano = 100000 WHERE id = ?').run('acme')
  t.ok(leases.hold('acme', 1000, 1000))
  t.ok(org(store).held_nano >= 1000)
  t.equal(store.ledger.releaseOlderThan(5000), 1)
  t.equal(org(store).held_nano, 0)
})
