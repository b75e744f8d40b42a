import t from 'tap'
import { readFileSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildApp } from '../../app.js'
import { startCheckpointer } from '../../engine/store/sqlite/checkpointer.js'
import { SqliteStore as Store } from '../../engine/store/sqlite/index.js'
import { eventually, sqliteOf, testConfig } from '../helper.js'
import { tempDir } from '../temp-dir.js'

// WAL checkpoints run on a thread (engine/store/sqlite/checkpointer.ts): the serving connection's own
// automatic checkpoint is pushed far out, and the pages it writes still reach the database file.
// Under a steady stream of commits the WAL starts over from its beginning all the same: the thread
// holds the process's group commit for its last copy, and the writes go on after it.

const tempFile = (): string => join(tempDir('ckpt'), 'gw.db')

/** Writes about 1 MB of pages, all of it into the WAL (the automatic checkpoint is 20,000 pages away). */
function writeMegabyte (store: Store): void {
  store.db.exec('CREATE TABLE IF NOT EXISTS filler (b BLOB)')
  const insert = store.db.prepare('INSERT INTO filler (b) VALUES (?)')
  store.db.transaction(() => { for (let i = 0; i < 256; i++) insert.run(Buffer.alloc(4000, i)) })()
}

async function fileGrows (file: string, from: number, by: number, withinMs: number): Promise<boolean> {
  const end = Date.now() + withinMs
  while (Date.now() < end) {
    if (statSync(file).size >= from + by) return true
    await new Promise((resolve) => setTimeout(resolve, 20))
  }
  return false
}

t.test('the thread copies what the WAL holds into the database file', async (t) => {
  const file = tempFile()
  const store = new Store(file)
  t.teardown(() => store.close())
  const errors: string[] = []
  const checkpointer = startCheckpointer(store.db, (m) => errors.push(m), 20)
  t.equal(store.db.pragma('wal_autocheckpoint', { simple: true }), 20_000, 'the automatic checkpoint is only a backstop')
  const before = statSync(file).size
  writeMegabyte(store)
  t.ok(await fileGrows(file, before, 1_000_000, 5_000), 'the pages reached the database file')
  await checkpointer.stop()
  t.same(errors, [])
  t.equal(store.db.pragma('wal_autocheckpoint', { simple: true }), 1000, 'stopped: the connection checkpoints on its own again')
  t.same(store.db.prepare('SELECT count(*) AS n FROM filler').get(), { n: 256 }, 'the connection is untouched')
})

t.test('without the thread, the same pages stay in the WAL', async (t) => {
  const file = tempFile()
  const store = new Store(file)
  t.teardown(() => store.close())
  store.db.pragma('wal_autocheckpoint = 10000')
  const before = statSync(file).size
  writeMegabyte(store)
  t.notOk(await fileGrows(file, before, 1_000_000, 300), 'the database file did not grow')
})

t.test('an app on a file checkpoints on the thread, and stops it when it closes', async (t) => {
  const app = await buildApp(testConfig({ store: { sqlite: tempFile() } }), { logger: false })
  t.equal(sqliteOf(app).db.pragma('wal_autocheckpoint', { simple: true }), 20_000)
  await app.close()
  t.notOk(sqliteOf(app).db.open, 'closed after the thread')
})

t.test('an app on :memory: has no WAL and no thread', async (t) => {
  const app = await buildApp(testConfig(), { logger: false })
  t.teardown(() => app.close())
  t.equal(sqliteOf(app).db.pragma('wal_autocheckpoint', { simple: true }), 1000, 'SQLite\'s default')
})

t.test('a thread that cannot open the file says so', async (t) => {
  const errors: string[] = []
  const fake = { pragma: () => undefined, name: join(tmpdir(), 'mg-no-such-dir', 'deeper', 'gw.db') } as unknown as Store['db']
  const checkpointer = startCheckpointer(fake, (m) => errors.push(m), 20)
  await checkpointer.stop()
  t.equal(errors.length, 1)
  t.match(errors[0], /directory does not exist/)
})

/** The WAL header's checkpoint sequence: it grows by one each time the WAL starts over. */
const walRestarts = (file: string): number => readFileSync(`${file}-wal`).readUInt32BE(12)

t.test('a group commit held keeps its writes until it is released, or until the longest hold is over; a flush commits them at once', async (t) => {
  const store = new Store(':memory:')
  t.teardown(() => store.close())
  store.db.exec('CREATE TABLE w (n INTEGER)')
  const insert = store.db.prepare('INSERT INTO w (n) VALUES (?)')
  const count = (): number => (store.db.prepare('SELECT count(*) AS n FROM w').get() as { n: number }).n
  store.commit.hold(60_000)
  const first = store.commit.run(() => insert.run(1))
  await new Promise((resolve) => setTimeout(resolve, 20))
  t.equal(count(), 0, 'held: not written')
  store.commit.release()
  await first
  t.equal(count(), 1, 'released: committed')
  store.commit.hold(30)
  const second = store.commit.run(() => insert.run(2))
  t.ok(store.commit.held)
  await second
  t.equal(count(), 2, 'committed once the hold ran out')
  t.notOk(store.commit.held)
  store.commit.hold(60_000)
  const third = store.commit.run(() => insert.run(3))
  store.flush()
  await third
  t.equal(count(), 3, 'a flush commits what a hold keeps')
  store.commit.release()
})

t.test('under a steady stream of commits the thread holds the writes for its last copy, and the WAL starts over, bounded', async (t) => {
  const file = tempFile()
  const store = new Store(file)
  t.teardown(() => store.close())
  store.db.exec('CREATE TABLE w (n INTEGER, pad BLOB)')
  const insert = store.db.prepare('INSERT INTO w (n, pad) VALUES (?, zeroblob(3000))')
  const errors: string[] = []
  let holds = 0
  const writes = { hold: (ms: number) => { holds++; store.commit.hold(ms) }, release: () => { store.commit.release() } }
  const checkpointer = startCheckpointer(store.db, (m) => errors.push(m), 10, { writes, resetPages: 64 })
  const version = store.db.pragma('user_version', { simple: true })
  const restarts = walRestarts(file)
  let largest = 0
  // a commit of a few pages every event-loop turn, turn after turn: never a pause long enough for
  // a checkpoint (its fsyncs) to find the WAL quiet
  const written: Array<Promise<unknown>> = []
  for (let i = 0; i < 8000 && walRestarts(file) < restarts + 3; i++) {
    written.push(store.commit.run(() => insert.run(i)))
    if (i % 4 === 3) {
      await new Promise((resolve) => setImmediate(resolve))
      largest = Math.max(largest, statSync(`${file}-wal`).size)
    }
  }
  await Promise.all(written)
  await checkpointer.stop()
  t.same(errors, [])
  t.ok(holds >= 1, `the thread held the writes ${holds} times`)
  t.ok(walRestarts(file) >= restarts + 3, `the WAL started over ${walRestarts(file) - restarts} times`)
  // without the restarts the WAL would hold every frame written: 8,000 pages and more
  t.ok(largest < 2000 * 4120, `the WAL stayed under 2,000 pages (${Math.round(largest / 4120)} at most)`)
  t.equal(store.db.pragma('user_version', { simple: true }), version, 'the write that restarts the WAL changes nothing')
  t.notOk(store.commit.held, 'nothing left held')
})

t.test('a chore is made on the thread while the writes are held, once its backlog reaches the threshold', async (t) => {
  const store = new Store(tempFile())
  t.teardown(() => store.close())
  store.db.exec('CREATE TABLE inbox (n INTEGER); CREATE TABLE done (n INTEGER)')
  const insert = store.db.prepare('INSERT INTO inbox (n) VALUES (?)')
  const count = (table: string): number => (store.db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n
  const errors: string[] = []
  const told: boolean[] = []
  let holds = 0
  let heldWhenTold = false
  const writes = { hold: (ms: number) => { holds++; store.commit.hold(ms) }, release: () => { store.commit.release() } }
  const chore = {
    backlogSql: 'SELECT count(*) FROM inbox',
    threshold: 5,
    withRestart: 1,
    sql: ['INSERT INTO done (n) SELECT n FROM inbox', 'DELETE FROM inbox'],
    // told after the release: the writes held meanwhile are committed by then
    done: (made: boolean) => { told.push(made); heldWhenTold ||= store.commit.held }
  }
  const checkpointer = startCheckpointer(store.db, (m) => errors.push(m), 10, { writes, chore })
  for (let i = 0; i < 4; i++) await store.commit.run(() => insert.run(i))
  await new Promise((resolve) => setTimeout(resolve, 100))
  t.same(told, [], 'below the threshold, and the WAL far from its restart: the chore waits')
  t.equal(count('inbox'), 4)
  await store.commit.run(() => insert.run(4))
  t.ok(await eventually(10_000, () => told.length, (n) => n > 0), 'the fifth row: the thread made the chore')
  t.same(told, [true])
  t.ok(holds >= 1, 'in a hold')
  t.notOk(heldWhenTold, 'told once the writes went on')
  t.equal(count('inbox'), 0)
  t.same(store.db.prepare('SELECT n FROM done ORDER BY n').all(), [0, 1, 2, 3, 4].map((n) => ({ n })), 'every row moved once')
  await checkpointer.stop()
  t.same(errors, [])
})

t.test('a chore that fails is undone and reported, and the store is told so', async (t) => {
  const store = new Store(tempFile())
  t.teardown(() => store.close())
  store.db.exec('CREATE TABLE inbox (n INTEGER); CREATE TABLE done (n INTEGER UNIQUE)')
  store.db.exec('INSERT INTO done (n) VALUES (1); INSERT INTO inbox (n) VALUES (0), (1)')
  const errors: string[] = []
  const told: boolean[] = []
  const writes = { hold: (ms: number) => { store.commit.hold(ms) }, release: () => { store.commit.release() } }
  const chore = { backlogSql: 'SELECT count(*) FROM inbox', threshold: 1, withRestart: 1, sql: ['DELETE FROM inbox WHERE n = 0', 'INSERT INTO done (n) SELECT n FROM inbox'], done: (made: boolean) => { told.push(made) } }
  const checkpointer = startCheckpointer(store.db, (m) => errors.push(m), 10, { writes, chore })
  t.ok(await eventually(10_000, () => told.length, (n) => n > 0))
  await checkpointer.stop()
  t.equal(told[0], false, 'told it was not made')
  t.match(errors, [/UNIQUE constraint failed/])
  t.same(store.db.prepare('SELECT n FROM inbox ORDER BY n').all(), [{ n: 0 }, { n: 1 }], 'its first statement was undone with the second')
  t.notOk(store.commit.held, 'the writes went on')
})
