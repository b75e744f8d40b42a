import t, { type Test } from 'tap'
import { execFile, spawn } from 'node:child_process'
import { existsSync, mkdirSync, readdirSync, writeFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { createServer } from 'node:net'
import { fromRoot } from '../paths.js'
import { childEnv, spawnGateway } from './helper.js'
import { tempDir } from './temp-dir.js'
import { servedPort } from './served-port.js'

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

interface Served { pid: number, port: number, exited: Promise<number | null>, stop: () => void }

/**
 * `modelgate serve --config CONFIG --workers 1` in a child process (from `cwd`), once it prints
 * where it listens; stopped (SIGTERM, awaited) at the end of the test if it still runs.
 */
async function serveChild (t: Test, config: string, opts: { cwd?: string, env?: Record<string, string> } = {}): Promise<Served> {
  const child = spawn(process.execPath, [CLI, 'serve', '--config', config, '--workers', '1'], {
    cwd: opts.cwd, env: childEnv({ LOG_LEVEL: 'warn', ...opts.env }), stdio: ['ignore', 'pipe', 'pipe']
  })
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  t.teardown(async () => { if (child.exitCode === null) { child.kill('SIGTERM'); await exited } })
  const port = await servedPort(child, `serve --config ${config}`)
  return { pid: child.pid as number, port, exited, stop: () => { child.kill('SIGTERM') } }
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
  raw.prepare('UPDATE usage_records SET attempts = ?, dropped_params = ? WHERE id = \'u2\'').run(JSON.stringify([
    { provider: 'dead', upstream_model: 'm', outcome: 'network_error', status: null, error: 'ECONNREFUSED', latency_ms: 1 },
    { provider: 'demo', upstream_model: 'm', outcome: 'ok', status: 200, error: null, latency_ms: 4 }
  ]), JSON.stringify(['seed']))
  // u1 wrote to the prompt cache and billed past a long-context tier
  raw.prepare('UPDATE usage_records SET cache_write_tokens = 30, cost_detail = ? WHERE id = \'u1\'').run(JSON.stringify({ input: 1_000_000, cached_input: 100_000, cache_write: 150_000, output: 250_000, images: 0, per_request: 0, tool_call: 0, tier: 200000 }))
  raw.close()
  const res = await cli(['usage', '--org', 'acme', '--json', '--config', file])
  t.equal(res.code, 0, res.stderr)
  const out = JSON.parse(res.stdout)
  t.same(out.totals, { calls: 2, prompt_tokens: 150, cached_input_tokens: 20, completion_tokens: 15, total_tokens: 165, cost_usd: '0.001500002' })
  t.equal(out.data[0].id, 'u2', 'newest first')
  t.same(out.data[0].attempts.map((a: { provider: string }) => a.provider), ['dead', 'demo'], 'with its attempts')
  t.same([out.data[0].dropped_params, out.data[1].attempts, out.data[1].dropped_params], [['seed'], [], []])
  t.match(out.data[1], { cache_write_tokens: 30, images: 0, cost_detail: { input: '0.001', cached_input: '0.0001', cache_write: '0.00015', output: '0.00025', images: '0', per_request: '0', tool_call: '0', tier: 200000 } }, 'cache writes and the cost by part')
  t.match(out.data[0], { cache_write_tokens: 0, cost_detail: null }, 'a record with no parts kept')
  const text = await cli(['usage', '--org', 'acme', '--config', file])
  t.match(text.stdout, /demo\/gpt {2}ok {2}in 50 \(cached 0\) {2}out 5 {2}\$0\.000000002 {2}tried dead, demo {2}dropped seed\n/)
  t.notMatch(text.stdout.split('\n')[1], /tried|dropped/, 'one attempt, nothing dropped: nothing more said')
  t.match(text.stdout.split('\n')[1], /in 100 \(cached 20, cache writes 30\) {2}out 10 {2}\$0\.0015 \(tier above 200000 input tokens\)/)
  const since = await cli(['usage', '--since', '2026-01-15', '--config', file])
  t.match(since.stdout, /total: 1 calls/)
  t.equal((await cli(['usage', '--since', 'soon', '--config', file])).code, 2)
})

t.test('unknown commands print the usage', async (t) => {
  const res = await cli(['frobnicate'])
  t.equal(res.code, 2)
  t.match(res.stderr, /modelgate keys create/)
})

t.test('bare modelgate prints the help and serves nothing', async (t) => {
  const res = await cli([], { PORT: '0' })
  t.equal(res.code, 0)
  t.match(res.stdout, /modelgate serve \[--config FILE\]/)
  t.match(res.stdout, /modelgate init/)
  t.notMatch(res.stdout, /listening/)
})

t.test('each command takes its own flags: another is refused, naming the ones it takes', async (t) => {
  const { file } = tempConfig()
  const workers = await cli(['orgs', 'list', '--workers', '3', '--config', file])
  t.equal(workers.code, 2)
  t.match(workers.stderr, /--workers: not for orgs list, which takes --json, --config/)
  t.equal(workers.stdout, '', 'and nothing is listed')
  const unknown = await cli(['keys', 'list', '--frob', '--config', file])
  t.equal(unknown.code, 2)
  t.match(unknown.stderr, /unknown flag --frob: keys list takes --org, --project, --json, --config/)
  const sub = await cli(['keys', 'revoke', 'key_x', '--models', '*', '--config', file])
  t.match(sub.stderr, /--models: not for keys revoke, which takes --config/, 'by subcommand')
  t.match((await cli(['init', '--config', file])).stderr, /--config: not for init, which takes no flags/)
  const bare = await cli(['keys'])
  t.equal(bare.code, 2)
  t.match(bare.stderr, /^modelgate: keys needs one of: create, list, update, rotate, revoke\n/)
  t.match((await cli(['--config', file, 'serve'])).stderr, /the command comes first/)
})

t.test('errors say what to do, once: no usage text after a refusal, init named when there is no config', async (t) => {
  const { file } = tempConfig()
  const ghost = await cli(['keys', 'create', '--org', 'ghost', '--project', 'web', '--config', file])
  t.equal(ghost.code, 2)
  t.equal(ghost.stderr, 'modelgate: no organization ghost (see modelgate orgs list)\n', 'the refusal alone')
  const empty = tempDir('cli-empty')
  for (const args of [['orgs', 'list'], ['serve'], ['keys', 'list'], ['reload'], ['config', 'check']]) {
    const res = await cli(args, {}, empty)
    t.equal(res.code, 2, args.join(' '))
    t.match(res.stderr, /modelgate init/, `${args.join(' ')}: names modelgate init`)
    t.notMatch(res.stderr, /ENOENT|usage:/, `${args.join(' ')}: no ENOENT, no usage text`)
  }
  const named = await cli(['orgs', 'list', '--config', join(empty, 'nope.yaml')])
  t.match(named.stderr, /no config file at .*nope\.yaml \(--config\)/)
  const badValue = await cli(['usage', '--since', 'soon', '--config', file])
  t.match(badValue.stderr, /--since: not an ISO date: soon\n\nusage:\n {2}modelgate usage \[--org O\]/, 'a wrong flag value: the command\'s synopsis, not every command\'s')
  t.notMatch(badValue.stderr, /modelgate keys/)
})

t.test('config check: a value outside a plugin option\'s choices is one line listing them', async (t) => {
  const dir = tempDir('cli')
  const bad = join(dir, 'enum.yaml')
  writeFileSync(bad, 'store: { sqlite: ":memory:" }\nplugins:\n  - name: auth\n  - name: cache\n    options: { scope: team }\n')
  const res = await cli(['config', 'check', bad])
  t.equal(res.code, 2)
  t.same(res.stderr.split('\n').filter((l) => l.includes('scope')), ['  - plugins[1].options.scope: must be one of "key", "project", "org"'])
})

t.test('keys list: the state (a rotated key past its grace is expired), the expiry, and --json as the admin API shows a key', async (t) => {
  const { file } = tempConfig()
  const created = await cli(['keys', 'create', '--org', 'acme', '--project', 'web', '--name', 'old', '--expires', '2031-05-01T00:00:00Z', '--config', file])
  const id = /created (key_[0-9a-f]+)/.exec(created.stderr)?.[1] as string
  const rotated = await cli(['keys', 'rotate', id, '--config', file])
  t.equal(rotated.code, 0, rotated.stderr)
  const fresh = /created (key_[0-9a-f]+)/.exec(rotated.stderr)?.[1] as string
  const text = (await cli(['keys', 'list', '--config', file])).stdout.split('\n')
  t.match(text[0], /^ID\s+PROJECT\s+KEY\s+NAME\s+MODELS\s+STATE\s+CREATED\s+EXPIRES$/)
  t.match(text.find((l) => l.startsWith(id)), /\sold\s.*\sexpired\s+\S+\s+20\d\d-\d\d-\d\dT/, 'rotated with no grace: expired, and when')
  t.match(text.find((l) => l.startsWith(fresh)), /\sactive\s+\S+\s+2031-05-01T00:00:00\.000Z$/, 'its successor: active, with the expiry it took over')
  const json = JSON.parse((await cli(['keys', 'list', '--json', '--config', file])).stdout) as Array<Record<string, unknown>>
  const old = json.find((k) => k.id === id)
  t.match(old, { state: 'expired', revoked: false, created_at: /^20\d\d-\d\d-\d\dT.*Z$/, expires_at: /^20\d\d-\d\d-\d\dT.*Z$/ })
  t.match(json.find((k) => k.id === fresh), { state: 'active', expires_at: '2031-05-01T00:00:00.000Z', replaces: id })
  t.notOk(json.some((k) => typeof k.created_at === 'number'), 'no epoch milliseconds')
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

t.test('serve on a port another program holds: one line saying so and what to do, and an exit, with one worker or several', async (t) => {
  const taken = createServer()
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { taken.close() })
  const busy = (taken.address() as { port: number }).port
  const { file } = tempConfig()
  // one worker: the command's own error; several: each worker's, then the primary stops them all
  // instead of starting replacements that would meet the same port
  for (const [workers, status] of [['1', 2], ['2', 1]] as const) {
    const res = await cli(['serve', '--config', file, '--port', String(busy), '--workers', workers])
    t.equal(res.code, status, `--workers ${workers}: exit status`)
    t.match(res.stderr, new RegExp(`^modelgate: 127\\.0\\.0\\.1:${busy} is in use by another program \\(another gateway\\?\\): stop it, or serve on another port with --port N`, 'm'), 'says what is wrong and what to do')
    t.notMatch(res.stderr, /starting another|usage:|at .*\.js:\d+/, 'no replacement, no usage text, no stack')
    t.notMatch(res.stdout, /listening/)
    t.notOk(existsSync(join(dirname(file), 'modelgate.pid')), 'no pid file left behind')
  }
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
  const token = /admin token: +(\S+)/.exec(init.stdout)?.[1] ?? ''
  const written = (await import('node:fs')).readFileSync(join(dir, 'gateway.yaml'), 'utf8')
  t.ok(token.startsWith('mga-') && written.includes(`token: \${MODELGATE_ADMIN_TOKEN:-${token}} # made by modelgate init`), 'the admin token it printed is the config\'s')
  t.match(written, /^# modelgate: the config modelgate init wrote \(\d{4}-\d{2}-\d{2}\)/, 'dated')
  t.match(written, /^ {2}sqlite: \$\{MODELGATE_DB:-data\/modelgate\.db\} # relative to this file's folder: data\/ beside this file$/m, 'its store, said as it is for an installed gateway')
  t.notMatch(written, /checkout/, 'no word of a checkout')

  // a relative --config, from a folder that is not the config's
  const served = await serveChild(t, join('..', 'gw', 'gateway.yaml'), { cwd: elsewhere, env: { PORT: '0' } })
  const res = await fetch(`http://127.0.0.1:${served.port}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'demo/echo-1', messages: [{ role: 'user', content: 'Hello' }] })
  })
  t.equal(res.status, 200, 'the key init printed is known to the store it serves')
  await res.text()
  t.ok(existsSync(join(dir, 'data', 'modelgate.pid')), 'the pid file is beside that store')
  t.same(readdirSync(elsewhere), [], 'nothing is written in the folder it was started from')
  served.stop()
  t.equal(await served.exited, 0)
})

t.test('a second serve of a SQLite store already served is refused, naming the first; reload still finds the first', async (t) => {
  const first = await spawnGateway(t, { admin: { token: 'second-serve-admin-token-0123456789' } }, ['--workers', '1'])
  const second = await cli(['serve', '--config', first.configFile, '--workers', '1'], { PORT: '0' })
  t.equal(second.code, 2)
  t.match(second.stderr, new RegExp(`a gateway already serves .*gw\\.db \\(pid ${first.pid}, listening on 127\\.0\\.0\\.1:${first.port}\\)`))
  t.match(second.stderr, /modelgate reload/, 'and says what to do')
  t.notMatch(second.stdout, /listening/)
  const reloaded = await cli(['reload', '--config', first.configFile])
  t.equal(reloaded.code, 0, reloaded.stderr)
  t.match(reloaded.stdout, /^reloaded: nothing changed/, 'reload reaches the first gateway, through its admin API')
  first.kill()
  t.equal(await first.exited, 0)
  const gone = await cli(['reload', '--config', first.configFile])
  t.equal(gone.code, 2)
  t.match(gone.stderr, /no running gateway found/, 'once it stopped, no gateway is named')
})

t.test('two gateways on two SQLite files of one folder both serve; reload reaches the one of its config', async (t) => {
  const dir = tempDir('cli-two-files')
  const serveHere = async (name: string): Promise<Served> => {
    const file = join(dir, `${name}.json`)
    writeFileSync(file, JSON.stringify({ server: { port: 0 }, store: { sqlite: join(dir, `${name}.db`) }, admin: { token: `two-files-${name}-admin-token-0123456789` } }))
    return await serveChild(t, file)
  }
  const a = await serveHere('a')
  const b = await serveHere('b')
  const { readFileSync } = await import('node:fs')
  const listed = JSON.parse(readFileSync(join(dir, 'modelgate.pid'), 'utf8')) as { gateways: Array<{ pid: number, store: string }> }
  t.same(listed.gateways.map((g) => [g.pid, g.store]), [[a.pid, join(dir, 'a.db')], [b.pid, join(dir, 'b.db')]], 'both listed, each with its store')
  for (const name of ['a', 'b']) {
    const reloaded = await cli(['reload', '--config', join(dir, `${name}.json`)])
    t.equal(reloaded.code, 0, reloaded.stderr)
    t.match(reloaded.stdout, /^reloaded: nothing changed/, `reload --config ${name}.json reaches its own gateway alone`)
  }
  a.stop()
  b.stop()
  t.same([await a.exited, await b.exited], [0, 0])
  t.notOk(existsSync(join(dir, 'modelgate.pid')), 'the file goes with the last gateway')
})

t.test('a lock file of an earlier version whose process is gone is removed, and does not hold the next serve up', async (t) => {
  const dir = tempDir('cli-lock')
  const file = join(dir, 'gw.json')
  writeFileSync(file, JSON.stringify({ server: { port: 0 }, store: { sqlite: join(dir, 'gw.db') } }))
  // a pid no process has: the largest pid_max allows is 2^22
  writeFileSync(join(dir, 'modelgate.pid.lock'), '4194304')
  const served = await serveChild(t, file)
  const { readFileSync } = await import('node:fs')
  t.same(JSON.parse(readFileSync(join(dir, 'modelgate.pid'), 'utf8')).gateways.map((g: { pid: number }) => g.pid), [served.pid], 'listed')
  t.notOk(existsSync(join(dir, 'modelgate.pid.lock')), 'the old lock removed')
  served.stop()
  t.equal(await served.exited, 0)
  t.notOk(existsSync(join(dir, 'modelgate.pid')), 'and the file goes with the gateway')
  t.ok(existsSync(join(dir, 'modelgate.lock')), 'the lock file stays (it holds nothing but a lock)')
})

t.test('the pid file is updated under a lock the kernel drops with its holder: after a holder killed with SIGKILL, eight processes claiming at once are all listed', async (t) => {
  const dir = tempDir('cli-lock-race')
  const module = fromRoot('.build', 'cli', 'pid-file.js')
  const node = (code: string, env: Record<string, string> = {}): ReturnType<typeof spawn> =>
    spawn(process.execPath, ['--input-type=module', '-e', code], { env: childEnv(env), stdio: ['pipe', 'pipe', 'inherit'] })
  const line = async (child: ReturnType<typeof spawn>): Promise<string> => await new Promise((resolve, reject) => {
    child.stdout?.once('data', (d: Buffer) => { resolve(d.toString().trim()) })
    child.once('exit', (code) => { reject(new Error(`exited with ${String(code)} before a line`)) })
  })
  // what a gateway holds for the few milliseconds of an update, held here until the process is killed
  const holder = node(`const { default: Database } = await import('better-sqlite3')
    const db = new Database(${JSON.stringify(join(dir, 'modelgate.lock'))}); db.exec('BEGIN IMMEDIATE'); console.log('held'); setInterval(() => {}, 60_000)`)
  t.equal(await line(holder), 'held')
  const claimers = Array.from({ length: 8 }, (_, i) => node(`const { claimPidFile, removePidFile } = await import(${JSON.stringify(pathToFileURL(module).href)})
    const config = { server: { host: '127.0.0.1' }, store: { sqlite: process.env.STORE } }
    claimPidFile(config); console.log('claimed')
    process.stdin.once('data', () => { removePidFile(config); process.exit(0) })`, { STORE: join(dir, `s${i}.db`) }))
  const exited = claimers.map(async (c) => await new Promise((resolve) => c.once('exit', resolve)))
  t.teardown(() => { for (const c of [holder, ...claimers]) if (c.exitCode === null) c.kill('SIGKILL') })
  const claimed = Promise.all(claimers.map(line))
  holder.kill('SIGKILL')
  t.same(await claimed, Array(8).fill('claimed'))
  const { readFileSync } = await import('node:fs')
  const listed = (JSON.parse(readFileSync(join(dir, 'modelgate.pid'), 'utf8')) as { gateways: Array<{ pid: number }> }).gateways.map((g) => g.pid)
  t.same(listed.sort(), claimers.map((c) => c.pid).sort(), 'every one listed: no update wrote over another')
  for (const c of claimers) c.stdin?.write('stop\n')
  t.same(await Promise.all(exited), Array(8).fill(0))
  t.notOk(existsSync(join(dir, 'modelgate.pid')), 'all taken out again: the file is gone')
})

t.test('a pid file left by a gateway that is gone does not stop the next serve', async (t) => {
  const dir = tempDir('cli-stale')
  const file = join(dir, 'gw.json')
  writeFileSync(file, JSON.stringify({ server: { port: 0 }, store: { sqlite: join(dir, 'gw.db') } }))
  // a pid no process has: the largest pid_max allows is 2^22
  writeFileSync(join(dir, 'modelgate.pid'), JSON.stringify({ pid: 4_194_304, host: '127.0.0.1', port: 1 }))
  const served = await serveChild(t, file)
  const { readFileSync } = await import('node:fs')
  t.same(JSON.parse(readFileSync(join(dir, 'modelgate.pid'), 'utf8')).gateways.map((g: { pid: number }) => g.pid), [served.pid], 'the stale entry is dropped')
  served.stop()
  t.equal(await served.exited, 0)
  t.notOk(existsSync(join(dir, 'modelgate.pid')), 'and the file goes with the last gateway')
})

t.test('instances on PostgreSQL from one folder are each tracked: reload reaches both', async (t) => {
  const { REDIS_URL, scratchDatabase, scratchRedisPrefix, servicesMissing } = await import('./scratch-services.js')
  const missing = await servicesMissing()
  if (missing !== null) { t.plan(0, missing); return }
  const dir = tempDir('cli-pg')
  const file = join(dir, 'gw.json')
  writeFileSync(file, JSON.stringify({
    server: { port: 0 },
    store: { sqlite: join(dir, 'gw.db'), postgres: await scratchDatabase(t), redis: REDIS_URL, redis_prefix: scratchRedisPrefix(t, 'mgc') },
    admin: { token: 'pg-instances-admin-token-0123456789' }
  }))
  const start = async (): Promise<number> => (await serveChild(t, file)).pid
  // the first one migrates the database
  const a = await start()
  const b = await start()
  const reloaded = await cli(['reload', '--config', file])
  t.equal(reloaded.code, 0, reloaded.stderr)
  t.match(reloaded.stdout, new RegExp(`pid ${a}: reloaded: nothing changed`))
  t.match(reloaded.stdout, new RegExp(`pid ${b}: reloaded: nothing changed`))
})
