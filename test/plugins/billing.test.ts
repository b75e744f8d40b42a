import t from 'tap'
import { chargeOf, estimatePromptTokens, settle } from '../../plugins/gateway/billing.js'
import { nanoToUsd, parseUsd, pricePerToken, usdToNano } from '../../plugins/kernel/money.js'
import type { Usage } from '../../plugins/translation/types.js'

const usage = (prompt: number, cached: number, completion: number): Usage => ({ prompt_tokens: prompt, cached_input_tokens: cached, completion_tokens: completion, cache_creation_input_tokens: 0 })

t.test('money: exact conversions', async (t) => {
  t.equal(usdToNano(25), 25_000_000_000)
  t.equal(nanoToUsd(1_500_000_000), '1.5')
  t.equal(nanoToUsd(25), '0.000000025')
  t.equal(nanoToUsd(0), '0')
  t.equal(nanoToUsd(-2_000_000_001), '-2.000000001')
  t.equal(parseUsd('12.5'), 12_500_000_000)
  t.equal(parseUsd('0.000000001'), 1)
  t.equal(parseUsd('1.0000000001'), undefined, 'more than nine decimals')
  t.equal(parseUsd('abc'), undefined)
  t.equal(pricePerToken(0.15), 150)
  t.equal(pricePerToken(0.075), 75)
  t.equal(pricePerToken(15), 15_000)
})

t.test('the spec\'s billing rule', async (t) => {
  const price = { input: pricePerToken(2.5), cached_input: pricePerToken(1.25), output: pricePerToken(10) }
  // (1000 − 400) × 2.5 + 400 × 1.25 + 200 × 10, per million tokens
  t.equal(chargeOf(usage(1000, 400, 200), price), 600 * 2500 + 400 * 1250 + 200 * 10_000)
  t.equal(nanoToUsd(chargeOf(usage(1000, 400, 200), price)), '0.004')
  const noCachedRate = { input: pricePerToken(3), cached_input: pricePerToken(3), output: pricePerToken(15) }
  t.equal(chargeOf(usage(1000, 400, 0), noCachedRate), 1000 * 3000, 'no cached rate: all input at the input rate')
  t.equal(chargeOf(usage(1000, 0, 10), null), 0, 'no price: costs 0')
  t.equal(chargeOf(null, price), 0)
})

t.test('a million small charges add up to the charge of the summed tokens (no drift)', async (t) => {
  const price = { input: pricePerToken(0.15), cached_input: pricePerToken(0.075), output: pricePerToken(0.6) }
  let sum = 0
  const total = usage(0, 0, 0)
  for (let i = 0; i < 1_000_000; i++) {
    const u = usage(1 + (i % 7), i % 3 === 0 ? 1 : 0, (i * 13) % 5)
    sum += chargeOf(u, price)
    total.prompt_tokens += u.prompt_tokens
    total.cached_input_tokens += u.cached_input_tokens
    total.completion_tokens += u.completion_tokens
  }
  t.equal(sum, chargeOf(total, price))
  t.ok(Number.isSafeInteger(sum))
})

t.test('settle: reported usage; estimates when it never came; nothing when the client got nothing', async (t) => {
  const price = { input: 1000, cached_input: 500, output: 2000 }
  const base = { billed: true, complete: true, relayedText: '', requestBody: { messages: [{ role: 'user', content: 'hello there' }] } }
  const s = settle({ ...base, usage: usage(10, 2, 5) }, price)
  t.same(s.usage, usage(10, 2, 5))
  t.equal(s.cost, 8 * 1000 + 2 * 500 + 5 * 2000)
  t.equal(s.estimated, false)

  const aborted = settle({ ...base, usage: null, complete: false, relayedText: 'twelve chars' }, price)
  t.equal(aborted.estimated, true)
  t.equal(aborted.usage.completion_tokens, 3, 'output counted from what was relayed')
  t.equal(aborted.usage.prompt_tokens, 4, 'input estimated from the request text ("user", "hello there")')

  const partial = { ...base, usage: usage(50, 0, 1), complete: false, relayedText: 'x'.repeat(40) }
  t.equal(settle(partial, price).usage.completion_tokens, 10, 'a reported count below what was relayed is raised')
  t.equal(settle(partial, price).usage.prompt_tokens, 50, 'the reported input is kept')
  t.equal(settle({ ...partial, complete: true }, price).usage.completion_tokens, 1, 'a finished answer keeps its reported count')

  const unbilled = settle({ ...base, billed: false, usage: usage(10, 0, 5) }, price)
  t.same(unbilled, { usage: usage(0, 0, 0), cost: 0, estimated: false }, 'a call whose client got no answer costs nothing, whatever was reported')
})

t.test('estimatePromptTokens is an upper bound for holds', async (t) => {
  const text = 'a'.repeat(1000)
  t.equal(estimatePromptTokens({ messages: [{ role: 'user', content: text }] }), 1000 + 'user'.length)
  const withImage = estimatePromptTokens({ messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'A'.repeat(100_000) } }] }] })
  t.ok(withImage >= 1600 && withImage < 2000, 'base64 bytes are not counted as text')
})

t.test('estimatePromptTokens reads a Gemini request: contents, systemInstruction, media; not signatures or base64', async (t) => {
  const text = 'a'.repeat(1000)
  const body = (parts: unknown[], extra: Record<string, unknown> = {}): Record<string, unknown> => ({ contents: [{ role: 'user', parts }], ...extra })
  t.equal(estimatePromptTokens(body([{ text }])), 1000 + 'user'.length, 'the contents\' text')
  t.equal(estimatePromptTokens(body([{ text }], { systemInstruction: { parts: [{ text: 'b'.repeat(500) }] } })), 1500 + 'user'.length, 'and the system instruction\'s')
  t.equal(estimatePromptTokens(body([{ text, thoughtSignature: 'S'.repeat(5000) }])), 1000 + 'user'.length, 'a thought signature is no text')
  const image = estimatePromptTokens(body([{ inlineData: { mimeType: 'image/png', data: 'A'.repeat(100_000) } }]))
  t.ok(image >= 1600 && image < 2000, `an inline image: its allowance, not its bytes (${image})`)
  const file = estimatePromptTokens(body([{ fileData: { mimeType: 'image/png', fileUri: 'https://example.com/a.png' } }]))
  t.ok(file >= 1600 && file < 2000, 'an image by URL too')
})
