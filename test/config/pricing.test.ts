import t from 'tap'
import { ConfigError, parseConfig } from '../../config/load.js'
import { priceOf } from '../../engine/gateway/catalog.js'

// Validation of every field of a price sheet, each problem with its path.

const model = (pricing: unknown, extra: Record<string, unknown> = {}): Record<string, unknown> =>
  ({ id: 'm', name: 'M', provider: 'p', context_length: 1_000_000, pricing, ...extra })

/** The problems of a config whose fourth model (models[3]) has `pricing`; [] when it is valid. */
function problems (pricing: unknown, extra: Record<string, unknown> = {}): string[] {
  const fine = model({ input: 1, output: 1 })
  try {
    parseConfig({ providers: [{ id: 'p', protocol: 'openai', base_url: 'https://x.test' }], models: [{ ...fine, id: 'a' }, { ...fine, id: 'b' }, { ...fine, id: 'c' }, { ...model(pricing, extra), id: 'd' }] }, {})
    return []
  } catch (err) {
    if (err instanceof ConfigError) return err.problems
    throw err
  }
}

const SONNET = { input: 3, cached_input: 0.3, cache_write: 3.75, cache_write_1h: 6, output: 15, per_request: 0.001, tiers: [{ above_input_tokens: 200_000, input: 6, cached_input: 0.6, cache_write: 7.5, cache_write_1h: 12, output: 22.5 }] }

t.test('a whole price sheet is valid, and what the charge reads of it', async (t) => {
  t.same(problems(SONNET), [])
  t.same(problems({ input: 0.02 }, { architecture: { input_modalities: ['text'], output_modalities: ['embeddings'] } }), [], 'an embedding model needs no output rate')
  t.same(problems({ input: 5, output: 40, per_image: { '1024x1024': 0.042, '1024x1536': 0.063, default: 0.042 } }, { architecture: { input_modalities: ['text'], output_modalities: ['image'] } }), [])
  t.same(problems({ input: 5, per_image: 0.04 }, { architecture: { input_modalities: ['text'], output_modalities: ['image'] } }), [], 'one price for every size')

  t.same(problems({ ...SONNET, server_tools: { web_search: 0.01, code_execution: 0.05 } }), [], 'server tools priced per use')
  t.same(priceOf({ input: 1, output: 1, server_tools: { web_search: 0.01 } })?.server_tools, new Map([['web_search', 10_000_000]]), 'in nano-dollars')

  const price = priceOf(SONNET)
  t.same(price, {
    input: 3000,
    cached_input: 300,
    output: 15000,
    cache_write: 3750,
    cache_write_1h: 6000,
    input_audio: 3000,
    output_audio: 15000,
    tiers: [{ input: 6000, cached_input: 600, output: 22500, cache_write: 7500, cache_write_1h: 12000, input_audio: 6000, output_audio: 22500, above: 200_000 }],
    per_request: 1_000_000
  }, 'nano-dollars per token; per_request in nano-dollars; audio tokens at the input and output rates when not set')
  t.match(priceOf({ input: 3, output: 15 }), { cached_input: 3000, cache_write: 3000, cache_write_1h: 3000 }, 'cache reads and writes default to the input rate')
  t.match(priceOf({ input: 3, cache_write: 3.75, output: 15 }), { cache_write_1h: 3750 }, '1-hour writes default to cache_write')
  t.same([...priceOf({ input: 1, per_image: 0.04 })?.per_image ?? []], [['default', 40_000_000]])
  t.match(priceOf({ input: 5, output: 20, input_audio: 40, output_audio: 80 }), { input_audio: 40_000, output_audio: 80_000 }, 'audio tokens at their own rates when set')
})

t.test('every new field is checked, with its path', async (t) => {
  const cases: Array<[string, unknown, RegExp, Record<string, unknown>?]> = [
    ['a negative cache write', { ...SONNET, cache_write: -1 }, /^models\[3\]\.pricing\.cache_write: must be >= 0$/],
    ['a 1-hour write with four decimals', { ...SONNET, cache_write_1h: 6.0005 }, /^models\[3\]\.pricing\.cache_write_1h: at most three decimals \(USD per million tokens\)$/],
    ['a text model without an output rate', { input: 1 }, /^models\[3\]\.pricing\.output: is required for a model that outputs text$/],
    ['an unknown key', { ...SONNET, cache_read: 1 }, /^models\[3\]\.pricing\.cache_read: is not a known key$/],
    ['a per-request price of ten decimals', { ...SONNET, per_request: 0.0000000001 }, /^models\[3\]\.pricing\.per_request: at most nine decimals \(USD\)$/],
    ['a negative per-request price', { ...SONNET, per_request: -0.5 }, /^models\[3\]\.pricing\.per_request: must be >= 0$/],
    ['a per-image map without a default', { input: 1, per_image: { '1024x1024': 0.04 } }, /^models\[3\]\.pricing\.per_image\.default: is required/, { architecture: { input_modalities: ['text'], output_modalities: ['image'] } }],
    ['a per-image price of ten decimals', { input: 1, per_image: { default: 0.0400000001 } }, /^models\[3\]\.pricing\.per_image\.default: at most nine decimals \(USD\)$/, { architecture: { input_modalities: ['text'], output_modalities: ['image'] } }],
    ['a per-image price that is text', { input: 1, per_image: 'cheap' }, /^models\[3\]\.pricing\.per_image: /, { architecture: { input_modalities: ['text'], output_modalities: ['image'] } }],
    ['an empty tier list', { ...SONNET, tiers: [] }, /^models\[3\]\.pricing\.tiers: /],
    ['a tier without its threshold', { ...SONNET, tiers: [{ input: 6, cached_input: 0.6, cache_write: 7.5, cache_write_1h: 12, output: 22.5 }] }, /^models\[3\]\.pricing\.tiers\[0\]\.above_input_tokens: is required$/],
    ['a tier with a negative input rate', { ...SONNET, tiers: [{ ...SONNET.tiers[0], input: -6 }] }, /^models\[3\]\.pricing\.tiers\[0\]\.input: must be >= 0$/],
    ['a tier rate of four decimals', { ...SONNET, tiers: [{ ...SONNET.tiers[0], output: 22.5001 }] }, /^models\[3\]\.pricing\.tiers\[0\]\.output: at most three decimals/],
    ['a tier that leaves out a rate the base names', { ...SONNET, tiers: [{ above_input_tokens: 200_000, input: 6, output: 22.5 }] }, /^models\[3\]\.pricing\.tiers\[0\]\.cached_input: is required, as pricing\.cached_input is set/],
    ['tiers out of order', { input: 1, output: 2, tiers: [{ above_input_tokens: 200_000, input: 2, output: 4 }, { above_input_tokens: 128_000, input: 3, output: 6 }] }, /^models\[3\]\.pricing\.tiers\[1\]\.above_input_tokens: must be above the previous tier's/],
    ['a tier no prompt reaches', { input: 1, output: 2, tiers: [{ above_input_tokens: 2_000_000, input: 2, output: 4 }] }, /^models\[3\]\.pricing\.tiers\[0\]\.above_input_tokens: must be below context_length \(1000000\)/],
    ['an audio rate with four decimals', { ...SONNET, input_audio: 40.0001 }, /^models\[3\]\.pricing\.input_audio: at most three decimals \(USD per million tokens\)$/],
    ['a tier that leaves out the audio rate the base names', { input: 1, output: 2, output_audio: 8, tiers: [{ above_input_tokens: 1000, input: 2, output: 4 }] }, /^models\[3\]\.pricing\.tiers\[0\]\.output_audio: is required, as pricing\.output_audio is set/],
    ['an unknown key in a tier', { input: 1, output: 2, tiers: [{ above_input_tokens: 1000, input: 2, output: 4, per_request: 1 }] }, /^models\[3\]\.pricing\.tiers\[0\]\.per_request: is not a known key$/],
    ['a negative server tool price', { ...SONNET, server_tools: { web_search: -0.01 } }, /^models\[3\]\.pricing\.server_tools\.web_search: must be >= 0$/],
    ['a server tool price of ten decimals', { ...SONNET, server_tools: { web_search: 0.0100000001 } }, /^models\[3\]\.pricing\.server_tools\.web_search: at most nine decimals \(USD per use\)$/],
    ['a server tool kind that is no name', { ...SONNET, server_tools: { 'Web Search': 0.01 } }, /^models\[3\]\.pricing\.server_tools/]
  ]
  for (const [what, pricing, want, extra] of cases) {
    const found = problems(pricing, extra)
    t.ok(found.some((p) => want.test(p)), `${what}: ${found.join(' | ')}`)
  }
})
