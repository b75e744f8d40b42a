import t from 'tap'
import { execFile, spawn } from 'node:child_process'
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { fromRoot } from '../paths.js'
import { childEnv } from './child-env.js'
import { KEY_A } from './helper.js'
import { tempDir } from './temp-dir.js'

// The example plugin as a contributor ships one: a package of its own that imports the plugin API
// from `modelgate/plugin`. Both modelgate and the plugin are packed with `npm pack` and unpacked
// into a project's node_modules, as `npm install` of the two tarballs lays them out (modelgate's
// own dependencies come from this project's install: fetching them would need the registry). The
// config names the plugin by its package name; the gateway serves it from there.

const run = promisify(execFile)

async function pack (dir: string, into: string): Promise<string> {
  // --ignore-scripts: `npm test` built dist/ already, and a rebuild now would pull it from under the other tests
  const { stdout } = await run('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', into], { cwd: dir, env: childEnv() })
  const [info] = JSON.parse(stdout) as Array<{ filename: string }>
  return join(into, info!.filename)
}

async function unpack (tarball: string, dir: string): Promise<void> {
  mkdirSync(dir, { recursive: true })
  await run('tar', ['xzf', tarball, '--strip-components=1', '-C', dir])
}

t.test('the example plugin, packed and installed beside a packed modelgate, is loaded by its package name and works', async (t) => {
  const work = tempDir('plugin-pkg')
  const project = join(work, 'project')
  const modules = join(project, 'node_modules')
  await unpack(await pack(fromRoot(), work), join(modules, 'modelgate'))
  symlinkSync(fromRoot('node_modules'), join(modules, 'modelgate', 'node_modules'))
  await unpack(await pack(fromRoot('examples', 'plugins', 'call-tagger'), work), join(modules, 'modelgate-call-tagger'))

  const manifest = JSON.parse(readFileSync(join(modules, 'modelgate', 'package.json'), 'utf8')) as { bin: { modelgate: string }, exports: Record<string, unknown> }
  t.ok(manifest.exports['./plugin'] !== undefined && manifest.exports['./testing'] !== undefined, 'modelgate exports its plugin API and test helper')
  const tagger = readFileSync(join(modules, 'modelgate-call-tagger', 'index.mjs'), 'utf8')
  t.match(tagger, /from 'modelgate\/plugin'/, 'the plugin imports the API as an outside package')

  const config = join(project, 'gateway.json')
  writeFileSync(config, JSON.stringify({
    server: { port: 0 },
    store: { sqlite: ':memory:' },
    plugins: [{ name: 'auth' }, { name: 'call-tagger', module: 'modelgate-call-tagger', options: { tag: 'green' } }],
    providers: [{ id: 'demo', protocol: 'openai', builtin: 'demo' }],
    models: [{ id: 'demo/echo', name: 'Echo', provider: 'demo', context_length: 8192 }],
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
  }))
  const cli = join(modules, 'modelgate', manifest.bin.modelgate)
  const checked = await run(process.execPath, [cli, 'config', 'check', config], { env: childEnv() })
  t.match(checked.stdout, /gateway\.json: ok/, 'config check loads the plugin from its package')

  const child = spawn(process.execPath, [cli, 'serve', '--config', config, '--workers', '1'], { cwd: work, env: childEnv({ LOG_LEVEL: 'warn' }), stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })
  let err = ''
  child.stderr.on('data', (d: Buffer) => { err += String(d) })
  const port = await new Promise<number>((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (d: Buffer) => {
      out += String(d)
      const m = /listening on http:\/\/[^/]+:(\d+)/.exec(out)
      if (m !== null) resolve(Number(m[1]))
    })
    child.once('exit', (code) => { reject(new Error(`modelgate serve exited with ${String(code)}: ${err}`)) })
  })
  const base = `http://127.0.0.1:${port}`
  const headers = { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }
  const res = await fetch(`${base}/v1/chat/completions`, { method: 'POST', headers, body: JSON.stringify({ model: 'demo/echo', messages: [{ role: 'user', content: 'hi' }] }) })
  t.equal(res.status, 200)
  t.equal(res.headers.get('x-call-tag'), 'green', 'the plugin tagged the answer')
  await res.text()
  const tags = await fetch(`${base}/v1/call-tags`, { headers })
  t.same(await tags.json(), { org: 'acme', tag: 'green', calls: { 'demo/echo': 1 } }, 'its own route, under /v1, counted the call from its outcome')
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  child.kill('SIGTERM')
  t.equal(await exited, 0)
})
