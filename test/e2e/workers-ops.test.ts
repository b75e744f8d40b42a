import { execFile } from 'node:child_process'
import { writeFileSync } from 'node:fs'
import { request } from 'node:http'
import { join } from 'node:path'
import t from 'tap'
import { fromRoot } from '../../paths.js'
import { startMockUpstream } from '../mock-upstream.js'
import { childEnv, KEY_A, mockCatalog, spawnGateway } from '../helper.js'
import { sample } from '../ops/prom.js'
import { tempDir } from '../temp-dir.js'

// `serve --workers 2`: one scrape of /metrics sums both workers' figures, a reload (the CLI, or
// SIGHUP to the primary) reaches both workers, and the admin API's /providers merges both
// workers' views of the providers' health.

const ADMIN = 'admin-token-0123456789'

function cli (args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [fromRoot('dist', 'cli', 'index.js'), ...args], { cwd: fromRoot(), env: childEnv() }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : Number((err as { code?: number }).code ?? 1), stdout, stderr })
    })
  })
}

// one gateway for both tests (two workers take seconds to start): the first leaves its config
// as it found it, and the second stops it
const mock = await startMockUpstream()
t.teardown(() => mock.close())
const c = mockCatalog(mock)
const config = {
  server: { port: 0 },
  store: { sqlite: join(tempDir('workers-ops'), 'gw.db') },
  admin: { token: ADMIN },
  metrics: { auth: 'open' },
  plugins: [{ name: 'auth' }, { name: 'usage' }],
  providers: c.providers,
  models: c.models,
  // the dead provider's failures are counted, its breaker never opens
  upstream: { breaker: { failures: 100, open_s: 60 } },
  tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
}
const gw = await spawnGateway(t, config, ['--workers', '2'])

t.test('two workers: one scrape sums both; modelgate reload and SIGHUP reload both', async (t) => {
  const base = `http://127.0.0.1:${gw.port}`
  // a fresh connection each (fetch keeps its connections alive): the primary hands connections
  // to the workers in turn
  const send = async (method: string, path: string, body?: string): Promise<{ status: number, text: string }> => await new Promise((resolve, reject) => {
    const req = request(`${base}${path}`, { method, agent: false, headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' } }, (res) => {
      let text = ''
      res.on('data', (c: Buffer) => { text += String(c) })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, text }) })
    })
    req.on('error', reject)
    req.end(body)
  })
  const call = async (model: string): Promise<number> => (await send('POST', '/v1/chat/completions', JSON.stringify({ model, messages: [{ role: 'user', content: 'x' }] }))).status
  const scrape = async (): Promise<string> => (await send('GET', '/metrics')).text

  const statuses = await Promise.all(Array.from({ length: 20 }, async () => await call('openai/gpt-test')))
  t.same(statuses, Array(20).fill(200))
  for (let i = 0; i < 2; i++) {
    const text = await scrape()
    t.equal(sample(text, 'modelgate_requests_total', { model: 'openai/gpt-test', status: 'ok' }), 20, `scrape ${i + 1}: every call, whichever worker served it`)
    t.equal(sample(text, 'modelgate_breaker_state', { provider: 'mock-openai', state: 'closed' }), 2, 'both workers\' figures are in it')
  }

  writeFileSync(gw.configFile, JSON.stringify({ ...config, models: [...c.models as object[], { ...(c.models as Array<Record<string, unknown>>)[0], id: 'openai/gpt-new' }] }))
  const reloaded = await cli(['reload', '--config', gw.configFile])
  t.equal(reloaded.code, 0, reloaded.stderr)
  t.match(reloaded.stdout, /reloaded \(2 workers\)/)
  t.match(reloaded.stdout, /models: added openai\/gpt-new/)
  t.same(await Promise.all(Array.from({ length: 6 }, async () => await call('openai/gpt-new'))), Array(6).fill(200), 'both workers serve the added model')

  writeFileSync(gw.configFile, JSON.stringify({ ...config, server: { port: 0, request_timeout_s: -1 } }))
  const invalid = await cli(['reload', '--config', gw.configFile])
  t.equal(invalid.code, 2, 'an invalid file: exit status 2')
  t.match(invalid.stderr, /server\.request_timeout_s: must be > 0/, 'with its problems')

  writeFileSync(gw.configFile, JSON.stringify(config))
  gw.kill('SIGHUP')
  let reloads = 0
  for (let i = 0; i < 100 && reloads < 4; i++) {
    reloads = sample(await scrape(), 'modelgate_config_reloads_total', { result: 'ok' })
    if (reloads < 4) await new Promise((resolve) => setTimeout(resolve, 50))
  }
  t.equal(reloads, 4, 'the CLI\'s reload and the SIGHUP, in both workers')
  t.same(await Promise.all(Array.from({ length: 4 }, async () => await call('openai/gpt-new'))), Array(4).fill(404), 'the model is gone again in both')
})

t.test('two workers: /admin/v1/providers answers the same merged view from either worker', async (t) => {
  // a fresh connection each: the primary hands connections to the workers in turn
  const send = async (path: string, token: string, body?: string): Promise<{ status: number, json: () => any }> => await new Promise((resolve, reject) => {
    const req = request(`http://127.0.0.1:${gw.port}${path}`, { method: body === undefined ? 'GET' : 'POST', agent: false, headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' } }, (res) => {
      let text = ''
      res.on('data', (d: Buffer) => { text += String(d) })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, json: () => JSON.parse(text) }) })
    })
    req.on('error', reject)
    req.end(body)
  })
  // each call tries the dead provider first (refused), then the one that answers
  for (let i = 0; i < 8; i++) t.equal((await send('/v1/chat/completions', KEY_A, JSON.stringify({ model: 'openai/failover', messages: [{ role: 'user', content: 'x' }] }))).status, 200)

  const answers = []
  for (let i = 0; i < 4; i++) {
    const res = await send('/admin/v1/providers', ADMIN)
    t.equal(res.status, 200)
    answers.push(res.json())
  }
  const pids = new Set<number>()
  for (const a of answers) {
    t.equal(a.workers, 2, 'both workers answered')
    const dead = a.data.find((p: { id: string }) => p.id === 'mock-dead')
    t.equal(dead.workers.length, 2)
    for (const w of dead.workers) pids.add(w.pid)
    const failedIn = new Set(dead.recent_failures.map((f: { pid: number }) => f.pid))
    t.equal(failedIn.size, 2, 'the latest failures come from both workers')
    t.equal(dead.recent_failures.length, 10, 'the latest ten of all')
    const times = dead.recent_failures.map((f: { at: string }) => Date.parse(f.at))
    t.same(times, [...times].sort((x, y) => y - x), 'newest first')
    t.match(dead.recent_failures[0], { status: null, error: 'ECONNREFUSED' })
    const openai = a.data.find((p: { id: string }) => p.id === 'mock-openai')
    t.same(openai.workers.map((w: { breaker: string }) => w.breaker), ['closed', 'closed'])
    t.type(openai.avg_latency_ms, 'number', 'the mean of the workers\' latency averages')
  }
  t.equal(pids.size, 2, 'two distinct workers')
  t.same(new Set(answers.map((a) => a.pid)), pids, 'either worker answers, with the same merged view')
  const views = answers.map((a) => JSON.stringify(a.data.find((p: { id: string }) => p.id === 'mock-dead').recent_failures))
  t.equal(new Set(views).size, 1, 'the same failures, whichever worker answered')

  gw.kill('SIGTERM')
  t.equal(await gw.exited, 0)
})
