import { createHash } from 'node:crypto'
import { existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { homedir, tmpdir } from 'node:os'
import { dirname, join, posix, relative, sep } from 'node:path'
import { getAsset, isSea } from 'node:sea'
import { fileURLToPath } from 'node:url'

// The files shipped with the gateway (package.json, the shipped config, the migrations, the
// console pages): read beside the sources in a checkout or an npm install, or from the assets of
// the one executable file (`npm run release`), which lists them in its manifest, release.json.

/** True in the one executable file (a Node.js single executable application). */
export const inExecutable = isSea()

/** What `npm run release` writes into the executable file beside the shipped files. */
interface Manifest {
  version: string
  commit: string
  /** The runtime packages bundled in, by name: their versions. */
  packages: Record<string, string>
  /** Every shipped file by its path from the project root (with /), and its SHA-256. */
  files: Record<string, string>
}

const manifest: Manifest | null = inExecutable ? JSON.parse(getAsset('release.json', 'utf8')) as Manifest : null

// The project root holds package.json; code runs from the sources (tests) or from dist/ (npm start).
function findRoot (): string {
  let dir = dirname(fileURLToPath(import.meta.url))
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir)
    if (parent === dir) throw new Error('modelgate: package.json not found above ' + fileURLToPath(import.meta.url))
    dir = parent
  }
  return dir
}

/** The project root; in the executable file, the folder that holds the file (nothing is read from there). */
export const projectRoot = inExecutable ? dirname(process.execPath) : findRoot()
export const fromRoot = (...parts: string[]): string => join(projectRoot, ...parts)

const key = (parts: string[]): string => posix.join(...parts)

/** A shipped file's bytes; `parts` is its path from the project root. Throws ENOENT for a file not shipped. */
export function shippedFile (...parts: string[]): Buffer {
  if (manifest === null) return readFileSync(fromRoot(...parts))
  if (!Object.hasOwn(manifest.files, key(parts))) throw Object.assign(new Error(`ENOENT: ${key(parts)} is not in the executable file`), { code: 'ENOENT' })
  return Buffer.from(getAsset(key(parts)))
}

/** Every file under a shipped folder, by its path from that folder (with /), sorted; none for a folder not shipped. */
export function shippedFiles (...parts: string[]): string[] {
  if (manifest !== null) {
    const prefix = `${key(parts)}/`
    return Object.keys(manifest.files).filter((f) => f.startsWith(prefix)).map((f) => f.slice(prefix.length)).sort()
  }
  const dir = fromRoot(...parts)
  if (!existsSync(dir)) return []
  return (readdirSync(dir, { recursive: true, withFileTypes: true }))
    .filter((e) => e.isFile())
    .map((e) => relative(dir, join(e.parentPath, e.name)).split(sep).join('/'))
    .sort()
}

/** The gateway's version, and in the executable file the commit it was built from. */
export function buildInfo (): { version: string, commit: string | null } {
  const { version } = JSON.parse(shippedFile('package.json').toString('utf8')) as { version: string }
  return { version, commit: manifest?.commit ?? null }
}

/** The installed (or, in the executable file, bundled) version of a runtime package; null when it cannot be read. */
export function packageVersion (name: string): string | null {
  if (manifest !== null) return manifest.packages[name] ?? null
  try {
    for (let dir = dirname(createRequire(import.meta.url).resolve(name)); dirname(dir) !== dir; dir = dirname(dir)) {
      const file = join(dir, 'package.json')
      if (!existsSync(file)) continue
      const pkg = JSON.parse(readFileSync(file, 'utf8')) as { name?: string, version?: string }
      if (pkg.name === name) return pkg.version ?? null
    }
  } catch {}
  return null
}

/**
 * Shipped files written out as files of their own, for what only loads from a file (a native
 * addon): into a private folder of the user's cache (`$XDG_CACHE_HOME/modelgate`, else
 * `~/.cache/modelgate`, else the system's temporary folder), named by their contents, once per
 * release; a copy that is not byte for byte the shipped file is written again. Returns their
 * paths, in order. Outside the executable file, the files are where they are.
 */
export function unpacked (files: string[][]): string[] {
  if (manifest === null) return files.map((parts) => fromRoot(...parts))
  const hashes = files.map((parts) => manifest.files[key(parts)] ?? '')
  const dir = join(privateCache(), createHash('sha256').update(hashes.join('\n')).digest('hex').slice(0, 16))
  mkdirPrivate(dir)
  return files.map((parts, i) => {
    const file = join(dir, posix.basename(key(parts)))
    if (existsSync(file) && createHash('sha256').update(readFileSync(file)).digest('hex') === hashes[i]) return file
    // written whole under another name, then renamed: a process starting beside this one never loads half a file
    const part = `${file}.${process.pid}.part`
    writeFileSync(part, shippedFile(...parts), { mode: 0o500 })
    try {
      renameSync(part, file)
    } catch (err) {
      rmSync(part, { force: true })
      throw err
    }
    return file
  })
}

function privateCache (): string {
  const base = process.env.XDG_CACHE_HOME !== undefined && process.env.XDG_CACHE_HOME !== '' ? process.env.XDG_CACHE_HOME : join(homedir(), '.cache')
  const home = join(base, 'modelgate')
  try {
    mkdirPrivate(home)
    return home
  } catch (err) {
    // a home where no folder can be made (a service user's, a read-only root): a folder of this
    // user's own in the temporary folder; a folder that is there but not private is refused
    if (typeof (err as NodeJS.ErrnoException).code !== 'string') throw err
    const temp = join(tmpdir(), `modelgate-${process.getuid?.() ?? 'user'}`)
    mkdirPrivate(temp)
    return temp
  }
}

/** Makes `dir` (0700) and checks it is this user's own folder, which no one else can write into. */
function mkdirPrivate (dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 })
  const st = lstatSync(dir)
  const uid = process.getuid?.()
  if (!st.isDirectory() || (uid !== undefined && st.uid !== uid) || (st.mode & 0o022) !== 0) {
    throw new Error(`modelgate: ${dir} is not a private folder of this user (a link, another user's, or writable by others): remove it, or set XDG_CACHE_HOME to another place`)
  }
}
