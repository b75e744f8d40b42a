import type Database from 'better-sqlite3'
import { createHash } from 'node:crypto'
import { mkdirSync, readFileSync, renameSync, unlinkSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import type { Config } from '../config/schema.js'
import { sqliteDriver } from '../plugins/store/sqlite/driver.js'
import { CommandError } from './command.js'

// The running gateways' pids and addresses, beside their store, so that `modelgate reload` finds
// them. A SQLite store is served by one gateway (its workers share it): a second `serve` of it is
// refused, naming the first; a gateway on another SQLite file of the same folder is no concern of
// it. Instances on PostgreSQL share their store by design: each one on the same database that
// serves from the same folder is listed, and a reload reaches every one.

export interface PidEntry {
  pid: number
  host: string
  /** null while the gateway starts (it claimed the file, it does not listen yet). */
  port: number | null
  /** The store it serves (storeOf); absent in an entry written before it was recorded: taken for this one. */
  store?: string
}

/**
 * Which store a config serves, as the pid file records it: the SQLite file's absolute path, or a
 * digest of the PostgreSQL URL (which may hold a password, so it is never written out).
 */
function storeOf (config: Config): string {
  if (config.store.postgres !== undefined) return 'postgres:' + createHash('sha256').update(config.store.postgres).digest('hex').slice(0, 16)
  return resolve(config.store.sqlite)
}

/** Where the pid file of a gateway serving `config` is; null for a :memory: store. */
export function pidFilePath (config: Config): string | null {
  return config.store.sqlite === ':memory:' ? null : join(dirname(resolve(config.store.sqlite)), 'modelgate.pid')
}

function alive (pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    // EPERM: it runs, as another user
    return (err as { code?: string }).code === 'EPERM'
  }
}

function read (path: string): PidEntry[] {
  let text: string
  try {
    text = readFileSync(path, 'utf8')
  } catch {
    return []
  }
  try {
    const parsed = JSON.parse(text) as { gateways?: PidEntry[] } & Partial<PidEntry>
    // a file written before several gateways were listed holds one
    return Array.isArray(parsed.gateways) ? parsed.gateways : typeof parsed.pid === 'number' ? [{ pid: parsed.pid, host: parsed.host ?? '127.0.0.1', port: parsed.port ?? null }] : []
  } catch {
    return []
  }
}

const LOCK_WAIT_MS = 3000

/**
 * Runs `fn` (a read of the file and a write of it) holding the folder's lock, so that two gateways
 * of one folder that start or stop at the same moment do not each write back what they read before
 * the other's write (two stopping at once left one of them listed, two starting at once could
 * both find the store free). One held past LOCK_WAIT_MS, or a folder that cannot take one, is not
 * waited for: the update goes on without it.
 */
function locked<T> (path: string, fn: () => T): T {
  const lock = takeLock(join(dirname(path), 'modelgate.lock'))
  try {
    if (lock !== null) dropOldLock(`${path}.lock`)
    return fn()
  } finally {
    lock?.release()
  }
}

/**
 * The lock is SQLite's write lock on a small file of its own (a file lock the kernel drops when
 * its process ends, however it ends): a gateway killed while it held it leaves nothing to take
 * over, and no two processes can both believe they took over the same stale lock. The file stays
 * when the last gateway stops: removing it could let a process that already opened it and one
 * that creates it anew each hold a lock.
 */
function takeLock (file: string): { release: () => void } | null {
  let db: Database.Database | null = null
  try {
    mkdirSync(dirname(file), { recursive: true })
    // loaded here, not with the module: `--help` and `--version` load no dependency
    const SQLite = sqliteDriver()
    db = new SQLite(file, { timeout: LOCK_WAIT_MS })
    db.exec('BEGIN IMMEDIATE')
  } catch {
    try { db?.close() } catch {}
    return null
  }
  const held = db
  return { release: () => { try { held.exec('COMMIT') } catch {} try { held.close() } catch {} } }
}

/** Removes the lock file of earlier versions (`modelgate.pid.lock`, a pid as text) once its process is gone. */
function dropOldLock (file: string): void {
  let text: string
  try { text = readFileSync(file, 'utf8') } catch { return }
  const pid = Number(text)
  if (Number.isInteger(pid) && pid > 0 && alive(pid)) return
  try { unlinkSync(file) } catch {}
}

/** Replaces the file whole (a reader never sees half of it); no gateway left: no file. */
function write (path: string, gateways: PidEntry[]): void {
  if (gateways.length === 0) { try { unlinkSync(path) } catch {} return }
  mkdirSync(dirname(path), { recursive: true })
  const tmp = `${path}.${process.pid}.tmp`
  writeFileSync(tmp, JSON.stringify({ gateways }) + '\n')
  renameSync(tmp, path)
}

/** Every gateway the pid file names whose process still runs, whatever store it serves (but this process). */
function runningHere (path: string): PidEntry[] {
  return read(path).filter((g) => g.pid !== process.pid && alive(g.pid))
}

/** The gateways the pid file names whose process still runs and that serve this config's store. */
export function runningGateways (config: Config): PidEntry[] {
  const path = pidFilePath(config)
  if (path === null) return []
  const store = storeOf(config)
  return runningHere(path).filter((g) => g.store === undefined || g.store === store)
}

/**
 * Puts this process in the pid file before it serves. A SQLite store another running gateway
 * serves is refused, with that gateway's pid and address; entries of processes gone are dropped.
 */
export function claimPidFile (config: Config): void {
  const path = pidFilePath(config)
  if (path === null) return
  locked(path, () => { claimLocked(config, path) })
}

function claimLocked (config: Config, path: string): void {
  const others = runningGateways(config)
  const first = others[0]
  if (first !== undefined && config.store.postgres === undefined) {
    const at = first.port === null ? 'starting' : `listening on ${first.host}:${first.port}`
    const kill = `kill ${first.pid}`
    throw new CommandError(`a gateway already serves ${config.store.sqlite} (pid ${first.pid}, ${at}); two gateways on one SQLite store would share its data unawares.
  ${'modelgate reload --config FILE'.padEnd(32)}makes it read its config again
  ${kill.padEnd(32)}stops it (then serve again)
(If no gateway runs, ${path} is stale: remove it.)`)
  }
  entry(path, { pid: process.pid, host: config.server.host, port: null, store: storeOf(config) })
}

/** This process's entry, written beside every other running gateway's. */
function entry (path: string, mine: PidEntry): void {
  try {
    write(path, [...runningHere(path), mine])
  } catch (err) {
    process.stderr.write(`modelgate: cannot write ${path}: ${(err as Error).message} (modelgate reload will not find this gateway)\n`)
  }
}

/** Records the port this process listens on. */
export function writePidFile (config: Config, port: number): void {
  const path = pidFilePath(config)
  if (path === null) return
  locked(path, () => { entry(path, { pid: process.pid, host: config.server.host, port, store: storeOf(config) }) })
}

/** Takes this process out of the pid file (and the entries of processes gone). */
export function removePidFile (config: Config): void {
  const path = pidFilePath(config)
  if (path === null) return
  locked(path, () => { try { write(path, runningHere(path)) } catch {} })
}

/** A running gateway that listens (the first the pid file names), if there is one. */
export function listeningGateway (config: Config): (PidEntry & { port: number }) | null {
  return runningGateways(config).find((g): g is PidEntry & { port: number } => g.port !== null) ?? null
}

/** Where a running gateway answers (a wildcard address is asked on loopback). */
export function baseUrlOf (found: PidEntry & { port: number }): string {
  const host = found.host === '0.0.0.0' || found.host === '::' ? '127.0.0.1' : found.host.includes(':') ? `[${found.host}]` : found.host
  return `http://${host}:${found.port}`
}
