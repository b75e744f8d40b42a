import t, { type Test } from 'tap'
import { connect, type Socket } from 'node:net'
import { Writable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { startMockUpstream } from '../mock-upstream.js'
import { bearer, KEY_A, mockCatalog, testConfig } from '../helper.js'

// The HTTP server's limits on slow and broken clients, over real sockets against tiny timeouts,
// and the errors met before routing, each in the route family's shape. What is asserted is that
// a connection is closed and what it was answered, never how long anything took.

const TIMEOUTS = { headers_timeout_s: 0.2, client_timeout_s: 0.4, keep_alive_timeout_s: 0.2 }

async function listen (t: Test, overrides: Record<string, unknown> = {}, log?: Writable): Promise<{ app: FastifyInstance, port: number }> {
  const logger = log === undefined ? false : { level: 'info', stream: log }
  const app = await buildApp(testConfig({ ...overrides, server: { ...TIMEOUTS, ...(overrides.server as object | undefined) } }), { logger })
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(() => app.close())
  const address = app.server.address()
  return { app, port: typeof address === 'object' && address !== null ? address.port : 0 }
}

interface Outcome { closed: boolean, status: number | null, headers: string, body: string }

/**
 * Writes `head`, then one byte of `drip` every `everyMs` (or nothing more when drip is empty),
 * and resolves when the server closes the connection, or once `drip` runs out while still open.
 */
async function slowClient (port: number, head: string, drip = '', everyMs = 40, linger = 0): Promise<Outcome> {
  const socket: Socket = connect(port, '127.0.0.1')
  let data = ''
  socket.setEncoding('latin1')
  socket.on('data', (d: string) => { data += d })
  socket.on('error', () => {})
  await new Promise((resolve) => socket.once('connect', resolve))
  if (head !== '') socket.write(head)
  let i = 0
  const closed = await new Promise<boolean>((resolve) => {
    socket.once('close', () => resolve(true))
    // bounded: a server that never closes fails the test instead of hanging it
    const timer = setInterval(() => {
      if (i < drip.length) { socket.write(drip[i++] as string); return }
      if (i++ >= drip.length + linger) { clearInterval(timer); resolve(false) }
    }, everyMs)
    socket.once('close', () => clearInterval(timer))
  })
  socket.destroy()
  const [headers = '', body = ''] = data.split('\r\n\r\n')
  const m = /^HTTP\/1\.1 (\d{3})/.exec(headers)
  return { closed, status: m === null ? null : Number(m[1]), headers, body }
}

const DRIP = 'x'.repeat(500) // 20 s at 40 ms a byte: far past every timeout under test

t.test('a client trickling its headers is cut off with a 408', async (t) => {
  const { port } = await listen(t)
  const res = await slowClient(port, 'POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nX-Slow: ', DRIP)
  t.ok(res.closed, 'the server closed the connection')
  t.equal(res.status, 408)
  t.same(JSON.parse(res.body), { error: { code: 408, type: 'timeout_error', message: 'The request was not received in full within 0.2 s.' } })
})

t.test('a client trickling its body is cut off with a 408, in the Messages shape on /v1/messages', async (t) => {
  let logs = ''
  const { port, app } = await listen(t, {}, new Writable({ write (chunk: Buffer, _enc, cb) { logs += chunk.toString(); cb() } }))
  // the two clients side by side: each is cut off on its own connection
  const [chat, messages] = await Promise.all([
    slowClient(port, `POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\nAuthorization: Bearer ${KEY_A}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`, DRIP),
    slowClient(port, `POST /v1/messages HTTP/1.1\r\nHost: gw\r\nx-api-key: ${KEY_A}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{`, DRIP)
  ])
  t.ok(chat.closed)
  t.equal(chat.status, 408)
  t.same(JSON.parse(chat.body), { error: { code: 408, type: 'timeout_error', message: 'The request was not received in full within 0.4 s.' } })
  t.ok(messages.closed)
  t.equal(messages.status, 408)
  t.same(JSON.parse(messages.body), { type: 'error', error: { type: 'timeout_error', message: 'The request was not received in full within 0.4 s.' } })
  await app.close()
  t.match(logs, /connection closed before the request was read/)
  t.notMatch(logs, /"level":50/, 'a client cut off is not logged as the gateway\'s error')
})

t.test('an idle keep-alive connection and a silent one are closed', async (t) => {
  const { port } = await listen(t)
  const [kept, silent] = await Promise.all([slowClient(port, 'GET /healthz HTTP/1.1\r\nHost: gw\r\n\r\n', '', 40, 500), slowClient(port, '', '', 40, 500)])
  t.ok(kept.closed, 'closed after its response')
  t.equal(kept.status, 200)
  t.ok(silent.closed, 'a connection that sends nothing is closed')
})

t.test('a response may stream far longer than every client timeout', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  mock.faults = { slowFramesMs: 60 }
  const { port } = await listen(t, mockCatalog(mock))
  const words = Array.from({ length: 20 }, (_, i) => `word${i}`).join(' ')
  const res = await fetch(`http://127.0.0.1:${port}/v1/chat/completions`, {
    method: 'POST',
    headers: { ...bearer(KEY_A), 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'openai/gpt-test', stream: true, messages: [{ role: 'user', content: words }] })
  })
  t.equal(res.status, 200)
  const text = await res.text()
  const frames = text.split('\n\n').filter((f) => f.startsWith('data: '))
  t.ok(frames.length > 20, `${frames.length} frames, each 60 ms apart: longer than the 0.4 s request timeout`)
  t.equal(frames.at(-1), 'data: [DONE]', 'the stream ran to its end')
  t.match(text, /word19/)
})

t.test('headers over the size limit: 431 in the family\'s shape', async (t) => {
  const { port } = await listen(t)
  const big = `X-Big: ${'a'.repeat(20_000)}\r\n`
  const chat = await slowClient(port, `POST /v1/chat/completions HTTP/1.1\r\nHost: gw\r\n${big}\r\n`)
  t.equal(chat.status, 431)
  t.same(JSON.parse(chat.body), { error: { code: 431, type: 'invalid_request_error', message: 'The request headers are larger than 16 KB.' } })
  t.match(chat.headers, /x-should-retry: false/)
  const messages = await slowClient(port, `POST /v1/messages?beta=true HTTP/1.1\r\nHost: gw\r\n${big}\r\n`)
  t.equal(messages.status, 431)
  t.same(JSON.parse(messages.body), { type: 'error', error: { type: 'invalid_request_error', message: 'The request headers are larger than 16 KB.' } })
})

t.test('a request that is not HTTP: 400 in the numeric-code shape', async (t) => {
  const { port } = await listen(t)
  const res = await slowClient(port, 'NOT HTTP AT ALL\r\n\r\n')
  t.equal(res.status, 400)
  t.same(JSON.parse(res.body), { error: { code: 400, type: 'invalid_request_error', message: 'The request is not valid HTTP.' } })
})

t.test('errors of the router: a malformed escape, an overlong parameter', async (t) => {
  const { app } = await listen(t, { admin: { token: 'admin-token-0123456789abcdef' } })
  for (const url of ['/v1/models/%ff', '/v1/%zz', '/admin/v1/orgs/%e0%a4%a']) {
    const res = await app.inject({ method: 'GET', url, headers: bearer(KEY_A) })
    t.equal(res.statusCode, 400, url)
    t.same(res.json(), { error: { code: 400, type: 'invalid_request_error', message: 'The request URL is not valid: it has a malformed percent-encoded sequence.' } })
    t.match(res.headers['x-svc-trace-id'], /^[0-9a-f-]{36}$/)
  }
  const m = await app.inject({ method: 'POST', url: '/v1/messages/%ff', headers: { 'x-api-key': KEY_A } })
  t.equal(m.statusCode, 400)
  t.same(m.json(), { type: 'error', error: { type: 'invalid_request_error', message: 'The request URL is not valid: it has a malformed percent-encoded sequence.' } })
  t.ok(m.headers['x-svc-trace-id'])
  const long = await app.inject({ method: 'GET', url: `/admin/v1/orgs/${'o'.repeat(1001)}`, headers: bearer('admin-token-0123456789abcdef') })
  t.equal(long.statusCode, 414)
  t.same(long.json(), { error: { code: 414, type: 'invalid_request_error', message: 'A path segment of the request URL is longer than 1000 characters.' } })
  t.ok(long.headers['x-svc-trace-id'])
})

t.test('OPTIONS without preflight headers is answered like a preflight, not with a text/plain 400', async (t) => {
  const { app } = await listen(t, { plugins: [{ name: 'cors' }, { name: 'auth' }] })
  for (const headers of [{}, { origin: 'https://app.example' }, { 'access-control-request-method': 'POST' }]) {
    const res = await app.inject({ method: 'OPTIONS', url: '/v1/chat/completions', headers })
    t.equal(res.statusCode, 204, JSON.stringify(headers))
    t.equal(res.body, '')
    t.ok(res.headers['x-svc-trace-id'])
  }
})

t.test('the configured timeouts reach the server', async (t) => {
  const { app } = await listen(t, { server: { idle_timeout_s: 9 } })
  t.equal(app.server.headersTimeout, 200)
  t.equal(app.server.requestTimeout, 400)
  t.equal(app.server.keepAliveTimeout, 200)
  t.equal(app.server.timeout, 9000)
  const defaults = await buildApp(testConfig({ server: { request_timeout_s: 120 } }))
  t.teardown(() => defaults.close())
  t.equal(defaults.server.timeout, 150_000, 'idle: request_timeout_s + 30 s by default')
  t.equal(defaults.server.headersTimeout, 30_000)
  t.equal(defaults.server.requestTimeout, 120_000)
  t.equal(defaults.server.keepAliveTimeout, 72_000)
})
