import t, { type Test } from 'tap'
import { join } from 'node:path'
import { startMockUpstream, type MockUpstream } from '../mock-upstream.js'
import { KEY_A, mockCatalog, spawnGateway } from '../helper.js'
import { sample } from '../ops/prom.js'
import { tempDir } from '../temp-dir.js'
import { REDIS_URL, scratchDatabase, scratchRedisPrefix, servicesMissing } from '../scratch-services.js'

// The response cache shared by the processes of one store: the workers of `serve --workers 2` on
// one SQLite file, and two instances on one PostgreSQL database and Redis. An answer stored by
// one is a hit on the other, and identical calls that miss together, spread over the processes,
// reach the provider once: the others wait (the waiting gauge of /metrics says when they all do).

interface Answer { status: number, cache: string | null, text: string }

async function call (base: string, content: string, stream = false): Promise<Answer> {
  const res = await fetch(`${base}/v1/chat/completions`, {
    method: 'POST',
    signal: AbortSignal.timeout(10_000),
    // a fresh connection each, so that calls spread over the processes
    headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json', 'x-svc-cache': 'on', connection: 'close' },
    body: JSON.stringify({ model: 'openai/gpt-test', stream, messages: [{ role: 'user', content }] })
  })
  return { status: res.status, cache: res.headers.get('x-svc-cache'), text: await res.text() }
}

/** Calls waiting for an identical call's answer, over every process behind `bases`. */
async function waiting (bases: string[]): Promise<number> {
  let n = 0
  for (const b of bases) n += sample(await (await fetch(`${b}/metrics`, { headers: { connection: 'close' } })).text(), 'modelgate_cache_waiting_calls')
  return n
}

async function until (what: string, ok: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 15_000
  while (!await ok()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`)
    await new Promise((resolve) => setTimeout(resolve, 25))
  }
}

const config = (mock: MockUpstream, store: Record<string, unknown>): Record<string, unknown> => {
  const c = mockCatalog(mock)
  return {
    store,
    plugins: [{ name: 'auth' }, { name: 'cache' }, { name: 'usage' }],
    providers: c.providers,
    models: c.models,
    metrics: { auth: 'open' },
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A }] }] }]
  }
}

/** Stored by the first process, then hit on the others; then a burst of identical misses over all of them. */
async function shared (t: Test, mock: MockUpstream, bases: string[]): Promise<void> {
  const first = await call(bases[0] as string, 'stored by one process')
  t.equal(first.cache, 'miss')
  for (let i = 0; i < 6; i++) {
    const b = bases[i % bases.length] as string
    const again = await call(b, 'stored by one process', i % 2 === 1)
    t.equal(again.cache, 'hit', `call ${i + 2}: a hit`)
  }
  t.equal(mock.requests.length, 1, 'the provider was asked once')

  mock.reset()
  let release: () => void = () => {}
  const gate = new Promise<void>((resolve) => { release = resolve })
  mock.script(async () => { await gate; return undefined })
  const burst = Array.from({ length: 8 }, async (_, i) => await call(bases[i % bases.length] as string, 'all at once, everywhere', i % 2 === 1))
  await mock.waitForRequests(1, 10_000)
  await until('seven calls wait for the first', async () => await waiting(bases) === 7)
  release()
  const answers = await Promise.all(burst)
  t.same(answers.map((a) => a.status), Array(8).fill(200))
  t.equal(answers.filter((a) => a.cache === 'hit').length, 7, 'seven hits')
  t.equal(mock.requests.length, 1, 'one request reached the provider')
  t.equal(await waiting(bases), 0)
}

t.test('serve --workers 2: the workers share one cache', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const gw = await spawnGateway(t, config(mock, { sqlite: join(tempDir('cache-workers'), 'gw.db') }), ['--workers', '2'])
  await shared(t, mock, [`http://127.0.0.1:${gw.port}`])
  gw.kill('SIGTERM')
  t.equal(await gw.exited, 0)
})

t.test('two instances on PostgreSQL + Redis share one cache', async (t) => {
  const missing = await servicesMissing()
  if (missing !== null) { t.plan(0, `PostgreSQL or Redis not reachable (${missing})`); return }
  const url = await scratchDatabase(t)
  const prefix = scratchRedisPrefix(t, 'mgcache')
  const mock = await startMockUpstream()
  t.teardown(async () => { await mock.close() })
  const cfg = config(mock, { postgres: url, redis: REDIS_URL, redis_prefix: prefix })
  const a = await spawnGateway(t, cfg, ['--workers', '1'])
  const b = await spawnGateway(t, cfg, ['--workers', '1'])
  await shared(t, mock, [a, b].map((g) => `http://127.0.0.1:${g.port}`))
})
