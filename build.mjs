// Builds what `npm start` serves, and only what changed since the last build:
//   the server: every TypeScript source (the top-level *.ts, cli/, config/, plugins/, routes/)
//     transpiled to dist/ by esbuild, file by file (type-checking is `npm run typecheck`'s job);
//   the console page: routes/console/web bundled into dist/console (routes/console/build.mjs).
// Each part is rebuilt when one of its sources is newer than its last build, or with --force
// (npm pack builds with it). Nothing changed: no work, so `npm start` serves at once.
import { build } from 'esbuild'
import { existsSync, mkdirSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = dirname(fileURLToPath(import.meta.url))
const dist = join(root, 'dist')
const force = process.argv.includes('--force')
const CONSOLE_WEB = join(root, 'routes', 'console', 'web')

/** Every file under `dir` for which `keep` is true, recursively. */
function files (dir, keep) {
  const out = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) out.push(...files(path, keep))
    else if (keep(path)) out.push(path)
  }
  return out
}

const newest = (paths) => Math.max(0, ...paths.map((p) => statSync(p).mtimeMs))
const builtAt = (stamp) => existsSync(stamp) ? statSync(stamp).mtimeMs : -1

const isSource = (p) => p.endsWith('.ts') && !p.endsWith('.d.ts') && !p.startsWith(CONSOLE_WEB)
const serverSources = [
  ...readdirSync(root).filter((f) => f.endsWith('.ts')).map((f) => join(root, f)),
  ...['cli', 'config', 'plugins', 'routes'].flatMap((d) => files(join(root, d), isSource))
]
const serverStamp = join(dist, '.server-built')
if (force || newest([...serverSources, join(root, 'tsconfig.json'), join(root, 'build.mjs')]) > builtAt(serverStamp)) {
  // a full build: files of sources since deleted do not linger
  for (const entry of existsSync(dist) ? readdirSync(dist) : []) if (entry !== 'console') rmSync(join(dist, entry), { recursive: true, force: true })
  await build({
    entryPoints: serverSources,
    outdir: dist,
    outbase: root,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: true,
    logLevel: 'warning'
  })
  writeFileSync(serverStamp, '')
  process.stderr.write(`build: ${serverSources.length} server files → ${relative(root, dist)}/\n`)
}

const consoleStamp = join(dist, 'console', 'index.html')
if (force || newest([...files(CONSOLE_WEB, () => true), join(root, 'routes', 'console', 'build.mjs')]) > builtAt(consoleStamp)) {
  mkdirSync(dist, { recursive: true })
  await import('./routes/console/build.mjs')
  process.stderr.write(`build: the console page → ${relative(root, join(dist, 'console'))}/\n`)
}
