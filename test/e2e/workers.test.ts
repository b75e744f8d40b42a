import t from 'tap'
import { startMockUpstream } from '../mock-upstream.js'
import { KEY_A, mockCatalog, spawnGateway } from '../helper.js'
import { tempDir } from '../temp-dir.js'

// `modelgate serve --workers 2`: the policies' state is in the shared SQLite file, so the
// workers count and deduplicate together.

t.test('the IP rate limit and idempotency hold across workers', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const c = mockCatalog(mock)
  const { join } = await import('node:path')
  const gw = await spawnGateway(t, {
    store: { sqlite: join(tempDir('workers'), 'gw.db') },
    plugins: [{ name: 'rate-limit', options: { max: 30, window_s: 600 } }, { name: 'auth' }, { name: 'idempotency' }],
    providers: c.providers,
    models: c.models,
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
  }, ['--workers', '2'])
  const url = `http://127.0.0.1:${gw.port}/v1/chat/completions`
  mock.faults = { delayMs: 100 }
  const dup = await Promise.all(Array.from({ length: 10 }, async () => {
    // a fresh connection each, so the kernel spreads them over both workers
    const res = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json', 'idempotency-key': 'across', connection: 'close' }, body: JSON.stringify({ model: 'openai/gpt-test', messages: [{ role: 'user', content: 'x' }] }) })
    await res.text()
    return res.status
  }))
  t.equal(dup.filter((s) => s === 200).length, 1, 'one of ten duplicates admitted')
  t.equal(mock.requests.length, 1, 'one reached the upstream')
  const statuses: number[] = []
  for (let i = 0; i < 30; i++) {
    const res = await fetch(`http://127.0.0.1:${gw.port}/v1/models`, { headers: { connection: 'close' } })
    await res.text()
    statuses.push(res.status)
  }
  t.equal(statuses.filter((s) => s === 401).length, 20, 'the ten chat calls and twenty more fill the window of 30')
  t.equal(statuses.filter((s) => s === 429).length, 10, 'then both workers refuse')
  gw.kill('SIGTERM')
  t.equal(await gw.exited, 0)
})
