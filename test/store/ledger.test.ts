import t from 'tap'
import { Store } from '../../plugins/store/index.js'
import { testConfig } from '../helper.js'

function store (): Store {
  const s = new Store(':memory:')
  s.syncTenants(testConfig(), 0)
  return s
}

t.test('leases never overdraw; a charge is debited, capped at the balance; stale leases are released', async (t) => {
  const s = store()
  t.teardown(() => s.close())
  s.db.prepare('UPDATE organizations SET balance_nano = 500 WHERE id = ?').run('acme')
  const got: number[] = []
  for (let i = 0; i < 50; i++) got.push(s.ledger.lease(`L${i}`, 'acme', 100, 100, 0))
  t.equal(got.filter((n) => n === 100).length, 5, 'a balance that covers 5 reservations takes 5')
  t.equal(got.filter((n) => n === 0).length, 45)
  t.equal(s.orgs.get('acme')?.held_nano, 500)
  t.equal(s.ledger.consume('L0', 'acme', 100, 1000, 0), 500, 'a charge above the balance is capped at it')
  t.match(s.orgs.get('acme'), { balance_nano: 0, held_nano: 400, spent_nano: 500 })
  s.db.prepare("UPDATE holds SET created_at = 9000 WHERE id IN ('L3', 'L4')").run()
  t.equal(s.ledger.releaseOlderThan(5000), 3, 'the leases untouched since before t, the spent one included')
  t.equal(s.orgs.get('acme')?.held_nano, 200)
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
