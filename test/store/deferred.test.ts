import t from 'tap'
import Database from 'better-sqlite3'
import { DeferredWriter } from '../../plugins/store/deferred.js'

function setup () {
  const db = new Database(':memory:')
  db.exec('CREATE TABLE x (id INTEGER PRIMARY KEY)')
  const errors: unknown[] = []
  const writer = new DeferredWriter(db, 1000, 1000, (err) => errors.push(err))
  const insert = db.prepare('INSERT INTO x (id) VALUES (?)')
  const count = (): number => (db.prepare('SELECT count(*) AS n FROM x').get() as { n: number }).n
  return { db, writer, insert, count, errors }
}

t.test('queued writes commit together on flush', async (t) => {
  const { writer, insert, count } = setup()
  for (let i = 1; i <= 10; i++) writer.add(() => { insert.run(i) })
  t.equal(count(), 0, 'nothing written before the flush')
  writer.flush()
  t.equal(count(), 10)
  t.equal(writer.pending, 0)
})

t.test('one bad write does not hold back the others', async (t) => {
  const { writer, insert, count, errors } = setup()
  writer.add(() => { insert.run(1) })
  writer.add(() => { insert.run(1) }) // a duplicate key: fails every time
  writer.add(() => { insert.run(2) })
  writer.flush()
  t.equal(count(), 2, 'the good writes are committed')
  t.equal(writer.pending, 0, 'the bad one is dropped, not retried forever')
  t.equal(errors.length, 1, 'and reported')
})

t.test('a busy database keeps the writes for later', async (t) => {
  const { writer, insert, count, errors } = setup()
  let busy = true
  writer.add(() => {
    if (busy) throw Object.assign(new Error('database is locked'), { code: 'SQLITE_BUSY' })
    insert.run(7)
  })
  writer.flush()
  t.equal(writer.pending, 1, 'kept')
  t.equal(errors.length, 1)
  busy = false
  writer.flush()
  t.equal(count(), 1)
  t.equal(writer.pending, 0)
})

t.test('sums: one write per key and batch, with the totals; later calls go to the next batch', async (t) => {
  const { writer } = setup()
  const applied: Array<[string, number[]]> = []
  const sum = (key: string, a: number, b: number): void => { writer.sum(key, [a, b], (totals) => applied.push([key, totals])) }
  sum('x', 1, 10)
  sum('y', 5, 0)
  sum('x', 2, 20)
  t.equal(writer.pending, 2, 'one queued write per key')
  writer.flush()
  t.same(applied, [['x', [3, 30]], ['y', [5, 0]]])
  sum('x', 4, 40)
  writer.flush()
  t.same(applied[2], ['x', [4, 40]], 'a new batch starts from zero')
})

t.test('sums: a batch that rolls back is applied again with the same totals', async (t) => {
  const { db, writer, errors } = setup()
  db.exec('CREATE TABLE total (n INTEGER NOT NULL)')
  db.exec('INSERT INTO total VALUES (0)')
  const add = db.prepare('UPDATE total SET n = n + ?')
  let busy = true
  writer.sum('n', [2], ([n]) => { add.run(n); if (busy) throw Object.assign(new Error('locked'), { code: 'SQLITE_BUSY' }) })
  writer.sum('n', [3], () => t.fail('the second call joins the first write'))
  writer.flush()
  t.equal((db.prepare('SELECT n FROM total').get() as { n: number }).n, 0, 'rolled back')
  t.equal(errors.length, 1)
  busy = false
  writer.flush()
  t.equal((db.prepare('SELECT n FROM total').get() as { n: number }).n, 5, 'applied once, with both amounts')
})
