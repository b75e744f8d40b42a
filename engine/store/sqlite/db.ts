import type Database from 'better-sqlite3'
import { chmodSync, closeSync, existsSync, mkdirSync, openSync, readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { shippedFile, shippedFiles } from '../../../paths.js'
import { sqliteDriver } from './driver.js'

export type DB = Database.Database

const MIGRATIONS = ['engine', 'store', 'sqlite', 'migrations']

/** Another connection (another worker) held the lock for longer than busy_timeout. */
export function isBusy (err: unknown): boolean {
  const code = (err as { code?: string }).code
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED'
}

/**
 * The store's files are the gateway's own (they may hold prompts and key hashes): a folder it
 * makes is 0700, and the database is 0600 (made so before SQLite opens it; SQLite gives its -wal
 * and -shm files the database's mode). A file an older version left readable is made private too.
 */
function privateFiles (file: string): void {
  mkdirSync(dirname(file), { recursive: true, mode: 0o700 })
  if (!existsSync(file)) closeSync(openSync(file, 'a', 0o600))
  for (const f of [file, `${file}-wal`, `${file}-shm`]) {
    try { chmodSync(f, 0o600) } catch (err) { if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err }
  }
}

const WAL_SWITCH_WAIT_MS = 5000
const pause = new Int32Array(new SharedArrayBuffer(4))

/**
 * Puts the file in WAL mode (a no-op when it is in it already). Workers open the file at the same
 * moment, and this pragma can meet another connection's lock in a way SQLite does not wait out
 * with its busy timeout: it answers SQLITE_BUSY at once (3 opens in 2,580 here, six processes
 * opening one new file together; a two-worker start failed so in a test run). It is tried again,
 * a few milliseconds apart, for up to `waitMs`.
 */
export function walMode (db: Pick<DB, 'pragma'>, waitMs = WAL_SWITCH_WAIT_MS): void {
  const until = Date.now() + waitMs
  for (;;) {
    try {
      db.pragma('journal_mode = WAL')
      return
    } catch (err) {
      if (!isBusy(err) || Date.now() >= until) throw err
      Atomics.wait(pause, 0, 0, 5)
    }
  }
}

/** Opens (creating if needed) the SQLite database in WAL mode and applies pending migrations. */
export function openDatabase (file: string): DB {
  if (file !== ':memory:') privateFiles(file)
  const SQLite = sqliteDriver()
  const db = new SQLite(file)
  walMode(db)
  db.pragma('synchronous = NORMAL')
  db.pragma('busy_timeout = 5000')
  db.pragma('foreign_keys = ON')
  // better-sqlite3 builds SQLite with a 16 MB page cache per connection; the pages the hot path
  // touches (counters, balances, the tail of the usage table) fit in SQLite's usual 2 MB, and the
  // larger cache showed up as RSS growing with the file (bench/memory.ts)
  db.pragma('cache_size = -2000')
  migrate(db)
  return db
}

// Numbered, forward-only migrations (NNN_name.sql); PRAGMA user_version holds the last applied.
// Each step runs in an IMMEDIATE transaction that re-reads the version, so workers opening the
// same file at once apply each migration exactly once. `dir`: a folder of other migrations (tests).
export function migrate (db: DB, dir?: string): number {
  const files = (dir === undefined ? shippedFiles(...MIGRATIONS) : readdirSync(dir)).filter((f) => /^\d{3}_.+\.sql$/.test(f)).sort()
  const current = db.pragma('user_version', { simple: true }) as number
  // a file that has every migration takes no write lock to be told so (most opens)
  if (current >= Number(files.at(-1)?.slice(0, 3) ?? 0)) return current
  const read = (file: string): string => dir === undefined ? shippedFile(...MIGRATIONS, file).toString('utf8') : readFileSync(join(dir, file), 'utf8')
  const step = db.transaction((file: string, version: number) => {
    if ((db.pragma('user_version', { simple: true }) as number) >= version) return
    db.exec(read(file))
    db.pragma(`user_version = ${version}`)
  })
  for (const file of files) step.immediate(file, Number(file.slice(0, 3)))
  return db.pragma('user_version', { simple: true }) as number
}
