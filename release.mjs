// `npm run release [-- --out DIR]`: the one executable file, release/modelgate-linux-x64, beside
// modelgate.cdx.json (a CycloneDX SBOM of what is inside) and SHA256SUMS (both files' checksums).
//
// The file is this Node.js binary with a single executable application blob injected (postject),
// the blob holding:
//   - the gateway, bundled by esbuild into one CommonJS script (the entry a Node.js 20 single
//     executable application runs; dynamic imports of the project's own modules become calls
//     within that script), with every dependency but the SQLite driver;
//   - assets: package.json, the shipped config, the SQL migrations, the built console pages, and
//     the SQLite driver (better-sqlite3's JavaScript bundled into one file, and its native addon),
//     which the gateway unpacks into a private cache folder at its first use (paths.ts);
//   - release.json, the manifest: the version, the commit, the bundled packages' versions, and
//     every asset with its SHA-256.
//
// Reproducible: the same commit, built with the same Node.js binary and the same installed
// packages (npm ci of the same lock file), gives the same bytes. Nothing of the build's time, place
// or order goes in: the SBOM's timestamp is the commit's (SOURCE_DATE_EPOCH when set), its serial
// number is derived from its contents, assets are listed in sorted order, the blob names its
// script by a relative path, and V8's code cache is not used: two builds with it differed (it
// would take about a third off a command's start-up CPU).
import { createHash } from 'node:crypto'
import { execFileSync } from 'node:child_process'
import { chmodSync, copyFileSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, utimesSync, writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'
import { fileURLToPath } from 'node:url'
import { parseArgs } from 'node:util'

const root = dirname(fileURLToPath(import.meta.url))
const require = createRequire(import.meta.url)
const { values: opts } = parseArgs({ options: { out: { type: 'string', default: join(root, 'release') } } })
const out = resolve(opts.out)
const NAME = 'modelgate-linux-x64'
const SBOM = 'modelgate.cdx.json'
// the sentinel Node.js looks for to know that a blob was injected (Node.js's single executable application docs)
const FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2'

const say = (line) => process.stderr.write(`release: ${line}\n`)
const fail = (line) => { say(line); process.exit(1) }
const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex')
const git = (...args) => execFileSync('git', args, { cwd: root, encoding: 'utf8' }).trim()

if (process.platform !== 'linux' || process.arch !== 'x64') fail(`builds ${NAME} on Linux x64 only (this is ${process.platform} ${process.arch})`)

// the commit, marked when a file the build reads differs from it (such a build is no release of it)
const SOURCES = ['package.json', 'package-lock.json', 'build.mjs', 'release.mjs', 'app.ts', 'server.ts', 'paths.ts', 'cli', 'config', 'engine', 'plugins', 'routes']
let commit
try {
  commit = git('rev-parse', 'HEAD')
  if (git('status', '--porcelain', '--', ...SOURCES) !== '') commit += '-dirty'
} catch {
  fail('needs a git checkout: the file names the commit it was built from')
}
const epoch = Number(process.env.SOURCE_DATE_EPOCH ?? git('log', '-1', '--format=%ct'))
const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8'))

// 1. the console pages (and dist/, which nothing here uses), built as npm start builds them
execFileSync(process.execPath, [join(root, 'build.mjs')], { cwd: root, stdio: 'inherit' })

const work = mkdtempSync(join(tmpdir(), 'modelgate-release-'))
process.on('exit', () => rmSync(work, { recursive: true, force: true }))
const { build } = await import('esbuild')

// 2. the gateway in one CommonJS script. `import.meta.url` (paths.ts, createRequire) is the file's own path.
const noDriver = {
  name: 'sqlite-driver-by-path',
  setup (b) {
    // the driver comes from its unpacked copy (engine/store/sqlite/driver.ts), never from the bundle
    b.onResolve({ filter: /^better-sqlite3$/ }, (args) => ({ errors: [{ text: `${relative(root, args.importer)} imports better-sqlite3: load it through engine/store/sqlite/driver.ts` }] }))
  }
}
// engine/kernel/schema-check.ts loads ajv lazily through createRequire, which a bundle cannot
// follow: here its `require` is the script's own, so that ajv is bundled and still loaded lazily
const ajvBundled = {
  name: 'ajv-bundled',
  setup (b) {
    b.onLoad({ filter: /engine[\\/]kernel[\\/]schema-check\.ts$/ }, (args) => {
      const source = readFileSync(args.path, 'utf8')
      const line = 'const require = createRequire(import.meta.url)\n'
      if (!source.includes(line)) return { errors: [{ text: `${relative(root, args.path)} no longer loads ajv with \`${line.trim()}\`: update release.mjs` }] }
      return { contents: source.replace(line, ''), loader: 'ts' }
    })
  }
}
const gateway = await build({
  entryPoints: [join(root, 'cli', 'index.ts')],
  outfile: join(work, 'modelgate.cjs'),
  absWorkingDir: root,
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  // pg's optional native driver, which pg requires only inside a try
  external: ['pg-native'],
  plugins: [noDriver, ajvBundled],
  define: { 'import.meta.url': '__mgImportMetaUrl' },
  banner: { js: "const __mgImportMetaUrl = require('node:url').pathToFileURL(__filename).href;" },
  legalComments: 'eof',
  // a smaller script to compile at each start (names are kept: a stack still names its functions)
  minifyWhitespace: true,
  minifySyntax: true,
  metafile: true,
  logLevel: 'warning'
})
// the entry is the body of a function: no #! line
const script = join(work, 'modelgate.cjs')
writeFileSync(script, readFileSync(script, 'utf8').replace(/^#![^\n]*\n/, ''))

// A bundled package that finds files of its own by __dirname or __filename would look beside the
// executable file. Those below were read: they do so only on paths the gateway does not take
// (pino's transports: the executable logs --pretty on the main thread), or fall back (ioredis's
// version in CLIENT SETINFO), or check first (undici).
const REVIEWED = new Set(['undici', 'pino', 'ioredis', 'thread-stream', 'pino-pretty'])
const packageOf = (input) => /(?:^|\/)node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(input)?.[1]
const needsDirname = new Set()
for (const input of Object.keys(gateway.metafile.inputs)) {
  const name = packageOf(input)
  if (name === undefined || REVIEWED.has(name) || !/\.[cm]?js$/.test(input)) continue
  if (/\b__(dirname|filename)\b/.test(readFileSync(join(root, input), 'utf8'))) needsDirname.add(name)
}
if (needsDirname.size > 0) fail(`${[...needsDirname].join(', ')} use __dirname or __filename: check what they read, then add them to REVIEWED in release.mjs`)

// 3. the SQLite driver: better-sqlite3's JavaScript in one file that loads the addon beside it
const bindingsBeside = {
  name: 'bindings-beside',
  setup (b) {
    b.onResolve({ filter: /^bindings$/ }, () => ({ path: 'bindings', namespace: 'beside' }))
    b.onLoad({ filter: /.*/, namespace: 'beside' }, () => ({ contents: "module.exports = (name) => require(require('node:path').join(__dirname, name))", loader: 'js' }))
  }
}
const driverDir = dirname(require.resolve('better-sqlite3/package.json'))
const driver = await build({
  entryPoints: [join(driverDir, 'lib', 'index.js')],
  outfile: join(work, 'better-sqlite3.cjs'),
  absWorkingDir: root,
  bundle: true,
  format: 'cjs',
  platform: 'node',
  target: 'node20',
  plugins: [bindingsBeside],
  metafile: true,
  logLevel: 'warning'
})
const addon = join(driverDir, 'build', 'Release', 'better_sqlite3.node')
if (!existsSync(addon)) fail(`no ${relative(root, addon)}: npm install builds it`)

// 4. the assets, by their path from the project root (what paths.ts's shippedFile reads)
/** Every file under `dir`, by its path from `base` (with /), sorted. */
const filesUnder = (dir, base = root) => readdirSync(dir, { recursive: true, withFileTypes: true })
  .filter((e) => e.isFile())
  .map((e) => relative(base, join(e.parentPath, e.name)).split('\\').join('/'))
  .sort()
const assets = new Map([
  ['package.json', join(root, 'package.json')],
  ['config/gateway.yaml', join(root, 'config', 'gateway.yaml')],
  ...['sqlite', 'postgres'].flatMap((s) => filesUnder(join(root, 'engine', 'store', s, 'migrations')).filter((f) => f.endsWith('.sql')).map((f) => [f, join(root, f)])),
  // the pages, without the build's own list of what it made (dist/console/.files): not a page
  ...filesUnder(join(root, 'dist', 'console')).filter((f) => !f.split('/').some((p) => p.startsWith('.'))).map((f) => [f, join(root, f)]),
  ['sqlite/better-sqlite3.cjs', join(work, 'better-sqlite3.cjs')],
  ['sqlite/better_sqlite3.node', addon]
])
if (!assets.has('dist/console/index.html') || !assets.has('dist/console/admin/index.html')) fail('the console pages were not built')

// the packages bundled in: the gateway's, and the driver (its `bindings` dependency is replaced above)
const bundled = new Map()
for (const input of [...Object.keys(gateway.metafile.inputs), ...Object.keys(driver.metafile.inputs)]) {
  const m = /^(.*node_modules\/(?:@[^/]+\/)?[^/]+)\//.exec(input)
  if (m === null || bundled.has(m[1])) continue
  const { name, version } = JSON.parse(readFileSync(join(root, m[1], 'package.json'), 'utf8'))
  bundled.set(m[1], { name, version })
}
const manifest = {
  version: pkg.version,
  commit,
  packages: Object.fromEntries([...bundled.values()].sort((a, b) => a.name.localeCompare(b.name)).map((p) => [p.name, p.version])),
  files: Object.fromEntries([...assets].sort(([a], [b]) => a < b ? -1 : 1).map(([k, file]) => [k, sha256(readFileSync(file))]))
}
writeFileSync(join(work, 'release.json'), JSON.stringify(manifest, null, 2) + '\n')
assets.set('release.json', join(work, 'release.json'))

// 5. the blob, and the executable: a copy of this Node.js binary with the blob injected
// (paths relative to the work folder: the blob keeps the main script's path as written here)
const seaConfig = {
  main: 'modelgate.cjs',
  output: 'sea.blob',
  disableExperimentalSEAWarning: true,
  useSnapshot: false,
  useCodeCache: false,
  assets: Object.fromEntries([...assets].sort(([a], [b]) => a < b ? -1 : 1))
}
writeFileSync(join(work, 'sea-config.json'), JSON.stringify(seaConfig, null, 2))
execFileSync(process.execPath, ['--experimental-sea-config', join(work, 'sea-config.json')], { cwd: work, stdio: ['ignore', 'ignore', 'inherit'] })
mkdirSync(out, { recursive: true })
const file = join(out, NAME)
rmSync(file, { force: true })
copyFileSync(process.execPath, file)
chmodSync(file, 0o755)
const { inject } = require('postject')
// (postject's ELF library warns of each note section it finds no name for: nothing to act on)
const warn = console.warn
console.warn = (...args) => { if (!/Can't find string offset for section name/.test(String(args[0]))) warn(...args) }
try {
  await inject(file, 'NODE_SEA_BLOB', readFileSync(join(work, 'sea.blob')), { sentinelFuse: FUSE })
} finally {
  console.warn = warn
}

// 6. the SBOM: npm's own record of each bundled package (version, license, integrity hash,
// references), for those packages only, with Node.js and SQLite, which are in the file too
const npmSbom = JSON.parse(execFileSync('npm', ['sbom', '--sbom-format', 'cyclonedx', '--sbom-type', 'application'], { cwd: root, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 }))
const refs = new Set([...bundled.values()].map((p) => `${p.name}@${p.version}`))
const components = npmSbom.components.filter((c) => refs.has(c['bom-ref']))
const found = new Set(components.map((c) => c['bom-ref']))
const missing = [...refs].filter((r) => !found.has(r))
if (missing.length > 0) fail(`npm sbom does not list ${missing.join(', ')}`)
const Database = require('better-sqlite3')
const sqliteVersion = new Database(':memory:').prepare('SELECT sqlite_version()').pluck().get()
components.push(
  { 'bom-ref': `node@${process.versions.node}`, type: 'platform', name: 'node', version: process.versions.node, description: 'Node.js, the runtime the file is made of', purl: `pkg:generic/nodejs/node@${process.versions.node}`, licenses: [{ license: { id: 'MIT' } }] },
  { 'bom-ref': `sqlite@${sqliteVersion}`, type: 'library', name: 'sqlite', version: sqliteVersion, description: 'SQLite, built into better-sqlite3\'s addon', purl: `pkg:generic/sqlite/sqlite@${sqliteVersion}`, licenses: [{ license: { id: 'blessing' } }] }
)
components.sort((a, b) => a['bom-ref'] < b['bom-ref'] ? -1 : a['bom-ref'] > b['bom-ref'] ? 1 : 0)
const self = `modelgate@${pkg.version}`
const inside = new Set([self, ...components.map((c) => c['bom-ref'])])
// the project's own dependencies that are inside (installed at the top of node_modules)
const direct = Object.keys(pkg.dependencies).map((n) => bundled.get(`node_modules/${n}`)).filter(Boolean).map((p) => `${p.name}@${p.version}`)
const dependencies = [
  { ref: self, dependsOn: [...new Set([...direct, `node@${process.versions.node}`])].sort() },
  { ref: `better-sqlite3@${manifest.packages['better-sqlite3']}`, dependsOn: [`sqlite@${sqliteVersion}`] },
  ...npmSbom.dependencies
    .filter((d) => inside.has(d.ref) && d.ref !== self && !d.ref.startsWith('better-sqlite3@'))
    .map((d) => ({ ref: d.ref, dependsOn: d.dependsOn.filter((r) => inside.has(r)).sort() }))
].sort((a, b) => a.ref === self ? -1 : b.ref === self ? 1 : a.ref < b.ref ? -1 : 1)
const sbom = {
  $schema: npmSbom.$schema,
  bomFormat: 'CycloneDX',
  specVersion: npmSbom.specVersion,
  serialNumber: '',
  version: 1,
  metadata: {
    timestamp: new Date(epoch * 1000).toISOString(),
    lifecycles: [{ phase: 'build' }],
    tools: npmSbom.metadata.tools,
    component: {
      ...npmSbom.metadata.component,
      name: pkg.name,
      properties: [{ name: 'modelgate:commit', value: commit }],
      hashes: [{ alg: 'SHA-256', content: sha256(readFileSync(file)) }]
    }
  },
  components,
  dependencies
}
// a serial number that is the same for the same contents (an RFC 4122 UUID made of their hash)
const h = sha256(JSON.stringify(sbom)).slice(0, 32).split('')
h[12] = '5'
h[16] = '89ab'[parseInt(h[16], 16) % 4]
const hex = h.join('')
sbom.serialNumber = `urn:uuid:${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
writeFileSync(join(out, SBOM), JSON.stringify(sbom, null, 2) + '\n')

// 7. the checksums, as sha256sum writes them (`sha256sum -c SHA256SUMS` checks them)
const sums = [NAME, SBOM].map((f) => `${sha256(readFileSync(join(out, f)))}  ${f}\n`).join('')
writeFileSync(join(out, 'SHA256SUMS'), sums)
for (const f of [NAME, SBOM, 'SHA256SUMS']) utimesSync(join(out, f), epoch, epoch)

const mb = (bytes) => `${(bytes / 1024 / 1024).toFixed(1)} MB`
say(`${relative(process.cwd(), file) || file}: ${mb(statSync(file).size)} (Node.js ${process.versions.node}, the gateway ${mb(statSync(script).size)}, ${assets.size} assets), modelgate ${pkg.version} at ${commit}`)
process.stdout.write(sums)
