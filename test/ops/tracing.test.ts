import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import t, { type Test } from 'tap'
import { buildApp } from '../../app.js'
import { startMockUpstream } from '../mock-upstream.js'
import { bearer, KEY_A, mockCatalog, testConfig } from '../helper.js'

// Traces over OTLP/HTTP (JSON), received by a collector of our own on loopback.

interface OtlpValue { stringValue?: string, intValue?: string, boolValue?: boolean, doubleValue?: number }
interface OtlpSpan { traceId: string, spanId: string, parentSpanId?: string, name: string, kind: number, startTimeUnixNano: string, endTimeUnixNano: string, attributes: Array<{ key: string, value: OtlpValue }>, status: { code: number } }
interface OtlpBody { resourceSpans: Array<{ resource: { attributes: Array<{ key: string, value: OtlpValue }> }, scopeSpans: Array<{ spans: OtlpSpan[] }> }> }

async function collector (t: Test): Promise<{ url: string, bodies: OtlpBody[], paths: string[] }> {
  const bodies: OtlpBody[] = []
  const paths: string[] = []
  const server = createServer((req, res) => {
    let text = ''
    req.on('data', (c: Buffer) => { text += String(c) })
    req.on('end', () => {
      paths.push(`${req.method ?? ''} ${req.url ?? ''} ${req.headers['content-type'] ?? ''} ${req.headers['x-collector-key'] ?? ''}`)
      bodies.push(JSON.parse(text) as OtlpBody)
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => { server.close() })
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1/traces`, bodies, paths }
}

const attrs = (s: OtlpSpan): Record<string, unknown> => Object.fromEntries(s.attributes.map((a) => [a.key, a.value.stringValue ?? (a.value.intValue !== undefined ? Number(a.value.intValue) : a.value.boolValue ?? a.value.doubleValue)]))

t.test('one span per call with the GenAI attributes, a child per attempt, the trace id of {prefix}Trace-ID', async (t) => {
  const mock = await startMockUpstream()
  const otlp = await collector(t)
  const app = await buildApp(testConfig({
    ...mockCatalog(mock),
    plugins: [{ name: 'auth' }, { name: 'usage' }],
    tracing: { otlp_endpoint: otlp.url, service_name: 'gw-test', headers: { 'x-collector-key': 'k1' } },
    upstream: { retry: { attempts: 0 } }
  }))
  t.teardown(() => mock.close())
  const plain = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: { model: 'openai/gpt-test', messages: [{ role: 'user', content: 'one two three' }] } })
  const failover = await app.inject({ method: 'POST', url: '/v1/messages', headers: bearer(KEY_A), payload: { model: 'openai/failover', max_tokens: 20, stream: true, messages: [{ role: 'user', content: 'four five' }] } })
  t.equal(plain.statusCode, 200)
  t.equal(failover.statusCode, 200)
  t.equal(otlp.bodies.length, 0, 'nothing sent while the batch is open')
  await app.gateway.store.flush()
  const usage = (await app.gateway.store.usage.page({}, 10)).find((r) => r.trace_id === plain.headers['x-svc-trace-id'])
  await app.close() // flushes the exporter
  t.ok(otlp.bodies.length >= 1)
  t.match(otlp.paths[0], /^POST \/v1\/traces application\/json k1$/)
  const resource = Object.fromEntries((otlp.bodies[0]?.resourceSpans[0]?.resource.attributes ?? []).map((a) => [a.key, a.value.stringValue]))
  t.equal(resource['service.name'], 'gw-test')
  const spans = otlp.bodies.flatMap((b) => b.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans)))

  const traceOf = (res: typeof plain): string => String(res.headers['x-svc-trace-id']).replace(/-/g, '')
  const first = spans.filter((s) => s.traceId === traceOf(plain))
  t.equal(first.length, 2, 'the call and its one attempt')
  const root = first.find((s) => s.parentSpanId === undefined) as OtlpSpan
  t.equal(root.name, 'chat openai/gpt-test')
  t.equal(root.kind, 2, 'server')
  t.equal(root.status.code, 1)
  t.match(attrs(root), {
    'gen_ai.operation.name': 'chat',
    'gen_ai.provider.name': 'mock-openai',
    'gen_ai.request.model': 'openai/gpt-test',
    'gen_ai.usage.input_tokens': usage?.prompt_tokens,
    'gen_ai.usage.output_tokens': usage?.completion_tokens,
    'http.response.status_code': 200,
    'modelgate.trace_id': plain.headers['x-svc-trace-id']
  })
  t.ok((usage?.completion_tokens ?? 0) > 0)
  const child = first.find((s) => s.parentSpanId === root.spanId) as OtlpSpan
  t.equal(child.kind, 3, 'client')
  t.match(attrs(child), { 'gen_ai.provider.name': 'mock-openai', 'gen_ai.request.model': 'gpt-upstream-name', 'http.response.status_code': 200 })
  t.ok(BigInt(child.startTimeUnixNano) >= BigInt(root.startTimeUnixNano) && BigInt(child.endTimeUnixNano) <= BigInt(root.endTimeUnixNano), 'the attempt lies within the call')

  const second = spans.filter((s) => s.traceId === traceOf(failover))
  const attempts = second.filter((s) => s.parentSpanId !== undefined)
  t.same(attempts.map((s) => attrs(s)['gen_ai.provider.name']), ['mock-dead', 'mock-openai'], 'a child span per attempt, the failover included')
  t.equal(attempts[0]?.status.code, 2, 'the refused connection is an error')
  t.equal(attrs(attempts[0] as OtlpSpan)['error.type'], 'network_error')
  t.equal(attrs(attempts[1] as OtlpSpan)['modelgate.failover'], true)
})

t.test('tracing is off by default and a collector that is away costs the calls nothing', async (t) => {
  const off = await buildApp(testConfig())
  t.teardown(() => off.close())
  t.equal(off.gateway.config.tracing.otlp_endpoint, '')
  t.equal(off.gateway.config.tracing.timeout_s, 5)
  // nothing listens on port 9: the exporter retries until timeout_s, and closing waits that long at most
  const away = await buildApp(testConfig({ tracing: { otlp_endpoint: 'http://127.0.0.1:9/v1/traces', timeout_s: 0.2 } }))
  const res = await away.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: { model: 'demo/gpt', messages: [{ role: 'user', content: 'x' }] } })
  t.equal(res.statusCode, 200)
  await away.close()
})
