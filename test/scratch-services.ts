import { randomBytes } from 'node:crypto'
import pg from 'pg'
import { Redis } from 'ioredis'
import type { Teardown } from './helper.js'

// PostgreSQL and Redis for the tests that need them: whether they answer, and a database and a
// Redis key prefix of a test's own, removed when the test ends (tap runs teardowns last first, so
// what a test opens on them afterwards is closed before they go).

export const ADMIN_URL = process.env.PG_ADMIN_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres'
export const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379'

/** Why PostgreSQL or Redis cannot be used here, or null when both answer. */
export async function servicesMissing (): Promise<string | null> {
  const c = new pg.Client({ connectionString: ADMIN_URL, connectionTimeoutMillis: 2000 })
  try { await c.connect(); await c.query('SELECT 1') } catch (err) { return `PostgreSQL: ${(err as Error).message}` } finally { await c.end().catch(() => {}) }
  const r = new Redis(REDIS_URL, { lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null })
  try { await r.connect(); await r.ping() } catch (err) { return `Redis: ${(err as Error).message}` } finally { r.disconnect() }
  return null
}

/** A fresh database, dropped when the test ends; returns its URL. */
export async function scratchDatabase (t: Teardown): Promise<string> {
  const name = `mg_test_${randomBytes(6).toString('hex')}`
  const admin = new pg.Client({ connectionString: ADMIN_URL })
  await admin.connect()
  await admin.query(`CREATE DATABASE ${name}`)
  await admin.end()
  t.teardown(async () => {
    const c = new pg.Client({ connectionString: ADMIN_URL })
    await c.connect()
    await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
    await c.end()
  })
  return ADMIN_URL.replace(/\/postgres$/, `/${name}`)
}

/** A Redis key prefix of this test's own (`tag` names the suite), its keys deleted when the test ends. */
export function scratchRedisPrefix (t: Teardown, tag = 'mgt'): string {
  const p = `${tag}:${randomBytes(4).toString('hex')}:`
  t.teardown(async () => {
    const r = new Redis(REDIS_URL)
    let cursor = '0'
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `${p}*`, 'COUNT', 1000)
      cursor = next
      if (keys.length > 0) await r.del(...keys)
    } while (cursor !== '0')
    r.disconnect()
  })
  return p
}
