import t, { type Test } from 'tap'
import { BedrockRuntimeClient, ConverseCommand, ConverseStreamCommand, InvokeModelCommand, InvokeModelWithResponseStreamCommand, ThrottlingException } from '@aws-sdk/client-bedrock-runtime'
import { NodeHttpHandler } from '@smithy/node-http-handler'
import { startMockBedrock, TEST_KEYS } from './mock-bedrock.js'

// The mock Bedrock is proved by AWS's own client: the SDK signs, the mock verifies its signature
// by signing again; the SDK parses the mock's JSON and event streams as it parses Bedrock's. The
// SDK speaks HTTP/2 to Bedrock by default (for its bidirectional stream, which the gateway does
// not use); over plain HTTP to the mock it is given its HTTP/1.1 handler.

const MODEL = 'us.anthropic.claude-sonnet-4-5-20250929-v1:0'

async function setup (t: Test) {
  const mock = await startMockBedrock()
  t.teardown(mock.close)
  const client = (keys: { accessKeyId: string, secretAccessKey: string, sessionToken?: string } = { accessKeyId: 'AKIDTESTBEDROCK1', secretAccessKey: TEST_KEYS.AKIDTESTBEDROCK1.secret }, region = 'us-east-1') =>
    new BedrockRuntimeClient({ region, endpoint: mock.url, credentials: keys, maxAttempts: 1, requestHandler: new NodeHttpHandler() })
  return { mock, client }
}

t.test('Converse: the SDK signs, the mock verifies and answers, the SDK parses; usage with the cache', async (t) => {
  const { mock, client } = await setup(t)
  mock.cacheRead = 5
  mock.cacheWrite = 9
  mock.cacheWrite1h = 4
  const res = await client().send(new ConverseCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text: 'hello there' }] }], system: [{ text: 'Be brief.' }], inferenceConfig: { maxTokens: 100 } }))
  t.equal(mock.last().auth, 'AKIDTESTBEDROCK1', 'signed by the known key')
  t.equal(mock.last().path, `/model/${encodeURIComponent(MODEL)}/converse`)
  t.equal(res.output?.message?.content?.[0]?.text, 'Echo: hello there')
  t.equal(res.stopReason, 'end_turn')
  t.equal(res.usage?.cacheReadInputTokens, 5)
  t.equal(res.usage?.cacheWriteInputTokens, 9)
  t.same(res.usage?.cacheDetails, [{ ttl: '5m', inputTokens: 5 }, { ttl: '1h', inputTokens: 4 }])
  t.equal(res.usage?.outputTokens, 3)
})

t.test('Converse with a session token; a tool call', async (t) => {
  const { mock, client } = await setup(t)
  const c = client({ accessKeyId: 'ASIATESTSESSION1', secretAccessKey: TEST_KEYS.ASIATESTSESSION1.secret, sessionToken: 'test-session-token' })
  const res = await c.send(new ConverseCommand({
    modelId: MODEL,
    messages: [{ role: 'user', content: [{ text: 'use the tool please' }] }],
    toolConfig: { tools: [{ toolSpec: { name: 'get_weather', inputSchema: { json: { type: 'object' } } } }] }
  }))
  t.equal(mock.last().headers['x-amz-security-token'], 'test-session-token')
  t.equal(res.stopReason, 'tool_use')
  t.same(res.output?.message?.content?.[0]?.toolUse?.input, { city: 'Paris' })
  t.equal(res.output?.message?.content?.[0]?.toolUse?.name, 'get_weather')
})

t.test('the mock refuses wrong keys, a wrong session token, another region; the SDK reads its errors', async (t) => {
  const { mock, client } = await setup(t)
  const send = (c: BedrockRuntimeClient) => c.send(new ConverseCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text: 'hi' }] }] }))
  await t.rejects(send(client({ accessKeyId: 'AKIDTESTBEDROCK1', secretAccessKey: 'wrong' })), { name: 'InvalidSignatureException', $metadata: { httpStatusCode: 403 } })
  await t.rejects(send(client({ accessKeyId: 'AKIDUNKNOWN', secretAccessKey: 'x' })), { name: 'UnrecognizedClientException' })
  await t.rejects(send(client({ accessKeyId: 'ASIATESTSESSION1', secretAccessKey: TEST_KEYS.ASIATESTSESSION1.secret, sessionToken: 'other' })), { name: 'UnrecognizedClientException' })
  await t.rejects(send(client(undefined, 'eu-west-1')), { name: 'InvalidSignatureException' })
  mock.failNext('ThrottlingException', 429, 'Too many requests, please wait before trying again.')
  const err = await send(client()).catch((e: unknown) => e)
  t.ok(err instanceof ThrottlingException, 'a throttling error as the SDK types it')
  mock.failNext('ValidationException', 400, 'bad input')
  await t.rejects(send(client()), { name: 'ValidationException', message: 'bad input', $metadata: { httpStatusCode: 400 } })
})

t.test('ConverseStream: event-stream frames the SDK reads, padding and all; an exception inside the stream', async (t) => {
  const { mock, client } = await setup(t)
  mock.cacheRead = 2
  const res = await client().send(new ConverseStreamCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text: 'stream this please' }] }] }))
  const kinds: string[] = []
  let text = ''
  let usage: unknown
  for await (const ev of res.stream ?? []) {
    kinds.push(Object.keys(ev).filter((k) => (ev as unknown as Record<string, unknown>)[k] !== undefined)[0] ?? '?')
    if (ev.contentBlockDelta?.delta?.text !== undefined) text += ev.contentBlockDelta.delta.text
    if (ev.metadata !== undefined) usage = ev.metadata.usage
  }
  t.equal(text, 'Echo: stream this please')
  t.same([...new Set(kinds)], ['messageStart', 'contentBlockDelta', 'contentBlockStop', 'messageStop', 'metadata'])
  t.match(usage, { outputTokens: 4, cacheReadInputTokens: 2 })

  mock.exceptionInStream = 'throttlingException'
  const res2 = await client().send(new ConverseStreamCommand({ modelId: MODEL, messages: [{ role: 'user', content: [{ text: 'stream this please' }] }] }))
  await t.rejects((async () => { for await (const ev of res2.stream ?? []) void ev })(), { name: 'ThrottlingException' })
})

t.test('InvokeModel and its stream for an Anthropic model: the Messages body and base64 chunks', async (t) => {
  const { mock, client } = await setup(t)
  const body = JSON.stringify({ anthropic_version: 'bedrock-2023-05-31', max_tokens: 50, messages: [{ role: 'user', content: 'invoke me' }] })
  const res = await client().send(new InvokeModelCommand({ modelId: MODEL, body, contentType: 'application/json', accept: 'application/json' }))
  const answer = JSON.parse(Buffer.from(res.body).toString('utf8')) as { content: Array<{ text: string }>, usage: { input_tokens: number } }
  t.equal(answer.content[0]?.text, 'Echo: invoke me')
  t.equal(mock.last().path, `/model/${encodeURIComponent(MODEL)}/invoke`)

  const stream = await client().send(new InvokeModelWithResponseStreamCommand({ modelId: MODEL, body, contentType: 'application/json' }))
  const types: string[] = []
  let text = ''
  for await (const ev of stream.body ?? []) {
    const inner = JSON.parse(Buffer.from(ev.chunk?.bytes ?? new Uint8Array()).toString('utf8')) as { type: string, delta?: { text?: string } }
    types.push(inner.type)
    if (inner.delta?.text !== undefined) text += inner.delta.text
  }
  t.equal(text, 'Echo: invoke me')
  t.equal(types[0], 'message_start')
  t.equal(types[types.length - 1], 'message_stop')

  await t.rejects(client().send(new InvokeModelCommand({ modelId: MODEL, body: JSON.stringify({ max_tokens: 5, messages: [] }) })), { name: 'ValidationException' })
})

t.test('a Bedrock API key as a Bearer token', async (t) => {
  const mock = await startMockBedrock({ apiKeys: ['bedrock-api-key-1'] })
  t.teardown(mock.close)
  const ok = await fetch(`${mock.url}/model/m/converse`, { method: 'POST', headers: { authorization: 'Bearer bedrock-api-key-1', 'content-type': 'application/json' }, body: JSON.stringify({ messages: [{ role: 'user', content: [{ text: 'hi' }] }] }) })
  t.equal(ok.status, 200)
  const bad = await fetch(`${mock.url}/model/m/converse`, { method: 'POST', headers: { authorization: 'Bearer nope' }, body: '{}' })
  t.equal(bad.status, 403)
  t.equal(bad.headers.get('x-amzn-errortype')?.split(':')[0], 'AccessDeniedException')
})
