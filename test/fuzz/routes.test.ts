import t, { type Test } from 'tap'
import fc from 'fast-check'
import { request as httpRequest } from 'node:http'
import type { FastifyInstance } from 'fastify'
import { bearer, build, KEY_A } from '../helper.js'

// Property-based fuzzing of every route family: generated methods, paths (percent-escapes valid
// and not, traversal, long segments), query strings (repeated and odd parameters), headers
// (keys right and wrong, locales, content types, idempotency keys) and bodies (random JSON,
// valid bodies with values swapped for hostile ones, text that is not JSON). Whatever comes in:
// never a 5xx (other than the documented 501 routes), and every error in its family's shape:
// the Messages shape under /v1/messages, Google's under /v1beta and on Gemini's method calls under
// /v1/models, the numeric-code shape everywhere else.
//
// Runs in-process (inject) for volume, and a smaller part over a real socket for what inject
// cannot send: oversized headers and URLs, raw request lines. A share of the runs here;
// routes.slow.test.ts runs the full count on another seed. FUZZ_SEED and FUZZ_RUNS replay or
// widen a run; FUZZ_DEBUG=<status> prints every request answered with that status.

const SEED = Number(process.env.FUZZ_SEED ?? 20261123)
const RUNS = Number(process.env.FUZZ_RUNS ?? 1000)
const ADMIN = 'fuzz-admin-token-0123456789abcdef'

const HOSTILE: unknown[] = [null, true, 0, -1, 1e308, -0, 1.5, '', 'Infinity', '1e400', '-1e400', 'x'.repeat(5000), '__proto__', 'constructor', 'toString', [], {}, [[[]]],
  { __proto__: { polluted: true } }, { constructor: { prototype: { x: 1 } } }, '\u0000', '\ud800', '💥', 'data:image/png;base64,AAAA', 'http://127.0.0.1/a.png', 'file:///etc/passwd']

const hostile = fc.oneof(fc.constantFrom(...HOSTILE), fc.jsonValue({ maxDepth: 4 }))

const VALID: Record<string, Record<string, unknown>> = {
  chat: { model: 'demo/gpt', messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: [{ type: 'text', text: 'Hi' }, { type: 'image_url', image_url: { url: 'https://example.com/a.png' } }] }], max_tokens: 16, temperature: 0.5, tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object' } } }], stream: false },
  messages: { model: 'demo/claude', max_tokens: 16, system: 'Be brief.', messages: [{ role: 'user', content: [{ type: 'text', text: 'Hi' }, { type: 'image', source: { type: 'url', url: 'https://example.com/a.png' } }] }], stream: false },
  responses: { model: 'demo/gpt', input: [{ role: 'user', content: [{ type: 'input_text', text: 'Hi' }] }], instructions: 'Be brief.', max_output_tokens: 16, stream: false, tools: [{ type: 'function', name: 'f', parameters: { type: 'object' } }] },
  count: { model: 'demo/claude', messages: [{ role: 'user', content: 'Hi' }] },
  gemini: {
    systemInstruction: { parts: [{ text: 'Be brief.' }] },
    contents: [{ role: 'user', parts: [{ text: 'Hi' }, { fileData: { mimeType: 'image/png', fileUri: 'https://example.com/a.png' } }] }, { role: 'model', parts: [{ functionCall: { name: 'f', args: {} } }] }, { role: 'user', parts: [{ functionResponse: { name: 'f', response: { output: 'x' } } }] }],
    tools: [{ functionDeclarations: [{ name: 'f', parameters: { type: 'OBJECT' } }] }],
    toolConfig: { functionCallingConfig: { mode: 'AUTO' } },
    generationConfig: { temperature: 0.5, maxOutputTokens: 16, topK: 3, thinkingConfig: { includeThoughts: true, thinkingBudget: 1024 } }
  },
  key: { org: 'acme', project: 'web', name: 'fuzz', models: ['demo/*'], passthrough: [], expires_at: '2030-01-01T00:00:00Z', limits: { rpm: 100, tpm: 10000 }, budget: { usd: '2.5', per: 'month' } },
  credits: { amount_usd: '1.5' },
  org: { id: 'fuzzco', balance_usd: '1.5', quota: { tokens: 1000, per: 'day' } },
  project: { id: 'fuzzproj', quota: { usd: 2, per: 'month' } },
  quota: { quota: { tokens: 5, per: 'hour' } },
  keyPatch: { models: ['demo/*'], name: 'x', expires_at: null, limits: { rpm: 10, tpm: null }, budget: { usd: 1, per: 'day' } },
  rotate: { grace_s: 60 }
}

/** Replaces the value at a random path of `body` (or deletes it, or adds a key). */
function mutate (body: unknown, path: number[], value: unknown, op: number): unknown {
  const copy = JSON.parse(JSON.stringify(body)) as unknown
  let node = copy
  for (let i = 0; i < path.length; i++) {
    if (node === null || typeof node !== 'object') break
    const keys = Object.keys(node)
    if (keys.length === 0) break
    const k = keys[(path[i] ?? 0) % keys.length] as string
    const child = (node as Record<string, unknown>)[k]
    const last = i === path.length - 1 || child === null || typeof child !== 'object'
    if (last) {
      if (op === 0) delete (node as Record<string, unknown>)[k]
      else if (op === 1) (node as Record<string, unknown>)[`extra_${k}`] = value
      else (node as Record<string, unknown>)[k] = value
      break
    }
    node = child
  }
  return copy
}

const ROUTES: Array<[string, string]> = [
  ['POST', '/v1/chat/completions'], ['POST', '/v1/messages'], ['POST', '/v1/messages/count_tokens'], ['POST', '/v1/responses'],
  ['GET', '/v1/responses/{seg}'], ['DELETE', '/v1/responses/{seg}'], ['POST', '/v1/responses/{seg}/cancel'], ['GET', '/v1/responses/{seg}/input_items'],
  ['GET', '/v1/models'], ['GET', '/v1/models/{seg}'], ['GET', '/v1/models/{seg}/{seg}'], ['POST', '/v1/embeddings'], ['GET', '/v1/{seg}'],
  ['POST', '/v1beta/models/demo/gpt:generateContent'], ['POST', '/v1beta/models/{seg}:streamGenerateContent'], ['POST', '/v1beta/models/demo%2Fclaude:countTokens'],
  ['POST', '/v1/models/{seg}/{seg}:generateContent'], ['POST', '/v1/models/demo/claude:{seg}'], ['POST', '/v1/models/{seg}'],
  ['GET', '/v1beta/models'], ['GET', '/v1beta/models/{seg}'], ['GET', '/v1beta/{seg}'],
  ['GET', '/admin/v1/usage'], ['GET', '/admin/v1/keys'], ['POST', '/admin/v1/keys'], ['DELETE', '/admin/v1/keys/{seg}'], ['GET', '/admin/v1/orgs/{seg}'],
  ['POST', '/admin/v1/orgs/{seg}/credits'], ['POST', '/admin/v1/reload'], ['GET', '/admin/v1/{seg}'],
  ['GET', '/admin/v1/orgs'], ['POST', '/admin/v1/orgs'], ['PATCH', '/admin/v1/orgs/{seg}'], ['DELETE', '/admin/v1/orgs/{seg}'],
  ['POST', '/admin/v1/orgs/{seg}/projects'], ['PATCH', '/admin/v1/orgs/{seg}/projects/{seg}'], ['DELETE', '/admin/v1/orgs/{seg}/projects/{seg}'],
  ['GET', '/admin/v1/keys/{seg}'], ['PATCH', '/admin/v1/keys/{seg}'], ['POST', '/admin/v1/keys/{seg}/rotate'],
  ['GET', '/admin/v1/usage/summary'], ['GET', '/admin/v1/audit'], ['GET', '/admin/v1/usage/{seg}'], ['GET', '/admin/v1/providers'], ['GET', '/admin/v1/plugins'],
  ['GET', '/admin/v1/sessions'], ['DELETE', '/admin/v1/sessions/{seg}'], ['DELETE', '/admin/v1/sessions'],
  ['GET', '/console/api/models'], ['GET', '/console/api/me'], ['GET', '/console/api/usage'], ['GET', '/console/api/calls'], ['GET', '/console/{seg}'],
  ['GET', '/'], ['GET', '/healthz'], ['GET', '/readyz'], ['GET', '/metrics'], ['GET', '/{seg}']
]

const segment = fc.oneof(
  fc.constantFrom('demo%2Fgpt', 'demo/gpt', '%ff', '%', '%2e%2e', '..', '%00', '%E2%82', 'resp_123', 'acme', 'web', 'zeta', 'fuzzco', 'key_abc', '__proto__', 'constructor', '%252F'),
  fc.string({ maxLength: 30 }).map(encodeURIComponent),
  fc.string({ unit: 'grapheme', maxLength: 10 }).map(encodeURIComponent),
  fc.integer({ min: 900, max: 1400 }).map((n) => 'a'.repeat(n))
)

const QUERY_NAMES = ['limit', 'cursor', 'since', 'until', 'org', 'project', 'model', 'key_id', 'range', 'after', 'group_by', 'bucket', '__proto__', 'x', 'alt', 'key', 'pageSize', 'pageToken',
  'status', 'endpoint', 'provider', 'sub']
const QUERY_VALUES = ['1', '0', '-5', '10001', 'abc', '2026-01-01T00:00:00Z', '2026-02-30', 'not-a-date', '24h', '7d', '', 'Infinity', '-Infinity', '1e400', 'NaN', '0x10',
  'org,model', 'key_id,provider,project', 'org,org', 'color', 'hour', 'day', 'week', 'sse', 'json', KEY_A, 'ok,timeout', 'upstream_error', 'ok,', 'messages', 'demo']
const query = fc.array(fc.tuple(fc.constantFrom(...QUERY_NAMES), fc.oneof(fc.constantFrom(...QUERY_VALUES), fc.string({ maxLength: 20 }))), { maxLength: 4 })
  .map((pairs) => pairs.length === 0 ? '' : '?' + pairs.map(([k, v]) => `${k}=${encodeURIComponent(v)}`).join('&'))

// mostly right credentials for the route, so that the bodies reach the code behind auth
const auth = fc.oneof(
  { weight: 6, arbitrary: fc.constant<Record<string, string>>({ ...bearer(KEY_A), 'x-admin': '1' }) },
  { weight: 1, arbitrary: fc.constantFrom<Record<string, string>>({}, bearer('mg-wrong-0123456789abcdef'), { authorization: 'Basic Zm9vOmJhcg==' }, { authorization: 'Bearer' }, { 'x-api-key': KEY_A }, { 'x-api-key': '' }, { 'x-goog-api-key': KEY_A }, { 'x-goog-api-key': ' ' }) }
)
const extraHeaders = fc.record({
  'content-type': fc.constantFrom('application/json', 'text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/json; charset=latin1', ''),
  'accept-language': fc.constantFrom('fr', 'zh-CN,zh;q=0.9', '__proto__', 'xx-YY', '*;q=0', 'de;q=abc', ''),
  'x-locale': fc.constantFrom('ja', 'constructor', 'pt-BR', ''),
  'idempotency-key': fc.oneof(fc.constant(''), fc.string({ maxLength: 300 }).map((s) => s.replace(/[^\x21-\x7e]/g, 'k'))),
  'anthropic-version': fc.constantFrom('2023-06-01', 'garbage', '')
}, { requiredKeys: [] })

const body = fc.oneof(
  { weight: 5, arbitrary: fc.tuple(fc.constantFrom(...Object.keys(VALID)), fc.array(fc.nat(), { minLength: 1, maxLength: 5 }), hostile, fc.integer({ min: 0, max: 2 })).map(([k, path, v, op]) => JSON.stringify(mutate(VALID[k], path, v, op))) },
  { weight: 2, arbitrary: fc.constantFrom(...Object.values(VALID)).map((v) => JSON.stringify(v)) },
  { weight: 2, arbitrary: fc.json({ maxDepth: 5 }) },
  { weight: 1, arbitrary: fc.string({ maxLength: 200 }) },
  { weight: 1, arbitrary: fc.constant('') }
)

const request = fc.record({
  route: fc.constantFrom(...ROUTES),
  // mostly the route's own method; sometimes any other
  method: fc.oneof({ weight: 6, arbitrary: fc.constant(null) }, { weight: 1, arbitrary: fc.constantFrom('GET', 'POST', 'PUT', 'DELETE', 'PATCH', 'OPTIONS', 'HEAD') }),
  segs: fc.array(segment, { minLength: 2, maxLength: 2 }),
  query,
  auth,
  headers: extraHeaders,
  body,
  stream: fc.boolean()
})

type Req = typeof request extends fc.Arbitrary<infer R> ? R : never

function urlOf (r: Req): string {
  let i = 0
  return r.route[1].replace(/\{seg\}/g, () => r.segs[i++] ?? 'x') + r.query
}

const isMessagesFamily = (url: string): boolean => url.startsWith('/v1/messages')
// Google's API, and its method calls beside OpenAI's model list (whose GET and HEAD are OpenAI's)
function isGeminiFamily (raw: string, method: string): boolean {
  // the path as the request reaches the router, dot segments resolved
  let url = raw
  try { const u = new URL(raw, 'http://gateway'); url = u.pathname + u.search } catch {}
  return url.startsWith('/v1beta') || (method !== 'GET' && method !== 'HEAD' && /^\/v1\/models\/[^?]*(?::|%3[Aa])[A-Za-z]+(?:\?|$)/.test(url))
}
const DOCUMENTED_501 = new Set(['/v1/embeddings', '/v1/images/generations'])

/** Why an answer breaks the contract, or null when it keeps it. */
function violation (url: string, status: number, contentType: string | undefined, text: string, method = 'GET'): string | null {
  if (status >= 500 && !(status === 501 && DOCUMENTED_501.has(url.split('?')[0] ?? ''))) return `status ${status}`
  if (status < 400 || text === '') return null
  if (!/application\/json/.test(contentType ?? '')) return `error with content-type ${contentType ?? 'none'}`
  let b: { type?: unknown, error?: { code?: unknown, type?: unknown, message?: unknown, status?: unknown } }
  try { b = JSON.parse(text) } catch { return 'error body is not JSON' }
  if (typeof b.error?.message !== 'string') return 'no error.message'
  if (isGeminiFamily(url, method)) {
    if (b.error.code !== status || typeof b.error.status !== 'string' || b.error.type !== undefined) return 'not Google\'s shape'
  } else if (isMessagesFamily(url)) {
    if (b.type !== 'error' || typeof b.error.type !== 'string') return 'not the Messages shape'
  } else if (b.error.code === undefined || b.error.code === null) {
    return 'no error.code in the numeric-code shape'
  }
  return null
}

async function appUnderFuzz (t: Test): Promise<FastifyInstance> {
  return await build(t, {
    admin: { token: ADMIN },
    plugins: [
      { name: 'cors' }, { name: 'rate-limit', options: { max: 1_000_000, window_s: 60 } }, { name: 'auth' }, { name: 'idempotency' }, { name: 'quota' },
      { name: 'balance' }, { name: 'usage' }, { name: 'guardrails', options: { rules: [{ name: 'card', pattern: '\\d{16}', action: 'redact' }] } }, { name: 'diagnostics' }
    ]
  })
}

t.test('every route family, in-process: no 5xx, every error in its shape', async (t) => {
  const app = await appUnderFuzz(t)
  const figures = { requests: 0, fivexx: 0, wrongShape: 0, byStatus: new Map<number, number>() }
  const failures: string[] = []
  await fc.assert(fc.asyncProperty(request, async (r) => {
    let url = urlOf(r)
    const method = r.method ?? r.route[0]
    const withBody = method !== 'GET' && method !== 'HEAD' && method !== 'OPTIONS'
    let payload = withBody ? r.body : undefined
    if (payload !== undefined && r.stream && payload.startsWith('{"model"')) payload = payload.replace('"stream":false', '"stream":true')
    if (r.stream && url.includes(':streamGenerateContent') && !url.includes('alt=')) url += `${url.includes('?') ? '&' : '?'}alt=sse`
    const headers: Record<string, string> = { ...r.auth }
    // the right credential for the family: the admin token on /admin, a key elsewhere
    if (headers['x-admin'] !== undefined) {
      delete headers['x-admin']
      if (url.startsWith('/admin') || url.startsWith('/metrics')) headers.authorization = `Bearer ${ADMIN}`
    }
    for (const [k, v] of Object.entries(r.headers)) if (v !== undefined && v !== '') headers[k] = v
    const res = await app.inject({ method: method as 'GET', url, headers, payload })
    figures.requests++
    figures.byStatus.set(res.statusCode, (figures.byStatus.get(res.statusCode) ?? 0) + 1)
    if (process.env.FUZZ_DEBUG === String(res.statusCode)) console.log(method, url.slice(0, 80), res.body.slice(0, 100))
    const why = violation(url, res.statusCode, res.headers['content-type'] as string | undefined, method === 'HEAD' ? '' : res.body, method)
    if (why !== null) {
      if (res.statusCode >= 500) figures.fivexx++
      else figures.wrongShape++
      failures.push(`${method} ${url.slice(0, 120)} -> ${why}: ${res.body.slice(0, 200)}`)
      return false
    }
    return true
  }), { seed: SEED, numRuns: RUNS, endOnFailure: true })
    .catch((err: Error) => { t.fail(`${err.message.split('\n').slice(0, 6).join('\n')}\n${failures.slice(0, 3).join('\n')}`) })
  t.comment(`fuzz (in-process, seed ${SEED}): ${figures.requests} requests, ${figures.fivexx} 5xx, ${figures.wrongShape} errors in a wrong shape; statuses ${[...figures.byStatus].sort((a, b) => a[0] - b[0]).map(([s, n]) => `${s}×${n}`).join(' ')}`)
  t.equal(figures.fivexx + figures.wrongShape, 0, 'no 5xx and no error outside its shape')
  t.ok(figures.byStatus.has(200) && figures.byStatus.has(400) && figures.byStatus.has(401) && figures.byStatus.has(404), 'the generated requests reach answers, refusals and misses alike')
})

/** One raw HTTP/1.1 exchange: what Node's own parser and server limits answer. */
async function raw (port: number, method: string, path: string, headers: Record<string, string>): Promise<{ status: number, contentType: string | undefined, text: string }> {
  return await new Promise((resolve, reject) => {
    const req = httpRequest({ host: '127.0.0.1', port, method, path, headers, insecureHTTPParser: false }, (res) => {
      let text = ''
      res.setEncoding('utf8')
      res.on('data', (d: string) => { text += d })
      res.on('end', () => { resolve({ status: res.statusCode ?? 0, contentType: res.headers['content-type'], text }) })
    })
    req.on('error', reject)
    req.end()
  })
}

t.test('over a socket: oversized headers, long and malformed URLs, preflights without their headers', async (t) => {
  const app = await appUnderFuzz(t)
  await app.listen({ host: '127.0.0.1', port: 0 })
  const port = (app.server.address() as { port: number }).port
  let requests = 0
  let bad = 0
  await fc.assert(fc.asyncProperty(
    fc.constantFrom('/v1/models', '/v1/messages', '/admin/v1/keys', '/console/api/me', '/v1/chat/completions'),
    fc.oneof(
      fc.constant<[string, Record<string, string>]>(['big-header', { 'x-big': 'a'.repeat(20_000) }]),
      fc.constant<[string, Record<string, string>]>(['long-path', {}]),
      fc.constant<[string, Record<string, string>]>(['bad-escape', {}]),
      fc.constant<[string, Record<string, string>]>(['options', {}]),
      fc.constant<[string, Record<string, string>]>(['options-preflight', { origin: 'https://app.example', 'access-control-request-method': 'POST' }])
    ),
    async (base, [kind, headers]) => {
      const path = kind === 'long-path' ? `${base}/${'x'.repeat(5000)}` : kind === 'bad-escape' ? `${base}/%ff%` : base
      const method = kind.startsWith('options') ? 'OPTIONS' : 'GET'
      const res = await raw(port, method, path, { authorization: `Bearer ${KEY_A}`, ...headers })
      requests++
      const why = violation(path, res.status, res.contentType, res.text)
      if (why !== null) { bad++; t.comment(`${kind} ${path.slice(0, 60)} -> ${res.status} ${why}: ${res.text.slice(0, 160)}`) }
      return why === null
    }), { seed: SEED, numRuns: 60 }).catch((err: Error) => { t.fail(err.message.split('\n').slice(0, 4).join('\n')) })
  t.comment(`fuzz (socket): ${requests} requests, ${bad} outside the contract`)
  const big = await raw(port, 'GET', '/v1/models', { 'x-big': 'a'.repeat(20_000) })
  t.equal(big.status, 431, 'headers over 16 KB: 431')
  t.equal(JSON.parse(big.text).error.code, 431)
})
