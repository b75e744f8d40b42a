// Builds what the tests run, and only what changed since the last build:
//   1. the server (build.mjs): dist/, which the tests that start the CLI run;
//   2. the tests and the sources they import, transpiled by esbuild file by file into .build/
//      with the same layout (.build/test/helper.js imports .build/app.js), which tap runs with no
//      TypeScript loader: no test process compiles anything.
// `npm test` runs it before tap lists .build/test (so new and deleted tests count), and tap runs
// it again before any test file (`before` in package.json), so that `npx tap test/x.test.ts`
// has a current dist/ as well. .build/ is rebuilt whole when a source is newer than the last
// build or the list of sources changed (a deleted test leaves no built copy behind).
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

// every TypeScript file of the project but the benchmarks, the console page (bundled on its
// own) and what is not source: a new source folder needs no change here
const SKIP = new Set(['node_modules', 'dist', '.build', '.git', '.tap', 'bench', 'examples', 'docs', 'data', 'test-output', 'fixtures', 'agents', 'web'])
/** The TypeScript files under `dir`, recursively, less the folders in SKIP. */
function sources (dir) {
  const found = []
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) {
      if (!SKIP.has(entry.name)) found.push(...sources(path))
    } else if (entry.name.endsWith('.ts') && !entry.name.endsWith('.d.ts')) {
      found.push(path)
    }
  }
  return found
}

const files = sources(root).sort()
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
