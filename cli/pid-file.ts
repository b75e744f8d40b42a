import type Database from 'better-sqlite3'
import { createHash } from 'node:crypto'
import { closeSync, constants, fstatSync, lstatSync, mkdirSync, openSync, readFileSync, realpathSync, renameSync, unlinkSync, writeFileSync, type Stats } from 'node:fs'
import { BlockList, isIP } from 'node:net'
import { dirname, join, resolve } from 'node:path'
import type { Config } from '../config/schema.js'
import { sqliteDriver } from '../engine/store/sqlite/driver.js'
import { CommandError } from './command.js'

// The running gateways' pids and addresses, beside their store, so that `modelgate reload` finds
// them. A SQLite store is served by one gateway (its workers share it): a second `serve` of it is
// refused, naming the first; a gateway on another SQLite file of the same folder is no concern of
// it. Instances on PostgreSQL share their store by design: each one on the same database that
// serves from the same folder is listed, and a reload reaches every one.
//
// What the file says decides where `modelgate reload` sends the admin token, so it is believed
// only when no one but the gateway's user could have written it: the file, its lock file and
// its folder belong to this user (or root) and are writable by no one else, and every folder
// above is too, unless sticky (like /tmp, whose entries only their owner can rename). Anything
// else is refused, saying what to change. The token goes only to a loopback address, or to the
// config's own server.host and port.

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

/** The file's entries; none when there is no file. Refused when anyone else could have written it. */
function read (path: string): PidEntry[] {
  trustFolders(dirname(path))
  let text: string
  try {
    text = readTrusted(path)
  } catch (err) {
    if (err instanceof CommandError) throw err
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

/** This process's user, and root: the owners a file or folder of the gateway's may have (null: no users here, as on Windows). */
function trustedUids (): number[] | null {
  const uid = process.geteuid?.()
  return uid === undefined ? null : [uid, 0]
}

/**
 * Why what `st` (at `path`) describes could have been written by someone other than this user,
 * with what to do about it; null when no one could.
 */
function untrusted (st: Stats, path: string, stickyAllowed: boolean): string | null {
  const uids = trustedUids()
  if (uids === null) return null
  if (!uids.includes(st.uid)) return `it belongs to uid ${st.uid}, not to this user (uid ${uids[0] as number}) or root; ${BELIEVED}: run this command as the gateway's user`
  const sticky = (st.mode & 0o1000) !== 0
  if ((st.mode & 0o022) !== 0 && !(stickyAllowed && sticky)) {
    const who = (st.mode & 0o002) !== 0 ? 'anyone' : 'its group'
    return `${who} may write it (mode ${(st.mode & 0o7777).toString(8).padStart(4, '0')}); ${BELIEVED}: chmod go-w ${path}`
  }
  return null
}

const BELIEVED = 'only a pid file, lock file and folders that belong to the gateway\'s user (or root) and that no one else may write are believed'

/** What a file that is not a file the gateway writes is, with what to do about it. */
const notAFile = (what: string, path: string): string => `it is ${what}; ${BELIEVED}: remove ${path} if no gateway runs`

/**
 * Opens the file with `flags` (never through a link) and checks what was opened, so that what is
 * read is what was checked; refused: a CommandError. Other errors of the system as they are.
 */
function openTrusted (path: string, flags: number): number {
  let fd: number
  try {
    fd = openSync(path, flags | constants.O_NOFOLLOW, 0o600)
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ELOOP') throw new CommandError(`not trusting ${path}: ${notAFile('a symbolic link', path)}`)
    throw err
  }
  const st = fstatSync(fd)
  const why = st.isFile() ? untrusted(st, path, false) : notAFile('not a regular file', path)
  if (why === null) return fd
  closeSync(fd)
  throw new CommandError(`not trusting ${path}: ${why}`)
}

/** The file's text, if it can be trusted. */
function readTrusted (path: string): string {
  const fd = openTrusted(path, constants.O_RDONLY)
  try {
    return readFileSync(fd, 'utf8')
  } finally {
    closeSync(fd)
  }
}

/**
 * Refuses a folder anyone but this user (or root) could write, or one above it that they could
 * (whoever can write a folder can replace what is in it); a sticky folder above (/tmp) is fine.
 * A folder that is not there holds nothing to trust.
 */
function trustFolders (dir: string): void {
  if (trustedUids() === null) return
  let real: string
  try {
    real = realpathSync(dir)
  } catch {
    return
  }
  for (let d = real, first = true; ; d = dirname(d), first = false) {
    const why = untrusted(lstatSync(d), d, !first)
    if (why !== null) throw new CommandError(`not trusting ${join(dir, 'modelgate.pid')}: ${first ? `its folder ${d}` : `${d}, a folder above it,`}: ${why}`)
    if (dirname(d) === d) return
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
  try {
    mkdirSync(dirname(file), { recursive: true, mode: 0o700 })
  } catch {
    return null
  }
  // made or not, the folder is checked now that it is there (one planted just before is refused)
  trustFolders(dirname(file))
  trustLockFile(file)
  let db: Database.Database | null = null
  try {
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

/** Makes the lock file (0600) when there is none; refuses one that anyone else could have written. */
function trustLockFile (file: string): void {
  try {
    closeSync(openTrusted(file, constants.O_RDONLY | constants.O_CREAT))
  } catch (err) {
    // a folder that cannot take one is no refusal: the update goes on without the lock
    if (err instanceof CommandError) throw err
  }
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
  mkdirSync(dirname(path), { recursive: true, mode: 0o700 })
  const tmp = `${path}.${process.pid}.tmp`
  try { unlinkSync(tmp) } catch {}
  writeFileSync(tmp, JSON.stringify({ gateways }) + '\n', { flag: 'wx', mode: 0o600 })
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
  unlessRefused(path, () => { locked(path, () => { entry(path, { pid: process.pid, host: config.server.host, port, store: storeOf(config) }) }) })
}

/** Takes this process out of the pid file (and the entries of processes gone). */
export function removePidFile (config: Config): void {
  const path = pidFilePath(config)
  if (path === null) return
  unlessRefused(path, () => { locked(path, () => { try { write(path, runningHere(path)) } catch {} }) })
}

/** Runs `fn`, a gateway's update once it serves: a file no longer to be trusted is said, not thrown. */
function unlessRefused (path: string, fn: () => void): void {
  try {
    fn()
  } catch (err) {
    if (!(err instanceof CommandError)) throw err
    process.stderr.write(`modelgate: ${err.message} (${path} not updated)\n`)
  }
}

/** A running gateway that listens (the first the pid file names), if there is one. */
export function listeningGateway (config: Config): (PidEntry & { port: number }) | null {
  return runningGateways(config).find((g): g is PidEntry & { port: number } => g.port !== null) ?? null
}

const WILDCARD = new Set(['0.0.0.0', '::'])
const LOOPBACK = new BlockList()
LOOPBACK.addSubnet('127.0.0.0', 8, 'ipv4')
LOOPBACK.addAddress('::1', 'ipv6')

const isLoopback = (host: string): boolean => host === 'localhost' || WILDCARD.has(host) || (isIP(host) !== 0 && LOOPBACK.check(host, isIP(host) === 6 ? 'ipv6' : 'ipv4'))

/**
 * Where a running gateway is asked with the admin token: its address when that is a loopback one
 * (a wildcard one is asked on loopback), or the config's own server.host and port. Any other is
 * refused: the token is not sent wherever a file says.
 */
export function adminBaseOf (config: Config, found: PidEntry & { port: number }): string {
  const configured = found.host === config.server.host && found.port === config.server.port
  if (!isLoopback(found.host) && !configured) {
    throw new CommandError(`the gateway (pid ${found.pid}) listens on ${found.host}:${found.port}, which is neither a loopback address nor the config's server.host and port (${config.server.host}:${config.server.port}): the admin token is sent to no other address. Serve it on one of those, or use kill -HUP ${found.pid} to make it read its config`)
  }
  const host = WILDCARD.has(found.host) ? '127.0.0.1' : found.host.includes(':') ? `[${found.host}]` : found.host
  return `http://${host}:${found.port}`
}
