import t, { type Test } from 'tap'
import { KEY_A, listeningGateway, type ListeningGateway } from '../helper.js'
import type { Faults } from '../mock-upstream.js'
import type { UsageRow } from '../../engine/store/types.js'

// The fault suite: an upstream that resets, stalls, answers 5xx or 4xx, or sends a truncated or
// malformed body, on every metered route, streamed and not. What the client must get: the right
// status and its route family's error shape, or, once a stream has started, an error event in
// its protocol at the end of what was relayed. What the ledger must say: a call that failed
// before its first byte is recorded with zero tokens and costs nothing; one that failed
// mid-stream is billed for what it delivered; balance + spent always equals what was credited.

const PROMPT = 'one two three four five six seven eight nine ten'
const ROUTES = {
  chat: { path: '/v1/chat/completions', family: 'openai', body: (stream: boolean) => ({ model: 'openai/gpt-test', stream, messages: [{ role: 'user', content: PROMPT }] }) },
  messages: { path: '/v1/messages', family: 'messages', body: (stream: boolean) => ({ model: 'anthropic/claude-test', stream, max_tokens: 64, messages: [{ role: 'user', content: PROMPT }] }) },
  responses: { path: '/v1/responses', family: 'openai', body: (stream: boolean) => ({ model: 'openai/gpt-test', stream, input: PROMPT }) }
} as const
type RouteName = keyof typeof ROUTES

const INITIAL_NANO = 25 * 1e9

async function gateway (t: Parameters<typeof listeningGateway>[0]): Promise<ListeningGateway> {
  return await listeningGateway(t, () => ({
    // a short upstream timeout for the stall cases; the breaker kept shut so every case reaches the mock
    server: { request_timeout_s: 0.4 },
    upstream: { breaker: { failures: 1_000_000 }, retry: { attempts: 1, backoff_ms: 1 } },
    plugins: [{ name: 'auth' }, { name: 'balance' }, { name: 'usage' }, { name: 'diagnostics' }]
  }))
}

async function call (gw: ListeningGateway, route: RouteName, stream: boolean): Promise<{ status: number, text: string, trace: string }> {
  const r = ROUTES[route]
  const res = await fetch(gw.base + r.path, { method: 'POST', headers: { authorization: `Bearer ${KEY_A}`, 'content-type': 'application/json' }, body: JSON.stringify(r.body(stream)) })
  return { status: res.status, text: await res.text(), trace: res.headers.get('x-svc-trace-id') ?? '' }
}

/** The call's usage record, once written (it is committed before the answer's last byte). */
async function rowOf (gw: ListeningGateway, trace: string): Promise<UsageRow | undefined> {
  return (await gw.rows()).find((r) => r.trace_id === trace)
}

async function ledger (gw: ListeningGateway): Promise<{ balance: number, held: number, spent: number }> {
  // a worker gives its balance lease back once it has no call in flight, with a later commit
  await gw.app.gateway.store.flush()
  const org = await gw.app.gateway.store.orgs.get('acme')
  return { balance: org?.balance_nano ?? NaN, held: org?.held_nano ?? NaN, spent: org?.spent_nano ?? NaN }
}

/** The body is an error in the route family's shape, with a code where that shape has one. */
function assertErrorShape (t: Test, family: 'openai' | 'messages', text: string, what: string): void {
  let body: { type?: string, error?: { code?: unknown, type?: unknown, message?: unknown } }
  try { body = JSON.parse(text) } catch { t.fail(`${what}: not JSON: ${text.slice(0, 200)}`); return }
  if (family === 'messages') {
    t.equal(body.type, 'error', `${what}: Messages shape`)
    t.type(body.error?.type, 'string', `${what}: error.type`)
  } else {
    t.not(body.error?.code ?? null, null, `${what}: error.code present`)
    t.type(body.error?.type, 'string', `${what}: error.type`)
  }
  t.type(body.error?.message, 'string', `${what}: error.message`)
}

/** A stream that broke ends with one error event in the client's protocol. */
function assertStreamError (t: Test, route: RouteName, text: string, what: string): void {
  const tail = text.trimEnd().split('\n\n').pop() ?? ''
  if (route === 'messages') t.match(tail, /^event: error\ndata: \{"type":"error","error":\{"type":"\w+"/, `${what}: ends with a Messages error event`)
  else if (route === 'responses') t.match(tail, /"type":"(error|response\.failed)"/, `${what}: ends with a Responses error event`)
  else t.match(tail, /^data: \{"error":\{"code":/, `${what}: ends with an error chunk`)
}

interface BeforeFirstByte { name: string, faults: Faults, status: number, recorded: 'upstream_error' | 'timeout', streamOnly?: boolean }

const BEFORE_FIRST_BYTE: BeforeFirstByte[] = [
  { name: 'connection reset before the answer', faults: { resetBeforeResponse: true }, status: 502, recorded: 'upstream_error' },
  { name: '500 on every call', faults: { status: 500 }, status: 502, recorded: 'upstream_error' },
  { name: '503 on every call', faults: { status: 503 }, status: 502, recorded: 'upstream_error' },
  { name: 'an upstream that never answers', faults: { hang: true }, status: 408, recorded: 'timeout' }
]

t.test('failures before the first byte: right status and shape, recorded with zero tokens, nothing charged', async (t) => {
  const gw = await gateway(t)
  let cases = 0
  for (const f of BEFORE_FIRST_BYTE) {
    gw.mock.faults = f.faults
    // the six calls of a fault at once: the ones that wait for the upstream timeout wait together
    const calls = (Object.keys(ROUTES) as RouteName[]).flatMap((route) => [false, true].map((stream) => ({ route, stream })))
    await Promise.all(calls.map(async ({ route, stream }) => {
      const what = `${f.name}, ${route}${stream ? ', streamed' : ''}`
      const res = await call(gw, route, stream)
      t.equal(res.status, f.status, `${what}: ${f.status}`)
      assertErrorShape(t, ROUTES[route].family, res.text, what)
      const row = await rowOf(gw, res.trace)
      t.ok(row, `${what}: recorded`)
      t.match(row, { status: f.recorded, prompt_tokens: 0, completion_tokens: 0, cost_nano: 0 }, `${what}: zero tokens, cost 0`)
      cases++
    }))
  }
  gw.mock.faults = {}
  t.same(await ledger(gw), { balance: INITIAL_NANO, held: 0, spent: 0 }, `after ${cases} failed calls: nothing charged, nothing held`)
})

t.test('an upstream 4xx storm: the status kept, the family\'s shape with a code, nothing charged', async (t) => {
  const gw = await gateway(t)
  for (const status of [400, 401, 404, 429]) {
    for (const route of Object.keys(ROUTES) as RouteName[]) {
      for (const stream of [false, true]) {
        const what = `${status}, ${route}${stream ? ', streamed' : ''}`
        gw.mock.faults = { status }
        const res = await call(gw, route, stream)
        t.equal(res.status, status, `${what}: relayed with its status`)
        assertErrorShape(t, ROUTES[route].family, res.text, what)
        t.match(await rowOf(gw, res.trace), { prompt_tokens: 0, completion_tokens: 0, cost_nano: 0 }, `${what}: cost 0`)
      }
    }
  }
  t.same(await ledger(gw), { balance: INITIAL_NANO, held: 0, spent: 0 })
})

t.test('a truncated JSON answer, or a stream answered with a broken body: 502 or an error event, nothing charged', async (t) => {
  const gw = await gateway(t)
  gw.mock.script(() => ({ body: '{"id":"chatcmpl-1","object":"chat.comp', headers: { 'content-type': 'application/json' } }))
  for (const route of Object.keys(ROUTES) as RouteName[]) {
    const whole = await call(gw, route, false)
    t.equal(whole.status, 502, `${route}: a truncated body is a failed upstream`)
    assertErrorShape(t, ROUTES[route].family, whole.text, `${route}, truncated`)
    t.match(await rowOf(gw, whole.trace), { status: 'upstream_error', prompt_tokens: 0, completion_tokens: 0, cost_nano: 0 })

    const streamed = await call(gw, route, true)
    t.equal(streamed.status, 200, `${route}, streamed: the stream had begun`)
    assertStreamError(t, route, streamed.text, `${route}, streamed truncated`)
    t.match(await rowOf(gw, streamed.trace), { status: 'upstream_error', completion_tokens: 0 }, `${route}, streamed: nothing was delivered`)
  }
  gw.mock.script(null)
  const l = await ledger(gw)
  t.equal(l.held, 0, 'nothing left held')
  t.equal(l.balance + l.spent, INITIAL_NANO, 'balance + spent = credited')
})

t.test('a stream reset or malformed mid-way: what was relayed, then an error event; billed for what was delivered', async (t) => {
  const gw = await gateway(t)
  const malformed = (route: RouteName): string[] => route === 'messages'
    ? ['event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[],"usage":{"input_tokens":12,"output_tokens":1}}}\n\n',
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n',
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"one two three"}}\n\n',
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_del']
    : ['data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}\n\n',
        'data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"one two three"},"finish_reason":null}]}\n\n',
        'data: {"id":"c1","object":"chat.completion.chu']
  let charged = 0
  for (const route of Object.keys(ROUTES) as RouteName[]) {
    for (const kind of ['reset', 'malformed'] as const) {
      const what = `${route}, ${kind} mid-stream`
      if (kind === 'reset') { gw.mock.script(null); gw.mock.faults = { resetMidStream: 3 } } else { gw.mock.faults = {}; gw.mock.script(() => ({ stream: malformed(route) })) }
      const res = await call(gw, route, true)
      t.equal(res.status, 200, `${what}: the stream had begun`)
      assertStreamError(t, route, res.text, what)
      const row = await rowOf(gw, res.trace)
      t.equal(row?.status, 'upstream_error', `${what}: recorded as failed`)
      t.ok((row?.completion_tokens ?? 0) > 0, `${what}: the relayed text is billed`)
      t.ok((row?.cost_nano ?? 0) > 0, `${what}: at a cost`)
      charged += row?.cost_nano ?? 0
    }
  }
  gw.mock.faults = {}
  gw.mock.script(null)
  const l = await ledger(gw)
  t.equal(l.spent, charged, 'spent is the sum of the recorded costs')
  t.equal(l.balance + l.spent, INITIAL_NANO, 'balance + spent = credited')
  t.equal(l.held, 0, 'nothing left held')
})

t.test('a stream that stalls after its first frames ends with an error event; the upstream request is closed', async (t) => {
  const gw = await gateway(t)
  gw.mock.faults = { idleMidStreamMs: { ms: 5000, afterFrames: 2 } }
  await Promise.all((Object.keys(ROUTES) as RouteName[]).map(async (route) => {
    const res = await call(gw, route, true)
    t.equal(res.status, 200)
    assertStreamError(t, route, res.text, `${route}, stalled`)
    t.match(await rowOf(gw, res.trace), { status: 'timeout' }, `${route}: recorded as a timeout`)
  }))
  gw.mock.faults = {}
  const l = await ledger(gw)
  t.equal(l.held, 0)
  t.equal(l.balance + l.spent, INITIAL_NANO)
})
