import t from 'tap'
import fc from 'fast-check'
import type { FastifyInstance } from 'fastify'
import { parseConfig, readConfigFile } from '../../config/load.js'
import { fromRoot } from '../../paths.js'

// Property-based fuzzing of the JSON keys a client chooses, on every translating route and every
// demo model of the shipped catalog (OpenAI, Messages and Gemini upstreams): a key with control
// characters, non-ASCII text, commas, quotes, percent signs, `__proto__` or thousands of
// characters, added anywhere in an otherwise valid body. Whatever the key: never a 5xx, every
// error in its route family's shape, every response header a valid header value, and
// `{prefix}Dropped-Params` a comma-separated list of tokens in which a dropped key is one name
// (docs/api.md, "Dropped parameters"), never split in two. A share of the runs here;
// names.slow.test.ts runs the full count on another seed. FUZZ_SEED and FUZZ_RUNS replay or widen a run.

const SEED = Number(process.env.FUZZ_SEED ?? 20261207)
const RUNS = Number(process.env.FUZZ_RUNS ?? 250)
const DEMO_KEY = 'mg-demo-local-only-0123456789abcdef'
const DROPPED = 'x-svc-dropped-params'
// the demo provider's pause between streamed words is not what is checked here: streams come at once
process.env.MODELGATE_DEMO_DELAY_MS = '0'

/** A header value as HTTP allows it (RFC 9110 field-value), and what the gateway sends: printable ASCII. */
const HEADER_VALUE = /^[\x20-\x7e]*$/
/** The documented form of a dropped-parameters list. */
const TOKEN_LIST = /^[A-Za-z0-9_.%-]+(?:,[A-Za-z0-9_.%-]+)*$/

interface Case { name: string, url: string, body: Record<string, unknown>, family: 'openai' | 'messages' | 'gemini', streams: boolean, reportsTopLevel: boolean }

const CHAT_MODELS = ['demo/echo-1', 'demo/claude-sim', 'demo/gemini-sim', 'demo/free-1']
const text = (s: string): Array<Record<string, unknown>> => [{ role: 'user', content: s }]

const CASES: Case[] = [
  ...CHAT_MODELS.flatMap((model): Case[] => [
    { name: `chat ${model}`, url: '/v1/chat/completions', body: { model, messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'Hi' }] }], max_tokens: 16, tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }] }, family: 'openai', streams: true, reportsTopLevel: true },
    { name: `messages ${model}`, url: '/v1/messages', body: { model, max_tokens: 16, system: 'Be brief.', messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }] }], tools: [{ name: 'f', input_schema: { type: 'object' } }] }, family: 'messages', streams: true, reportsTopLevel: true },
    { name: `count_tokens ${model}`, url: '/v1/messages/count_tokens', body: { model, messages: text('Hi') }, family: 'messages', streams: false, reportsTopLevel: false },
    { name: `responses ${model}`, url: '/v1/responses', body: { model, instructions: 'Be brief.', input: [{ role: 'user', content: [{ type: 'input_text', text: 'Hi' }] }], max_output_tokens: 16, reasoning: { effort: 'low' }, text: { verbosity: 'low' }, tools: [{ type: 'function', name: 'f', parameters: { type: 'object' } }] }, family: 'openai', streams: true, reportsTopLevel: true },
    { name: `generateContent ${model}`, url: `/v1beta/models/${model}:generateContent`, body: { systemInstruction: { parts: [{ text: 'Be brief.' }] }, contents: [{ role: 'user', parts: [{ text: 'Hi' }] }], tools: [{ functionDeclarations: [{ name: 'f', parameters: { type: 'OBJECT' } }] }], generationConfig: { maxOutputTokens: 16, topK: 3 } }, family: 'gemini', streams: false, reportsTopLevel: true },
    { name: `streamGenerateContent ${model}`, url: `/v1beta/models/${model}:streamGenerateContent?alt=sse`, body: { contents: [{ role: 'user', parts: [{ text: 'Hi' }] }], generationConfig: { maxOutputTokens: 16 } }, family: 'gemini', streams: false, reportsTopLevel: true },
    { name: `countTokens ${model}`, url: `/v1beta/models/${model}:countTokens`, body: { contents: [{ role: 'user', parts: [{ text: 'Hi' }] }] }, family: 'gemini', streams: false, reportsTopLevel: false }
  ]),
  { name: 'embeddings demo/embed-1', url: '/v1/embeddings', body: { model: 'demo/embed-1', input: ['the cat', 'the mat'], encoding_format: 'float' }, family: 'openai', streams: false, reportsTopLevel: false },
  { name: 'embedContent demo/embed-1', url: '/v1beta/models/demo/embed-1:embedContent', body: { content: { parts: [{ text: 'the cat' }] }, taskType: 'RETRIEVAL_QUERY' }, family: 'gemini', streams: false, reportsTopLevel: false },
  { name: 'batchEmbedContents demo/embed-1', url: '/v1beta/models/demo/embed-1:batchEmbedContents', body: { requests: [{ model: 'models/demo/embed-1', content: { parts: [{ text: 'the cat' }] } }] }, family: 'gemini', streams: false, reportsTopLevel: false },
  { name: 'images demo/image-1', url: '/v1/images/generations', body: { model: 'demo/image-1', prompt: 'a cat', n: 1, size: '256x256' }, family: 'openai', streams: false, reportsTopLevel: false }
]

// keys a client may send, among them the ones that broke answers before names were encoded
const NAMED_KEYS = [
  'bad\nkey', '温度', 'a,b', 'a, b', ',', ',,', '"quoted"', '\'', 'a;b', 'a=b', '__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', '', ' ', '%', '%2C',
  'a%2Cb', '%%', '\u0000', '\r\n', '\r\nSet-Cookie: x=1', '\t', '\x7f', '\u0085', '\u00ff', '\u0100', 'ünïcödé', '\u202e', 'a\u2028b', '\ufeff', '😀', '\ud800', '\udc00x',
  'x'.repeat(64), 'x'.repeat(65), 'x'.repeat(5000), '温'.repeat(300), '😀'.repeat(100), 'seed', 'temperature', 'tools', 'messages', 'stream', 'model', 'generationConfig'
]
const key = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...NAMED_KEYS) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 24 }) },
  { weight: 1, arbitrary: fc.string({ unit: 'grapheme', maxLength: 16 }) },
  { weight: 2, arbitrary: fc.string({ unit: fc.constantFrom(',', '"', '\n', '\r', '%', ' ', 'a', '温', '\u0000', ';', '.', '-', '😀', '\ud800'), minLength: 1, maxLength: 12 }) },
  { weight: 1, arbitrary: fc.integer({ min: 60, max: 4000 }).chain((n) => fc.string({ unit: 'binary', minLength: n, maxLength: n })) }
)
const value = fc.oneof(fc.constantFrom<unknown>('x', 1, 0.5, true, false, [], {}, ['a'], { a: 1 }), fc.dictionary(key, fc.constantFrom<unknown>('x', 1, null), { maxKeys: 3 }))

/** Every object of `body` (the top level first), so that a key can be added anywhere. */
function objectsOf (body: unknown, out: Array<Record<string, unknown>> = []): Array<Record<string, unknown>> {
  if (Array.isArray(body)) for (const v of body) objectsOf(v, out)
  else if (body !== null && typeof body === 'object') {
    out.push(body as Record<string, unknown>)
    for (const v of Object.values(body)) objectsOf(v, out)
  }
  return out
}

const request = fc.record({
  c: fc.nat({ max: CASES.length - 1 }),
  // where the keys go: mostly the top level, else any object of the body
  keys: fc.array(fc.tuple(fc.oneof({ weight: 3, arbitrary: fc.constant(0) }, { weight: 2, arbitrary: fc.nat() }), key, value), { minLength: 1, maxLength: 3 }),
  stream: fc.boolean()
})

type Req = typeof request extends fc.Arbitrary<infer R> ? R : never

/** The body as JSON, keys added with JSON text so that `__proto__` is an own key, as a client sends it. */
function payloadOf (r: Req): string {
  const c = CASES[r.c] as Case
  const body = structuredClone(c.body)
  if (r.stream && c.streams) body.stream = true
  const marks = new Map<Record<string, unknown>, Array<[string, unknown]>>()
  const targets = objectsOf(body)
  for (const [at, k, v] of r.keys) {
    const target = targets[at % targets.length] as Record<string, unknown>
    marks.set(target, [...(marks.get(target) ?? []), [k, v]])
  }
  // JSON.stringify with each target's added keys spliced in as text (an object literal would turn `__proto__` into a prototype)
  const write = (v: unknown): string => {
    if (Array.isArray(v)) return `[${v.map(write).join(',')}]`
    if (v === null || typeof v !== 'object') return JSON.stringify(v)
    const own = Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}:${write(x)}`)
    const added = (marks.get(v as Record<string, unknown>) ?? []).map(([k, x]) => `${JSON.stringify(k)}:${JSON.stringify(x)}`)
    return `{${[...own, ...added].join(',')}}`
  }
  return write(body)
}

/** Why an answer breaks the contract, or null when it keeps it. */
function violation (c: Case, status: number, headers: Record<string, unknown>, body: string): string | null {
  if (status >= 500) return `status ${status}: ${body.slice(0, 200)}`
  for (const [name, v] of Object.entries(headers)) {
    for (const one of Array.isArray(v) ? v : [v]) if (!HEADER_VALUE.test(String(one))) return `header ${name} is no valid value: ${JSON.stringify(one).slice(0, 120)}`
  }
  const dropped = headers[DROPPED]
  if (dropped !== undefined) {
    if (typeof dropped !== 'string' || !TOKEN_LIST.test(dropped)) return `${DROPPED} is no comma list of tokens: ${JSON.stringify(dropped).slice(0, 200)}`
    if (dropped.length > 8192) return `${DROPPED} is ${dropped.length} characters long`
    for (const n of dropped.split(',')) {
      try { decodeURIComponent(n) } catch { return `${DROPPED} holds ${n}, which does not decode` }
    }
  }
  const type = String(headers['content-type'] ?? '')
  if (status >= 400) {
    if (!type.includes('application/json')) return `error with content-type ${type}`
    let b: { type?: unknown, error?: { code?: unknown, type?: unknown, message?: unknown, status?: unknown } }
    try { b = JSON.parse(body) } catch { return 'error body is not JSON' }
    if (typeof b.error?.message !== 'string') return 'no error.message'
    if (c.family === 'gemini' && (b.error.code !== status || typeof b.error.status !== 'string')) return 'not Google\'s shape'
    if (c.family === 'messages' && (b.type !== 'error' || typeof b.error.type !== 'string')) return 'not the Messages shape'
    if (c.family === 'openai' && (b.error.code === undefined || b.error.code === null)) return 'no error.code in the numeric-code shape'
    return null
  }
  if (type.includes('application/json')) {
    try { JSON.parse(body) } catch { return 'a success whose JSON does not parse' }
  } else if (!type.includes('text/event-stream')) return `a success with content-type ${type}`
  return null
}

/** A key that names no field of any protocol (every field name is a word): dropped wherever the route reports its top-level fields. */
const foreign = (k: string): boolean => /[^A-Za-z0-9_]/.test(k)

async function shippedDemo (): Promise<FastifyInstance> {
  const raw = readConfigFile(fromRoot('config', 'gateway.yaml')) as { plugins: Array<{ name: string, options?: Record<string, unknown>, enabled?: boolean }> }
  // the shipped chain, with the per-IP limit out of the way of a few thousand calls and the balance on
  raw.plugins = raw.plugins.map((p) => p.name === 'rate-limit' ? { ...p, options: { max: 1_000_000, window_s: 60 } } : { name: p.name, ...(p.options === undefined ? {} : { options: p.options }) })
  const { buildApp } = await import('../../app.js')
  return await buildApp(parseConfig(raw, { MODELGATE_DB: ':memory:' }), { logger: false })
}

t.test('client-chosen keys on every translating route and demo model: no 5xx, shapes kept, headers valid, a dropped key one name', async (t) => {
  const app = await shippedDemo()
  t.teardown(() => app.close())
  const figures = { requests: 0, ok: 0, dropped: 0, roundTrips: 0, byStatus: new Map<number, number>() }
  const failures: string[] = []
  await fc.assert(fc.asyncProperty(request, async (r) => {
    const c = CASES[r.c] as Case
    const payload = payloadOf(r)
    const res = await app.inject({ method: 'POST', url: c.url, headers: { authorization: `Bearer ${DEMO_KEY}`, 'content-type': 'application/json' }, payload })
    figures.requests++
    figures.byStatus.set(res.statusCode, (figures.byStatus.get(res.statusCode) ?? 0) + 1)
    let why = violation(c, res.statusCode, res.headers, res.body)
    const header = res.headers[DROPPED]
    if (why === null && typeof header === 'string') {
      figures.dropped++
      const names = header.split(',').map((n) => decodeURIComponent(n))
      // a top-level key the route reports: the header names it once, whole (or its start, when cut)
      for (const [at, k] of r.keys) {
        if (at !== 0 || !c.reportsTopLevel || res.statusCode !== 200 || !foreign(k)) continue
        const sent = k.replace(/[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g, '\ufffd')
        if (names.includes(sent) || (sent.length > 10 && names.some((n) => n.length >= 8 && sent.startsWith(n)))) figures.roundTrips++
        else why = `the dropped key ${JSON.stringify(k).slice(0, 60)} is not one name of ${header.slice(0, 200)}`
      }
    }
    if (res.statusCode === 200) figures.ok++
    if (why !== null) { failures.push(`${c.name} ${payload.slice(0, 160)} -> ${why}`); return false }
    return true
  }), { seed: SEED, numRuns: RUNS, endOnFailure: true })
    .catch((err: Error) => { t.fail(`${err.message.split('\n').slice(0, 6).join('\n')}\n${failures.slice(-3).join('\n')}`) })
  t.comment(`fuzz (keys, seed ${SEED}): ${figures.requests} requests, ${figures.ok} answered 200, ${figures.dropped} with ${DROPPED}, ${figures.roundTrips} dropped keys read back whole; statuses ${[...figures.byStatus].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}×${n}`).join(' ')}`)
  t.ok(figures.ok > RUNS / 4 && figures.roundTrips > RUNS / 10, 'the generated keys reach answers and the header')
})

t.test('the keys the gateway once answered 500 for, on each route that met them', async (t) => {
  const app = await shippedDemo()
  t.teardown(() => app.close())
  const sends: Array<[string, Record<string, unknown>]> = [
    ['/v1/chat/completions', { model: 'demo/claude-sim', messages: text('Hi') }],
    ['/v1/messages', { model: 'demo/echo-1', max_tokens: 16, messages: text('Hi') }],
    ...CHAT_MODELS.map((model): [string, Record<string, unknown>] => ['/v1/responses', { model, input: 'Hi' }])
  ]
  for (const [url, body] of sends) {
    for (const k of ['bad\nkey', '温度', 'a,b']) {
      const res = await app.inject({ method: 'POST', url, headers: { authorization: `Bearer ${DEMO_KEY}` }, payload: { ...body, [k]: 1 } })
      t.equal(res.statusCode, 200, `${url} ${String(body.model)} ${JSON.stringify(k)}: 200`)
      const names = String(res.headers[DROPPED]).split(',')
      t.ok(names.map((n) => decodeURIComponent(n)).includes(k), `${JSON.stringify(k)} is one name of ${String(res.headers[DROPPED])}`)
    }
  }
  const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { authorization: `Bearer ${DEMO_KEY}` }, payload: { model: 'demo/echo-1', messages: text('Hi'), 'a,b': 1, 温度: 1, 'bad\nkey': 1, seed: 1, logit_bias: { 1: 2 } } })
  t.equal(res.headers[DROPPED], 'a%2Cb,%E6%B8%A9%E5%BA%A6,bad%0Akey,logit_bias', 'the documented form: safe names as they are, the rest percent-encoded (UTF-8), in the order the body gave them')
})

t.test('the encoding, alone: one token a name, bounded, the same for the same name', async (t) => {
  const { addDroppedNames, droppedName, MAX_LIST_CHARS, MAX_NAME_CHARS, MAX_NAMES } = await import('../../engine/gateway/dropped-names.js')
  t.equal(droppedName('generationConfig.topK'), 'generationConfig.topK', 'a field path as it is')
  t.equal(droppedName('a,b'), 'a%2Cb')
  t.equal(droppedName('bad\nkey'), 'bad%0Akey')
  t.equal(droppedName('温度'), '%E6%B8%A9%E5%BA%A6', 'UTF-8 bytes')
  t.equal(droppedName('50%'), '50%25', 'a percent sign too, so that every name decodes to what the client sent')
  t.equal(droppedName('\ud800x'), '%EF%BF%BDx', 'a lone surrogate as U+FFFD')
  t.equal(droppedName(''), '%22%22', 'the empty name as ""')
  t.equal(droppedName('__proto__'), '__proto__')
  t.equal(droppedName('x'.repeat(500)), 'x'.repeat(MAX_NAME_CHARS), 'cut')
  t.equal(droppedName('x'.repeat(MAX_NAME_CHARS - 2) + '温'), 'x'.repeat(MAX_NAME_CHARS - 2), 'cut before a character that does not fit whole')
  for (const raw of ['a,b', '温度', 'x\r\ny', '"', '😀', '%41']) t.equal(decodeURIComponent(droppedName(raw)), raw, `${JSON.stringify(raw)} decodes to itself`)

  const list: string[] = []
  addDroppedNames(list, ['seed', 'a,b', 'seed', 'a,b'])
  t.same(list, ['seed', 'a%2Cb'], 'each name once')
  addDroppedNames(list, Array.from({ length: 200 }, (_, i) => `n${i}`))
  t.equal(list.length, MAX_NAMES, 'bounded in number')
  const long: string[] = []
  addDroppedNames(long, Array.from({ length: 60 }, (_, i) => `${i}`.padEnd(300, '温')))
  t.ok(long.join(',').length <= MAX_LIST_CHARS && long.length > 10, `bounded in length: ${long.length} names, ${long.join(',').length} characters`)
})
