// Run by tap before the test files (`before` in package.json), so by `npm test` and by
// `npx tap test/x.test.ts` alike:
//   1. the server build (build.mjs): dist/, which the tests that start the CLI run;
//   2. the tests and the sources they import, transpiled by esbuild file by file into .build/
//      with the same layout (.build/test/helper.js imports .build/app.js), which tap runs with no
//      TypeScript loader: no test process compiles anything.
// Rebuilt whole when a source is newer than the last build or the list of sources changed (a
// deleted test leaves no built copy behind); nothing changed, no work.
import { build } from 'esbuild'
import { spawnSync } from 'node:child_process'
import { existsSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath } from 'node:url'

const root = dirname(dirname(fileURLToPath(import.meta.url)))
const out = join(root, '.build')
const stamp = join(out, '.sources')

// tap starts this with its process recorder measuring coverage (it would print a coverage table
// of build.mjs after the tests): the work is done in a child that is not measured
if (process.env._TAPJS_PROCESSINFO_COVERAGE_ === '1') {
  const env = { ...process.env, _TAPJS_PROCESSINFO_COVERAGE_: '0' }
  delete env.NODE_OPTIONS
  const r = spawnSync(process.execPath, [fileURLToPath(import.meta.url)], { env, stdio: 'inherit' })
  process.exit(r.status ?? 1)
}

await import('../build.mjs')

const skip = new Set(['node_modules', 'fixtures', 'agents', 'web'].map((d) => `/${d}`))
/** The TypeScript files under `dir`, recursively, less the folders of fixtures, agents and the console page. */
function sources (dir) {
  const found = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) { if (!skip.has(`/${entry.name}`)) found.push(...sources(path)) } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) found.push(path)
  }
  return found
}

const files = [
  ...readdirSync(root).filter((f) => f.endsWith('.ts')).map((f) => join(root, f)),
  ...['config', 'plugins', 'routes', 'test'].flatMap((d) => sources(join(root, d)))
].sort()
const list = files.map((f) => relative(root, f)).join('\n')
const builtAt = existsSync(stamp) ? statSync(stamp).mtimeMs : -1
const newest = Math.max(...[...files, join(root, 'tsconfig.json'), fileURLToPath(import.meta.url)].map((f) => statSync(f).mtimeMs))
const sameList = builtAt >= 0 && readFileSync(stamp, 'utf8') === list

if (!sameList || newest > builtAt) {
  rmSync(out, { recursive: true, force: true })
  await build({
    entryPoints: files,
    outdir: out,
    outbase: root,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    sourcemap: true,
    logLevel: 'warning'
  })
  writeFileSync(stamp, list)
  process.stderr.write(`build: ${files.length} test and server files → ${relative(root, out)}/\n`)
}
