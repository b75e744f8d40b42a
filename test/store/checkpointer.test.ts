import t from 'tap'
import { statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildApp } from '../../app.js'
import { startCheckpointer } from '../../plugins/store/sqlite/checkpointer.js'
import { SqliteStore as Store } from '../../plugins/store/sqlite/index.js'
import { sqliteOf, testConfig } from '../helper.js'
import { tempDir } from '../temp-dir.js'

// WAL checkpoints run on a thread (plugins/store/sqlite/checkpointer.ts): the serving connection's own
// automatic checkpoint is pushed far out, and the pages it writes still reach the database file.

const tempFile = (): string => join(tempDir('ckpt'), 'gw.db')

/** Writes about 1 MB of pages, all of it into the WAL (the automatic checkpoint is 10,000 pages away). */
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
  t.equal(store.db.pragma('wal_autocheckpoint', { simple: true }), 10_000, 'the automatic checkpoint is only a backstop')
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
  t.equal(sqliteOf(app).db.pragma('wal_autocheckpoint', { simple: true }), 10_000)
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
