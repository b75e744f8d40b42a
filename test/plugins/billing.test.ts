import t from 'tap'
import { chargeOf, costOf, estimatePromptTokens, settle, worstCaseCharge } from '../../engine/gateway/billing.js'
import { priceOf } from '../../engine/gateway/catalog.js'
import { nanoToUsd, parseUsd, pricePerToken, usdToNano } from '../../engine/kernel/money.js'
import type { Usage } from '../../engine/translation/types.js'
import { toOpenAIUsage, usageFromOpenAI } from '../../engine/protocols/chat/usage.js'

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
  t.same(unbilled, { usage: usage(0, 0, 0), cost: 0, detail: { input: 0, cached_input: 0, cache_write: 0, output: 0, images: 0, per_request: 0, tool_call: 0, tier: null }, estimated: false }, 'a call whose client got no answer costs nothing, whatever was reported')
})

t.test('estimatePromptTokens is an upper bound for holds', async (t) => {
  const text = 'a'.repeat(1000)
  // a few tokens per message (or block) for its role and separators
  t.equal(estimatePromptTokens({ messages: [{ role: 'user', content: text }] }), 1000 + 'user'.length + 4)
  const withImage = estimatePromptTokens({ messages: [{ role: 'user', content: [{ type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'A'.repeat(100_000) } }] }] })
  t.ok(withImage >= 1600 && withImage < 2000, 'base64 bytes are not counted as text')
})

t.test('estimatePromptTokens reads a Gemini request: contents, systemInstruction, media; not signatures or base64', async (t) => {
  const text = 'a'.repeat(1000)
  const body = (parts: unknown[], extra: Record<string, unknown> = {}): Record<string, unknown> => ({ contents: [{ role: 'user', parts }], ...extra })
  // and a few tokens per turn and per part
  t.equal(estimatePromptTokens(body([{ text }])), 1000 + 'user'.length + 8, 'the contents\' text')
  t.equal(estimatePromptTokens(body([{ text }], { systemInstruction: { parts: [{ text: 'b'.repeat(500) }] } })), 1500 + 'user'.length + 16, 'and the system instruction\'s')
  t.equal(estimatePromptTokens(body([{ text, thoughtSignature: 'S'.repeat(5000) }])), 1000 + 'user'.length + 8, 'a thought signature is no text')
  const image = estimatePromptTokens(body([{ inlineData: { mimeType: 'image/png', data: 'A'.repeat(100_000) } }]))
  t.ok(image >= 1600 && image < 2000, `an inline image: its allowance, not its bytes (${image})`)
  const file = estimatePromptTokens(body([{ fileData: { mimeType: 'image/png', fileUri: 'https://example.com/a.png' } }]))
  t.ok(file >= 1600 && file < 2000, 'an image by URL too')
})

t.test('the whole price sheet: cache writes, the 1-hour part, tiers at their boundary, images by size, a per-request price', async (t) => {
  const price = priceOf({ input: 3, cached_input: 0.3, cache_write: 3.75, cache_write_1h: 6, output: 15, per_request: 0.002, tiers: [{ above_input_tokens: 1000, input: 6, cached_input: 0.6, cache_write: 7.5, cache_write_1h: 12, output: 22.5 }, { above_input_tokens: 5000, input: 9, cached_input: 0.9, cache_write: 11.25, cache_write_1h: 18, output: 30 }] })
  const writes = (prompt: number, read: number, write: number, hour: number, out: number): Usage => ({ prompt_tokens: prompt, cached_input_tokens: read, completion_tokens: out, cache_creation_input_tokens: write, cache_write_1h_tokens: hour })
  // 1000 tokens: not past the first tier. 400 plain, 300 read, 300 written of which 100 for an hour
  t.same(costOf(writes(1000, 300, 300, 100, 10), price), { input: 400 * 3000, cached_input: 300 * 300, cache_write: 200 * 3750 + 100 * 6000, output: 10 * 15000, images: 0, per_request: 2_000_000, tool_call: 0, tier: null }, 'at the threshold: the base rates')
  t.same(costOf(writes(1001, 300, 300, 100, 10), price), { input: 401 * 6000, cached_input: 300 * 600, cache_write: 200 * 7500 + 100 * 12000, output: 10 * 22500, images: 0, per_request: 2_000_000, tool_call: 0, tier: 1000 }, 'one token past it: the whole call at the tier')
  t.equal(costOf(writes(6000, 0, 0, 0, 0), price).tier, 5000, 'the highest tier the prompt exceeds')
  t.same(costOf(writes(100, 0, 50, 80, 0), price), { input: 50 * 3000, cached_input: 0, cache_write: 50 * 6000, output: 0, images: 0, per_request: 2_000_000, tool_call: 0, tier: null }, 'a 1-hour count above the writes is held to them')
  t.equal(costOf(writes(100, 80, 50, 0, 0), price).cache_write, 20 * 3750, 'writes above what the reads leave of the prompt are held to it')
  t.equal(chargeOf(writes(1000, 300, 300, 100, 10), price), 400 * 3000 + 300 * 300 + 200 * 3750 + 100 * 6000 + 10 * 15000 + 2_000_000, 'the charge is the sum of its parts')

  const plain = priceOf({ input: 3, output: 15 })
  t.same(costOf(writes(1000, 300, 300, 100, 0), plain), { input: 400 * 3000, cached_input: 300 * 3000, cache_write: 300 * 3000, output: 0, images: 0, per_request: 0, tool_call: 0, tier: null }, 'no cache prices: reads and writes at the input rate')

  const image = priceOf({ input: 5, output: 40, per_image: { '1024x1024': 0.042, '1024x1536': 0.063, default: 0.05 } })
  const images = (n: number, size?: string): Usage => ({ ...usage(20, 0, 0), images: n, image_size: size })
  t.equal(costOf(images(2, '1024x1536'), image).images, 2 * 63_000_000, 'the price of the size asked for')
  t.equal(costOf(images(3, '256x256'), image).images, 3 * 50_000_000, 'a size not listed: the default')
  t.equal(costOf(images(1), image).images, 50_000_000, 'no size: the default')
  t.equal(costOf(images(4, 'any'), priceOf({ input: 5, per_image: 0.04 })).images, 4 * 40_000_000, 'one price for every size')
  t.equal(costOf(images(2, '1024x1024'), image).input, 20 * 5000, 'the prompt\'s tokens at the token rate besides')

  const audio = priceOf({ input: 5, cached_input: 2.5, output: 20, input_audio: 40, output_audio: 80 })
  const spoken = (prompt: number, cached: number, audioIn: number, out: number, audioOut: number): Usage => ({ ...usage(prompt, cached, out), audio_input_tokens: audioIn, audio_output_tokens: audioOut })
  t.same(costOf(spoken(1300, 100, 1000, 300, 250), audio), { input: 200 * 5000 + 1000 * 40_000, cached_input: 100 * 2500, cache_write: 0, output: 50 * 20_000 + 250 * 80_000, images: 0, per_request: 0, tool_call: 0, tier: null }, 'audio tokens at the audio rates, inside the input and output parts')
  t.equal(costOf(spoken(1000, 400, 1000, 0, 0), audio).input, 600 * 40_000, 'audio taken as uncached first: never less than the sheet says')
  t.equal(costOf(spoken(100, 0, 500, 10, 50), audio).output, 10 * 80_000, 'counts above the totals are held to them')
  t.equal(chargeOf(spoken(1000, 0, 1000, 10, 10), priceOf({ input: 5, output: 20 })), 1000 * 5000 + 10 * 20_000, 'no audio rates: audio at the input and output rates')
  t.equal(worstCaseCharge(audio as NonNullable<typeof audio>, 100), 100 * 80_000, 'a hold counts the audio rates too')

  t.equal(worstCaseCharge(price as NonNullable<typeof price>, 100), 100 * 30_000 + 2_000_000, 'a hold: every token at the highest rate of every tier, and the per-request price')
  t.equal(worstCaseCharge(image as NonNullable<typeof image>, 10, 2), 10 * 40_000 + 2 * 63_000_000, 'and each image at the highest image price')
})

t.test('OpenAI usage: audio tokens of both details, held to the totals; and back', async (t) => {
  const u = usageFromOpenAI({ prompt_tokens: 1300, completion_tokens: 300, prompt_tokens_details: { cached_tokens: 100, audio_tokens: 1000 }, completion_tokens_details: { audio_tokens: 250, reasoning_tokens: 0 } })
  t.same(u, { prompt_tokens: 1300, cached_input_tokens: 100, completion_tokens: 300, cache_creation_input_tokens: 0, audio_input_tokens: 1000, audio_output_tokens: 250 })
  t.same(usageFromOpenAI({ prompt_tokens: 10, completion_tokens: 5, prompt_tokens_details: { audio_tokens: 50 }, completion_tokens_details: { audio_tokens: 0 } }), { prompt_tokens: 10, cached_input_tokens: 0, completion_tokens: 5, cache_creation_input_tokens: 0, audio_input_tokens: 10 }, 'held to the prompt; none: no field')
  t.same(toOpenAIUsage(u as Usage), { prompt_tokens: 1300, completion_tokens: 300, total_tokens: 1600, prompt_tokens_details: { cached_tokens: 100, audio_tokens: 1000 }, completion_tokens_details: { audio_tokens: 250 } })
  t.same(toOpenAIUsage(usage(10, 0, 5)), { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15, prompt_tokens_details: { cached_tokens: 0 } }, 'no audio: as before')
})
