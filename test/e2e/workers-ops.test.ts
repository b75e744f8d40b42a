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

// `serve --workers 2`: one scrape of /metrics sums both workers' figures, and a reload (the CLI,
// or SIGHUP to the primary) reaches both workers.

const ADMIN = 'admin-token-0123456789'

function cli (args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  return new Promise((resolve) => {
    execFile(process.execPath, [fromRoot('dist', 'cli', 'index.js'), ...args], { cwd: fromRoot(), env: childEnv() }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : Number((err as { code?: number }).code ?? 1), stdout, stderr })
    })
  })
}

t.test('two workers: one scrape sums both; modelgate reload and SIGHUP reload both', async (t) => {
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
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
  }
  const gw = await spawnGateway(t, config, ['--workers', '2'])
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

  gw.kill('SIGTERM')
  t.equal(await gw.exited, 0)
})
