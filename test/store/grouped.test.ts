import t from 'tap'
import Database from 'better-sqlite3'
import { grouped } from '../../plugins/store/grouped.js'

function setup () {
  const db = new Database(':memory:')
  db.exec('CREATE TABLE x (id INTEGER PRIMARY KEY)')
  const insert = db.prepare('INSERT INTO x (id) VALUES (?) ON CONFLICT DO NOTHING')
  const count = (): number => (db.prepare('SELECT count(*) AS n FROM x').get() as { n: number }).n
  return { db, insert, count }
}

t.test('calls of one event-loop turn share one transaction, each with its own answer', async (t) => {
  const { db, insert, count } = setup()
  // the database as grouped() sees it, counting the transactions it runs
  let transactions = 0
  const counted = {
    transaction: (f: (...a: unknown[]) => unknown) => {
      const tx = db.transaction(f)
      const counting = (run: (...a: unknown[]) => unknown) => (...a: unknown[]) => { transactions++; return run(...a) }
      return Object.assign(counting(tx), { deferred: counting(tx.deferred), immediate: counting(tx.immediate), exclusive: counting(tx.exclusive) })
    }
  } as unknown as typeof db
  const take = grouped(counted, (id: number) => insert.run(id).changes > 0)
  const first = [take(1), take(2), take(1), take(3)]
  t.equal(count(), 0, 'nothing runs before the turn ends')
  t.same(await Promise.all(first), [true, true, false, true], 'the repeat in the same group sees the first write')
  t.equal(transactions, 1, 'one transaction for the four calls')
  t.equal(count(), 3)
  t.same(await Promise.all([take(3), take(4)]), [false, true], 'the next turn is the next group')
  t.equal(transactions, 2)
})

t.test('a call that fails rejects alone; the others are still answered and committed', async (t) => {
  const { db, insert, count } = setup()
  const take = grouped(db, (id: number) => {
    if (id < 0) throw new Error('bad id')
    return insert.run(id).changes > 0
  })
  const results = await Promise.allSettled([take(1), take(-1), take(2)])
  t.same(results.map((r) => r.status), ['fulfilled', 'rejected', 'fulfilled'])
  t.match((results[1] as PromiseRejectedResult).reason, { message: 'bad id' })
  t.equal(count(), 2, 'both good writes are in the store')
})

t.test('the group runs inside a transaction', async (t) => {
  const { db } = setup()
  const inTx = grouped(db, () => db.inTransaction)
  t.same(await Promise.all([inTx(), inTx()]), [true, true])
})

t.test('a group refused because another worker held the lock rejects every call at once, with no reruns', async (t) => {
  const { db, count } = setup()
  let calls = 0
  const take = grouped(db, () => {
    calls++
    throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' })
  })
  const results = await Promise.allSettled([take(), take(), take()])
  t.same(results.map((r) => r.status), ['rejected', 'rejected', 'rejected'])
  t.match((results[0] as PromiseRejectedResult).reason, { code: 'SQLITE_BUSY' })
  t.equal(calls, 1, 'not rerun one by one (each rerun would wait busy_timeout again)')
  t.equal(count(), 0)
})
