import t from 'tap'
import { SqliteStore as Store } from '../../engine/store/sqlite/index.js'
import type { UsageFilter } from '../../engine/store/types.js'
import { testConfig } from '../helper.js'
import { usageRow } from '../usage-row.js'

function store (): Store {
  const s = new Store(':memory:')
  // SQLite applies the tenants at once: the promise is only the store interface's
  void s.syncTenants(testConfig(), 0)
  return s
}

t.test('leases never overdraw; a charge is debited, capped at the balance; stale leases are released', async (t) => {
  const s = store()
  t.teardown(() => s.close())
  s.db.prepare('UPDATE organizations SET balance_nano = 500 WHERE id = ?').run('acme')
  const got: number[] = []
  for (let i = 0; i < 50; i++) got.push(s.ledger.lease(`L${i}`, null, 'acme', 100, 100, 0))
  t.equal(got.filter((n) => n === 100).length, 5, 'a balance that covers 5 reservations takes 5')
  t.equal(got.filter((n) => n === 0).length, 45)
  t.equal(s.orgs.get('acme')?.held_nano, 500)
  t.equal(s.ledger.consume('L0', 'acme', 100, 1000, 0), 500, 'a charge above the balance is capped at it')
  t.match(s.orgs.get('acme'), { balance_nano: 0, held_nano: 400, spent_nano: 500 })
  t.notOk(s.db.prepare("SELECT 1 FROM holds WHERE id = 'L0'").get(), 'a lease spent to nothing leaves no row')
  s.db.prepare("UPDATE holds SET created_at = 9000 WHERE id IN ('L3', 'L4')").run()
  t.equal(s.ledger.releaseOlderThan(5000), 2, 'the leases untouched since before t')
  t.equal(s.orgs.get('acme')?.held_nano, 200)
})

t.test('usage records: batched insert, filters, cursor pages', async (t) => {
  const s = store()
  t.teardown(() => s.close())
  const row = (i: number, org: string) => usageRow({
    id: `u${String(i).padStart(3, '0')}`,
    created_at: 1000 + Math.floor(i / 2),
    trace_id: `t${i}`,
    org_id: org,
    cached_input_tokens: 1,
    cost_nano: 7,
    ttft_ms: 1
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

t.test('usage pages search the index that fits their filter, newest first without a sort', async (t) => {
  const s = store()
  t.teardown(() => s.close())
  const cursor = { created_at: 1000, id: 'u1' }
  const cases: Array<[UsageFilter, string]> = [
    [{}, 'usage_time'],
    [{ org: 'acme' }, 'usage_org_time (org_id=?'],
    [{ org: 'acme', model: 'm' }, 'usage_org_time (org_id=?'],
    [{ org: 'acme', since: 1 }, 'usage_org_time (org_id=? AND created_at>?'],
    [{ org: 'acme', project: 'web' }, 'usage_project_time (org_id=? AND project_id=?'],
    [{ since: 1, until: 2 }, 'usage_time (created_at>? AND created_at<?)'],
    [{ status: ['upstream_error', 'timeout'] }, 'usage_failed_time'],
    [{ status: ['timeout'], since: 1 }, 'usage_failed_time (created_at>?'],
    [{ status: ['ok'] }, 'usage_time'],
    [{ org: 'acme', endpoint: 'messages', provider: 'p' }, 'usage_org_time (org_id=?']
  ]
  for (const [filter, index] of cases) {
    for (const c of [undefined, cursor]) {
      const plan = s.usage.planOfPage(filter, c).join('; ')
      t.match(plan, `USING INDEX ${index}`, `${JSON.stringify(filter)}${c === undefined ? '' : ' after a cursor'}: ${plan}`)
      t.notMatch(plan, /TEMP B-TREE/, 'no sort: the index is read backwards')
    }
  }
  t.match(s.usage.planOfPage({ org: 'acme' }, cursor).join(), '(created_at,id)<(?,?)', 'the cursor is a range of the index, not a filter on every row')
})

t.test('usage filters combine: every page and total agrees with the rows', async (t) => {
  const s = store()
  t.teardown(() => s.close())
  const rows = Array.from({ length: 40 }, (_, i) => usageRow({
    id: `u${String(i).padStart(3, '0')}`,
    created_at: 1000 + Math.floor(i / 3),
    trace_id: `t${i}`,
    org_id: i % 2 === 0 ? 'acme' : 'zeta',
    project_id: i % 4 < 2 ? 'web' : 'app',
    key_id: `k${i % 3}`,
    endpoint: i % 7 < 3 ? 'messages' : 'chat.completions',
    model: i % 5 === 0 ? 'big' : 'small',
    provider: i % 6 === 0 ? 'q' : 'p',
    status: ['ok', 'ok', 'upstream_error', 'timeout', 'client_aborted'][i % 5] as string,
    prompt_tokens: i,
    completion_tokens: 1,
    total_tokens: i + 1,
    cost_nano: 2 * i
  }))
  s.usage.insertMany(rows, [])
  const filters: UsageFilter[] = [{}, { org: 'acme' }, { org: 'zeta', project: 'app' }, { project: 'web' }, { key_id: 'k1' }, { model: 'big' },
    { since: 1005, until: 1010 }, { org: 'acme', since: 1003 }, { org: 'acme', project: 'web', key_id: 'k0', until: 1011 },
    { status: ['ok'] }, { status: ['timeout', 'upstream_error'] }, { status: ['ok', 'client_aborted'], org: 'zeta' }, { endpoint: 'messages' }, { provider: 'q', since: 1004 },
    { org: 'acme', status: ['upstream_error', 'timeout', 'client_aborted'], endpoint: 'chat.completions', provider: 'p' }]
  for (const f of filters) {
    const want = rows.filter((r) => (f.org === undefined || r.org_id === f.org) && (f.project === undefined || r.project_id === f.project) &&
      (f.key_id === undefined || r.key_id === f.key_id) && (f.model === undefined || r.model === f.model) &&
      (f.since === undefined || r.created_at >= f.since) && (f.until === undefined || r.created_at < f.until) &&
      (f.status === undefined || (f.status as string[]).includes(r.status)) && (f.endpoint === undefined || r.endpoint === f.endpoint) && (f.provider === undefined || r.provider === f.provider))
      .sort((a, b) => b.created_at - a.created_at || (a.id < b.id ? 1 : -1))
    const got: string[] = []
    let cursor
    for (;;) {
      const page = s.usage.page(f, 4, cursor)
      got.push(...page.map((r) => r.id))
      const last = page[page.length - 1]
      if (page.length < 4 || last === undefined) break
      cursor = { created_at: last.created_at, id: last.id }
    }
    t.same(got, want.map((r) => r.id), `pages of ${JSON.stringify(f)}, newest first`)
    t.same(s.usage.totals(f), {
      calls: want.length,
      prompt_tokens: want.reduce((a, r) => a + r.prompt_tokens, 0),
      cached_input_tokens: 0,
      completion_tokens: want.length,
      total_tokens: want.reduce((a, r) => a + r.total_tokens, 0),
      cost_nano: want.reduce((a, r) => a + r.cost_nano, 0)
    }, `totals of ${JSON.stringify(f)}`)
  }
})

t.test('the usage summary reads its records through the index that fits its filter', async (t) => {
  const s = store()
  t.teardown(() => s.close())
  // (an organization's records are the prefix of either of its indexes)
  const cases: Array<[UsageFilter, RegExp]> = [
    [{ org: 'acme' }, /USING INDEX usage_(org|project)_time \(org_id=\?/],
    [{ org: 'acme', since: 1, until: 2 }, /USING INDEX usage_org_time \(org_id=\? AND created_at>\? AND created_at<\?\)/],
    [{ org: 'acme', project: 'web', since: 1 }, /USING INDEX usage_project_time \(org_id=\? AND project_id=\? AND created_at>\?\)/],
    [{ key_id: 'k', since: 1 }, /USING INDEX usage_key_time \(key_id=\? AND created_at>\?\)/],
    [{ since: 1, until: 2 }, /USING INDEX usage_time \(created_at>\? AND created_at<\?\)/]
  ]
  for (const [filter, index] of cases) {
    for (const [groupBy, bucket] of [[['org', 'model'], undefined], [['key_id'], 3_600_000], [[], undefined]] as const) {
      const plan = s.usage.planOfSummary(filter, [...groupBy], bucket).join('; ')
      t.match(plan, index, `${JSON.stringify(filter)} by ${groupBy.join(',')}: ${plan}`)
    }
  }
})
