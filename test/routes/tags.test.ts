import t from 'tap'
import { bearer, build, KEY_A, watchAnswers } from '../helper.js'

// Tags on calls: the {prefix}Tags header and OpenAI's metadata.tags, checked (400 naming the bad
// tag), kept on the usage record, and reported by /admin/v1/usage?tag= and
// /usage/summary?group_by=tag with exact sums; the developer console's usage breaks spend down by
// tag; no metric carries them.

const ADMIN = 'test-admin-token-0123456789'
const admin = bearer(ADMIN)

async function app (t: Parameters<typeof build>[0]): ReturnType<typeof build> {
  const a = await build(t, { admin: { token: ADMIN }, plugins: [{ name: 'auth' }, { name: 'usage' }, { name: 'diagnostics' }], metrics: { enabled: true, auth: 'open' } })
  watchAnswers(a) // the admin answers as their response schemas send them (tags and tag kept)
  return a
}

const chat = (extra: Record<string, unknown> = {}) => ({ model: 'demo/gpt', messages: [{ role: 'user', content: 'hello there' }], ...extra })

t.test('tags from the header and metadata.tags go on the usage record; the summary sums them exactly', async (t) => {
  const a = await app(t)
  const post = (headers: Record<string, string>, body = chat()) => a.inject({ method: 'POST', url: '/v1/chat/completions', headers: { ...bearer(KEY_A), ...headers }, payload: body })
  t.equal((await post({ 'X-SVC-Tags': 'team-a, feature-x' })).statusCode, 200)
  t.equal((await post({}, chat({ metadata: { tags: 'team-a,feature:y' } }))).statusCode, 200)
  t.equal((await post({ 'x-svc-tags': 'team-b' }, chat({ metadata: { tags: 'team-b, v1.2' } }))).statusCode, 200, 'both: the union, once each')
  t.equal((await post({})).statusCode, 200, 'untagged')
  const m = await a.inject({ method: 'POST', url: '/v1/messages', headers: { ...bearer(KEY_A), 'X-SVC-Tags': 'team-a' }, payload: { model: 'demo/claude', max_tokens: 20, messages: [{ role: 'user', content: 'hi' }] } })
  t.equal(m.statusCode, 200, 'the Messages route takes the header')

  const records = (await a.inject({ method: 'GET', url: '/admin/v1/usage', headers: admin })).json().data as Array<{ tags: string[], cost_usd: string, endpoint: string }>
  t.same(records.map((r) => r.tags).reverse(), [['team-a', 'feature-x'], ['team-a', 'feature:y'], ['team-b', 'v1.2'], [], ['team-a']])

  const teamA = (await a.inject({ method: 'GET', url: '/admin/v1/usage?tag=team-a', headers: admin })).json().data as Array<{ tags: string[] }>
  t.equal(teamA.length, 3, 'filtered by tag')
  t.ok(teamA.every((r) => r.tags.includes('team-a')))

  const summary = (await a.inject({ method: 'GET', url: '/admin/v1/usage/summary?group_by=tag', headers: admin })).json().data as Array<{ tag: string | null, calls: number, cost_usd: string, prompt_tokens: number }>
  const byTag = new Map(summary.map((r) => [r.tag, r]))
  t.same([...byTag.keys()].sort((x, y) => String(x).localeCompare(String(y))), ['feature-x', 'feature:y', null, 'team-a', 'team-b', 'v1.2'].sort((x, y) => String(x).localeCompare(String(y))))
  // exact: each group's cost is the sum, in nano-dollars, of its records' costs
  const nano = (usd: string): bigint => { const [w, f = ''] = usd.split('.'); return BigInt(w as string) * 1_000_000_000n + BigInt((f + '000000000').slice(0, 9)) }
  for (const [tag, row] of byTag) {
    const mine = records.filter((r) => tag === null ? r.tags.length === 0 : r.tags.includes(tag))
    t.equal(row.calls, mine.length, `calls of ${String(tag)}`)
    t.equal(nano(row.cost_usd), mine.reduce((s, r) => s + nano(r.cost_usd), 0n), `cost of ${String(tag)}`)
  }
  const both = (await a.inject({ method: 'GET', url: '/admin/v1/usage/summary?group_by=tag,model&tag=team-a', headers: admin })).json().data as Array<{ tag: string, model: string }>
  t.ok(both.some((r) => r.tag === 'team-a' && r.model === 'demo/claude'), 'with other fields and filters')

  const console = await a.inject({ method: 'GET', url: '/console/api/usage?range=24h', headers: bearer(KEY_A) })
  t.equal(console.statusCode, 200, console.body)
  const dev = console.json().by_tag as Array<{ tag: string | null, calls: number }>
  t.equal(dev.find((r) => r.tag === 'team-a')?.calls, 3, 'the developer console\'s usage by tag')

  const metrics = await a.inject({ method: 'GET', url: '/metrics' })
  t.notOk(/team-a|feature-x/.test(metrics.body), 'never a metric label')
})

t.test('bad tags answer 400 naming them, in the route\'s shape; the refusals are recorded without tags', async (t) => {
  const a = await app(t)
  const post = (headers: Record<string, string>, body: Record<string, unknown> = chat(), url = '/v1/chat/completions') => a.inject({ method: 'POST', url, headers: { ...bearer(KEY_A), ...headers }, payload: body })
  let res = await post({ 'X-SVC-Tags': 'ok, has space' })
  t.equal(res.statusCode, 400)
  t.match(res.json().error, { code: 400, message: /X-SVC-Tags.*"has space"/ })
  res = await post({}, chat({ metadata: { tags: 'fine,bad/slash' } }))
  t.match(res.json().error.message, /metadata\.tags.*"bad\/slash"/)
  res = await post({ 'X-SVC-Tags': 'x'.repeat(65) })
  t.equal(res.statusCode, 400, 'at most 64 characters')
  res = await post({ 'X-SVC-Tags': Array.from({ length: 11 }, (_, i) => `t${i}`).join(',') })
  t.match(res.json().error.message, /at most 10 tags/)
  res = await post({}, chat({ metadata: { tags: ['a'] } }))
  t.match(res.json().error.message, /metadata\.tags.*comma-separated string/)
  res = await post({ 'X-SVC-Tags': 'bad tag' }, { model: 'demo/claude', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] }, '/v1/messages')
  t.equal(res.statusCode, 400)
  t.equal(res.json().type, 'error', 'the Messages shape')
  t.equal(res.json().error.type, 'invalid_request_error')
  // each a refused record (nothing spent), with no tags
  const records = (await a.inject({ method: 'GET', url: '/admin/v1/usage', headers: admin })).json().data as Array<{ status: string, error: string, tags: string[], cost_usd: string }>
  t.equal(records.length, 6, 'one for each refused call')
  t.ok(records.every((r) => r.status === 'refused' && r.error === 'invalid_field' && r.tags.length === 0 && r.cost_usd === '0'))
  t.equal((await a.inject({ method: 'GET', url: '/admin/v1/usage?tag=bad%20tag', headers: admin })).statusCode, 400, 'the filter is checked too')
})
