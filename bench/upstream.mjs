// A fixed-response upstream that costs almost nothing: canned answers for both protocols,
// JSON or SSE (20 content chunks) depending on the request's `stream`, and one embedding for
// any POST …/embeddings; and AWS Bedrock's Converse (POST /model/{id}/converse, JSON, and
// /converse-stream, the same 20 chunks as event-stream messages; no signature checked: what is
// measured is the gateway's signing and reading). PACE_MS paces stream
// chunks (the memory bench holds 1,000 streams open with it). A request for the model `bench-down`
// is answered 503 at once (the failed attempt of the fallback figure). Prints its port on stdout.
import { createServer } from 'node:http'
import { EventStreamCodec } from '@smithy/eventstream-codec'
import { fromUtf8, toUtf8 } from '@smithy/util-utf8'

const PACE_MS = Number(process.env.PACE_MS ?? 0)
const CHUNKS = 20
const usageO = { prompt_tokens: 25, completion_tokens: CHUNKS, total_tokens: 25 + CHUNKS, prompt_tokens_details: { cached_tokens: 5 } }
const chatJson = JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion', created: 1700000000, model: 'bench', choices: [{ index: 0, message: { role: 'assistant', content: 'word '.repeat(CHUNKS).trim() }, finish_reason: 'stop', logprobs: null }], usage: usageO })
const msgJson = JSON.stringify({ id: 'msg_bench', type: 'message', role: 'assistant', model: 'bench', content: [{ type: 'text', text: 'word '.repeat(CHUNKS).trim() }], stop_reason: 'end_turn', stop_sequence: null, usage: { input_tokens: 20, cache_read_input_tokens: 5, cache_creation_input_tokens: 0, output_tokens: CHUNKS } })
const chunk = (delta, finish = null) => `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1700000000, model: 'bench', choices: [{ index: 0, delta, finish_reason: finish }], usage: null })}\n\n`
const chatFrames = [chunk({ role: 'assistant', content: '' }), ...Array.from({ length: CHUNKS }, () => chunk({ content: 'word ' })), chunk({}, 'stop'),
  `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', created: 1700000000, model: 'bench', choices: [], usage: usageO })}\n\n`, 'data: [DONE]\n\n']
const ev = (type, data) => `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
const msgFrames = [ev('message_start', { message: { id: 'msg_bench', type: 'message', role: 'assistant', model: 'bench', content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 20, cache_read_input_tokens: 5, cache_creation_input_tokens: 0, output_tokens: 1 } } }),
  ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }),
  ...Array.from({ length: CHUNKS }, () => ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: 'word ' } })),
  ev('content_block_stop', { index: 0 }), ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: CHUNKS } }), ev('message_stop', {})]

const codec = new EventStreamCodec(toUtf8, fromUtf8)
const esm = (type, payload) => Buffer.from(codec.encode({ headers: { ':message-type': { type: 'string', value: 'event' }, ':event-type': { type: 'string', value: type }, ':content-type': { type: 'string', value: 'application/json' } }, body: fromUtf8(JSON.stringify(payload)) }))
const converseUsage = { inputTokens: 20, outputTokens: CHUNKS, totalTokens: 25 + CHUNKS, cacheReadInputTokens: 5 }
const converseJson = JSON.stringify({ output: { message: { role: 'assistant', content: [{ text: 'word '.repeat(CHUNKS).trim() }] } }, stopReason: 'end_turn', usage: converseUsage, metrics: { latencyMs: 1 } })
const converseStream = Buffer.concat([esm('messageStart', { role: 'assistant', p: 'abcd' }),
  ...Array.from({ length: CHUNKS }, () => esm('contentBlockDelta', { contentBlockIndex: 0, delta: { text: 'word ' }, p: 'abcdefgh' })),
  esm('contentBlockStop', { contentBlockIndex: 0, p: 'ab' }), esm('messageStop', { stopReason: 'end_turn', p: 'abc' }), esm('metadata', { usage: converseUsage, metrics: { latencyMs: 1 }, p: 'a' })])

// an embedding as text-embedding-3-small gives it: 1,536 float32 values, in base64 (what the openai SDK asks for)
const vector = Buffer.alloc(1536 * 4)
for (let i = 0; i < 1536; i++) vector.writeFloatLE(Math.sin(i) / 40, i * 4)
const embeddingJson = JSON.stringify({ object: 'list', data: [{ object: 'embedding', index: 0, embedding: vector.toString('base64') }], model: 'bench', usage: { prompt_tokens: 8, total_tokens: 8 } })

const server = createServer((req, res) => {
  let body = ''
  req.setEncoding('utf8')
  req.on('data', (d) => { body += d })
  req.on('end', () => {
    if (req.url.endsWith('/embeddings')) {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(embeddingJson)
      return
    }
    if (body.includes('"model":"bench-down"')) {
      res.writeHead(503, { 'content-type': 'application/json' })
      res.end('{"error":{"message":"down","type":"server_error","code":null}}')
      return
    }
    if (req.url.endsWith('/converse')) {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(converseJson)
      return
    }
    if (req.url.endsWith('/converse-stream')) {
      res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream' })
      res.end(converseStream)
      return
    }
    const messages = req.url.endsWith('/messages')
    const stream = body.includes('"stream":true')
    if (!stream) {
      res.writeHead(200, { 'content-type': 'application/json' })
      res.end(messages ? msgJson : chatJson)
      return
    }
    res.writeHead(200, { 'content-type': 'text/event-stream' })
    const frames = messages ? msgFrames : chatFrames
    if (PACE_MS === 0) { res.end(frames.join('')); return }
    let i = 0
    const timer = setInterval(() => {
      if (i < frames.length) res.write(frames[i++])
      if (i >= frames.length) { clearInterval(timer); res.end() }
    }, PACE_MS)
    res.on('close', () => clearInterval(timer))
  })
})
server.keepAliveTimeout = 60_000
server.listen(0, '127.0.0.1', () => process.stdout.write(`listening ${server.address().port}\n`))
