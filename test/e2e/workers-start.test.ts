import { execFile, spawn } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { join } from 'node:path'
import t from 'tap'
import { fromRoot } from '../../paths.js'
import { childEnv } from '../child-env.js'
import { startMockUpstream } from '../mock-upstream.js'
import { KEY_A, mockCatalog } from '../helper.js'
import { sample } from '../ops/prom.js'
import { tempDir } from '../temp-dir.js'

// How `serve --workers N` starts: the primary checks the config before it forks anything, and a
// worker that replaces a dead one starts even when the file has been made invalid since.

const CLI = fromRoot('dist', 'cli', 'index.js')

t.test('an invalid config: every problem listed, exit status 2, and no worker forked', async (t) => {
  const file = join(tempDir('workers-start'), 'bad.json')
  writeFileSync(file, JSON.stringify({ server: { port: 0, request_timeout_s: -1 }, store: { sqlite: join(tempDir('workers-start'), 'gw.db') }, models: [{ id: 'm' }] }))
  const res = await new Promise<{ code: number | null, stderr: string }>((resolve) => {
    execFile(process.execPath, [CLI, 'serve', '--config', file, '--workers', '2'], { env: childEnv() }, (err, _stdout, stderr) => {
      resolve({ code: err === null ? 0 : (err as { code?: number }).code ?? null, stderr })
    })
  })
  t.equal(res.code, 2)
  t.match(res.stderr, /server\.request_timeout_s: must be > 0/)
  t.match(res.stderr, /models\[0\]\.name: is required/)
  t.notMatch(res.stderr, /modelgate: worker/, 'no worker started, so none exited')
})

t.test('a worker that replaces a dead one starts with the last valid config when the file is invalid', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const c = mockCatalog(mock)
  const dir = tempDir('workers-start')
  const file = join(dir, 'gw.json')
  writeFileSync(file, JSON.stringify({
    server: { port: 0 },
    store: { sqlite: join(dir, 'gw.db') },
    metrics: { auth: 'open' },
    plugins: [{ name: 'auth' }],
    providers: c.providers,
    models: c.models,
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
  }))
  const child = spawn(process.execPath, [CLI, 'serve', '--config', file, '--workers', '2'], { env: childEnv({ LOG_LEVEL: 'warn' }), stdio: ['ignore', 'pipe', 'pipe'] })
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve))
  let out = ''
  let err = ''
  child.stdout.on('data', (d: Buffer) => { out += String(d) })
  child.stderr.on('data', (d: Buffer) => { err += String(d) })
  // polls with a bound generous enough for a machine busy with other work
  const until = async (what: string, ok: () => boolean): Promise<void> => {
    for (let i = 0; i < 2400 && !ok(); i++) {
      if (child.exitCode !== null) throw new Error(`the gateway exited: ${err}`)
      await new Promise((resolve) => setTimeout(resolve, 25))
    }
    if (!ok()) throw new Error(`${what} did not happen; stderr: ${err}`)
  }
  await until('listening', () => /listening on http:\/\/[^/]+:\d+/.test(out))
  const port = Number(/listening on http:\/\/[^/]+:(\d+)/.exec(out)?.[1])
  const workers = (): number[] => readFileSync(`/proc/${child.pid as number}/task/${child.pid as number}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number)
  const first = workers()
  t.equal(first.length, 2)
  // a fresh connection each: the primary hands connections to the workers in turn
  const get = async (path: string, method = 'GET', body?: string): Promise<{ status: number, text: string }> => await new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method, agent: false, headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' } }, (res) => {
      let text = ''
      res.on('data', (d: Buffer) => { text += String(d) })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, text }) })
    })
    req.on('error', reject)
    req.end(body)
  })

  writeFileSync(file, JSON.stringify({ server: { port: 0, request_timeout_s: -1 } }))
  process.kill(first[0] as number, 'SIGKILL')
  await until('a replacement', () => /starts with the last valid configuration/.test(err))
  t.match(err, /server\.request_timeout_s: must be > 0/, 'the primary says what is wrong with the file')
  t.equal(workers().filter((pid) => pid !== first[0]).length, 2, 'a new worker beside the other')
  // calls on fresh connections until both workers have served one (the scrape sums both workers'
  // figures): the replacement did not fail on the file. Two calls a round: with one call and one
  // scrape, the primary's turns would give every call to the same worker.
  const call = async (): Promise<number> => (await get('/v1/chat/completions', 'POST', JSON.stringify({ model: 'openai/gpt-test', messages: [{ role: 'user', content: 'x' }] }))).status
  const statuses = new Set<number>()
  let serving = 0
  for (let i = 0; i < 1000 && serving < 2; i++) {
    statuses.add(await call())
    statuses.add(await call())
    serving = sample((await get('/metrics').catch(() => ({ text: '' }))).text, 'modelgate_breaker_state', { provider: 'mock-openai', state: 'closed' })
    if (serving < 2) await new Promise((resolve) => setTimeout(resolve, 25))
  }
  t.equal(serving, 2, 'the replacement serves calls beside the other worker')
  t.same([...statuses], [200], 'with the valid config\'s catalog and keys')
  t.equal(err.match(/exited with/g)?.length, 1, 'one worker died, and no replacement after it')
  child.kill('SIGTERM')
  t.equal(await exited, 0)
})
