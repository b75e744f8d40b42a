import { mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import type { Config } from '../config/schema.js'

// The running gateway's pid and address, beside its store, so that `modelgate reload` finds it.

export interface PidFile { pid: number, host: string, port: number }

/** Where the pid file of a gateway serving `config` is; null for a :memory: store. */
export function pidFilePath (config: Config): string | null {
  return config.store.sqlite === ':memory:' ? null : join(dirname(resolve(config.store.sqlite)), 'modelgate.pid')
}

export function writePidFile (config: Config, port: number): void {
  const path = pidFilePath(config)
  if (path === null) return
  try {
    // a PostgreSQL store has no SQLite folder of its own: the folder is made here
    mkdirSync(dirname(path), { recursive: true })
    writeFileSync(path, JSON.stringify({ pid: process.pid, host: config.server.host, port } satisfies PidFile) + '\n')
  } catch (err) {
    process.stderr.write(`modelgate: cannot write ${path}: ${(err as Error).message} (modelgate reload will not find this gateway)\n`)
  }
}

/** Removes the pid file if this process wrote it. */
export function removePidFile (config: Config): void {
  const path = pidFilePath(config)
  if (path === null) return
  try {
    const found = JSON.parse(readFileSync(path, 'utf8')) as Partial<PidFile>
    if (found.pid === process.pid) unlinkSync(path)
  } catch {}
}

/** The running gateway the pid file beside the store names, if there is one. */
export function readPidFile (config: Config): PidFile | null {
  const path = pidFilePath(config)
  if (path === null) return null
  try {
    return JSON.parse(readFileSync(path, 'utf8')) as PidFile
  } catch {
    return null
  }
}

/** Where a running gateway answers (a wildcard address is asked on loopback). */
export function baseUrlOf (found: PidFile): string {
  const host = found.host === '0.0.0.0' || found.host === '::' ? '127.0.0.1' : found.host.includes(':') ? `[${found.host}]` : found.host
  return `http://${host}:${found.port}`
}
