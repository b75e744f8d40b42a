import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Hash } from '@smithy/hash-node'
import { EventStreamCodec, type MessageHeaders } from '@smithy/eventstream-codec'
import { HttpRequest } from '@smithy/protocol-http'
import { SignatureV4 } from '@smithy/signature-v4'
import { fromUtf8, toUtf8 } from '@smithy/util-utf8'
import { isObj, type Json } from '../engine/kernel/json.js'
import type { ConverseAnswer, ConverseContentBlock, ConverseStreamEvents } from '../engine/protocols/converse/types.js'

// A local AWS Bedrock Runtime for the tests: /model/{id}/converse, /converse-stream, /invoke and
// /invoke-with-response-stream, with Bedrock's JSON bodies, its binary event-stream framing
// (written by @smithy/eventstream-codec, CRCs and all) and its errors ({message} with the name in
// x-amzn-ErrorType). Every call must be signed with Signature Version 4 for service `bedrock`
// by keys the mock knows (checked by re-signing the request with AWS's own signer and comparing
// the signatures), or carry a Bedrock API key as a Bearer token. @aws-sdk/client-bedrock-runtime
// proves the mock right in mock-bedrock.test.ts.
//
// Answers are deterministic:
//   P (input tokens) = ceil(len(JSON.stringify(messages)) / 4) + ceil(len(JSON.stringify(system)) / 4) when system is present
//   Converse usage: inputTokens = P (uncached), cacheReadInputTokens = mock.cacheRead,
//     cacheWriteInputTokens = mock.cacheWrite (of which mock.cacheWrite1h for an hour, in cacheDetails)
//   Messages (invoke) usage: input_tokens = P, cache_read_input_tokens / cache_creation_input_tokens the same
//   output: one token per word of the text, plus ceil(len(JSON of the tool input) / 4) per tool call
// Text: "Echo: <the first 20 words of the last user text>", or "The tool returned: <its text>"
// after a tool result. A tool call (named get_weather's, or the first tool's) is answered when
// tools are given and the last user text says "use the tool", or the choice forces one.
// maxTokens / max_tokens cut the words (stop reason max_tokens).

export interface BedrockRecorded {
  method: string
  path: string
  headers: IncomingHttpHeaders
  body: Json
  /** How the call authenticated: the access key id, `bearer`, or null when refused. */
  auth: string | null
  status: number
}

export interface MockBedrockOptions {
  region?: string
  /** Known keys: access key id → secret (and session token, which must then come). */
  keys?: Record<string, { secret: string, sessionToken?: string }>
  /** Bedrock API keys taken as Bearer tokens. */
  apiKeys?: string[]
}

export interface MockBedrock {
  url: string
  requests: BedrockRecorded[]
  cacheRead: number
  cacheWrite: number
  cacheWrite1h: number
  /** The next calls fail with this error (each call takes one; `times` defaults to 1). */
  failNext: (name: string, status: number, message: string, times?: number) => void
  /** The next stream sends this exception after its first delta. */
  exceptionInStream: string | null
  last: () => BedrockRecorded
  close: () => Promise<void>
}

const codec = new EventStreamCodec(toUtf8, fromUtf8)

export const TEST_KEYS = { AKIDTESTBEDROCK1: { secret: 'test-secret-key-1' }, ASIATESTSESSION1: { secret: 'test-secret-key-2', sessionToken: 'test-session-token' } }

export function promptTokensOf (body: Json): number {
  const system = body.system === undefined ? 0 : Math.ceil(JSON.stringify(body.system).length / 4)
  return Math.ceil(JSON.stringify(body.messages ?? []).length / 4) + system
}

function eventMessage (eventType: string, payload: unknown): Uint8Array {
  const headers: MessageHeaders = {
    ':message-type': { type: 'string', value: 'event' },
    ':event-type': { type: 'string', value: eventType },
    ':content-type': { type: 'string', value: 'application/json' }
  }
  return codec.encode({ headers, body: fromUtf8(JSON.stringify(payload)) })
}

/** A Converse stream event as the gateway's codec reads it, with the padding `p` real payloads carry. */
const converseEvent = <K extends keyof ConverseStreamEvents>(name: K, payload: ConverseStreamEvents[K] & { p: string }): Uint8Array => eventMessage(name, payload)

function exceptionMessage (type: string, message: string): Uint8Array {
  const headers: MessageHeaders = {
    ':message-type': { type: 'string', value: 'exception' },
    ':exception-type': { type: 'string', value: type },
    ':content-type': { type: 'string', value: 'application/json' }
  }
  return codec.encode({ headers, body: fromUtf8(JSON.stringify({ message })) })
}

const signers = new Map<string, SignatureV4>()

/** The request's SigV4 signature checked by signing it again with the same key, date and signed headers; the access key id, or why not. */
async function verifySigV4 (req: IncomingMessage, raw: Buffer, region: string, keys: NonNullable<MockBedrockOptions['keys']>): Promise<{ ok: true, id: string } | { ok: false, type: string, message: string }> {
  const authz = req.headers.authorization ?? ''
  const m = /^AWS4-HMAC-SHA256 Credential=([^/]+)\/(\d{8})\/([^/]+)\/([^/]+)\/aws4_request, ?SignedHeaders=([^,]+), ?Signature=([0-9a-f]{64})$/.exec(authz)
  if (m === null) return { ok: false, type: 'MissingAuthenticationTokenException', message: 'Missing Authentication Token' }
  const [, id, , scopeRegion, service, signedHeaders] = m as unknown as string[]
  const key = keys[id as string]
  if (key === undefined) return { ok: false, type: 'UnrecognizedClientException', message: 'The security token included in the request is invalid.' }
  if (scopeRegion !== region || service !== 'bedrock') return { ok: false, type: 'InvalidSignatureException', message: `Credential should be scoped to a valid region and service bedrock, not ${scopeRegion ?? ''}/${service ?? ''}.` }
  if (key.sessionToken !== undefined && req.headers['x-amz-security-token'] !== key.sessionToken) return { ok: false, type: 'UnrecognizedClientException', message: 'The security token included in the request is invalid.' }
  const date = req.headers['x-amz-date']
  if (typeof date !== 'string' || !/^\d{8}T\d{6}Z$/.test(date)) return { ok: false, type: 'IncompleteSignatureException', message: 'X-Amz-Date is missing.' }
  const when = new Date(`${date.slice(0, 4)}-${date.slice(4, 6)}-${date.slice(6, 8)}T${date.slice(9, 11)}:${date.slice(11, 13)}:${date.slice(13, 15)}Z`)
  if (Math.abs(when.getTime() - Date.now()) > 15 * 60_000) return { ok: false, type: 'InvalidSignatureException', message: 'Signature expired.' }
  const headers: Record<string, string> = {}
  for (const name of (signedHeaders as string).split(';')) {
    const v = req.headers[name]
    headers[name] = Array.isArray(v) ? v.join(',') : v ?? ''
  }
  const url = new URL(req.url ?? '/', 'http://mock')
  const signerKey = `${id as string}:${region}`
  let signer = signers.get(signerKey)
  if (signer === undefined) {
    const credentials = key.sessionToken === undefined ? { accessKeyId: id as string, secretAccessKey: key.secret } : { accessKeyId: id as string, secretAccessKey: key.secret, sessionToken: key.sessionToken }
    signer = new SignatureV4({ service: 'bedrock', region, credentials, sha256: Hash.bind(null, 'sha256') })
    signers.set(signerKey, signer)
  }
  const request = new HttpRequest({ method: req.method ?? 'POST', protocol: 'http:', hostname: url.hostname, path: url.pathname, query: Object.fromEntries(url.searchParams), headers, body: raw })
  const again = await signer.sign(request, { signingDate: when })
  const expected = again.headers.authorization ?? again.headers.Authorization
  if (expected !== authz) return { ok: false, type: 'InvalidSignatureException', message: 'The request signature we calculated does not match the signature you provided.' }
  return { ok: true, id: id as string }
}

interface Turn { role: string, texts: string[], toolResult: string | null }

function turnsOf (body: Json, invoke: boolean): Turn[] {
  const out: Turn[] = []
  for (const m of Array.isArray(body.messages) ? body.messages.filter(isObj) : []) {
    const content: unknown[] = typeof m.content === 'string' ? [{ text: m.content, type: 'text' }] : Array.isArray(m.content) ? m.content : []
    const texts: string[] = []
    let toolResult: string | null = null
    for (const b of content.filter(isObj)) {
      if (typeof b.text === 'string') texts.push(b.text)
      if (invoke && b.type === 'tool_result') toolResult = typeof b.content === 'string' ? b.content : JSON.stringify(b.content)
      if (!invoke && isObj(b.toolResult)) {
        const c = Array.isArray(b.toolResult.content) ? b.toolResult.content.filter(isObj) : []
        toolResult = c.map((p) => typeof p.text === 'string' ? p.text : JSON.stringify(p.json)).join(' ')
      }
    }
    out.push({ role: String(m.role), texts, toolResult })
  }
  return out
}

interface Answer { text: string, tool: { id: string, name: string, input: Record<string, string> } | null, stop: 'end_turn' | 'tool_use' | 'max_tokens', input: number, output: number }

let seq = 0

function answer (body: Json, invoke: boolean): Answer {
  const turns = turnsOf(body, invoke)
  const last = turns[turns.length - 1]
  const toolNames: string[] = []
  if (invoke) for (const t of Array.isArray(body.tools) ? body.tools.filter(isObj) : []) toolNames.push(String(t.name))
  else {
    const config = isObj(body.toolConfig) ? body.toolConfig : {}
    for (const t of Array.isArray(config.tools) ? config.tools.filter(isObj) : []) if (isObj(t.toolSpec)) toolNames.push(String(t.toolSpec.name))
  }
  const choice = invoke ? body.tool_choice : isObj(body.toolConfig) ? body.toolConfig.toolChoice : undefined
  const forced = isObj(choice) && (invoke ? choice.type === 'any' || choice.type === 'tool' : 'any' in choice || 'tool' in choice)
  const lastText = last?.texts.join(' ') ?? ''
  const input = promptTokensOf(body)
  if (last?.toolResult === null && toolNames.length > 0 && (forced || /use the tool/i.test(lastText))) {
    const name = toolNames.includes('get_weather') ? 'get_weather' : toolNames[0] as string
    const args = { city: 'Paris' }
    return { text: '', tool: { id: `tooluse_mock${++seq}`, name, input: args }, stop: 'tool_use', input, output: Math.ceil(JSON.stringify(args).length / 4) }
  }
  const source = last?.toolResult !== null && last?.toolResult !== undefined ? `The tool returned: ${last.toolResult}` : `Echo: ${lastText}`
  let words = source.split(/\s+/).filter((w) => w !== '').slice(0, 21)
  const max = invoke ? body.max_tokens : isObj(body.inferenceConfig) ? body.inferenceConfig.maxTokens : undefined
  let stop: Answer['stop'] = 'end_turn'
  if (typeof max === 'number' && words.length > max) { words = words.slice(0, max); stop = 'max_tokens' }
  return { text: words.join(' '), tool: null, stop, input, output: words.length }
}

export async function startMockBedrock (opts: MockBedrockOptions = {}): Promise<MockBedrock> {
  const region = opts.region ?? 'us-east-1'
  const keys = opts.keys ?? TEST_KEYS
  const apiKeys = new Set(opts.apiKeys ?? [])
  const failures: Array<{ name: string, status: number, message: string }> = []
  const state: MockBedrock = {
    url: '',
    requests: [],
    cacheRead: 0,
    cacheWrite: 0,
    cacheWrite1h: 0,
    exceptionInStream: null,
    failNext: (name, status, message, times = 1) => { for (let i = 0; i < times; i++) failures.push({ name, status, message }) },
    last: () => state.requests[state.requests.length - 1] as BedrockRecorded,
    close: async () => {}
  }

  // Converse's answers typed as the gateway's codec reads them, and checked by the SDK's client (mock-bedrock.test.ts)
  const converseUsage = (a: Answer): NonNullable<ConverseAnswer['usage']> => {
    const usage: NonNullable<ConverseAnswer['usage']> = { inputTokens: a.input, outputTokens: a.output, totalTokens: a.input + a.output + state.cacheRead + state.cacheWrite }
    if (state.cacheRead > 0) usage.cacheReadInputTokens = state.cacheRead
    if (state.cacheWrite > 0) {
      usage.cacheWriteInputTokens = state.cacheWrite
      const details = [{ ttl: '5m' as const, inputTokens: state.cacheWrite - state.cacheWrite1h }, { ttl: '1h' as const, inputTokens: state.cacheWrite1h }]
      usage.cacheDetails = details.filter((d) => d.inputTokens > 0)
    }
    return usage
  }
  const messagesUsage = (a: Answer): Json => ({ input_tokens: a.input, output_tokens: a.output, cache_read_input_tokens: state.cacheRead, cache_creation_input_tokens: state.cacheWrite })

  const sendError = (res: ServerResponse, status: number, name: string, message: string): void => {
    res.writeHead(status, { 'content-type': 'application/json', 'x-amzn-errortype': `${name}:http://internal.amazon.com/coral/com.amazon.bedrock/`, 'x-amzn-requestid': 'mock-request' })
    res.end(JSON.stringify({ message }))
  }

  const handle = async (req: IncomingMessage, res: ServerResponse, raw: Buffer): Promise<number> => {
    const url = new URL(req.url ?? '/', 'http://mock')
    const rec: BedrockRecorded = { method: req.method ?? '', path: url.pathname, headers: req.headers, body: {}, auth: null, status: 0 }
    state.requests.push(rec)
    const bearer = /^Bearer (.+)$/.exec(req.headers.authorization ?? '')?.[1]
    if (bearer !== undefined) {
      if (!apiKeys.has(bearer)) { sendError(res, 403, 'AccessDeniedException', 'Authentication failed: the API key is invalid.'); return 403 }
      rec.auth = 'bearer'
    } else {
      const v = await verifySigV4(req, raw, region, keys)
      if (!v.ok) { sendError(res, 403, v.type, v.message); return 403 }
      rec.auth = v.id
    }
    const m = /^\/model\/([^/]+)\/(converse|converse-stream|invoke|invoke-with-response-stream)$/.exec(url.pathname)
    if (req.method !== 'POST' || m === null) { sendError(res, 404, 'UnknownOperationException', 'Unknown operation'); return 404 }
    const model = decodeURIComponent(m[1] as string)
    const op = m[2] as string
    let body: unknown
    try { body = JSON.parse(raw.toString('utf8')) } catch { body = null }
    if (!isObj(body)) { sendError(res, 400, 'ValidationException', 'Malformed input request, please reformat your input and try again.'); return 400 }
    rec.body = body
    const failure = failures.shift()
    if (failure !== undefined) { sendError(res, failure.status, failure.name, failure.message); return failure.status }
    const invoke = op.startsWith('invoke')
    if (invoke && body.anthropic_version !== 'bedrock-2023-05-31') { sendError(res, 400, 'ValidationException', 'Malformed input request: #: required key [anthropic_version] not found'); return 400 }
    if (invoke && (body.model !== undefined || body.stream !== undefined)) { sendError(res, 400, 'ValidationException', 'Malformed input request: #: extraneous key [model] is not permitted'); return 400 }
    if (!invoke && (!Array.isArray(body.messages) || body.messages.length === 0)) { sendError(res, 400, 'ValidationException', 'A conversation must start with a user message.'); return 400 }
    if (!invoke && Array.isArray(body.messages) && body.messages.some((msg) => isObj(msg) && Array.isArray(msg.content) && msg.content.some((b) => isObj(b) && typeof b.text === 'string' && b.text.trim() === ''))) {
      sendError(res, 400, 'ValidationException', 'The text field in the ContentBlock object is blank.'); return 400
    }
    const a = answer(body, invoke)
    if (op === 'converse') {
      const content: ConverseContentBlock[] = []
      if (a.text !== '') content.push({ text: a.text })
      if (a.tool !== null) content.push({ toolUse: { toolUseId: a.tool.id, name: a.tool.name, input: a.tool.input } })
      const out: ConverseAnswer = { output: { message: { role: 'assistant', content } }, stopReason: a.stop, usage: converseUsage(a), metrics: { latencyMs: 12 } }
      res.writeHead(200, { 'content-type': 'application/json', 'x-amzn-requestid': 'mock-request' })
      res.end(JSON.stringify(out))
      return 200
    }
    if (op === 'invoke') {
      const content: Json[] = []
      if (a.text !== '') content.push({ type: 'text', text: a.text })
      if (a.tool !== null) content.push({ type: 'tool_use', id: a.tool.id, name: a.tool.name, input: a.tool.input })
      res.writeHead(200, { 'content-type': 'application/json', 'x-amzn-requestid': 'mock-request', 'x-amzn-bedrock-input-token-count': String(a.input) })
      res.end(JSON.stringify({ id: `msg_bdrk_${++seq}`, type: 'message', role: 'assistant', model, content, stop_reason: a.stop, stop_sequence: null, usage: messagesUsage(a) }))
      return 200
    }
    res.writeHead(200, { 'content-type': 'application/vnd.amazon.eventstream', 'x-amzn-requestid': 'mock-request' })
    const frames: Uint8Array[] = []
    const words = a.text === '' ? [] : a.text.split(' ').map((w, i) => i === 0 ? w : ` ${w}`)
    let excepted = false
    const except = (): boolean => {
      if (state.exceptionInStream === null || excepted) return false
      frames.push(exceptionMessage(state.exceptionInStream, 'Too many requests, please wait before trying again.'))
      state.exceptionInStream = null
      excepted = true
      return true
    }
    if (op === 'converse-stream') {
      // real payloads carry a padding field `p`
      frames.push(converseEvent('messageStart', { role: 'assistant', p: 'abcd' }))
      let index = 0
      if (words.length > 0) {
        for (const w of words) {
          frames.push(converseEvent('contentBlockDelta', { contentBlockIndex: index, delta: { text: w }, p: 'ab' }))
          if (except()) break
        }
        if (!excepted) frames.push(converseEvent('contentBlockStop', { contentBlockIndex: index++, p: 'abc' }))
      }
      if (a.tool !== null && !excepted) {
        const json = JSON.stringify(a.tool.input)
        frames.push(converseEvent('contentBlockStart', { contentBlockIndex: index, start: { toolUse: { toolUseId: a.tool.id, name: a.tool.name } }, p: 'a' }))
        frames.push(converseEvent('contentBlockDelta', { contentBlockIndex: index, delta: { toolUse: { input: json.slice(0, 5) } }, p: 'a' }))
        frames.push(converseEvent('contentBlockDelta', { contentBlockIndex: index, delta: { toolUse: { input: json.slice(5) } }, p: 'a' }))
        frames.push(converseEvent('contentBlockStop', { contentBlockIndex: index, p: 'a' }))
      }
      if (!excepted) {
        frames.push(converseEvent('messageStop', { stopReason: a.stop, p: 'abcdef' }))
        frames.push(converseEvent('metadata', { usage: converseUsage(a), metrics: { latencyMs: 12 }, p: 'ab' }))
      }
    } else {
      const chunk = (ev: Json): void => { frames.push(eventMessage('chunk', { bytes: Buffer.from(JSON.stringify(ev)).toString('base64'), p: 'abc' })) }
      chunk({ type: 'message_start', message: { id: `msg_bdrk_${++seq}`, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: { ...messagesUsage(a), output_tokens: 1 } } })
      let index = 0
      if (words.length > 0) {
        chunk({ type: 'content_block_start', index, content_block: { type: 'text', text: '' } })
        for (const w of words) {
          chunk({ type: 'content_block_delta', index, delta: { type: 'text_delta', text: w } })
          if (except()) break
        }
        if (!excepted) chunk({ type: 'content_block_stop', index: index++ })
      }
      if (a.tool !== null && !excepted) {
        chunk({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: a.tool.id, name: a.tool.name, input: {} } })
        chunk({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(a.tool.input) } })
        chunk({ type: 'content_block_stop', index })
      }
      if (!excepted) {
        chunk({ type: 'message_delta', delta: { stop_reason: a.stop, stop_sequence: null }, usage: { output_tokens: a.output } })
        chunk({ type: 'message_stop', 'amazon-bedrock-invocationMetrics': { inputTokenCount: a.input, outputTokenCount: a.output, invocationLatency: 20, firstByteLatency: 5 } })
      }
    }
    // frames split at odd places, as TCP may split them
    const all = Buffer.concat(frames)
    for (let at = 0; at < all.length; at += 37) res.write(all.subarray(at, Math.min(at + 37, all.length)))
    res.end()
    return 200
  }

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => {
      handle(req, res, Buffer.concat(chunks)).then((status) => {
        const rec = state.requests[state.requests.length - 1]
        if (rec !== undefined) rec.status = status
      }, (err: unknown) => {
        if (!res.headersSent) sendError(res, 500, 'InternalServerException', String(err))
      })
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  state.close = async () => { await new Promise<void>((resolve) => { server.close(() => { resolve() }); server.closeAllConnections() }) }
  return state
}
