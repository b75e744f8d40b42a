import t, { type Test } from 'tap'
import OpenAI from 'openai'
import Anthropic from '@anthropic-ai/sdk'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { FakeClock, KEY_A, KEY_B, KEY_OTHER_ORG, testConfig } from '../helper.js'

// A spent limit and the official SDKs with their default retries (two, after waiting out any
// Retry-After): a window that reopens hours later is answered with `x-should-retry: false`, so
// that the SDK gives up at once instead of sleeping until midnight; a window that reopens within
// the minute is left to the SDK's retries.

// 12:00 UTC: a daily window reopens 43,200 s later
const NOON = Date.UTC(2026, 0, 15, 12, 0, 0)

async function start (t: Test): Promise<{ app: FastifyInstance, base: string, requests: () => number }> {
  const app = await buildApp(testConfig({
    plugins: [{ name: 'auth' }, { name: 'quota' }, { name: 'usage' }],
    tenants: [
      // a budget of a thousandth of a cent a day: the first call spends it
      { org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY_A, budget: { usd: 0.00001, per: 'day' } }, { key: KEY_B, budget: { usd: 0.00001, per: 'minute' } }] }] },
      // an organization's daily quota of one token
      { org: 'zeta', quota: { tokens: 1, per: 'day' }, projects: [{ id: 'app', keys: [{ key: KEY_OTHER_ORG }] }] }
    ]
  }), { clock: new FakeClock(NOON) })
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { await app.close() })
  let seen = 0
  app.server.on('request', () => { seen++ })
  return { app, base: `http://127.0.0.1:${(app.server.address() as { port: number }).port}`, requests: () => seen }
}

/** What `call` did within `ms`: its error, or 'hung' when it was still waiting (it is aborted then). */
async function settlesWithin (ms: number, call: (signal: AbortSignal) => Promise<unknown>): Promise<unknown> {
  const abort = new AbortController()
  let timer: NodeJS.Timeout | undefined
  const hung = new Promise<string>((resolve) => { timer = setTimeout(() => { abort.abort(); resolve('hung') }, ms) })
  try {
    return await Promise.race([call(abort.signal).then(() => 'answered', (err: unknown) => err), hung])
  } finally {
    clearTimeout(timer)
  }
}

t.test('a key over its daily budget: the openai and Anthropic SDKs, with their default retries, give up at once', async (t) => {
  const { base, requests } = await start(t)
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY_A })
  const anthropic = new Anthropic({ baseURL: base, apiKey: KEY_A })
  await openai.chat.completions.create({ model: 'demo/gpt', messages: [{ role: 'user', content: 'spend the budget' }] })

  const before = requests()
  // a bound on a failure, not a wait: the SDK answers in milliseconds or sleeps for twelve hours
  const err = await settlesWithin(10_000, async (signal) => await openai.chat.completions.create({ model: 'demo/gpt', messages: [{ role: 'user', content: 'again' }] }, { signal }))
  t.type(err, OpenAI.RateLimitError, 'openai: a RateLimitError, not a wait')
  t.equal((err as InstanceType<typeof OpenAI.RateLimitError>).headers?.get('x-should-retry'), 'false')
  t.equal((err as InstanceType<typeof OpenAI.RateLimitError>).headers?.get('retry-after'), '43200', 'Retry-After still says when the budget comes back')
  t.equal(requests() - before, 1, 'one request: no retry')

  const before2 = requests()
  const err2 = await settlesWithin(10_000, async (signal) => await anthropic.messages.create({ model: 'demo/gpt', max_tokens: 16, messages: [{ role: 'user', content: 'again' }] }, { signal }))
  t.type(err2, Anthropic.RateLimitError, 'Anthropic: a RateLimitError, not a wait')
  t.match((err2 as InstanceType<typeof Anthropic.RateLimitError>).error, { type: 'error', error: { type: 'rate_limit_error' } })
  t.equal(requests() - before2, 1, 'one request: no retry')
})

t.test('an organization over its daily quota: the same', async (t) => {
  const { base, requests } = await start(t)
  const openai = new OpenAI({ baseURL: `${base}/v1`, apiKey: KEY_OTHER_ORG })
  const anthropic = new Anthropic({ baseURL: base, apiKey: KEY_OTHER_ORG })
  await openai.chat.completions.create({ model: 'demo/gpt', messages: [{ role: 'user', content: 'use the quota' }] })
  const before = requests()
  t.type(await settlesWithin(10_000, async (signal) => await openai.chat.completions.create({ model: 'demo/gpt', messages: [{ role: 'user', content: 'again' }] }, { signal })), OpenAI.RateLimitError)
  t.type(await settlesWithin(10_000, async (signal) => await anthropic.messages.create({ model: 'demo/claude', max_tokens: 16, messages: [{ role: 'user', content: 'again' }] }, { signal })), Anthropic.RateLimitError)
  t.equal(requests() - before, 2, 'one request each: no retry')
})

t.test('a window that reopens within the minute keeps Retry-After alone, for the SDKs to retry', async (t) => {
  const { app } = await start(t)
  const call = async (): Promise<{ statusCode: number, headers: Record<string, unknown> }> => await app.inject({
    method: 'POST', url: '/v1/chat/completions', headers: { authorization: `Bearer ${KEY_B}` }, payload: { model: 'demo/gpt', messages: [{ role: 'user', content: 'x' }] }
  })
  t.equal((await call()).statusCode, 200)
  const refused = await call()
  t.equal(refused.statusCode, 429)
  t.equal(refused.headers['retry-after'], '60')
  t.equal(refused.headers['x-should-retry'], undefined, 'no x-should-retry: the SDKs may wait a minute and retry')
})
