// What a usage query by tag costs on 100,000 records, on SQLite and on PostgreSQL: `GET
// /admin/v1/usage?tag=` (a page of 50, newest first) for a rare tag (1% of the records) and a
// common one (a third), and `/usage/summary?group_by=tag` over all of them. The records are
// written through the store as the gateway writes them; each query is timed 15 times, the median
// printed. SQLite alone with TAG_PG=0 (PostgreSQL and Redis otherwise, a scratch database).
//   node --import tsx bench/tag-query.ts [RECORDS]
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { PostgresStore } from '../engine/store/postgres/index.js'
import { SqliteStore } from '../engine/store/sqlite/index.js'
import type { Store, UsageRow } from '../engine/store/types.js'
import { usageRow } from '../test/usage-row.js'
import { scratchPostgres } from './single.js'

const RECORDS = Number(process.argv[2] ?? 100_000)
const T0 = Date.UTC(2026, 11, 1)

/** Record i: a second apart, twenty keys, 1% with the rare tag and a third with the common one. */
function row (i: number): UsageRow {
  const tags = i % 100 === 0 ? ['rare', 'team-b'] : i % 3 === 0 ? ['team-a'] : []
  return usageRow({ id: `u${String(i).padStart(8, '0')}`, created_at: T0 + i * 1000, key_id: `k${i % 20}`, tags })
}

async function fill (store: Store): Promise<number> {
  const t0 = performance.now()
  for (let i = 0; i < RECORDS; i += 500) {
    const batch: Array<Promise<void>> = []
    for (let j = i; j < Math.min(RECORDS, i + 500); j++) batch.push(Promise.resolve(store.usage.record(row(j))))
    await Promise.all(batch)
  }
  return performance.now() - t0
}

async function timed (what: () => unknown): Promise<number> {
  const ms: number[] = []
  for (let i = 0; i < 15; i++) {
    const t0 = performance.now()
    await what()
    ms.push(performance.now() - t0)
  }
  return ms.sort((a, b) => a - b)[7]!
}

async function measure (name: string, store: Store): Promise<void> {
  const writeMs = await fill(store)
  const rare = await timed(async () => await store.usage.page({ org: 'acme', tag: 'rare' }, 50))
  const common = await timed(async () => await store.usage.page({ org: 'acme', tag: 'team-a' }, 50))
  const absent = await timed(async () => await store.usage.page({ org: 'acme', tag: 'nobody' }, 50))
  const totals = await timed(async () => await store.usage.totals({ org: 'acme', tag: 'rare' }))
  const summary = await timed(async () => await store.usage.summary({ org: 'acme' }, ['tag']))
  const check = await store.usage.page({ org: 'acme', tag: 'rare' }, 50)
  if (check.length !== 50 || check.some((r) => !r.tags.includes('rare'))) throw new Error(`${name}: the rare tag's page is wrong`)
  console.log(`${name.padEnd(10)} ${RECORDS} records written in ${(writeMs / 1000).toFixed(1)} s; ?tag= page of 50: rare ${rare.toFixed(2)} ms, common ${common.toFixed(2)} ms, absent ${absent.toFixed(2)} ms; totals of the rare tag ${totals.toFixed(2)} ms; summary by tag ${summary.toFixed(1)} ms`)
}

const dir = mkdtempSync(join(tmpdir(), 'tagq-'))
const sqlite = new SqliteStore(join(dir, 'u.db'))
await measure('SQLite', sqlite)
await sqlite.close()
if (process.env.TAG_PG !== '0') {
  const scratch = await scratchPostgres()
  if (typeof scratch === 'string') {
    console.log(`PostgreSQL skipped: ${scratch}`)
  } else {
    const pg = new PostgresStore({ postgres: scratch.url, redis: 'redis://127.0.0.1:6379', prefix: scratch.prefix })
    try {
      await pg.ready
      await measure('PostgreSQL', pg)
    } finally {
      await pg.close()
      await scratch.drop()
    }
  }
}
