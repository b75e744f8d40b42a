import t from 'tap'
import { execFile, spawn, spawnSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { chmodSync, copyFileSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { fromRoot } from '../paths.js'
import { childEnv } from './child-env.js'
import { servedPort } from './served-port.js'
import { tempDir } from './temp-dir.js'

// The one executable file (`npm run release`), as a user without Node.js gets it: copied alone
// into an empty folder and run with no node on the PATH, no NODE_OPTIONS and a home of its own,
// it inits a gateway and serves it (two workers, a plugin module of the user's), both consoles
// included; its commands work; its SQLite driver is unpacked into a private folder and written
// again when it was changed. Built a second time from the same tree, it has the same bytes.
//
// .ci/run builds release/ once and names it in MODELGATE_RELEASE_DIR; without it, this file
// builds one. Either way it builds one more, for the comparison.

t.setTimeout(15 * 60_000)

const run = promisify(execFile)
const sha256 = (file: string): string => createHash('sha256').update(readFileSync(file)).digest('hex')
const NAME = 'modelgate-linux-x64'

async function release (out: string): Promise<string> {
  await run(process.execPath, [fromRoot('release.mjs'), '--out', out], { cwd: fromRoot(), env: childEnv(), maxBuffer: 16 * 1024 * 1024 })
  return out
}

const built = process.env.MODELGATE_RELEASE_DIR ?? await release(tempDir('release-a'))

t.test('the release: the file, its SBOM, and SHA256SUMS of both', async (t) => {
  const sums = readFileSync(join(built, 'SHA256SUMS'), 'utf8')
  t.same(sums.trim().split('\n').map((l) => l.split('  ')[1]), [NAME, 'modelgate.cdx.json'], 'sha256sum\'s format, one line a file')
  for (const line of sums.trim().split('\n')) {
    const [sum, file] = line.split('  ') as [string, string]
    t.equal(sha256(join(built, file)), sum, `${file}: its checksum`)
  }
  const size = statSync(join(built, NAME)).size
  t.ok(size <= 130 * 1024 * 1024, `${(size / 1024 / 1024).toFixed(1)} MB, at most 130 MB`)

  const sbom = JSON.parse(readFileSync(join(built, 'modelgate.cdx.json'), 'utf8')) as {
    bomFormat: string
    specVersion: string
    serialNumber: string
    metadata: { timestamp: string, component: { name: string, version: string, hashes: Array<{ alg: string, content: string }> } }
    components: Array<{ name: string, version: string, purl: string, licenses?: unknown[] }>
    dependencies: Array<{ ref: string, dependsOn: string[] }>
  }
  t.equal(sbom.bomFormat, 'CycloneDX')
  t.match(sbom.serialNumber, /^urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
  const pkg = JSON.parse(readFileSync(fromRoot('package.json'), 'utf8')) as { version: string }
  t.match(sbom.metadata.component, { name: 'modelgate', version: pkg.version })
  t.same(sbom.metadata.component.hashes, [{ alg: 'SHA-256', content: sha256(join(built, NAME)) }], 'the file it describes, by its hash')
  const names = new Set(sbom.components.map((c) => c.name))
  for (const name of ['fastify', 'better-sqlite3', 'undici', 'yaml', '@sinclair/typebox', 'node', 'sqlite']) t.ok(names.has(name), `lists ${name}`)
  t.same(['tap', 'esbuild', 'typescript', 'eslint', 'postject', 'openai', 'playwright-core'].filter((n) => names.has(n)), [], 'no development tool')
  t.notOk(names.has('prebuild-install'), 'not the driver\'s install-time helper, which is not in the file')
  t.same(sbom.components.filter((c) => c.version === '' || (c.licenses ?? []).length === 0 || c.purl === '').map((c) => c.name), [], 'each with its version, license and purl')
  t.equal(sbom.components.find((c) => c.name === 'node')?.version, process.versions.node, 'the Node.js it is made of')
  t.ok(sbom.dependencies.every((d) => d.dependsOn.every((r) => sbom.components.some((c) => `${c.name}@${c.version}` === r))), 'its dependency graph names only what it lists')
})

t.test('alone, with no Node.js on the PATH: init, config check, serve with two workers, the consoles, keys, reload', async (t) => {
  const dir = tempDir('release-run')
  const bin = join(dir, 'bin')
  mkdirSync(bin)
  const home = join(dir, 'home')
  const file = join(dir, NAME)
  copyFileSync(join(built, NAME), file)
  chmodSync(file, 0o755)
  // no node, no npm, no node_modules: an empty PATH folder, and a home of its own (its cache)
  const env = { PATH: bin, HOME: home, LANG: 'C.UTF-8' }
  const looked = spawnSync('/bin/sh', ['-c', 'command -v node || command -v npm'], { env, encoding: 'utf8' })
  t.ok(looked.status !== 0 && looked.stdout === '', 'no node or npm to be found')
  const exe = async (args: string[], extra: Record<string, string> = {}): Promise<{ code: number, stdout: string, stderr: string }> =>
    await run(file, args, { cwd: dir, env: { ...env, ...extra } }).then(
      ({ stdout, stderr }) => ({ code: 0, stdout, stderr }),
      (err: { code: number, stdout: string, stderr: string }) => ({ code: err.code, stdout: err.stdout, stderr: err.stderr }))

  const pkg = JSON.parse(readFileSync(fromRoot('package.json'), 'utf8')) as { version: string }
  const commit = spawnSync('git', ['rev-parse', 'HEAD'], { cwd: fromRoot(), encoding: 'utf8' }).stdout.trim()
  const version = await exe(['--version'])
  t.match(version.stdout.trim(), new RegExp(`^${pkg.version.replace(/\./g, '\\.')} \\(commit ${commit}(-dirty)?\\)$`), `--version: the version and the commit (${version.stdout.trim()})`)

  const init = await exe(['init', 'gw'])
  t.equal(init.code, 0, `init: ${init.stderr}`)
  const key = /API key \([^)]*\): (\S+)/.exec(init.stdout)?.[1] ?? ''
  const adminToken = /admin token:\s+(\S+)/.exec(init.stdout)?.[1] ?? ''
  t.match(key, /^mg-/, 'init prints a key')
  t.same(readdirSync(join(dir, 'gw')).sort(), ['data', 'gateway.yaml'])
  const config = join(dir, 'gw', 'gateway.yaml')
  // a plugin module of the user's, which imports the plugin API as outside plugins do (modelgate/plugin)
  copyFileSync(fromRoot('examples', 'plugins', 'call-tagger', 'index.mjs'), join(dir, 'gw', 'tagger.mjs'))
  writeFileSync(config, readFileSync(config, 'utf8').replace(/^ {2}- name: auth\n/m, '  - name: auth\n  - name: call-tagger\n    module: ./tagger.mjs\n    options: { tag: sea }\n'))
  const check = await exe(['config', 'check', config])
  t.equal(check.code, 0, `config check: ${check.stdout}${check.stderr}`)

  const cache = join(home, '.cache', 'modelgate')
  const [unpacked] = readdirSync(cache)
  t.equal(statSync(cache).mode & 0o777, 0o700, 'the cache folder is private')
  t.same(readdirSync(join(cache, unpacked as string)).sort(), ['better-sqlite3.cjs', 'better_sqlite3.node'], 'the SQLite driver, unpacked')

  const child = spawn(file, ['serve', '--config', config, '--workers', '2'], { cwd: dir, env: { ...env, PORT: '0', LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })
  let logged = ''
  child.stdout.on('data', (d: Buffer) => { logged += String(d) })
  child.stderr.on('data', (d: Buffer) => { logged += String(d) })
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  const port = await servedPort(child, 'the executable file\'s serve')
  t.match(logged, /\(2 workers\)/)
  const base = `http://127.0.0.1:${port}`

  const chat = async (secret: string, content: string): Promise<Response> => await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${secret}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'demo/echo-1', messages: [{ role: 'user', content }] })
  })
  const answer = await chat(key, 'Hello from one file')
  t.equal(answer.status, 200, 'the demo catalog answers a chat call')
  t.equal(answer.headers.get('x-call-tag'), 'sea', 'through the user\'s plugin')
  t.match(((await answer.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]?.message.content, /Hello from one file/)

  for (const page of ['/console/', '/console/admin/']) {
    const res = await fetch(`${base}${page}`)
    t.equal(res.status, 200, `${page}: the page`)
    t.match(res.headers.get('content-type'), /^text\/html/)
    const html = await res.text()
    const assets = [...html.matchAll(/(?:src|href)="(\/console\/[^"]+\.(?:js|css))"/g)].map((m) => m[1] as string)
    t.equal(assets.length, 2, `${page}: its script and stylesheet`)
    for (const asset of assets) t.equal((await fetch(`${base}${asset}`)).status, 200, asset)
  }

  const created = await exe(['keys', 'create', '--org', 'demo', '--project', 'playground', '--config', config])
  const second = /(mg-\S+)/.exec(created.stdout)?.[1] ?? ''
  t.equal(created.code, 0, `keys create: ${created.stderr}`)
  t.equal((await chat(second, 'and with a new key')).status, 200, 'a key made by keys create is served')
  const reload = await exe(['reload', '--config', config])
  t.match(reload.stdout, /reloaded \(2 workers\)/, `reload: ${reload.stdout}${reload.stderr}`)
  const admin = await fetch(`${base}/admin/v1/orgs`, { headers: { authorization: `Bearer ${adminToken}` } })
  t.equal(admin.status, 200, 'the admin API, with the token init made')

  for (const args of [['orgs', 'list'], ['keys', 'list'], ['models', 'check'], ['mcp', 'list']]) {
    const res = await exe([...args, '--config', config])
    t.equal(res.code, 0, `${args.join(' ')}: ${res.stderr}`)
  }

  child.kill('SIGTERM')
  t.equal(await exited, 0, 'stops cleanly')
  t.notMatch(logged, /"level":(50|60)/, 'no error logged (the checkpointer\'s thread loaded the driver)')
  t.match((await exe(['usage', '--config', config])).stdout, /total: 2 calls/, 'both calls recorded')

  // the unpacked driver is checked at each start: a changed copy is written again
  const addon = join(cache, unpacked as string, 'better_sqlite3.node')
  const good = sha256(addon)
  chmodSync(addon, 0o700)
  writeFileSync(addon, 'not a library')
  t.equal((await exe(['keys', 'list', '--config', config])).code, 0, 'a command after the copy was changed')
  t.equal(sha256(addon), good, 'the copy is the shipped addon again')
  // a cache folder others can write into is refused, naming it
  chmodSync(cache, 0o777)
  const refused = await exe(['keys', 'list', '--config', config])
  t.not(refused.code, 0)
  t.match(refused.stderr, /is not a private folder of this user/)
  chmodSync(cache, 0o700)
  // a home where no folder can be made: a private folder in the temporary folder
  const tmp = join(dir, 'tmp')
  mkdirSync(tmp)
  writeFileSync(join(dir, 'not-a-folder'), '')
  t.equal((await exe(['keys', 'list', '--config', config], { HOME: join(dir, 'not-a-folder'), TMPDIR: tmp })).code, 0, 'a command with no usable home')
  t.same(readdirSync(tmp), [`modelgate-${process.getuid?.() ?? 'user'}`])
})

t.test('two builds of one tree: the same bytes', async (t) => {
  const again = await release(tempDir('release-b'))
  t.equal(readFileSync(join(again, 'SHA256SUMS'), 'utf8'), readFileSync(join(built, 'SHA256SUMS'), 'utf8'), 'the same SHA256SUMS')
})
