import t from 'tap'
import { Tiktoken } from 'js-tiktoken/lite'
import ranks from 'js-tiktoken/ranks/o200k_base'
import { countGeminiTokens, countTexts, countTokens, MAX_PIECE, MAX_WORK, o200kBase, pieceWork, SLICE_WORK, type Encoding } from '../../engine/translation/tokenizer.js'
import { bearer, build, KEY_A } from '../helper.js'

// The count_tokens tokenizer is bounded: the BPE never sees a piece longer than MAX_PIECE, the
// work between two yields to the event loop is bounded, and so is the work of one request.
// Nothing here measures time: an encoder that records what it is given checks the bounds.

const raw = new Tiktoken(ranks)
const pattern = new RegExp(ranks.pat_str, 'gu')
const piecesOf = (text: string): string[] => [...text.matchAll(pattern)].map((m) => m[0])
const workOf = (text: string): number => piecesOf(text).reduce((n, p) => n + pieceWork(p), 0)

interface Spy extends Encoding { calls: string[], slices: number[] }

/** The real encoding, recording each text it encodes and the work done between two pauses. */
async function spy (): Promise<{ enc: Spy, pause: () => Promise<void> }> {
  const real = await o200kBase()
  const enc: Spy = {
    pattern: real.pattern,
    calls: [],
    slices: [0],
    encode: (text) => {
      enc.calls.push(text)
      enc.slices[enc.slices.length - 1] += workOf(text)
      return real.encode(text)
    }
  }
  return { enc, pause: async () => { enc.slices.push(0) } }
}

// What count_tokens answered before the bounds: every string encoded whole.
const SAMPLES = [
  'Hello, world! How are you today?',
  'The quick brown fox jumps over the lazy dog. '.repeat(200),
  'function add (a, b) {\n  return a + b\n}\n\nconsole.log(add(1, 2))\n'.repeat(50),
  '吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。',
  '天下大势，分久必合，合久必分。',
  'Emoji 😀🎉👍🏽 and accents: café, naïve, Ærøskøbing.',
  '    indented\n\t\ttabs\r\n\r\n   trailing   ',
  'Numbers 1234567890 3.14159 -42 1e10',
  JSON.stringify([{ name: 'get_weather', description: 'Weather of a city', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }]),
  'URL https://example.com/a/b?c=d&e=f#g and an email a.b@example.org'
]

t.test('counts of normal text are what whole-string encoding gave', async (t) => {
  const enc = await o200kBase()
  for (const text of SAMPLES) t.equal(await countTexts([text], enc), raw.encode(text).length, text.slice(0, 30))
  const body = {
    system: 'You are terse.',
    messages: [
      { role: 'user', content: SAMPLES[1] },
      { role: 'assistant', content: [{ type: 'text', text: SAMPLES[2] }] },
      { role: 'user', content: [{ type: 'text', text: SAMPLES[3] }, { type: 'image', source: { type: 'base64', media_type: 'image/png', data: 'AAAA' } }] }
    ],
    tools: JSON.parse(SAMPLES[8] as string)
  }
  // one image, three turns, and every string but the image's: roles included
  const before = 1 * 1_600 + 3 * 4 + ['You are terse.', 'user', SAMPLES[1], 'assistant', SAMPLES[2], 'user', SAMPLES[3], JSON.stringify(body.tools)].reduce((n, s) => n + raw.encode(s as string).length, 0)
  t.equal(await countTokens(body), before)
})

t.test('a Gemini request: the system instruction, the parts\' text, calls and results, images at their allowance; signatures and base64 not counted', async (t) => {
  const call = { name: 'get_weather', args: { city: 'Lyon' } }
  const result = { name: 'get_weather', response: { output: 'sunny' } }
  const body = {
    systemInstruction: { role: 'system', parts: [{ text: 'You are terse.' }] },
    contents: [
      { role: 'user', parts: [{ text: SAMPLES[1] }, { inlineData: { mimeType: 'image/png', data: 'A'.repeat(50_000) } }] },
      { role: 'model', parts: [{ text: SAMPLES[2], thoughtSignature: 'S'.repeat(4000) }, { functionCall: call }] },
      { role: 'user', parts: [{ functionResponse: result }, { fileData: { mimeType: 'image/jpeg', fileUri: 'https://example.com/a.jpg' } }] }
    ],
    tools: [{ functionDeclarations: [{ name: 'get_weather', parameters: { type: 'OBJECT' } }] }]
  }
  // two images, three turns, and the texts: no role names, no signature, no base64
  const want = 2 * 1_600 + 3 * 4 + ['You are terse.', SAMPLES[1], SAMPLES[2], JSON.stringify(call), JSON.stringify(result), JSON.stringify(body.tools)].reduce((n, s) => n + raw.encode(s as string).length, 0)
  t.equal(await countGeminiTokens(body), want)
  t.equal(await countGeminiTokens({ systemInstruction: 'Be brief.', contents: [{ role: 'user', parts: [{ text: 'Hi' }] }] }), 4 + raw.encode('Be brief.').length + raw.encode('Hi').length, 'a plain string system instruction')
  t.equal(await countGeminiTokens({ contents: [] }), 1, 'never 0')
})

t.test('special-token names are plain text, not an error', async (t) => {
  const n = await countTokens({ messages: [{ role: 'user', content: 'before <|endoftext|> after <|endofprompt|>' }] })
  t.ok(n > 4)
})

t.test('no piece longer than MAX_PIECE reaches the BPE', async (t) => {
  const { enc, pause } = await spy()
  const texts = ['A'.repeat(100_000), '日'.repeat(20_000), '!'.repeat(5_000), ' '.repeat(5_000) + 'x', '😀'.repeat(3_000), 'ab' + 'Z'.repeat(1_000) + ' normal words after']
  const n = await countTexts(texts, enc, pause)
  t.ok(n > 0)
  let longest = 0
  for (const call of enc.calls) for (const p of piecesOf(call)) longest = Math.max(longest, p.length)
  t.ok(longest <= MAX_PIECE, `longest piece given to the BPE: ${longest}`)
  t.ok(enc.calls.every((c) => !c.includes('\uFFFD') && !/[\uD800-\uDBFF]$/.test(c)), 'no surrogate pair is split')
})

t.test('the work between two yields to the event loop is bounded', async (t) => {
  const { enc, pause } = await spy()
  await countTexts(['The quick brown fox jumps over the lazy dog. '.repeat(2_000), 'B'.repeat(20_000), '日本'.repeat(5_000)], enc, pause)
  const maxPiece = pieceWork('😀'.repeat(MAX_PIECE / 2))
  t.ok(enc.slices.length > 10, `${enc.slices.length} slices`)
  t.ok(Math.max(...enc.slices) <= SLICE_WORK + maxPiece, `largest slice: ${Math.max(...enc.slices)} units`)
})

t.test('past MAX_WORK the rest is estimated, not encoded', async (t) => {
  const { enc, pause } = await spy()
  const unit = 'The quick brown fox jumps over the lazy dog. '
  const reps = 60_000 // about 2.7 MB, far past the budget
  const n = await countTexts([unit.repeat(reps)], enc, pause)
  const encoded = enc.calls.reduce((w, c) => w + workOf(c), 0)
  t.ok(encoded <= MAX_WORK + SLICE_WORK, `work encoded: ${encoded}`)
  t.ok(enc.calls.reduce((c, s) => c + s.length, 0) < unit.length * reps / 2, 'most of the text was not encoded')
  const exact = raw.encode(unit.repeat(100)).length * reps / 100
  t.ok(Math.abs(n - exact) / exact < 0.01, `estimate ${n} vs ${exact}`)

  const { enc: enc2, pause: pause2 } = await spy()
  const long = await countTexts(['A'.repeat(1_000_000)], enc2, pause2)
  t.ok(enc2.calls.reduce((w, c) => w + workOf(c), 0) <= MAX_WORK + SLICE_WORK, 'one long piece is bounded too')
  t.ok(long > 1_000_000 / MAX_PIECE, `a plausible count: ${long}`)
})

t.test('count_tokens of one long piece answers', async (t) => {
  const app = await build(t)
  const res = await app.inject({ method: 'POST', url: '/v1/messages/count_tokens', headers: bearer(KEY_A), payload: { model: 'demo/gpt', messages: [{ role: 'user', content: 'A'.repeat(50_000) }] } })
  t.equal(res.statusCode, 200)
  t.ok(res.json().input_tokens > 50_000 / MAX_PIECE)
  const special = await app.inject({ method: 'POST', url: '/v1/messages/count_tokens', headers: bearer(KEY_A), payload: { model: 'demo/gpt', messages: [{ role: 'user', content: 'say <|endoftext|>' }] } })
  t.equal(special.statusCode, 200, 'a special-token name in the text is counted, not a 500')
})
