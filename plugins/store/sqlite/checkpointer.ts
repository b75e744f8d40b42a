import { createRequire } from 'node:module'
import { Worker } from 'node:worker_threads'
import type { DB } from './db.js'

// WAL checkpoints on a thread of their own. SQLite's automatic checkpoint runs inside whichever
// commit pushes the WAL past 1,000 pages: on the event loop, where it copies those pages into
// the database file and fsyncs it (synchronous = NORMAL syncs only there), which held up one
// request in a hundred or so by several milliseconds at one connection (bench: p99 5.7 ms →
// 3.9 ms with the checkpoint moved away). The thread runs a PASSIVE checkpoint every
// INTERVAL_MS on its own connection: PASSIVE never waits for, nor blocks, readers and writers.
// The serving connection keeps an automatic checkpoint, far above what the thread lets the WAL
// reach, as a backstop should the thread fall behind or stop.

const INTERVAL_MS = 200
const BACKSTOP_PAGES = 10_000

// CommonJS, evaluated in the thread: no file of its own to resolve (dist/ .js or TypeScript source)
const THREAD = `
const { workerData, parentPort } = require('node:worker_threads')
const Database = require(workerData.driver)
const db = new Database(workerData.file)
db.pragma('busy_timeout = 5000')
let last = '', lastAt = 0 // a failure that repeats is reported once a minute, not five times a second
const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)')
    last = ''
  } catch (err) {
    const message = String((err && err.message) || err)
    if (message !== last || Date.now() - lastAt >= 60000) { parentPort.postMessage(message); last = message; lastAt = Date.now() }
  }
}, workerData.intervalMs)
parentPort.on('message', () => { clearInterval(timer); db.close(); parentPort.close() })
`

export interface Checkpointer { stop: () => Promise<void> }

/** Starts checkpointing `db`'s file (not ':memory:') on a thread; `onError` hears its failures. */
export function startCheckpointer (db: DB, onError: (message: string) => void, intervalMs = INTERVAL_MS): Checkpointer {
  const own = db.pragma('wal_autocheckpoint', { simple: true }) as number
  db.pragma(`wal_autocheckpoint = ${BACKSTOP_PAGES}`)
  const driver = createRequire(import.meta.url).resolve('better-sqlite3')
  const worker = new Worker(THREAD, { eval: true, workerData: { driver, file: db.name, intervalMs } })
  worker.on('message', onError)
  worker.on('error', (err) => { onError(err.message) })
  worker.unref()
  const exited = new Promise<void>((resolve) => worker.once('exit', () => { resolve() }))
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
