import type Database from 'better-sqlite3'
import { createRequire } from 'node:module'
import { inExecutable, unpacked } from '../../../paths.js'

// The SQLite driver, better-sqlite3: a native addon and its JavaScript. From node_modules; in the
// one executable file, from the file's assets (the release bundles the JavaScript into one file
// beside the addon), unpacked once into a private cache folder, since an addon loads from a file.
// The checkpointer's thread loads it by the same path.

/** The files the release ships the driver as, from the project root. */
export const SHIPPED_DRIVER = [['sqlite', 'better-sqlite3.cjs'], ['sqlite', 'better_sqlite3.node']]

const load = createRequire(import.meta.url)
let path: string | undefined

/** The file to require for the driver's Database class. */
export function driverPath (): string {
  path ??= inExecutable ? unpacked(SHIPPED_DRIVER)[0] as string : load.resolve('better-sqlite3')
  return path
}

/** better-sqlite3's Database class, loaded at the first call (`--help` and `--version` load no driver). */
export function sqliteDriver (): typeof Database {
  return load(driverPath()) as typeof Database
}
