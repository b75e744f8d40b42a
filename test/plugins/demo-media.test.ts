import t from 'tap'
import { inflateSync } from 'node:zlib'
import { vectorFromBase64 } from '../../engine/translation/embeddings.js'
import type { Json } from '../../engine/translation/types.js'
import { createDemoClient } from '../../engine/upstream/demo.js'
import { cosine, DEMO_DIMENSIONS, demoPng, demoVector } from '../../engine/upstream/demo-media.js'
import { CallAbort, type UpstreamResponse } from '../../engine/upstream/types.js'

// The demo models' embeddings and images: vectors that behave like a real model's (equal texts
// equal, related texts closer than unrelated ones, unit length, shortened on request), valid PNGs
// (checked with a CRC-32 of the test's own and by inflating their pixels), and the demo provider
// answering both routes in OpenAI's and Gemini's protocols.

const norm = (v: readonly number[]): number => Math.sqrt(v.reduce((s, x) => s + x * x, 0))

t.test('demo vectors: deterministic, unit length, and closer for related texts', async (t) => {
  const a = demoVector('The heron waits by the river.')
  t.same(a, demoVector('The heron waits by the river.'), 'equal texts, equal vectors')
  t.equal(a.length, DEMO_DIMENSIONS)
  t.ok(Math.abs(norm(a) - 1) < 1e-9, 'unit length')
  const pairs: Array<[string, string, string]> = [
    ['the cat sat on the mat', 'cats sitting on mats', 'quarterly revenue grew by ten percent'],
    ['how do I reset my password', 'I forgot my password, how can I reset it', 'the best pasta recipe with tomatoes'],
    ['GPU memory usage during training', 'training uses a lot of GPU memory', 'a quiet walk along the beach']
  ]
  for (const [q, related, unrelated] of pairs) {
    const near = cosine(demoVector(q), demoVector(related))
    const far = cosine(demoVector(q), demoVector(unrelated))
    t.ok(near > far + 0.3, `"${q}": ${near.toFixed(2)} to a related text, ${far.toFixed(2)} to an unrelated one`)
  }
  const short = demoVector('The heron waits by the river.', 16)
  t.equal(short.length, 16)
  t.ok(Math.abs(norm(short) - 1) < 1e-9, 'a shortened vector is normalized again')
  t.ok(cosine(short, a.slice(0, 16)) > 0.999, 'the first values of the whole one')
  t.same(demoVector([1, 2, 3]), demoVector([1, 2, 3]), 'token ids too')
  t.ok(norm(demoVector('!!!')) > 0.99, 'a text without words still gets a direction')
})

/** CRC-32 (ISO 3309), computed here rather than by the zlib the PNG writer uses. */
function crc32 (bytes: Buffer): number {
  let c = 0xffffffff
  for (const b of bytes) {
    c ^= b
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1))
  }
  return (c ^ 0xffffffff) >>> 0
}

function chunks (png: Buffer): Array<{ type: string, data: Buffer }> {
  const out: Array<{ type: string, data: Buffer }> = []
  for (let at = 8; at < png.length;) {
    const length = png.readUInt32BE(at)
    const type = png.subarray(at + 4, at + 8)
    const data = png.subarray(at + 8, at + 8 + length)
    if (png.readUInt32BE(at + 8 + length) !== crc32(Buffer.concat([type, data]))) throw new Error(`bad CRC in ${type.toString('latin1')}`)
    out.push({ type: type.toString('latin1'), data })
    at += 12 + length
  }
  return out
}

t.test('demo images: valid PNGs of the aspect ratio asked for, drawn from the prompt', async (t) => {
  for (const [w, h, pw, ph] of [[1024, 1024, 64, 64], [1536, 1024, 64, 43], [1024, 1792, 37, 64]]) {
    const png = demoPng('a red fox in the snow', w as number, h as number)
    t.equal(png.subarray(0, 8).toString('hex'), '89504e470d0a1a0a', 'the PNG signature')
    const list = chunks(png)
    t.same(list.map((c) => c.type), ['IHDR', 'IDAT', 'IEND'])
    const ihdr = list[0]?.data as Buffer
    t.same([ihdr.readUInt32BE(0), ihdr.readUInt32BE(4), ihdr[8], ihdr[9]], [pw, ph, 8, 2], `${w}x${h}: ${pw}x${ph}, 8-bit RGB`)
    const raw = inflateSync(list[1]?.data as Buffer)
    t.equal(raw.length, (ph as number) * (1 + 3 * (pw as number)), 'every row of pixels, each after its filter byte')
  }
  t.ok(demoPng('a fox', 64, 64).equals(demoPng('a fox', 64, 64)), 'the same prompt, the same image')
  t.notOk(demoPng('a fox', 64, 64).equals(demoPng('a whale', 64, 64)), 'another prompt, another image')
  t.notOk(demoPng('a fox', 64, 64, 0).equals(demoPng('a fox', 64, 64, 1)), 'the images of one call differ')
})

async function json (res: UpstreamResponse): Promise<Json> {
  let text = ''
  for await (const chunk of res.body) text += String(chunk)
  return JSON.parse(text) as Json
}

t.test('the demo provider embeds and draws in OpenAI\'s and Gemini\'s protocols', async (t) => {
  const signal = new CallAbort()
  const openai = createDemoClient('demo', 'openai', { chunkDelayMs: 0 })
  const embedded = await openai.request({ path: '/embeddings', headers: {}, body: JSON.stringify({ model: 'embed-1', input: ['hello', [1, 2]], encoding_format: 'base64', dimensions: 8 }), signal })
  t.equal(embedded.statusCode, 200)
  const list = await json(embedded) as { data: Array<{ embedding: string }>, usage: Json, model: string }
  t.equal(list.model, 'embed-1')
  t.same(list.usage, { prompt_tokens: 4, total_tokens: 4 }, 'a token per four characters (at least one), a token per id: 2 + 2')
  t.ok(vectorFromBase64(list.data[0]?.embedding ?? '').every((x, i) => Math.abs(x - (demoVector('hello', 8)[i] as number)) < 1e-6))
  const tooWide = await openai.request({ path: '/embeddings', headers: {}, body: JSON.stringify({ model: 'embed-1', input: 'x', dimensions: 4096 }), signal })
  t.equal(tooWide.statusCode, 400)
  t.match(await json(tooWide), { error: { message: /dimensions from 1 to 256/ } })

  const drawn = await openai.request({ path: '/images/generations', headers: {}, body: JSON.stringify({ model: 'image-1', prompt: 'a fox', n: 2 }), signal })
  const images = await json(drawn) as { data: Array<{ b64_json: string }>, usage: Json }
  t.equal(images.data.length, 2)
  t.match(images.usage, { input_tokens: 2, output_tokens: 512 })
  t.same(chunks(Buffer.from(images.data[1]?.b64_json ?? '', 'base64')).map((c) => c.type), ['IHDR', 'IDAT', 'IEND'])

  const gemini = createDemoClient('demo-gemini', 'gemini', { chunkDelayMs: 0 })
  const batch = await gemini.request({ path: '/v1beta/models/embed-g:batchEmbedContents', headers: {}, body: JSON.stringify({ requests: [{ model: 'models/embed-g', content: { parts: [{ text: 'hello' }] }, outputDimensionality: 4 }] }), signal })
  t.same(await json(batch), { embeddings: [{ values: demoVector('hello', 4) }] })
  const one = await gemini.request({ path: '/v1beta/models/embed-g:embedContent', headers: {}, body: JSON.stringify({ content: { parts: [{ text: 'hello' }] } }), signal })
  t.same(await json(one), { embedding: { values: demoVector('hello') } })
  const picture = await gemini.request({
    path: '/v1beta/models/image-g:generateContent',
    headers: {},
    body: JSON.stringify({ contents: [{ role: 'user', parts: [{ text: 'a fox' }] }], generationConfig: { responseModalities: ['TEXT', 'IMAGE'], imageConfig: { aspectRatio: '16:9' } } }),
    signal
  })
  const answer = await json(picture) as { candidates: Array<{ content: { parts: Array<{ inlineData: { mimeType: string, data: string } }> }, finishReason: string }>, usageMetadata: Json }
  const inline = answer.candidates[0]?.content.parts[0]?.inlineData
  t.equal(inline?.mimeType, 'image/png')
  t.same(chunks(Buffer.from(inline?.data ?? '', 'base64'))[0]?.data.subarray(0, 8), Buffer.from([0, 0, 0, 64, 0, 0, 0, 36]), '16:9: 64x36')
  t.match(answer.usageMetadata, { candidatesTokenCount: 1290 })
})
