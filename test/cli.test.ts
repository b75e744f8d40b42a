import t from 'tap'
import { execFile, spawn } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { createServer } from 'node:net'
import { fromRoot } from '../paths.js'
import { childEnv, spawnGateway } from './helper.js'
import { tempDir } from './temp-dir.js'

const run = promisify(execFile)
// the built CLI (npm test builds first): a child process that compiled the sources would take seconds
const CLI = fromRoot('dist', 'cli', 'index.js')

async function cli (args: string[], env: Record<string, string> = {}, cwd = fromRoot()): Promise<{ code: number, stdout: string, stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { env: childEnv(env), cwd })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number, stdout: string, stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

function tempConfig (): { file: string, db: string } {
  const dir = tempDir('cli')
  const db = join(dir, 'gw.db')
  const file = join(dir, 'gw.yaml')
  writeFileSync(file, `store: { sqlite: ${db} }
tenants:
  - org: acme
    balance_usd: 1
    projects:
      - id: web
`)
  return { file, db }
}

t.test('config check: ok, and every problem with its path and a non-zero exit', async (t) => {
  const good = await cli(['config', 'check', fromRoot('config', 'gateway.yaml')])
  t.equal(good.code, 0, good.stderr)
  t.match(good.stdout, /ok/)
  const dir = tempDir('cli')
  const bad = join(dir, 'bad.yaml')
  writeFileSync(bad, 'server: { port: -1, nope: 1 }\nmodels: [{ id: m }]\n')
  const res = await cli(['config', 'check', bad])
  t.equal(res.code, 2)
  t.match(res.stderr, /server\.port: must be >= 0/)
  t.match(res.stderr, /server\.nope: is not a known key/)
  t.match(res.stderr, /models\[0\]\.name: is required/)
})

t.test('keys create | list | revoke', async (t) => {
  const { file } = tempConfig()
  const created = await cli(['keys', 'create', '--org', 'acme', '--project', 'web', '--models', 'demo/*,openai/*', '--name', 'ci', '--config', file])
  t.equal(created.code, 0, created.stderr)
  const key = created.stdout.trim()
  t.match(key, /^mg-/)
  const id = /created (key_[0-9a-f]+)/.exec(created.stderr)?.[1]
  t.ok(id)
  const list = await cli(['keys', 'list', '--json'], { MODELGATE_CONFIG: file })
  const keys = JSON.parse(list.stdout)
  t.equal(keys.length, 1)
  t.same(keys[0].models, ['demo/*', 'openai/*'])
  t.notOk(list.stdout.includes(key), 'the key is never listed')
  const revoked = await cli(['keys', 'revoke', id!, '--config', file])
  t.equal(revoked.code, 0)
  const after = JSON.parse((await cli(['keys', 'list', '--json', '--config', file])).stdout)
  t.equal(after[0].revoked, true)
  const unknownOrg = await cli(['keys', 'create', '--org', 'ghost', '--project', 'web', '--config', file])
  t.equal(unknownOrg.code, 2)
  t.match(unknownOrg.stderr, /no organization ghost/)
})

t.test('credits add', async (t) => {
  const { file } = tempConfig()
  const res = await cli(['credits', 'add', '--org', 'acme', '--amount-usd', '2.5', '--config', file])
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, /balance 3\.5 USD/)
  const bad = await cli(['credits', 'add', '--org', 'acme', '--amount-usd', 'lots', '--config', file])
  t.equal(bad.code, 2)
})

t.test('usage: records and totals from the same store', async (t) => {
  const { file, db } = tempConfig()
  await cli(['keys', 'list', '--config', file]) // creates the database and tenants
  const { default: Database } = await import('better-sqlite3')
  const raw = new Database(db)
  // the columns named: later migrations add columns with defaults
  const insert = raw.prepare(`INSERT INTO usage_records (id, created_at, trace_id, org_id, project_id, key_id, endpoint, model, provider, stream, status,
    prompt_tokens, cached_input_tokens, completion_tokens, total_tokens, cost_nano, latency_ms, ttft_ms)
    VALUES (?, ?, ?, 'acme', 'web', 'k', 'chat.completions', 'demo/gpt', 'demo', 0, 'ok', ?, ?, ?, ?, ?, 5, 1)`)
  insert.run('u1', Date.parse('2026-01-01T00:00:00Z'), 't1', 100, 20, 10, 110, 1_500_000)
  insert.run('u2', Date.parse('2026-02-01T00:00:00Z'), 't2', 50, 0, 5, 55, 2)
  // a call that failed over to a second provider and had a parameter dropped
  raw.prepare(`UPDATE usage_records SET attempts = ?, dropped_params = ? WHERE id = 'u2'`).run(JSON.stringify([
    { provider: 'dead', upstream_model: 'm', outcome: 'network_error', status: null, error: 'ECONNREFUSED', latency_ms: 1 },
    { provider: 'demo', upstream_model: 'm', outcome: 'ok', status: 200, error: null, latency_ms: 4 }
  ]), JSON.stringify(['seed']))
  raw.close()
  const res = await cli(['usage', '--org', 'acme', '--json', '--config', file])
  t.equal(res.code, 0, res.stderr)
  const out = JSON.parse(res.stdout)
  t.same(out.totals, { calls: 2, prompt_tokens: 150, cached_input_tokens: 20, completion_tokens: 15, total_tokens: 165, cost_usd: '0.001500002' })
  t.equal(out.data[0].id, 'u2', 'newest first')
  t.same(out.data[0].attempts.map((a: { provider: string }) => a.provider), ['dead', 'demo'], 'with its attempts')
  t.same([out.data[0].dropped_params, out.data[1].attempts, out.data[1].dropped_params], [['seed'], [], []])
  const text = await cli(['usage', '--org', 'acme', '--config', file])
  t.match(text.stdout, /demo\/gpt  ok  in 50 \(cached 0\)  out 5  \$0\.000000002  tried dead, demo  dropped seed\n/)
  t.notMatch(text.stdout.split('\n')[1], /tried|dropped/, 'one attempt, nothing dropped: nothing more said')
  const since = await cli(['usage', '--since', '2026-01-15', '--config', file])
  t.match(since.stdout, /total: 1 calls/)
  t.equal((await cli(['usage', '--since', 'soon', '--config', file])).code, 2)
})

t.test('--version and --help load no store, no Fastify, no plugin: only the command line\'s own modules', async (t) => {
  const dir = tempDir('cli-modules')
  const log = join(dir, 'loaded.txt')
  // a module hook that writes down every module resolved, run on the sources (the bundle hides its parts)
  writeFileSync(join(dir, 'hooks.mjs'), `import { appendFileSync } from 'node:fs'
export async function resolve (spec, ctx, next) { const r = await next(spec, ctx); appendFileSync(${JSON.stringify(log)}, r.url + '\\n'); return r }
`)
  writeFileSync(join(dir, 'register.mjs'), `import { register } from 'node:module'\nregister('./hooks.mjs', import.meta.url)\n`)
  const own = new Set(['cli/', 'paths.ts', 'plugins/kernel/money.ts', 'routes/admin/usage-record.ts'])
  for (const args of [['--version'], ['--help'], ['keys', '--help']]) {
    writeFileSync(log, '')
    const { stdout } = await run(process.execPath, ['--import', 'tsx', '--import', join(dir, 'register.mjs'), fromRoot('cli', 'index.ts'), ...args], { env: childEnv(), cwd: fromRoot() })
    t.match(stdout, args[0] === '--version' ? /^\d+\.\d+\.\d+/ : /modelgate keys create/, args.join(' '))
    const loaded = (await import('node:fs')).readFileSync(log, 'utf8').split('\n').filter((u) => u.startsWith('file:'))
    const root = new URL(`file://${fromRoot()}/`).href
    const project = loaded.filter((u) => u.startsWith(root) && !u.includes('/node_modules/')).map((u) => u.slice(root.length))
    t.ok(project.some((p) => p === 'cli/index.ts'), 'the hook saw the command load')
    t.same(project.filter((p) => ![...own].some((o) => p.startsWith(o))), [], `${args.join(' ')}: no other module of the project`)
    t.same(loaded.filter((u) => u.includes('/node_modules/') && !u.includes('/node_modules/tsx/')), [], `${args.join(' ')}: no dependency`)
  }
})

t.test('unknown commands print the usage', async (t) => {
  const res = await cli(['frobnicate'])
  t.equal(res.code, 2)
  t.match(res.stderr, /modelgate keys create/)
})

t.test('serve: PORT over the config\'s port, --port over PORT; --host', async (t) => {
  // a port taken on every address: a gateway that tried to listen on it would exit at once
  const taken = createServer()
  await new Promise<void>((resolve) => taken.listen(0, '0.0.0.0', resolve))
  t.teardown(() => { taken.close() })
  const busy = (taken.address() as { port: number }).port
  const a = await spawnGateway(t, { server: { port: busy } }, ['--workers', '1', '--host', '127.0.0.2'], { PORT: '0' })
  t.not(a.port, busy, 'PORT')
  t.equal((await fetch(`http://127.0.0.2:${a.port}/`)).status, 200, 'on the --host address')
  await t.rejects(fetch(`http://127.0.0.1:${a.port}/`), 'and only there')
  a.kill()
  t.equal(await a.exited, 0)
  const b = await spawnGateway(t, {}, ['--workers', '1', '--port', '0'], { PORT: String(busy) })
  t.not(b.port, busy, '--port wins over PORT')
  b.kill()
  t.equal(await b.exited, 0)
})

t.test('serve: a port that is not one is a usage error', async (t) => {
  for (const bad of ['http', '70000', '-1']) {
    const res = await cli(['serve', '--port', bad])
    t.equal(res.code, 2, bad)
    t.match(res.stderr, /--port/, 'named in the message')
  }
  const res = await cli(['serve'], { PORT: 'eighty' })
  t.equal(res.code, 2, 'from PORT as well')
})

t.test('init DIR, then serve --config DIR/gateway.yaml from another folder: the store is the one init made', async (t) => {
  const work = tempDir('cli-init')
  const dir = join(work, 'gw')
  const elsewhere = join(work, 'elsewhere')
  mkdirSync(elsewhere)
  const init = await cli(['init', dir], {}, work)
  t.equal(init.code, 0, init.stderr)
  const key = /API key \([^)]*\): (\S+)/.exec(init.stdout)?.[1] ?? ''
  t.match(key, /^mg-/, 'init prints a key')
  t.ok(existsSync(join(dir, 'data', 'modelgate.db')), 'its store is in DIR/data')

  // a relative --config, from a folder that is not the config's
  const child = spawn(process.execPath, [CLI, 'serve', '--config', join('..', 'gw', 'gateway.yaml'), '--workers', '1'], {
    cwd: elsewhere, env: childEnv({ PORT: '0', LOG_LEVEL: 'warn' }), stdio: ['ignore', 'pipe', 'pipe']
  })
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  let err = ''
  child.stderr.on('data', (d: Buffer) => { err += String(d) })
  const port = await new Promise<number>((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (d: Buffer) => {
      out += String(d)
      const m = /listening on http:\/\/[^/]+:(\d+)/.exec(out)
      if (m !== null) resolve(Number(m[1]))
    })
    void exited.then((code) => { reject(new Error(`serve exited with ${String(code)}: ${err}`)) })
  })
  const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'demo/echo-1', messages: [{ role: 'user', content: 'Hello' }] })
  })
  t.equal(res.status, 200, 'the key init printed is known to the store it serves')
  await res.text()
  t.ok(existsSync(join(dir, 'data', 'modelgate.pid')), 'the pid file is beside that store')
  t.same(readdirSync(elsewhere), [], 'nothing is written in the folder it was started from')
  child.kill('SIGTERM')
  t.equal(await exited, 0)
})
