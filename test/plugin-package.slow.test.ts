import t from 'tap'
import { execFile, spawn } from 'node:child_process'
import { existsSync, mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import YAML from 'yaml'
import { fromRoot } from '../paths.js'
import { childEnv } from './child-env.js'
import { tempDir } from './temp-dir.js'
import { servedPort } from './served-port.js'

// docs/plugins.md's steps, "A plugin package, from npm pack to a serving gateway": the example
// plugin packed with `npm pack`, installed with `npm install` of its tarball beside the config
// that `modelgate init` wrote for an installed modelgate, named in that config, checked and served.
// modelgate is installed as `npm install -g` lays it out (the package under <prefix>/lib/node_modules,
// the command in <prefix>/bin), with its dependencies from this project's install: fetching them
// would need the registry. The plugin's `npm install` runs with --offline: it must need nothing
// from the registry (modelgate is only its optional peer), and no `modelgate` is installed beside
// it: the gateway answers its `modelgate/plugin` import with its own package.

const run = promisify(execFile)

async function pack (dir: string, into: string, args: string[] = []): Promise<string> {
  const { stdout } = await run('npm', ['pack', ...args, '--json', '--pack-destination', into], { cwd: dir, env: childEnv() })
  const [info] = JSON.parse(stdout) as Array<{ filename: string }>
  return join(into, info!.filename)
}

t.test('the example plugin, packed, npm-installed beside an init\'d config of an installed modelgate, is checked and served', async (t) => {
  const work = tempDir('plugin-pkg')

  // modelgate, installed (--ignore-scripts: `npm test` built dist/ already, and a rebuild now
  // would pull it from under the other tests)
  const prefix = join(work, 'prefix')
  const pkg = join(prefix, 'lib', 'node_modules', 'modelgate')
  mkdirSync(pkg, { recursive: true })
  mkdirSync(join(prefix, 'bin'))
  await run('tar', ['xzf', await pack(fromRoot(), work, ['--ignore-scripts']), '--strip-components=1', '-C', pkg])
  symlinkSync(fromRoot('node_modules'), join(pkg, 'node_modules'))
  const modelgate = join(prefix, 'bin', 'modelgate')
  symlinkSync(join('..', 'lib', 'node_modules', 'modelgate', 'dist', 'cli', 'index.js'), modelgate)

  // the plugin's author: npm pack
  const tarball = await pack(fromRoot('examples', 'plugins', 'call-tagger'), work)
  const manifest = JSON.parse(readFileSync(fromRoot('examples', 'plugins', 'call-tagger', 'package.json'), 'utf8')) as { peerDependenciesMeta?: Record<string, { optional?: boolean }> }
  t.equal(manifest.peerDependenciesMeta?.modelgate?.optional, true, 'modelgate is an optional peer: it is not on the registry')

  // the operator: modelgate init, npm install of the plugin's tarball beside the config
  const gw = join(work, 'my-gateway')
  mkdirSync(gw)
  const init = await run(modelgate, ['init'], { cwd: gw, env: childEnv() })
  const key = /API key \([^)]*\): (\S+)/.exec(init.stdout)?.[1] ?? ''
  t.match(key, /^mg-/)
  const installed = await run('npm', ['install', '--offline', '--no-audit', '--no-fund', tarball], { cwd: gw, env: childEnv() })
  t.notMatch(installed.stderr, /ERR!|E404|peer/i, 'npm install: no error, no peer dependency complaint')
  t.ok(existsSync(join(gw, 'node_modules', 'modelgate-call-tagger', 'index.mjs')), 'installed beside the config')
  t.notOk(existsSync(join(gw, 'node_modules', 'modelgate')), 'with no modelgate of its own')
  t.match(readFileSync(join(gw, 'node_modules', 'modelgate-call-tagger', 'index.mjs'), 'utf8'), /from 'modelgate\/plugin'/, 'which it imports')

  // in gateway.yaml, after `- name: auth`
  const file = join(gw, 'gateway.yaml')
  const doc = YAML.parseDocument(readFileSync(file, 'utf8'))
  const chain = doc.get('plugins') as YAML.YAMLSeq
  const auth = chain.items.findIndex((p) => (p as YAML.YAMLMap).get('name') === 'auth')
  t.ok(auth >= 0, 'init\'s chain has auth')
  chain.items.splice(auth + 1, 0, doc.createNode({ name: 'call-tagger', module: 'modelgate-call-tagger', options: { tag: 'blue' } }))
  writeFileSync(file, doc.toString({ lineWidth: 0 }))

  const checked = await run(modelgate, ['config', 'check'], { cwd: gw, env: childEnv() })
  t.equal(checked.stdout, 'gateway.yaml: ok\n', 'modelgate config check')
  t.match((await run(modelgate, ['plugins'], { cwd: gw, env: childEnv() })).stdout, /\d+\. call-tagger \(from file:.*modelgate-call-tagger\/index\.mjs\)\n\s+tag: string \(required\) = "blue"/, 'modelgate plugins lists it')

  const child = spawn(modelgate, ['serve', '--workers', '1'], { cwd: gw, env: childEnv({ PORT: '0', LOG_LEVEL: 'warn' }), stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })
  const port = await servedPort(child, 'modelgate serve')
  const base = `http://127.0.0.1:${port}`
  const headers = { authorization: `Bearer ${key}`, 'content-type': 'application/json' }
  const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ model: 'demo/echo-1', messages: [{ role: 'user', content: 'hi' }] }) })
  t.equal(res.status, 200)
  t.equal(res.headers.get('x-call-tag'), 'blue', 'the plugin tagged the answer')
  await res.text()
  const tags = await fetch(`${base}/v1/call-tags`, { headers })
  t.same(await tags.json(), { org: 'demo', tag: 'blue', calls: { 'demo/echo-1': 1 } }, 'its own route, under /v1, counted the call from its outcome')
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  child.kill('SIGTERM')
  t.equal(await exited, 0)
})

t.test('docs/plugins.md\'s test of the example plugin runs as written, with the dev dependencies it names', async (t) => {
  const doc = readFileSync(fromRoot('docs', 'plugins.md'), 'utf8')
  const section = doc.slice(doc.indexOf('## Testing a plugin alone'))
  t.match(section, /npm install --save-dev \/path\/to\/modelgate-0\.1\.0\.tgz tap fastify@5/, 'it names modelgate, tap and fastify as dev dependencies')
  const code = /saved as `test\/tagger\.test\.mjs`[\s\S]*?```js\n([\s\S]*?)```/.exec(section)?.[1]
  if (code === undefined) { t.fail('no test in the section'); return }
  // the plugin's folder with those three installed (from this checkout: modelgate is the checkout itself)
  const dir = join(tempDir('plugin-test'), 'call-tagger')
  mkdirSync(join(dir, 'test'), { recursive: true })
  mkdirSync(join(dir, 'node_modules'))
  for (const f of ['index.mjs', 'package.json']) writeFileSync(join(dir, f), readFileSync(fromRoot('examples', 'plugins', 'call-tagger', f)))
  symlinkSync(fromRoot(), join(dir, 'node_modules', 'modelgate'))
  for (const dep of ['tap', 'fastify']) symlinkSync(fromRoot('node_modules', dep), join(dir, 'node_modules', dep))
  writeFileSync(join(dir, 'test', 'tagger.test.mjs'), code)
  // run by Node alone (a tap test file is a program), outside this runner's own environment
  const env = Object.fromEntries(Object.entries(childEnv()).filter(([k]) => !k.startsWith('TAP')))
  const { stdout } = await run(process.execPath, [join('test', 'tagger.test.mjs')], { cwd: dir, env })
  t.match(stdout, /^ok 1 - tags the answer/m, 'its test passes')
  t.notMatch(stdout, /^not ok/m)
})
