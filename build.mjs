// Builds what `npm start` serves, and only what changed since the last build:
//   the server: the `modelgate` command (cli/index.ts) and everything it loads, and the plugin API
//     package.json exports (plugins/api/), bundled by esbuild into dist/ (type-checking is
//     `npm run typecheck`'s job; `npm pack` adds the API's declarations). Each module loaded lazily (a
//     command, the server of a worker, the store migration) starts a chunk of its own, so a
//     process compiles only what it runs. The dependencies are bundled too, except those below:
//     Node reads, resolves and compiles thousands of small files to load them from node_modules
//     (TypeBox alone is 247 ES modules), which was most of a process's start-up. Beside them, what
//     every command would otherwise make again: the validators of the config's and the built-in
//     plugins' schemas (dist/validators.cjs, and V8's code for it) and init's starter config;
//   the console pages: routes/console/web (the developer console) and routes/console/web/admin
//     (the operator's console) bundled into dist/console (routes/console/build.mjs).
// Each part is rebuilt when one of its sources is newer than its last build (for the server:
// also package.json, package-lock.json, tsconfig.json, config/gateway.yaml and this file), or with --force (npm pack
// builds with it). Nothing changed: no work, so `npm start` serves at once.
// A build never pulls dist/ from under a process of the same checkout (a test run, a gateway, the
// command): it is made in a staging folder beside dist/ and published into it file by file, each
// file replacing its older self in one rename, the entry points last (see `publish`).
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmdirSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'

const root = dirname(fileURLToPath(import.meta.url))
const dist = join(root, 'dist')
const force = process.argv.includes('--force')
const CONSOLE_WEB = join(root, 'routes', 'console', 'web')

// Loaded from node_modules at run time, not bundled: a native addon, code that runs files of its
// package by path (pino's transports start a worker thread on one), an optional native driver,
// tokenizer tables loaded on demand, code that reads its own package.json by __dirname (ioredis).
const EXTERNAL = ['better-sqlite3', 'pino', 'pino-pretty', 'thread-stream', 'pg-native', 'js-tiktoken', 'ioredis']
// Bundled dependencies that name __dirname or __filename only after checking that they exist.
const REVIEWED = new Set(['undici'])

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

// Where this process builds: beside dist/ (at its depth, so that the source maps' relative paths
// hold once the files are in dist/), one per process, removed at the end; one a build that died
// left behind goes at the next build.
const staging = join(root, `.dist-staging-${process.pid}`)
for (const entry of readdirSync(root)) {
  const pid = /^\.dist-staging-(\d+)$/.exec(entry)?.[1]
  if (pid !== undefined && Number(pid) !== process.pid && !alive(Number(pid))) rmSync(join(root, entry), { recursive: true, force: true })
}
process.once('exit', () => { rmSync(staging, { recursive: true, force: true }) })

function alive (pid) {
  try { process.kill(pid, 0); return true } catch (err) { return err.code === 'EPERM' }
}

/**
 * Moves the files of `from` into `to`, each by a rename that replaces the file there in one step
 * (a process never finds a path missing, nor half a file): first what the entry points load
 * (content-hashed chunks and assets, whose names are new when their content is), then the rest,
 * the entry points (`index.js`, `index.html`) last. Then it removes the files of `to` that are in
 * neither this build nor the one before it, as its list in `to`/`.files` says (`keep`: paths it
 * leaves alone): a process started from the build before, still loading its chunks, finds them.
 */
function publish (from, to, keep = () => false) {
  const made = files(from, () => true).map((f) => relative(from, f))
  const rank = (f) => /(^|\/)(chunks|assets)\//.test(f) ? 0 : /(^|\/)index\.(js|html)$/.test(f) || f === 'engine/host/testing.js' ? 2 : 1
  for (const f of [...made].sort((a, b) => rank(a) - rank(b))) {
    mkdirSync(dirname(join(to, f)), { recursive: true })
    renameSync(join(from, f), join(to, f))
  }
  const list = join(to, '.files')
  let before = []
  try { before = JSON.parse(readFileSync(list, 'utf8')) } catch {}
  const kept = new Set([...made, ...before, '.files'])
  for (const f of files(to, () => true).map((f) => relative(to, f))) {
    if (!kept.has(f) && !keep(f)) rmSync(join(to, f), { force: true })
  }
  // folders left empty
  const prune = (dir) => {
    for (const e of readdirSync(dir, { withFileTypes: true })) if (e.isDirectory() && !keep(relative(to, join(dir, e.name)) + '/')) prune(join(dir, e.name))
    if (dir !== to && readdirSync(dir).length === 0) rmdirSync(dir)
  }
  prune(to)
  writeFileSync(list, JSON.stringify(made))
}

const newest = (paths) => Math.max(0, ...paths.map((p) => statSync(p).mtimeMs))
const builtAt = (stamp) => existsSync(stamp) ? statSync(stamp).mtimeMs : -1

const isSource = (p) => p.endsWith('.ts') && !p.endsWith('.d.ts') && !p.startsWith(CONSOLE_WEB)
const serverSources = [
  ...readdirSync(root).filter((f) => f.endsWith('.ts')).map((f) => join(root, f)),
  ...['cli', 'config', 'engine', 'plugins', 'routes'].flatMap((d) => files(join(root, d), isSource))
]
const serverStamp = join(dist, '.server-built')
const serverInputs = [...serverSources, ...['tsconfig.json', 'build.mjs', 'package.json', 'package-lock.json', join('config', 'gateway.yaml')].map((f) => join(root, f)).filter(existsSync)]
if (force || newest(serverInputs) > builtAt(serverStamp)) {
  const { build } = await import('esbuild')
  const out = staging
  const result = await build({
    // the command, and what package.json exports to plugins written outside the project (they
    // share the command's chunks, so a plugin and the gateway that loads it share one API)
    entryPoints: [join(root, 'cli', 'index.ts'), join(root, 'plugins', 'api', 'index.ts'), join(root, 'engine', 'host', 'testing.ts')],
    outdir: out,
    outbase: root,
    absWorkingDir: root,
    bundle: true,
    splitting: true,
    chunkNames: 'chunks/[name]-[hash]',
    format: 'esm',
    platform: 'node',
    target: 'node20',
    external: EXTERNAL,
    // the CommonJS code bundled into these ES modules requires the external packages through this
    banner: { js: "import { createRequire as __mgCreateRequire } from 'node:module'; const require = __mgCreateRequire(import.meta.url);" },
    sourcemap: true,
    sourcesContent: false,
    metafile: true,
    logLevel: 'warning'
  })
  // an ES module has no __dirname: a bundled dependency that needs one must be in EXTERNAL
  const needsDirname = new Set()
  for (const input of Object.keys(result.metafile.inputs)) {
    const pkg = /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input)?.[1]
    if (pkg === undefined || REVIEWED.has(pkg) || !/\.[cm]?js$/.test(input)) continue
    if (/\b__(dirname|filename)\b/.test(readFileSync(join(root, input), 'utf8'))) needsDirname.add(pkg)
  }
  if (needsDirname.size > 0) {
    process.stderr.write(`build: ${[...needsDirname].join(', ')} use __dirname or __filename, which a bundle does not have: add them to EXTERNAL in build.mjs (or, once checked, to REVIEWED)\n`)
    process.exit(1)
  }
  // what the build makes ahead rather than each process, by modules bundled beside dist/, run,
  // and removed: the schemas every command that reads a config checks, compiled by ajv (its
  // standalone code), with V8's code for them (engine/kernel/schema-check.ts); and the starter
  // config `modelgate init` writes (cli/init.ts)
  const aheadDir = join(staging, '.ahead')
  await build({
    entryPoints: { schemas: join(root, 'engine', 'host', 'schemas-ahead.ts'), init: join(root, 'cli', 'init.ts') },
    outdir: aheadDir,
    outExtension: { '.js': '.mjs' },
    absWorkingDir: root,
    bundle: true,
    format: 'esm',
    platform: 'node',
    target: 'node20',
    external: EXTERNAL,
    banner: { js: "import { createRequire as __mgCreateRequire } from 'node:module'; const require = __mgCreateRequire(import.meta.url);" },
    logLevel: 'warning'
  })
  const schemas = await import(pathToFileURL(join(aheadDir, 'schemas.mjs')).href)
  const validators = join(out, 'validators.cjs')
  writeFileSync(validators, await schemas.validatorsAhead())
  writeFileSync(`${validators}.v8`, schemas.compiledAheadCache(validators))
  writeFileSync(join(out, 'init-gateway.yaml'), await (await import(pathToFileURL(join(aheadDir, 'init.mjs')).href)).starterTemplate())
  rmSync(aheadDir, { recursive: true })
  // dist/console is the console's part; the stamp is written once everything is in place
  publish(out, dist, (f) => f.startsWith('console/') || f === '.server-built' || f.startsWith('types/'))
  writeFileSync(serverStamp, '')
  process.stderr.write(`build: ${serverSources.length} server files → ${relative(root, dist)}/\n`)
}

const consoleStamp = join(dist, 'console', 'index.html')
if (force || newest([...files(CONSOLE_WEB, () => true), join(root, 'routes', 'console', 'build.mjs')]) > builtAt(consoleStamp)) {
  const out = join(staging, 'console')
  await (await import('./routes/console/build.mjs')).buildConsole(out)
  publish(out, join(dist, 'console'))
  process.stderr.write(`build: the console pages → ${relative(root, join(dist, 'console'))}/\n`)
}
