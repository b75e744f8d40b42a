import t from 'tap'
import { execFile, spawn } from 'node:child_process'
import { builtinModules } from 'node:module'
import { existsSync, mkdirSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { fromRoot } from '../paths.js'
import { childEnv } from './child-env.js'
import { tempDir } from './temp-dir.js'
import { servedPort } from './served-port.js'

// The package as users get it: `npm pack` makes a tarball of what a `modelgate` command needs
// and nothing else; laid out as `npm install -g` lays it out (the package under
// <prefix>/lib/node_modules, the command in <prefix>/bin), it inits a folder and serves it from
// there. Its dependencies come from this project's own install: fetching them would need the
// registry, and no test uses the network. That every module the built code imports is a
// dependency (not a devDependency) is checked on its own.

const run = promisify(execFile)

t.test('npm pack, then init and serve from an empty folder with the packed command', async (t) => {
  const work = tempDir('pack')
  // --ignore-scripts: `npm test` built dist/ already (prepack would build it again, and have tsc write the API's declarations)
  const { stdout: packed } = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], { cwd: fromRoot(), env: childEnv() })
  const [info] = JSON.parse(packed) as Array<{ filename: string, files: Array<{ path: string }> }>
  const files = info!.files.map((f) => f.path)
  for (const needed of ['dist/cli/index.js', 'dist/plugins/api/index.js', 'dist/engine/host/testing.js', 'dist/console/index.html', 'config/gateway.yaml', 'engine/store/sqlite/migrations/001_tenants.sql', 'README.md', 'LICENSE', 'docs/plugins.md', 'examples/plugins/call-tagger/index.mjs', 'examples/plugins/call-tagger/package.json']) {
    t.ok(files.includes(needed), `the tarball has ${needed}`)
  }
  t.same(files.filter((f) => /^(test|bench|\.ci)\//.test(f) || (f.endsWith('.ts') && !f.endsWith('.d.ts'))), [], 'no tests, benchmarks, CI script or TypeScript sources (the declarations npm pack adds are no source)')

  const prefix = join(work, 'prefix')
  const pkg = join(prefix, 'lib', 'node_modules', 'modelgate')
  mkdirSync(pkg, { recursive: true })
  mkdirSync(join(prefix, 'bin'))
  await run('tar', ['xzf', join(work, info!.filename), '--strip-components=1', '-C', pkg])
  symlinkSync(fromRoot('node_modules'), join(pkg, 'node_modules'))
  const bin = join(prefix, 'bin', 'modelgate')
  symlinkSync(join('..', 'lib', 'node_modules', 'modelgate', 'dist', 'cli', 'index.js'), bin)

  const manifest = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8')) as { scripts?: Record<string, string> }
  t.same(Object.keys(manifest.scripts ?? {}).filter((s) => ['preinstall', 'install', 'postinstall', 'prepare'].includes(s)), [], 'no install-time script: npm install -g of the tarball has nothing to allow but the SQLite driver\'s build')
  const version = JSON.parse(readFileSync(fromRoot('package.json'), 'utf8')).version as string
  t.equal((await run(bin, ['--version'], { env: childEnv() })).stdout.trim(), version, 'modelgate --version')
  t.match((await run(bin, ['serve', '--help'], { env: childEnv() })).stdout, /modelgate serve \[--config FILE\]/, 'help on a command')

  const folder = join(work, 'my-gateway')
  mkdirSync(folder)
  const init = await run(bin, ['init'], { cwd: folder, env: childEnv() })
  const key = /API key \([^)]*\): (\S+)/.exec(init.stdout)?.[1]
  t.ok(key?.startsWith('mg-'), 'init prints a new API key')
  t.notMatch(init.stdout, /mg-demo-local-only/, 'not the public demo key')
  t.same(readdirSync(folder).sort(), ['data', 'gateway.yaml'])
  const again = await run(bin, ['init'], { cwd: folder, env: childEnv() }).then(() => 0, (err: { code: number }) => err.code)
  t.equal(again, 2, 'a second init refuses to overwrite')

  const child = spawn(bin, ['serve', '--workers', '1'], { cwd: folder, env: childEnv({ PORT: '0', LOG_LEVEL: 'warn' }), stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })
  const port = await servedPort(child, 'modelgate serve')
  const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key ?? ''}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'demo/echo-1', messages: [{ role: 'user', content: 'Hello from the packed command' }] })
  })
  t.equal(res.status, 200, 'the demo chat call answers')
  t.match(((await res.json()) as { choices: Array<{ message: { content: string } }> }).choices[0]?.message.content, /Hello from the packed command/)
  t.equal((await fetch(`http://127.0.0.1:${port}/console/`)).status, 200, 'the console is in the package')
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  child.kill('SIGTERM')
  t.equal(await exited, 0, 'stops cleanly')
})

t.test('a build never pulls dist/ from under a process of the same checkout: while one runs, the command loads and checks a config', async (t) => {
  // a file no build made (left by an older one): gone after this build
  const planted = fromRoot('dist', 'chunks', 'planted-by-a-test.js')
  writeFileSync(planted, '')
  const build = spawn(process.execPath, [fromRoot('build.mjs'), '--force'], { cwd: fromRoot(), env: childEnv(), stdio: ['ignore', 'ignore', 'pipe'] })
  let building = true
  let errors = ''
  build.stderr.on('data', (d: Buffer) => { errors += String(d) })
  const built = new Promise<number | null>((resolve) => build.once('exit', (code) => { building = false; resolve(code) }))
  const failures: string[] = []
  let during = 0
  // eslint-disable-next-line no-unmodified-loop-condition -- set when the build exits
  while (building) {
    for (const args of [['--version'], ['config', 'check', fromRoot('config', 'gateway.yaml')]]) {
      const failed = await run(process.execPath, [fromRoot('dist', 'cli', 'index.js'), ...args], { env: childEnv() }).then(() => null, (err: { stderr?: string }) => `${args.join(' ')}: ${err.stderr ?? String(err)}`)
      if (failed !== null) failures.push(failed)
      if (building) during++
    }
  }
  t.equal(await built, 0, `the build succeeded ${errors}`)
  t.ok(during > 0, `commands ran to their end while it built (${during})`)
  t.same(failures, [], 'every one found every file it loads')
  t.notOk(existsSync(planted), 'a file no build made is removed')
  t.notOk(existsSync(fromRoot(`.dist-staging-${build.pid as number}`)), 'its staging folder is gone')
})

t.test('every module the built code imports is a dependency or a Node built-in', async (t) => {
  const pkg = JSON.parse(readFileSync(fromRoot('package.json'), 'utf8')) as { dependencies: Record<string, string> }
  // pg's optional native driver, which pg requires only inside a try
  const deps = new Set([...Object.keys(pkg.dependencies), 'pg-native'])
  const builtins = new Set(builtinModules)
  const missing = new Set<string>()
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name)
      if (entry.isDirectory()) { if (entry.name !== 'console') walk(path); continue }
      if (!entry.name.endsWith('.js')) continue
      const code = readFileSync(path, 'utf8')
      // ES imports, and the requires of bundled CommonJS code (what build.mjs leaves out of the bundle)
      for (const m of code.matchAll(/(?:^|[\s;])(?:import|export)\b[^'"]*?from\s*['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)|__require\(\s*['"]([^'"]+)['"]\s*\)/gm)) {
        // an example in a bundled library's doc comment (` * import addFormats from 'ajv-formats'`) is no import
        const line = code.slice(code.lastIndexOf('\n', m.index) + 1, m.index + m[0].length).trimStart()
        if (line.startsWith('*') || line.startsWith('//')) continue
        const spec = m[1] ?? m[2] ?? m[3] ?? ''
        if (spec.startsWith('.') || spec.startsWith('node:')) continue
        const name = spec.startsWith('@') ? spec.split('/').slice(0, 2).join('/') : spec.split('/')[0] ?? spec
        if (!deps.has(name) && !builtins.has(name)) missing.add(`${name} (${path.slice(fromRoot().length + 1)})`)
      }
    }
  }
  walk(fromRoot('dist'))
  t.same([...missing], [], 'imported but not a dependency')
  // modules loaded by name at run time rather than imported
  t.ok(deps.has('pino-pretty'), 'pino-pretty, the --pretty log transport')
})

t.test('an install is quiet: every package runs on the Node the package promises, every install script is decided', async (t) => {
  const { default: semver } = await import('semver')
  const pkg = JSON.parse(readFileSync(fromRoot('package.json'), 'utf8')) as { engines: { node: string } }
  const promised = semver.minVersion(pkg.engines.node)?.version ?? ''
  t.equal(promised, '20.18.1', 'the Node version README.md names')
  const lock = JSON.parse(readFileSync(fromRoot('package-lock.json'), 'utf8')) as { packages: Record<string, { version?: string, dev?: boolean, engines?: { node?: string } }> }
  // what an installed modelgate pulls must run on the promised Node (npm warns EBADENGINE otherwise);
  // the test suite's own tools (tap's coverage, c8, and its yargs) need 20.19, which docs/testing.md says
  const refused = Object.entries(lock.packages)
    .filter(([path, p]) => path !== '' && typeof p.engines?.node === 'string' && !semver.satisfies(p.dev === true ? '20.19.0' : promised, p.engines.node))
    .map(([path, p]) => `${path.replace(/^.*node_modules\//, '')}@${p.version ?? ''} wants node ${p.engines?.node ?? ''}`)
  t.same(refused, [], 'no package wants a newer Node')
  const { stdout } = await run('npm', ['install-scripts', 'ls'], { cwd: fromRoot(), env: childEnv() })
  t.match(stdout, /No packages with unreviewed install scripts/, 'allowScripts covers every install script')
})
