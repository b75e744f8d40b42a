import { Worker } from 'node:worker_threads'
import type { DB } from './db.js'
import { driverPath } from './driver.js'

// WAL checkpoints on a thread of their own. SQLite's automatic checkpoint runs inside whichever
// commit pushes the WAL past 1,000 pages: on the event loop, where it copies those pages into
// the database file and fsyncs it (synchronous = NORMAL syncs only there), which held up one
// request in a hundred or so by several milliseconds at one connection (bench: p99 5.7 ms →
// 3.9 ms with the checkpoint moved away). The thread runs a PASSIVE checkpoint every
// INTERVAL_MS on its own connection: PASSIVE never waits for, nor blocks, readers and writers.
//
// The WAL starts over from its beginning only at a write that begins when every frame in it has
// been copied. Under a steady stream of commits that never happens by itself: each checkpoint
// takes milliseconds (two fsyncs), and commits land meanwhile. Left alone, the WAL grew until the
// serving connection's own automatic checkpoint (the backstop below) ran on the event loop, with
// its fsyncs: a stall of 10 to 40 ms every few hundred calls at one connection, and a file that
// grew, each new frame a page the kernel had to allocate. So once the WAL holds RESET_PAGES, the
// thread asks this process to hold its writes (they wait in the group commit's queue, the event
// loop goes on), copies what came in since its last checkpoint, makes the write that restarts the
// WAL itself (it syncs the WAL's new header: that fsync is the thread's, not the event loop's),
// and lets them go. The hold lasts one short checkpoint and that write, three small fsyncs (a few
// ms, at most MAX_HOLD_MS), and comes once per RESET_PAGES pages written: about once in 750 calls
// at one connection, where a call writes about 11 pages. Another process writing to the file
// meanwhile (a second worker) leaves frames uncopied: the WAL then goes on growing until a later
// try finds it quiet, or up to the backstop. When one of the thread's own checkpoints happens to
// find the WAL quiet (every frame copied, no commit meanwhile), the next serving write restarts
// it, and syncs the header on the event loop: once in about 5,000 calls at one connection here
// (strace), where a backstop checkpoint came every 600 or so.
//
// The serving connection keeps an automatic checkpoint, far above what the thread lets the WAL
// reach, as a backstop should the thread fall behind or stop.
//
// A store may also hand the thread a chore: writes it would otherwise make on the event loop,
// a few milliseconds at a time, that nobody waits for (the usage journal's move, ./usage.ts). The
// thread makes them in the same hold, in one IMMEDIATE transaction on its own connection, after
// its last copy: that transaction is then the write that restarts the WAL. When the chore's
// backlog reaches its threshold before the WAL reaches RESET_PAGES, the thread asks for a hold
// for the chore alone. At one connection, the journal's move on the event loop held one call in
// 500 by about 2 ms; in the hold, one call in about 1,100 waits 8 to 10 ms for the last copy and
// the move together, and the event loop makes neither (fewer slow calls in four interleaved runs
// out of six: bench/README.md).

const INTERVAL_MS = 200
const BACKSTOP_PAGES = 20_000
const RESET_PAGES = 8_192
const MAX_HOLD_MS = 100

// CommonJS, evaluated in the thread: no file of its own to resolve (dist/ .js or TypeScript source)
const THREAD = `
const { workerData, parentPort } = require('node:worker_threads')
const Database = require(workerData.driver)
const db = new Database(workerData.file)
db.pragma('busy_timeout = 5000')
let last = '', lastAt = 0 // a failure that repeats is reported once a minute, not five times a second
let timer = null, asked = null, stopped = false
const report = (err) => {
  const message = String((err && err.message) || err)
  if (message !== last || Date.now() - lastAt >= 60000) { parentPort.postMessage(message); last = message; lastAt = Date.now() }
}
const checkpoint = () => {
  try {
    const r = db.pragma('wal_checkpoint(PASSIVE)')[0]
    last = ''
    return r
  } catch (err) {
    report(err)
    return null
  }
}
// a write of page 1 that changes nothing (user_version written back as it is)
const restart = db.transaction(() => { db.pragma('user_version = ' + Number(db.pragma('user_version', { simple: true }))) }).immediate
// the chore's statements, prepared at its first use (the tables are the store's)
const chore = workerData.chore
let backlogStmt = null, choreTx = null
const backlog = () => {
  if (chore === null) return 0
  try {
    if (backlogStmt === null) backlogStmt = db.prepare(chore.backlogSql).pluck()
    return Number(backlogStmt.get()) || 0
  } catch (err) { report(err); return 0 }
}
const runChore = () => {
  try {
    if (choreTx === null) {
      const stmts = chore.sql.map((sql) => db.prepare(sql))
      choreTx = db.transaction(() => { for (const s of stmts) s.run() }).immediate
    }
    choreTx()
    return 'done'
  } catch (err) { report(err); return 'failed' }
}
const next = () => { if (!stopped) timer = setTimeout(tick, workerData.intervalMs) }
const tick = () => {
  const r = checkpoint()
  const reset = r !== null && r.busy === 0 && r.log >= workerData.resetPages
  if (workerData.resetPages > 0 && (reset || (chore !== null && backlog() >= chore.threshold))) {
    // the writes wait while the frames that came in meanwhile are copied; none answering, go on
    parentPort.postMessage({ hold: true })
    asked = setTimeout(() => { asked = null; next() }, workerData.maxHoldMs)
    return
  }
  next()
}
parentPort.on('message', (m) => {
  if (m === 'held') {
    // too late (the thread went on without it): the writes go at once
    if (asked === null) { parentPort.postMessage({ release: true }); return }
    clearTimeout(asked)
    asked = null
    const r = checkpoint()
    // the write that restarts the WAL syncs its new header: made here, not on the event loop.
    // The chore's transaction, when there is one to make, is that write if every frame was
    // copied; if not (another process wrote meanwhile), it only appends, and the WAL restarts
    // at a later hold
    let done
    if (chore !== null && backlog() >= chore.withRestart) done = runChore()
    else if (r !== null && r.busy === 0 && r.checkpointed === r.log) {
      try { restart() } catch (err) { report(err) }
    }
    parentPort.postMessage({ release: true, chore: done })
    next()
    return
  }
  stopped = true
  clearTimeout(timer)
  clearTimeout(asked)
  db.close()
  parentPort.close()
})
next()
`

export interface Checkpointer { stop: () => Promise<void> }

/** What the thread holds while it copies the last frames before the WAL can start over (the store's group commit). */
export interface HeldWrites {
  hold: (maxMs: number) => void
  release: () => void
}

/**
 * Writes the thread makes for the store, on its own connection, while the process's writes are
 * held: statements only (they cross to the thread as text), committed together.
 */
export interface ThreadChore {
  /** A query whose one value is the chore's backlog (a row count, say); 0: nothing to do. */
  backlogSql: string
  /** From this backlog the thread holds the writes for the chore alone; below it, the chore waits for the WAL's next restart. */
  threshold: number
  /**
   * From this backlog (at least 1) the chore is made in a WAL restart's hold; below it, not: a
   * chore may cost about the same whatever its backlog (the journal's move: about 0.6 ms), and a
   * hold under load keeps every connection's writes waiting.
   */
  withRestart: number
  /** The statements, run in order in one IMMEDIATE transaction. */
  sql: string[]
  /** Told on the event loop, when the writes are released, whether the chore was made (false: it failed, and was reported). */
  done: (made: boolean) => void
}

export interface CheckpointerOptions {
  /** The process's writes; without them the thread never asks for a hold, and the WAL restarts only when it is quiet. */
  writes?: HeldWrites
  /** The WAL size (pages) from which the thread holds the writes to let the WAL start over. */
  resetPages?: number
  /** Work to make in the holds (only with `writes`: the thread never writes while they go on). */
  chore?: ThreadChore
}

/** Starts checkpointing `db`'s file (not ':memory:') on a thread; `onError` hears its failures. */
export function startCheckpointer (db: DB, onError: (message: string) => void, intervalMs = INTERVAL_MS, opts: CheckpointerOptions = {}): Checkpointer {
  const own = db.pragma('wal_autocheckpoint', { simple: true }) as number
  db.pragma(`wal_autocheckpoint = ${BACKSTOP_PAGES}`)
  const driver = driverPath()
  const writes = opts.writes
  const chore = writes === undefined ? undefined : opts.chore
  const workerData = {
    driver,
    file: db.name,
    intervalMs,
    resetPages: writes === undefined ? 0 : opts.resetPages ?? RESET_PAGES,
    maxHoldMs: MAX_HOLD_MS,
    chore: chore === undefined ? null : { backlogSql: chore.backlogSql, threshold: chore.threshold, withRestart: Math.max(1, chore.withRestart), sql: chore.sql }
  }
  const worker = new Worker(THREAD, { eval: true, workerData })
  worker.on('message', (m: unknown) => {
    if (typeof m === 'string') onError(m)
    else if ((m as { hold?: boolean }).hold === true && writes !== undefined) {
      writes.hold(MAX_HOLD_MS)
      worker.postMessage('held')
    } else if ((m as { release?: boolean }).release === true) {
      writes?.release()
      const made = (m as { chore?: 'done' | 'failed' }).chore
      if (made !== undefined) chore?.done(made === 'done')
    }
  })
  worker.on('error', (err) => { onError(err.message) })
  worker.unref()
  const exited = new Promise<void>((resolve) => worker.once('exit', () => { writes?.release(); resolve() }))
  return {
    // the thread closes its connection and ends once a checkpoint under way is done; the
    // connection checkpoints on its own again (it may outlive the app: a store passed to buildApp)
    stop: async () => {
      worker.ref() // the process waits for it now
      worker.postMessage('stop')
      await exited
      if (db.open) db.pragma(`wal_autocheckpoint = ${own}`)
    }
  }
}
