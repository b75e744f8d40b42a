import t, { type Test } from 'tap'
import { startMockUpstream } from '../mock-upstream.js'
import { bearer, build, KEY_A, mockCatalog } from '../helper.js'

// A media URL the rules of engine/gateway/media-url.ts refuse is answered 400 in the route family's
// shape and never reaches the upstream, whatever protocol the client and the upstream speak.

const BAD = ['file:///etc/passwd', 'gopher://example.com/_x', 'javascript:alert(1)', 'http://169.254.169.254/latest/meta-data/', 'http://[::1]/a.png', 'http://[::ffff:7f00:1]/', 'http://2130706433/', 'http://user:pw@example.com/a.png', 'http://metadata.google.internal/']
const GOOD = 'https://example.com/cat.png'

async function setup (t: Test) {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const app = await build(t, mockCatalog(mock))
  return { app, mock }
}

const chat = (part: unknown) => ({ model: 'openai/gpt-test', messages: [{ role: 'user', content: [{ type: 'text', text: 'look' }, part] }] })

t.test('chat/completions: image_url as {url} and as a string, to both upstream protocols', async (t) => {
  const { app, mock } = await setup(t)
  for (const model of ['openai/gpt-test', 'anthropic/claude-test']) {
    for (const url of BAD) {
      for (const part of [{ type: 'image_url', image_url: { url } }, { type: 'image_url', image_url: url }]) {
        const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: { ...chat(part), model } })
        t.equal(res.statusCode, 400, `${model} ${JSON.stringify(part)}`)
        t.equal(res.json().error.code, 400)
        t.equal(res.json().error.type, 'invalid_request_error')
        t.match(res.json().error.message, /^messages\[0\]\.content\[1\]\.image_url must be a public/)
      }
    }
  }
  t.equal(mock.requests.length, 0, 'nothing reached the upstream')
  const ok = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat({ type: 'image_url', image_url: { url: GOOD } }) })
  t.equal(ok.statusCode, 200, 'a public URL is forwarded')
  const data = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: chat({ type: 'image_url', image_url: { url: 'data:image/png;base64,iVBORw0KGgo=' } }) })
  t.equal(data.statusCode, 200, 'a data: URI of an image is forwarded')
  t.equal(mock.requests.length, 2)
})

t.test('chat/completions: video_url keeps invalid_video_url, data: included', async (t) => {
  const { app, mock } = await setup(t)
  for (const url of [...BAD, 'data:video/mp4;base64,AAAA', 'data:image/png;base64,AAAA']) {
    const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: bearer(KEY_A), payload: { ...chat({ type: 'video_url', video_url: { url } }), model: 'openai/video' } })
    t.equal(res.statusCode, 400, url)
    t.match(res.json().error.message, /^video_url must be a public/)
  }
  t.equal(mock.requests.length, 0)
})

t.test('messages: url sources in content, tool_result content and system, to both upstream protocols', async (t) => {
  const { app, mock } = await setup(t)
  const image = (url: string) => ({ type: 'image', source: { type: 'url', url } })
  const bodies = (url: string): Array<[string, Record<string, unknown>]> => [
    ['messages[0].content[1].source.url', { messages: [{ role: 'user', content: [{ type: 'text', text: 'look' }, image(url)] }] }],
    ['messages[0].content[0].source.url', { messages: [{ role: 'user', content: [{ type: 'document', source: { type: 'url', url } }] }] }],
    ['messages[2].content[0].content[0].source.url', {
      messages: [
        { role: 'user', content: 'fetch it' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'get', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [image(url)] }] }
      ],
      tools: [{ name: 'get', input_schema: { type: 'object' } }]
    }],
    ['system[0].source.url', { system: [image(url)], messages: [{ role: 'user', content: 'hi' }] }]
  ]
  for (const model of ['anthropic/claude-test', 'openai/gpt-test']) {
    for (const url of [...BAD, 'data:image/png;base64,iVBORw0KGgo=']) {
      for (const [field, body] of bodies(url)) {
        const res = await app.inject({ method: 'POST', url: '/v1/messages', headers: { 'x-api-key': KEY_A }, payload: { model, max_tokens: 10, ...body } })
        t.equal(res.statusCode, 400, `${model} ${field} ${url}`)
        t.equal(res.json().type, 'error')
        t.equal(res.json().error.type, 'invalid_request_error')
        t.equal(res.json().error.message.startsWith(`${field} must be a public`), true, res.json().error.message)
      }
    }
  }
  t.equal(mock.requests.length, 0, 'nothing reached the upstream')
  const ok = await app.inject({ method: 'POST', url: '/v1/messages', headers: { 'x-api-key': KEY_A }, payload: { model: 'anthropic/claude-test', max_tokens: 10, messages: [{ role: 'user', content: [image(GOOD), { type: 'text', text: 'what is it' }] }] } })
  t.equal(ok.statusCode, 200, 'a public URL is forwarded')
  t.equal(mock.requests.length, 1)
})
