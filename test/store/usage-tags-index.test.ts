import t from 'tap'
import { join } from 'node:path'
import { SqliteStore as Store } from '../../engine/store/sqlite/index.js'
import { tempDir } from '../temp-dir.js'
import { usageRow } from '../usage-row.js'

// Migrations 021 and 022: a query by tag over every organization reads the tagged records' partial
// index by time, not every record; one within an organization reads an index too (that
// organization's records, or the tagged ones), never the whole table; both find the same records.

t.test('a page and the totals of a tag read the tagged records\' index, and find exactly the tagged records', async (t) => {
  const store = new Store(join(tempDir('tags-index'), 'gw.db'))
  t.teardown(async () => { await store.close() })
  const writes: Array<Promise<void>> = []
  for (let i = 0; i < 300; i++) {
    const tags = i % 10 === 0 ? ['rare', 'team-b'] : i % 2 === 0 ? ['team-a'] : []
    writes.push(store.usage.record(usageRow({ id: `u${String(i).padStart(4, '0')}`, created_at: 1000 + i, tags })))
  }
  await Promise.all(writes)

  // the statements the store prepares, to ask SQLite how it runs them
  const prepared: string[] = []
  const prepare = store.db.prepare.bind(store.db)
  store.db.prepare = ((sql: string) => { prepared.push(sql); return prepare(sql) }) as typeof store.db.prepare

  const page = store.usage.page({ org: 'acme', tag: 'rare' }, 5)
  t.same(page.map((r) => r.id), ['u0290', 'u0280', 'u0270', 'u0260', 'u0250'], 'the newest records of the tag, newest first')
  t.ok(page.every((r) => r.tags.includes('rare')))
  t.equal(store.usage.totals({ org: 'acme', tag: 'rare' }).calls, 30, 'every record of the tag counted')
  t.equal(store.usage.totals({ org: 'acme', tag: 'team-a' }).calls, 120)
  t.equal(store.usage.page({ org: 'acme', tag: 'nobody' }, 5).length, 0, 'a tag no record carries: none')

  t.equal(store.usage.page({ tag: 'rare' }, 50).length, 30, 'of every organization')

  const byTag = prepared.filter((sql) => sql.includes('json_each'))
  t.ok(byTag.length >= 3, 'the pages and the totals were prepared here')
  for (const sql of byTag) {
    const plan = store.db.prepare(`EXPLAIN QUERY PLAN ${sql}`).all(sql.includes('@org') ? { org: 'acme', tag: 'rare', limit: 5 } : { tag: 'rare', limit: 5 }) as Array<{ detail: string }>
    const index = sql.includes('@org') ? /INDEX (usage_org_time|usage_tagged_time)\b/ : /INDEX usage_tagged_time\b/
    t.ok(plan.some((p) => index.test(p.detail)), `read through ${String(index)}: ${plan.map((p) => p.detail).join('; ')}`)
    t.notOk(plan.some((p) => /^SCAN usage_records$/.test(p.detail)), 'not the whole table')
  }
})
