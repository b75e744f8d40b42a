import t from 'tap'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { bearer, FakeClock, KEY_A, testConfig, type Teardown } from '../helper.js'
import { tempDir } from '../temp-dir.js'

// The rate-limit headers of a key with `limits`: OpenAI's names on the OpenAI-shaped routes,
// Anthropic's on /v1/messages, read from the counters the limits are enforced with, so that they
// match the 429s, also across two apps (two workers) on one file.

const START = Date.UTC(2026, 0, 15, 12, 0, 0)
const chat = { model: 'demo/gpt', messages: [{ role: 'user', content: 'hello there' }] }
const messages = { model: 'demo/claude', max_tokens: 20, messages: [{ role: 'user', content: 'hello there' }] }

async function app (t: Teardown, clock: FakeClock, limits: Record<string, number> | null, file = ':memory:', quotaOptions: Record<string, unknown> = {}): Promise<FastifyInstance> {
  const config = testConfig({
    store: { sqlite: file },
    plugins: [{ name: 'auth' }, { name: 'quota', options: quotaOptions }, { name: 'usage' }],
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, ...(limits === null ? {} : { limits }) }] }] }]
  })
  const a = await buildApp(config, { logger: false, clock, alerts: { timers: false } })
  t.teardown(() => a.close())
  return a
}

t.test('rpm: x-ratelimit-*-requests count down to 0, and the next call is the 429, which carries them too', async (t) => {
  const clock = new FakeClock(START)
  const a = await app(t, clock, { rpm: 3 })
  const seen: Array<Record<string, unknown>> = []
  for (let i = 0; i < 4; i++) {
    const res = await a.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat })
    seen.push({ status: res.statusCode, limit: res.headers['x-ratelimit-limit-requests'], remaining: res.headers['x-ratelimit-remaining-requests'], reset: res.headers['x-ratelimit-reset-requests'], tokens: res.headers['x-ratelimit-limit-tokens'] })
    clock.advance(15_000)
  }
  t.same(seen, [
    { status: 200, limit: '3', remaining: '2', reset: '1m0s', tokens: undefined },
    { status: 200, limit: '3', remaining: '1', reset: '45s', tokens: undefined },
    { status: 200, limit: '3', remaining: '0', reset: '30s', tokens: undefined },
    { status: 429, limit: '3', remaining: '0', reset: '15s', tokens: undefined }
  ])
  clock.advance(1)
  const after = await a.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat })
  t.equal(after.statusCode, 200, 'a new window')
  t.equal(after.headers['x-ratelimit-remaining-requests'], '2')
})

t.test('tpm: the tokens the window counted; Anthropic\'s names on /v1/messages', async (t) => {
  const clock = new FakeClock(START + 20_000)
  const a = await app(t, clock, { rpm: 100, tpm: 120 })
  const first = await a.inject({ method: 'POST', url: '/v1/messages', headers: bearer(KEY_A), payload: messages })
  t.equal(first.statusCode, 200)
  t.equal(first.headers['anthropic-ratelimit-requests-limit'], '100')
  t.equal(first.headers['anthropic-ratelimit-requests-remaining'], '99')
  t.equal(first.headers['anthropic-ratelimit-requests-reset'], '2026-01-15T12:01:20Z')
  t.equal(first.headers['anthropic-ratelimit-tokens-limit'], '120')
  t.equal(first.headers['anthropic-ratelimit-tokens-remaining'], '120', 'nothing counted yet this minute')
  t.equal(first.headers['anthropic-ratelimit-tokens-reset'], '2026-01-15T12:01:00Z', 'the UTC minute\'s end')
  t.equal(first.headers['x-ratelimit-limit-requests'], undefined, 'no OpenAI names there')
  const u = first.json().usage as { input_tokens: number, output_tokens: number }
  const spent = u.input_tokens + u.output_tokens
  const second = await a.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat })
  t.equal(second.headers['x-ratelimit-remaining-tokens'], String(120 - spent), 'what the first call used is counted')
  t.equal(second.headers['x-ratelimit-reset-tokens'], '40s')
  t.equal(second.headers['anthropic-ratelimit-tokens-limit'], undefined)
  let res = second
  let n = 0
  while (res.statusCode === 200 && n++ < 50) res = await a.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat })
  t.equal(res.statusCode, 429)
  t.equal(res.headers['x-ratelimit-remaining-tokens'], '0', 'the 429 says none are left')
  t.equal(res.headers['retry-after'], '40')
})

t.test('a key without limits gets none of these headers', async (t) => {
  const a = await app(t, new FakeClock(START), null)
  const res = await a.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat })
  t.equal(res.statusCode, 200)
  t.notOk(Object.keys(res.headers).some((h) => h.includes('ratelimit')))
})

t.test('rate_limit_headers: false: the limits still hold, and neither the answers nor the 429 show them', async (t) => {
  const clock = new FakeClock(START)
  const a = await app(t, clock, { rpm: 2, tpm: 100_000 }, ':memory:', { rate_limit_headers: false })
  const statuses: number[] = []
  for (const [url, payload] of [['/v1/chat/completions', chat], ['/v1/messages', messages], ['/v1/chat/completions', chat]] as const) {
    const res = await a.inject({ method: 'POST', url, headers: bearer(KEY_A), payload })
    statuses.push(res.statusCode)
    t.same(Object.keys(res.headers).filter((h) => h.includes('ratelimit')), [], `no rate-limit header on ${url} (${res.statusCode})`)
    if (res.statusCode === 429) t.equal(res.headers['retry-after'], '60', 'the refusal still says when to retry')
  }
  t.same(statuses, [200, 200, 429], 'rpm 2 is enforced as before')
})

t.test('rate_limit_headers takes a boolean only', async (t) => {
  await t.rejects(app(t, new FakeClock(START), { rpm: 2 }, ':memory:', { rate_limit_headers: 'no' }), /rate_limit_headers/)
})

t.test('two apps on one file (two workers): the remaining counts are the calls\' places in the shared counter, and the 429s follow', async (t) => {
  const clock = new FakeClock(START)
  const file = join(tempDir('rl-headers'), 'gw.db')
  const apps = [await app(t, clock, { rpm: 8 }, file), await app(t, clock, { rpm: 8 }, file)]
  const remaining: number[] = []
  const refused: string[] = []
  for (let i = 0; i < 12; i++) {
    const res = await (apps[i % 2] as FastifyInstance).inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat })
    if (res.statusCode === 200) remaining.push(Number(res.headers['x-ratelimit-remaining-requests']))
    else { t.equal(res.statusCode, 429); refused.push(String(res.headers['x-ratelimit-remaining-requests'])) }
  }
  t.same([...remaining].sort((x, y) => x - y), [0, 1, 2, 3, 4, 5, 6, 7], 'each place once: 8 admitted, 0 to 7 left')
  t.same(refused, ['0', '0', '0', '0'])
})
