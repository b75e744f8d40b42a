import t from 'tap'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { isGatewayError } from '../../engine/kernel/errors.js'
import { pairFor, upstreamPath, wholePairFor, type WholeKind } from '../../engine/translation/index.js'
import { serialize, SseParser } from '../../engine/protocols/sse.js'
import type { Protocol, SseEvent, TranslateCtx, TranslatorPair, WholePair } from '../../engine/translation/types.js'
import { fromRoot } from '../../paths.js'

// Every folder under test/fixtures/<pair>/<case>/ is a case; a new case needs no code. Streams are
// replayed whole, one byte at a time, and split at seeded random byte boundaries, and compared
// frame by frame (event name and parsed JSON) with the expected client stream. A case's
// dropped.json lists the client fields request() reports as dropped; without one, none may be; a
// usage.json is the usage of the stream, or of the JSON answer when there is no stream; a
// finished.json says whether the stream's answer is complete (the relay settles it as a success). A
// case's ctx.json may set `stream` (a Gemini path says it) and the rest of the ctx; its
// upstream-path.txt is the path the call goes to. The pairs of calls answered whole (embeddings,
// images) have no stream; a response-error.json is the gateway error their response() throws.

const ROOT = fromRoot('test', 'fixtures')
const PAIRS: Record<string, [Protocol, Protocol]> = {
  'chat-to-messages': ['openai', 'messages'],
  'messages-to-chat': ['messages', 'openai'],
  'passthrough-openai': ['openai', 'openai'],
  'passthrough-messages': ['messages', 'messages'],
  'responses-to-chat': ['responses', 'openai'],
  'responses-to-messages': ['responses', 'messages'],
  'passthrough-responses': ['responses', 'responses'],
  'gemini-to-chat': ['gemini', 'openai'],
  'gemini-to-messages': ['gemini', 'messages'],
  'chat-to-gemini': ['openai', 'gemini'],
  'messages-to-gemini': ['messages', 'gemini'],
  'responses-to-gemini': ['responses', 'gemini'],
  'passthrough-gemini': ['gemini', 'gemini']
}
const WHOLE_PAIRS: Record<string, [WholeKind, Protocol, Protocol]> = {
  'embeddings-passthrough': ['embeddings', 'openai', 'openai'],
  'embeddings-to-gemini': ['embeddings', 'openai', 'gemini'],
  'gemini-embed-to-embeddings': ['embeddings', 'gemini', 'openai'],
  'gemini-embed-passthrough': ['embeddings', 'gemini', 'gemini'],
  'images-passthrough': ['images', 'openai', 'openai'],
  'images-to-gemini': ['images', 'openai', 'gemini']
}
const ALL: Array<[string, Protocol, TranslatorPair | WholePair]> = [
  ...Object.entries(PAIRS).map(([name, [client, upstream]]): [string, Protocol, TranslatorPair] => [name, client, pairFor(client, upstream)]),
  ...Object.entries(WHOLE_PAIRS).map(([name, [kind, client, upstream]]): [string, Protocol, WholePair] => {
    const pair = wholePairFor(kind, client, upstream)
    if (pair === undefined) throw new Error(`no ${kind} pair ${client} → ${upstream}`)
    return [name, client, pair]
  })
]
const BASE_CTX: TranslateCtx = { model: 'vendor/model', upstreamModel: 'up-model', id: 'abc', created: 1700000000, stream: false, includeUsage: false, flatten: false, defaultMaxTokens: 4096 }

function mulberry32 (seed: number): () => number {
  let a = seed
  return () => {
    a = (a + 0x6D2B79F5) | 0
    let x = Math.imul(a ^ (a >>> 15), 1 | a)
    x = (x + Math.imul(x ^ (x >>> 7), 61 | x)) ^ x
    return ((x ^ (x >>> 14)) >>> 0) / 4294967296
  }
}

function splits (bytes: Buffer, seed: number): Buffer[] {
  const rand = mulberry32(seed)
  const out: Buffer[] = []
  let i = 0
  while (i < bytes.length) {
    const n = 1 + Math.floor(rand() * 40)
    out.push(bytes.subarray(i, i + n))
    i += n
  }
  return out
}

interface Frame { event: string | null, data: unknown }
const normal = (evs: SseEvent[]): Frame[] => evs.map((e) => ({ event: e.event ?? null, data: e.data === '[DONE]' ? '[DONE]' : JSON.parse(e.data) }))
const parseAll = (text: string): SseEvent[] => { const p = new SseParser(); return [...p.push(text), ...p.end()] }

const read = (dir: string, file: string): unknown => JSON.parse(readFileSync(join(dir, file), 'utf8'))
const has = (dir: string, file: string): boolean => existsSync(join(dir, file))

for (const [pairName, client, pair] of ALL) {
  for (const name of readdirSync(join(ROOT, pairName)).sort()) {
    const dir = join(ROOT, pairName, name)
    t.test(`${pairName}/${name}`, async (t) => {
      // the pair sees the client's request in ctx too (a Responses answer echoes it); ctx.json gives `supported` as a list
      const clientRequest = has(dir, 'client-request.json') ? { clientRequest: read(dir, 'client-request.json') as Record<string, unknown> } : {}
      const given = (has(dir, 'ctx.json') ? read(dir, 'ctx.json') : {}) as Partial<TranslateCtx> & { supported?: string[] }
      const ctx: TranslateCtx = { ...BASE_CTX, ...clientRequest, ...given, supported: given.supported === undefined ? undefined : new Set(given.supported) }
      if (has(dir, 'error.json')) {
        const want = read(dir, 'error.json') as { key: string, status: number, params?: Record<string, unknown> }
        let thrown: unknown
        try { pair.request(read(dir, 'client-request.json') as Record<string, unknown>, ctx) } catch (err) { thrown = err }
        t.ok(isGatewayError(thrown), 'a gateway error')
        t.match(thrown, { key: want.key, statusCode: want.status, ...(want.params === undefined ? {} : { params: want.params }) })
      } else if (has(dir, 'client-request.json')) {
        const result = pair.request(read(dir, 'client-request.json') as Record<string, unknown>, ctx)
        t.same(result.body, read(dir, 'upstream-request.json'), 'upstream request')
        t.same(result.dropped, has(dir, 'dropped.json') ? read(dir, 'dropped.json') : [], 'dropped fields')
        if (has(dir, 'upstream-path.txt')) t.equal(upstreamPath(pair, ctx), readFileSync(join(dir, 'upstream-path.txt'), 'utf8').trim(), 'upstream path')
      }
      if (has(dir, 'response-error.json')) {
        const want = read(dir, 'response-error.json') as { key: string, status: number, params?: Record<string, unknown> }
        let thrown: unknown
        try { pair.response(read(dir, 'upstream-response.json') as Record<string, unknown>, ctx) } catch (err) { thrown = err }
        t.ok(isGatewayError(thrown), 'a gateway error for the answer')
        t.match(thrown, { key: want.key, statusCode: want.status, ...(want.params === undefined ? {} : { params: want.params }) })
      } else if (has(dir, 'upstream-response.json')) {
        const out = pair.response(read(dir, 'upstream-response.json') as Record<string, unknown>, ctx)
        t.same(out.body, has(dir, 'client-response.json') ? read(dir, 'client-response.json') : null, 'client response')
        if (has(dir, 'usage.json') && !has(dir, 'upstream-stream.txt')) t.same(out.usage, read(dir, 'usage.json'), 'usage')
      }
      if (has(dir, 'upstream-error.json')) {
        const e = read(dir, 'upstream-error.json') as { status: number, body: unknown }
        t.same(pair.error(e.status, e.body), read(dir, 'client-error.json'), 'client error')
      }
      if (has(dir, 'upstream-stream.txt')) {
        if (!('stream' in pair)) throw new Error(`${pairName} answers whole: no stream cases`)
        const bytes = readFileSync(join(dir, 'upstream-stream.txt'))
        const expected = normal(parseAll(readFileSync(join(dir, 'client-stream.txt'), 'utf8')))
        const ways: Array<[string, Buffer[]]> = [['whole', [bytes]], ['byte by byte', [...bytes].map((b) => Buffer.from([b]))]]
        for (let seed = 1; seed <= 6; seed++) ways.push([`random split, seed ${seed}`, splits(bytes, seed)])
        for (const [how, chunks] of ways) {
          const parser = new SseParser()
          const mapper = pair.stream(ctx)
          let text = ''
          for (const c of chunks) for (const f of parser.push(c)) for (const ev of mapper.push(f)) text += serialize(ev)
          for (const f of parser.end()) for (const ev of mapper.push(f)) text += serialize(ev)
          for (const ev of mapper.end()) text += serialize(ev)
          const frames = parseAll(text)
          t.same(normal(frames), expected, `client stream (${how})`)
          if (has(dir, 'usage.json')) t.same(mapper.usage(), read(dir, 'usage.json'), `usage (${how})`)
          if (has(dir, 'finished.json')) t.equal(mapper.finished(), read(dir, 'finished.json'), `the answer ${read(dir, 'finished.json') === true ? 'is' : 'is not'} complete (${how})`)
          if (client === 'messages') t.ok(frames.every((f) => f.event === (JSON.parse(f.data) as { type: string }).type), 'every Messages frame names its type')
          else if (client === 'gemini') {
            t.ok(frames.every((f) => f.event === undefined && f.data !== '[DONE]'), 'data-only Gemini frames, no [DONE]')
            const chunksOut = frames.map((f) => JSON.parse(f.data) as { responseId?: string, modelVersion?: string, error?: unknown }).filter((c) => c.error === undefined)
            t.equal(new Set(chunksOut.map((c) => `${c.responseId}/${c.modelVersion}`)).size <= 1, true, 'one responseId and modelVersion on every chunk')
          } else {
            const chunksOut = frames.filter((f) => f.data !== '[DONE]').map((f) => JSON.parse(f.data) as { id?: string, created?: number, error?: unknown }).filter((c) => c.error === undefined)
            t.equal(new Set(chunksOut.map((c) => `${c.id}/${c.created}`)).size <= 1, true, 'one id and created on every chunk')
          }
        }
      }
    })
  }
}

t.test('stop reasons map both ways, every value', async (t) => {
  const toChat = pairFor('openai', 'messages')
  const toMessages = pairFor('messages', 'openai')
  const table: Array<[string, string]> = [['end_turn', 'stop'], ['stop_sequence', 'stop'], ['pause_turn', 'stop'], ['max_tokens', 'length'], ['model_context_window_exceeded', 'length'], ['tool_use', 'tool_calls'], ['refusal', 'content_filter']]
  for (const [stop, finish] of table) {
    const out = toChat.response({ content: [{ type: 'text', text: 'x' }], stop_reason: stop, usage: { input_tokens: 1, output_tokens: 1 } }, BASE_CTX).body as { choices: Array<{ finish_reason: string }> }
    t.equal(out.choices[0]?.finish_reason, finish, `${stop} → ${finish}`)
  }
  for (const [finish, stop] of [['stop', 'end_turn'], ['length', 'max_tokens'], ['tool_calls', 'tool_use'], ['content_filter', 'refusal']]) {
    const out = toMessages.response({ choices: [{ index: 0, message: { role: 'assistant', content: 'x' }, finish_reason: finish }], usage: { prompt_tokens: 1, completion_tokens: 1 } }, BASE_CTX).body as { stop_reason: string }
    t.equal(out.stop_reason, stop, `${finish} → ${stop}`)
  }
})

t.test('sse framing: CRLF, comments, multi-line data, a split multi-byte character', async (t) => {
  const p = new SseParser()
  const euro = Buffer.from('data: {"a":"€"}\n\n')
  const out = [...p.push(': keep-alive\r\n\r\nevent: x\r\ndata: 1\r\ndata: 2\r\n\r\n'), ...p.push(euro.subarray(0, 13)), ...p.push(euro.subarray(13)), ...p.end()]
  t.same(out.map((e) => [e.event ?? null, e.data]), [['x', '1\n2'], [null, '{"a":"€"}']])
  t.equal(serialize(out[1]!), 'data: {"a":"€"}\n\n', 'an unchanged frame is relayed byte for byte')
})
