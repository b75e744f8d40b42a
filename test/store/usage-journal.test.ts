import t from 'tap'
import { join } from 'node:path'
import Database from 'better-sqlite3'
import { SqliteStore } from '../../engine/store/sqlite/index.js'
import { eventually } from '../helper.js'
import { tempDir } from '../temp-dir.js'
import { usageRow } from '../usage-row.js'

// A usage record committed with few other writes goes to usage_journal (one B-tree) and moves into
// usage_records in batches: on the checkpoint thread in a serving process, on the event loop
// otherwise; every read of the records moves the journal first.

const rows = (db: Database.Database, table: string): number => (db.prepare(`SELECT count(*) AS n FROM ${table}`).get() as { n: number }).n

t.test('a lone record is written to the journal, and every read of the records sees it', async (t) => {
  const store = new SqliteStore(join(tempDir('journal'), 'gw.db'))
  t.teardown(async () => { await store.close() })
  const r = usageRow({ id: 'usage_lone', trace_id: 'lone', created_at: 5000 })
  await store.usage.record(r)
  t.equal(rows(store.db, 'usage_journal'), 1, 'in the journal')
  t.equal(rows(store.db, 'usage_records'), 0, 'not in the table yet')
  t.equal(rows(store.db, 'usage_records_all'), 1, 'the view shows it to a reader that cannot move it')

  t.same(store.usage.page({ org: 'acme' }, 10).map((x) => x.id), ['usage_lone'], 'a page moves the journal first')
  t.equal(rows(store.db, 'usage_journal'), 0)
  t.equal(rows(store.db, 'usage_records'), 1)
  t.same(store.usage.page({ org: 'acme' }, 10)[0], r, 'the record as written')

  const readers: Array<[string, () => unknown]> = [
    ['count', () => store.usage.count()],
    ['totals', () => store.usage.totals({ org: 'acme' }).calls],
    ['summary', () => store.usage.summary({ org: 'acme' }, ['model'])[0]?.calls],
    ['byTrace', () => store.usage.byTrace('again-2') === undefined ? 1 : 2],
    ['buckets', () => store.usage.buckets('acme', 'web', 0, 60_000)[0]?.calls]
  ]
  for (const [i, [name, read]] of readers.entries()) {
    await store.usage.record(usageRow({ id: `usage_again${i}`, trace_id: `again-${i}`, created_at: 6000 + i }))
    t.equal(rows(store.db, 'usage_journal'), 1, `${name}: a new record in the journal`)
    t.equal(read(), name === 'byTrace' ? 2 : i + 2, `${name} sees it`)
    t.equal(rows(store.db, 'usage_journal'), 0, `${name} moved the journal`)
  }
})

t.test('a record in a large group, or with its content, goes straight to usage_records', async (t) => {
  const store = new SqliteStore(join(tempDir('journal'), 'gw.db'))
  t.teardown(async () => { await store.close() })
  await Promise.all(Array.from({ length: 40 }, async (_, i) => { await store.usage.record(usageRow({ id: `usage_g${i}`, trace_id: `g${i}` })) }))
  t.equal(rows(store.db, 'usage_journal'), 0, 'forty records in one commit: none in the journal')
  t.equal(rows(store.db, 'usage_records'), 40)
  await store.usage.record(usageRow({ id: 'usage_c', trace_id: 'c' }), { usage_id: 'usage_c', created_at: 1000, request: 'q', response: 'a' })
  t.equal(rows(store.db, 'usage_journal'), 0, 'a record with content: straight to the table its content refers to')
  t.equal(store.usage.byTrace('c')?.content?.response, 'a')
})

t.test('the journal is moved in batches as it fills, and when the store closes', async (t) => {
  const file = join(tempDir('journal'), 'gw.db')
  const store = new SqliteStore(file)
  for (let i = 0; i < 511; i++) await store.usage.record(usageRow({ id: `usage_b${i}`, trace_id: `b${i}` }))
  t.equal(rows(store.db, 'usage_journal'), 511, 'one at a time: each in the journal')
  await store.usage.record(usageRow({ id: 'usage_b511', trace_id: 'b511' }))
  store.flush() // the move waits for the next group, or a flush
  t.equal(rows(store.db, 'usage_journal'), 0, 'the 512th record queued a move')
  t.equal(rows(store.db, 'usage_records'), 512)
  await store.usage.record(usageRow({ id: 'usage_last', trace_id: 'last' }))
  await store.close()
  const raw = new Database(file, { readonly: true })
  t.equal(rows(raw, 'usage_journal'), 0, 'a store that closes leaves its journal empty')
  t.equal(rows(raw, 'usage_records'), 513)
  raw.close()
})

t.test('a record that cannot move stays in the journal and is reported; the others move', async (t) => {
  const errors: string[] = []
  const store = new SqliteStore(join(tempDir('journal'), 'gw.db'), { onError: (_err, what) => { errors.push(what) } })
  t.teardown(async () => { await store.close() })
  await store.usage.record(usageRow({ id: 'usage_twice', trace_id: 'twice' }))
  t.equal(store.usage.count(), 1)
  // the same id again: usage_records refuses it, the journal does not look
  await store.usage.record(usageRow({ id: 'usage_twice', trace_id: 'twice' }))
  await store.usage.record(usageRow({ id: 'usage_fine', trace_id: 'fine' }))
  t.equal(store.usage.count(), 2, 'the other record moved')
  t.equal(rows(store.db, 'usage_journal'), 1, 'the refused one is kept, not dropped')
  t.match(errors, [/moving them one by one/, /usage record usage_twice kept in usage_journal/])
})

t.test('usage_journal has the columns of usage_records, in their order', async (t) => {
  const store = new SqliteStore(':memory:')
  t.teardown(async () => { await store.close() })
  const columns = (table: string): string[] => (store.db.prepare(`PRAGMA table_info(${table})`).all() as Array<{ name: string, type: string }>).map((c) => `${c.name} ${c.type}`)
  t.same(columns('usage_journal'), columns('usage_records'))
})

t.test('a read whose move meets another process\'s write lock past busy_timeout goes on without the journal, and the next read has it', async (t) => {
  const file = join(tempDir('journal'), 'gw.db')
  const errors: string[] = []
  const store = new SqliteStore(file, { onError: (_err, what) => { errors.push(what) } })
  t.teardown(async () => { await store.close() })
  await store.usage.record(usageRow({ id: 'usage_held', trace_id: 'held' }))
  store.db.pragma('busy_timeout = 20')
  const other = new Database(file)
  other.prepare('BEGIN IMMEDIATE').run()
  t.same(store.usage.page({}, 10), [], 'the read answers, without the record it could not move')
  t.match(errors, [/not moved before a read/])
  other.prepare('COMMIT').run()
  other.close()
  t.same(store.usage.page({}, 10).map((r) => r.id), ['usage_held'], 'the next read moves it')
})

t.test('in a serving process the checkpoint thread moves the journal, not the event loop', async (t) => {
  const file = join(tempDir('journal'), 'gw.db')
  const errors: string[] = []
  const store = new SqliteStore(file, { onError: (_err, what) => { errors.push(what) } })
  t.teardown(async () => { await store.close() })
  store.startMaintenance()
  // another connection counts: a read through the store would move the journal itself
  const other = new Database(file, { readonly: true })
  t.teardown(() => { other.close() })
  let written = 0
  // past the thread's threshold (2,048), below the event loop's own (16,384); a pause now and
  // then leaves the thread its ticks on a slow machine
  while (rows(other, 'usage_records') === 0 && written < 16_000) {
    await store.usage.record(usageRow({ id: `usage_t${written}`, trace_id: `t${written}` }))
    if (++written % 256 === 0) await new Promise((resolve) => setTimeout(resolve, 5))
  }
  t.ok(written < 16_000, `the thread moved the journal after ${written} lone records`)
  t.ok(await eventually(15_000, () => rows(other, 'usage_journal') === 0 || rows(other, 'usage_records') >= 2048, (done) => done))
  t.equal(rows(other, 'usage_records') + rows(other, 'usage_journal'), written, 'every record once, in one table or the other')
  t.same(errors, [])
})

t.test('a move that fails on the thread is made again on the event loop, which keeps what cannot move', async (t) => {
  const file = join(tempDir('journal'), 'gw.db')
  const errors: string[] = []
  const store = new SqliteStore(file, { onError: (_err, what) => { errors.push(what) } })
  t.teardown(async () => { await store.close() })
  // a record already in usage_records, and again in the journal: the thread's one statement fails
  await Promise.all(Array.from({ length: 8 }, async (_, i) => { await store.usage.record(usageRow({ id: i === 0 ? 'usage_dup' : `usage_x${i}`, trace_id: `x${i}` })) }))
  await store.usage.record(usageRow({ id: 'usage_dup', trace_id: 'dup' }))
  store.startMaintenance()
  for (let i = 0; i < 2100; i++) await store.usage.record(usageRow({ id: `usage_f${i}`, trace_id: `f${i}` }))
  t.ok(await eventually(15_000, () => errors.some((e) => /kept in usage_journal/.test(e)), (done) => done), 'the event loop moved it one by one')
  t.match(errors, [/WAL checkpoint failed/])
  t.equal(rows(store.db, 'usage_journal'), 1, 'the duplicate is kept')
  t.equal(rows(store.db, 'usage_records'), 8 + 2100, 'the others moved')
})
