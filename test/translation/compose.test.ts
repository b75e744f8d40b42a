import t from 'tap'
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { CHAT_FIELDS } from '../../engine/protocols/chat/table.js'
import { MESSAGES_FIELDS } from '../../engine/protocols/messages/table.js'
import { CODECS } from '../../engine/protocols/index.js'
import { SseParser } from '../../engine/protocols/sse.js'
import { compose, type Bridge } from '../../engine/translation/compose.js'
import { pairFor, upstreamsOf } from '../../engine/translation/index.js'
import type { Json, Protocol, SseEvent, TranslateCtx } from '../../engine/translation/types.js'
import { fromRoot } from '../../paths.js'

// A bridged upstream (compose.ts) is the client's pair toward the bridge's `via` protocol, then
// the bridge. An envelope bridge (its own "wire format": the Messages body wrapped, answers and
// stream events wrapped the other way) composed with every pair toward Messages must give, on
// every fixture of those pairs, what the direct pair gives: the same upstream request inside
// the envelope, the same client answer, error, stream, usage and end.

const BASE_CTX: TranslateCtx = { model: 'vendor/model', upstreamModel: 'up-model', id: 'abc', created: 1700000000, stream: false, includeUsage: false, flatten: false, defaultMaxTokens: 4096 }

const envelope: Bridge = {
  upstream: 'gemini', // a name the bridge takes over for the test: what matters is that it is not `via`
  via: 'messages',
  path: '/envelope',
  request: (body) => ({ body: { envelope: body }, dropped: [] }),
  response: (body) => ({ body: body.answer as Json, usage: null }),
  error: (status, body) => (body as { inner: Json }).inner,
  stream () {
    let stopped = false
    return {
      // one upstream frame carries a list of Messages events
      push (ev: SseEvent): SseEvent[] {
        const events = JSON.parse(ev.data) as Array<{ type: string }>
        if (events.some((e) => e.type === 'message_stop')) stopped = true
        return events.map((e) => ({ event: e.type, data: JSON.stringify(e) }))
      },
      end: () => [],
      usage: () => null,
      relayedText: () => '',
      finished: () => stopped
    }
  }
}

const FIXTURES: Array<[string, Protocol]> = [['chat-to-messages', 'openai'], ['responses-to-messages', 'responses'], ['gemini-to-messages', 'gemini'], ['passthrough-messages', 'messages']]
const read = (dir: string, file: string): unknown => JSON.parse(readFileSync(join(dir, file), 'utf8'))
const has = (dir: string, file: string): boolean => existsSync(join(dir, file))
const parseAll = (text: string): SseEvent[] => { const p = new SseParser(); return [...p.push(text), ...p.end()] }
const plain = (evs: SseEvent[]): Array<{ event: string | null, data: unknown }> => evs.map((e) => ({ event: e.event ?? null, data: e.data === '[DONE]' ? e.data : JSON.parse(e.data) as unknown }))

for (const [folder, client] of FIXTURES) {
  const direct = pairFor(client, 'messages')
  const bridged = compose(direct, envelope, CODECS[client].fields)
  for (const name of readdirSync(fromRoot('test', 'fixtures', folder)).sort()) {
    const dir = fromRoot('test', 'fixtures', folder, name)
    t.test(`${folder}/${name} through a bridge`, async (t) => {
      const clientRequest = has(dir, 'client-request.json') ? { clientRequest: read(dir, 'client-request.json') as Json } : {}
      const given = (has(dir, 'ctx.json') ? read(dir, 'ctx.json') : {}) as Partial<TranslateCtx> & { supported?: string[] }
      const ctx: TranslateCtx = { ...BASE_CTX, ...clientRequest, ...given, supported: given.supported === undefined ? undefined : new Set(given.supported) }
      t.equal(bridged.upstream, 'gemini')
      t.equal(bridged.path, '/envelope')
      if (has(dir, 'client-request.json') && !has(dir, 'error.json')) {
        const want = direct.request(read(dir, 'client-request.json') as Json, ctx)
        const got = bridged.request(read(dir, 'client-request.json') as Json, ctx)
        t.same(got.body, { envelope: want.body }, 'the upstream request, in the envelope')
        // the test bridge takes a Gemini column's name: a field the client's table drops toward it is reported too
        const fields = CODECS[client].fields
        const extra = Object.keys(read(dir, 'client-request.json') as Json).filter((k) => fields[k]?.gemini === 'dropped' && fields[k]?.messages !== 'dropped' && !want.dropped.includes(k))
        t.same(got.dropped, client === 'messages' ? want.dropped : [...want.dropped, ...extra], 'dropped fields')
      } else if (has(dir, 'error.json')) {
        t.throws(() => bridged.request(read(dir, 'client-request.json') as Json, ctx), 'the pair refuses what it refuses directly')
      }
      if (has(dir, 'upstream-response.json') && !has(dir, 'response-error.json')) {
        const answer = read(dir, 'upstream-response.json') as Json
        const want = direct.response(structuredClone(answer), ctx)
        const got = bridged.response({ answer }, ctx)
        t.same(got.body, want.body ?? answer, 'the client answer (a same-protocol pair: the bridge\'s)')
        t.same(got.usage, want.usage, 'usage')
      }
      if (has(dir, 'upstream-error.json')) {
        const e = read(dir, 'upstream-error.json') as { status: number, body: unknown }
        t.same(bridged.error(e.status, { inner: e.body }), direct.error(e.status, e.body), 'the client error')
      }
      if (has(dir, 'upstream-stream.txt')) {
        const frames = parseAll(readFileSync(join(dir, 'upstream-stream.txt'), 'utf8'))
        const one = direct.stream(ctx)
        const want = [...frames.flatMap((f) => one.push(f)), ...one.end()]
        // the bridged upstream sends the same events two to a frame
        const two = bridged.stream(ctx)
        const got: SseEvent[] = []
        for (let i = 0; i < frames.length; i += 2) {
          const batch = frames.slice(i, i + 2).filter((f) => f.data !== '' && f.data[0] === '{').map((f) => JSON.parse(f.data) as unknown)
          got.push(...two.push({ data: JSON.stringify(batch) }))
        }
        got.push(...two.end())
        t.same(plain(got), plain(want), 'the client stream')
        t.same(two.usage(), one.usage(), 'stream usage')
        t.equal(two.finished(), one.finished(), 'the end')
        t.equal(two.relayedText(), one.relayedText(), 'the text relayed')
      }
    })
  }
}

t.test('a bridge composes only with a pair toward its `via`', async (t) => {
  t.throws(() => compose(pairFor('openai', 'gemini'), envelope), /cannot go through a bridge/)
})

t.test('a client field its table drops toward the bridged upstream is reported once, by its own name', async (t) => {
  const pair = compose(pairFor('openai', 'messages'), envelope, CHAT_FIELDS)
  const r = pair.request({ model: 'm', messages: [{ role: 'user', content: 'hi' }], user: 'u-1', seed: 7 }, BASE_CTX)
  // seed: dropped toward Messages already (reported by the pair); user: mapped toward Messages, dropped toward the bridged upstream
  t.same(r.dropped, ['seed', 'user'])
  t.equal(CHAT_FIELDS.user.gemini, 'dropped')
})

t.test('a client of the bridge\'s own `via` protocol hears what the bridge drops, by name', async (t) => {
  const dropping: Bridge = { ...envelope, request: (body) => { const { metadata: _m, ...rest } = body; return { body: rest, dropped: body.metadata === undefined ? [] : ['metadata'] } } }
  const pair = compose(pairFor('messages', 'messages'), dropping, MESSAGES_FIELDS)
  const r = pair.request({ model: 'm', max_tokens: 5, messages: [], metadata: { user_id: 'u' } }, BASE_CTX)
  t.same(r.dropped, ['metadata'])
  t.notOk('metadata' in r.body)
})

t.test('every client protocol reaches the upstreams of its pairs', async (t) => {
  t.same(upstreamsOf('openai').sort(), ['gemini', 'messages', 'openai'])
  t.same(upstreamsOf('responses').sort(), ['gemini', 'messages', 'openai', 'responses'])
})
