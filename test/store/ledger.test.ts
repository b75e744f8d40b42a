import t from 'tap'
import { Store } from '../../plugins/store/index.js'
import { testConfig } from '../helper.js'

function store (): Store {
  const s = new Store(':memory:')
  s.syncTenants(testConfig(), 0)
  return s
}

t.test('holds never overdraw; settle debits the real charge; release frees the hold', async (t) => {
  const s = store()
  t.teardown(() => s.close())
  s.db.prepare('UPDATE organizations SET balance_nano = 500 WHERE id = ?').run('acme')
  const ok: boolean[] = []
  for (let i = 0; i < 50; i++) ok.push(s.ledger.hold(`h${i}`, 'acme', 100, 0))
  t.equal(ok.filter(Boolean).length, 5, 'a balance that covers 5 holds takes 5')
  t.equal(s.orgs.get('acme')?.held_nano, 500)
  for (let i = 0; i < 5; i++) t.equal(s.ledger.settle(`h${i}`, 60), 60)
  const org = s.orgs.get('acme')
  t.equal(org?.held_nano, 0, 'all holds released')
  t.equal(org?.balance_nano, 200)
  t.equal(org?.spent_nano, 300)
  t.equal(s.ledger.settle('h0', 60), 0, 'a hold settles once')
  t.notOk(s.ledger.release('h1'), 'nothing left to release')
})

t.test('a charge above what remains is capped at the balance', async (t) => {
  const s = store()
  t.teardown(() => s.close())
  s.db.prepare('UPDATE organizations SET balance_nano = 100 WHERE id = ?').run('acme')
  t.ok(s.ledger.hold('x', 'acme', 100, 0))
  t.equal(s.ledger.settle('x', 1000), 100)
  t.equal(s.orgs.get('acme')?.balance_nano, 0)
})

t.test('stale holds are released', async (t) => {
  const s = store()
  t.teardown(() => s.close())
  t.ok(s.ledger.hold('old', 'acme', 10, 1000))
  t.ok(s.ledger.hold('new', 'acme', 10, 9000))
  t.equal(s.ledger.releaseOlderThan(5000), 1)
  t.equal(s.orgs.get('acme')?.held_nano, 10)
})

t.test('usage records: batched insert, filters, cursor pages', async (t) => {
  const s = store()
  t.teardown(() => s.close())
  const row = (i: number, org: string) => ({
    id: `u${String(i).padStart(3, '0')}`, created_at: 1000 + Math.floor(i / 2), trace_id: `t${i}`, org_id: org, project_id: 'web', key_id: 'k', endpoint: 'chat.completions',
    model: 'm', provider: 'p', stream: 0, status: 'ok', prompt_tokens: 10, cached_input_tokens: 1, completion_tokens: 5, total_tokens: 15, cost_nano: 7, latency_ms: 1, ttft_ms: 1
  })
  s.usage.insertMany(Array.from({ length: 25 }, (_, i) => row(i, i % 5 === 0 ? 'zeta' : 'acme')), [])
  t.equal(s.usage.count(), 25)
  const seen: string[] = []
  let cursor
  for (;;) {
    const page = s.usage.page({ org: 'acme' }, 7, cursor)
    seen.push(...page.map((r) => r.id))
    if (page.length < 7) break
    const last = page[page.length - 1]!
    cursor = { created_at: last.created_at, id: last.id }
  }
  t.equal(seen.length, 20, 'every acme record once, across pages')
  t.equal(new Set(seen).size, 20)
  t.same(s.usage.totals({ org: 'acme' }), { calls: 20, prompt_tokens: 200, cached_input_tokens: 20, completion_tokens: 100, total_tokens: 300, cost_nano: 140 })
})
