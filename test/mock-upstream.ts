import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo, Socket } from 'node:net'
import { setTimeout as sleep } from 'node:timers/promises'
import {
  asksForImages, completionFrames, completionJson, errorJson, fragments, geminiEmbeddings, geminiImages, geminiRoute, openaiEmbeddings, openaiImages,
  readRequest, sampleArguments, shapeText, toolsToCall, words,
  type Completion, type OutputBlock, type RequestView, type ToolDef
} from '../engine/upstream/demo.js'
import { buildResponse, ResponseWriter, type OutputPart, type ResponsesCtx } from '../engine/protocols/responses/writer.js'
import { flatToolName } from '../engine/kernel/tool-names.js'
import { serialize } from '../engine/protocols/sse.js'
import type { Json, Protocol, Usage } from '../engine/translation/types.js'
import { isObj } from '../engine/kernel/json.js'

// A real HTTP server on 127.0.0.1 that answers like the OpenAI Chat Completions, OpenAI Responses
// (POST /v1/responses, for a provider that serves it natively), OpenAI embeddings and image
// generation (POST /v1/embeddings, /v1/images/generations), Anthropic Messages and Google
// Gemini (POST /v1beta/models/{model}:generateContent, :streamGenerateContent?alt=sse,
// :countTokens, :embedContent, :batchEmbedContents) APIs, for the gateway's tests. Answers are deterministic so tests can assert exact
// numbers; fault switches and scripted answers simulate everything a real provider does wrong.
// The wire rendering is shared with the demo provider (engine/upstream/demo.ts); what the mock
// says, and how it counts, is its own:
//
//   P = promptTokens(body) = ceil(len(JSON.stringify(body.messages)) / 4)
//                          + ceil(len(JSON.stringify(body.system)) / 4)   (when system is present)
//       Responses: ceil(len(JSON.stringify(body.input)) / 4)
//                + ceil(len(JSON.stringify(body.instructions)) / 4)        (when instructions is a string)
//       Gemini:    ceil(len(JSON.stringify(body.contents)) / 4)
//                + ceil(len(JSON.stringify(body.systemInstruction)) / 4)  (when present)
//   OpenAI:   prompt_tokens = P + cachedTokens, prompt_tokens_details.cached_tokens = cachedTokens
//   Responses: input_tokens = P + cachedTokens, input_tokens_details.cached_tokens = cachedTokens
//   Messages: input_tokens = P, cache_read_input_tokens = cachedTokens,
//             cache_creation_input_tokens = cacheCreationTokens; count_tokens answers P
//   Gemini:   promptTokenCount = P + cachedTokens, cachedContentTokenCount = cachedTokens (when > 0),
//             thoughtsTokenCount = the thought words; countTokens answers {totalTokens: P}
//   output:   one token per emitted word (text and thinking), plus ceil(len(arguments JSON) / 4)
//             per tool call
//
//   embeddings: prompt_tokens = Σ per input: ceil(len(text) / 4) (at least 1), or its number of
//             token ids; the vectors are the demo provider's (engine/upstream/demo-media.ts),
//             256 dimensions (`dimensions` / outputDimensionality may ask for fewer); Gemini's
//             embedContent and batchEmbedContents report no tokens, as Google's do
//   images:   OpenAI: input_tokens = ceil(len(prompt) / 4), output_tokens = 100 per image; Gemini
//             (generateContent with responseModalities IMAGE): promptTokenCount = P,
//             candidatesTokenCount = 1290 per image (one candidate per candidateCount); each image
//             the demo provider's PNG of the prompt
//
// Text answer: "Echo: <first 20 words of the last user message>", or "The tool returned: <first
// 20 words of the result>" after a tool result. A tool call is answered when the request has
// tools and tool_choice forces one, or the last user text says "use the tool" (the tool whose
// name it mentions, else the first) or "use all tools" (every tool, unless parallel calls are
// off). Tool arguments are sampled from the tool's schema. On Messages, an unforced tool call
// is preceded by a text block "I will use <name>.", and `thinking` adds a thinking block first;
// on Gemini, thinkingConfig.includeThoughts adds thought parts first, and their signature
// (base64 of "sig_mock<n>") rides on the part after them. Gemini calls carry no id, as Google's
// older calls do; ANY with one allowedFunctionNames forces that function.
// max_tokens cuts the answer text, one token a word (finish_reason length / stop_reason
// max_tokens; thinking and tool calls are never cut); stop / stop_sequences cut before the first
// match (stop_reason stop_sequence). On /v1/responses the same answer comes as Responses output
// items: max_output_tokens cuts the text (status incomplete, reason max_output_tokens), function
// calls come back with the `namespace` of a namespaced tool, and the input's trailing
// function_call_output items are the tool result.

export interface RecordedRequest {
  method: string
  /** Path without the query string. */
  path: string
  query: Record<string, string>
  headers: IncomingHttpHeaders
  /** The parsed JSON object, or the raw text when the body is not a JSON object. */
  body: Json | string
  rawBody: string
  /** The credential presented (Bearer token, x-api-key on Messages routes, x-goog-api-key or ?key= on Gemini routes); null when none. */
  apiKey: string | null
  /** Status answered; null while pending or when the mock never answered (hang, reset). */
  status: number | null
  /** Names of the fault switches applied to this request. */
  faults: string[]
  /** The exchange is over (answered, reset or abandoned). */
  closed: boolean
  /** The client went away before the response ended. */
  closedEarly: boolean
  /** The mock destroyed the socket on purpose (resetBeforeResponse, resetMidStream). */
  reset: boolean
}

export interface FaultScope {
  /** Apply to the next N matching requests only, then switch off. Default: until cleared. */
  times?: number
  /** Apply only to requests to this path, e.g. '/v1/messages'. */
  path?: string
}
export interface StatusFault extends FaultScope { status: number, message?: string, type?: string, code?: string | null, headers?: Record<string, string> }
export interface DelayFault extends FaultScope { ms: number }
export interface ResetMidStreamFault extends FaultScope { afterFrames: number }
export interface IdleFault extends FaultScope {
  ms: number
  /** the pause comes after this many frames; default 1 */
  afterFrames?: number
  /** the pause lasts until this settles too (a test's own signal that the stream may go on), then `ms` */
  until?: Promise<unknown>
}

/**
 * Fault switches, read on every request. A number or `true` is the short form (every request,
 * every path). Body faults count SSE frames; a JSON body counts as two frames (its two halves).
 */
export interface Faults {
  /** Answer this status with the provider's error body (any 4xx or 5xx). */
  status?: number | StatusFault
  /** Wait this long before the status line and headers. */
  delayMs?: number | DelayFault
  /** Read the request, then destroy the socket without answering. */
  resetBeforeResponse?: boolean | FaultScope
  /** Send the headers and this many frames (all of them at most, without the end), then destroy the socket. */
  resetMidStream?: number | ResetMidStreamFault
  /** Read the request and never answer. */
  hang?: boolean | FaultScope
  /** After the first frame (or `afterFrames`), pause this long once. */
  idleMidStreamMs?: number | IdleFault
  /** Pause this long before every frame after the first. */
  slowFramesMs?: number | DelayFault
}

/** A scripted JSON (or raw text) answer. `path`: only a request to this path takes it from the queue. */
export interface CannedBody { status?: number, body?: unknown, headers?: Record<string, string>, path?: string }
/** A scripted stream: raw SSE frames, written one by one. */
export interface CannedStream { stream: string[], frameDelayMs?: number, status?: number, headers?: Record<string, string>, path?: string }
export type CannedAnswer = CannedBody | CannedStream
/** Return an answer to replace the default one, or undefined to keep it. */
export type ScriptFn = (req: RecordedRequest) => CannedAnswer | undefined | Promise<CannedAnswer | undefined>

export interface MockOptions {
  /** Credentials the mock accepts; null (the default) accepts any non-empty key. */
  keys?: { openai?: string | null, messages?: string | null, gemini?: string | null }
}

const objects = (v: unknown): Json[] => Array.isArray(v) ? v.filter(isObj) : []
const chars = (v: unknown): number => JSON.stringify(v ?? null).length

/** The mock's prompt-token count of a request body (see the file's header). */
export function promptTokens (body: Json): number {
  if (body.contents !== undefined) return Math.ceil(chars(body.contents) / 4) + (body.systemInstruction === undefined ? 0 : Math.ceil(chars(body.systemInstruction) / 4))
  if (body.input !== undefined) return Math.ceil(chars(body.input) / 4) + (typeof body.instructions === 'string' ? Math.ceil(chars(body.instructions) / 4) : 0)
  return Math.ceil(chars(body.messages ?? []) / 4) + (body.system === undefined ? 0 : Math.ceil(chars(body.system) / 4))
}

const ECHO_WORDS = 20
const firstWords = (text: string): string => words(text.trim()).slice(0, ECHO_WORDS).join('').trim()

type Route = 'chat' | 'responses' | 'messages' | 'count_tokens' | 'embeddings' | 'images' | 'gemini' | 'gemini_stream' | 'gemini_count' | 'gemini_embed' | 'gemini_batch_embed'
const ROUTES: Record<string, Route> = {
  '/v1/chat/completions': 'chat',
  '/v1/responses': 'responses',
  '/v1/messages': 'messages',
  '/v1/messages/count_tokens': 'count_tokens',
  '/v1/embeddings': 'embeddings',
  '/v1/images/generations': 'images'
}
const GEMINI_ROUTES = { generateContent: 'gemini', streamGenerateContent: 'gemini_stream', countTokens: 'gemini_count', embedContent: 'gemini_embed', batchEmbedContents: 'gemini_batch_embed' } as const

/** The route of a path: a fixed one, or a Gemini model's method. */
function routeOf (path: string): Route | undefined {
  const fixed = ROUTES[path]
  if (fixed !== undefined) return fixed
  const gemini = geminiRoute(path)
  return gemini === null || !path.startsWith('/v1beta/') ? undefined : GEMINI_ROUTES[gemini.method]
}

function protocolOf (path: string): Protocol {
  if (path.startsWith('/v1beta/')) return 'gemini'
  return path.startsWith('/v1/messages') ? 'messages' : 'openai'
}

const SSE_HEADERS = { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache' }

interface Delivery { status: number, headers: Record<string, string>, chunks: string[], stream: boolean, frameDelayMs: number }

export class MockUpstream {
  readonly url: string
  readonly openaiBaseUrl: string
  readonly messagesBaseUrl: string
  /** What a Gemini provider's base_url is (the SDK's baseUrl): requests go to {this}/v1beta/models/… */
  readonly geminiBaseUrl: string
  readonly requests: RecordedRequest[] = []
  faults: Faults = {}
  /** Expected credentials per protocol; null accepts any non-empty key. */
  keys: { openai: string | null, messages: string | null, gemini: string | null }
  /** OpenAI prompt_tokens_details.cached_tokens / Messages cache_read_input_tokens. */
  cachedTokens = 0
  /** Messages cache_creation_input_tokens. */
  cacheCreationTokens = 0
  /** Pause between the frames of a default stream; 0 yields to the event loop between frames. */
  frameDelayMs = 0
  /** Refuse malformed requests with 400 as the providers do (bad tool pairing, empty text blocks…). */
  validate = true
  /**
   * Gemini: refuse, as Gemini 3 does, a step of the current turn whose first function call has no
   * thoughtSignature (the current turn: the contents after the last user text).
   */
  requireThoughtSignatures = false

  private readonly server: Server
  private readonly sockets = new Set<Socket>()
  private readonly lives = new Set<AbortController>()
  private readonly waiters = new Set<() => void>()
  private queue: Array<CannedAnswer | { fn: ScriptFn }> = []
  private handler: ScriptFn | null = null
  private seq = 0
  private arrived = 0
  private readonly seqOf = new WeakMap<RecordedRequest, number>()
  private shuttingDown = false
  private readonly initialKeys: { openai: string | null, messages: string | null, gemini: string | null }

  constructor (server: Server, opts: MockOptions) {
    this.server = server
    const port = (server.address() as AddressInfo).port
    this.url = `http://127.0.0.1:${port}`
    this.openaiBaseUrl = `${this.url}/v1`
    this.messagesBaseUrl = this.url
    this.geminiBaseUrl = this.url
    this.initialKeys = { openai: opts.keys?.openai ?? null, messages: opts.keys?.messages ?? null, gemini: opts.keys?.gemini ?? null }
    this.keys = { ...this.initialKeys }
    server.on('connection', (socket: Socket) => {
      this.sockets.add(socket)
      socket.once('close', () => this.sockets.delete(socket))
    })
    server.on('request', (req: IncomingMessage, res: ServerResponse) => {
      this.handle(req, res).catch((err: unknown) => {
        if (!res.headersSent && !res.destroyed) {
          res.writeHead(500, { 'content-type': 'application/json' })
          res.end(JSON.stringify({ error: { message: `mock upstream failed: ${String(err)}`, type: 'server_error', param: null, code: null } }))
        } else {
          res.destroy()
        }
      })
    })
  }

  /** Persistent script: consulted for every request once the queue is empty; null removes it. */
  script (fn: ScriptFn | null): void { this.handler = fn }

  /** One-shot answers for the next requests, in order (a function is called for its request). */
  enqueue (...answers: Array<CannedAnswer | ScriptFn>): void {
    for (const a of answers) this.queue.push(typeof a === 'function' ? { fn: a } : a)
  }

  /** Back to a fresh state: no requests, faults, scripts or cache counts; ids start again. */
  reset (): void {
    this.requests.length = 0
    this.faults = {}
    this.keys = { ...this.initialKeys }
    this.cachedTokens = 0
    this.cacheCreationTokens = 0
    this.frameDelayMs = 0
    this.validate = true
    this.requireThoughtSignatures = false
    this.queue = []
    this.handler = null
    this.seq = 0
    this.arrived = 0
  }

  /** The parsed body of request `i` (negative counts from the end); throws when it is not JSON. */
  body (i = -1): Json {
    const rec = this.requests[i < 0 ? this.requests.length + i : i]
    if (rec === undefined) throw new Error(`mock upstream: no request #${i} (${this.requests.length} recorded)`)
    if (typeof rec.body === 'string') throw new Error(`mock upstream: request #${i} has no JSON body: ${rec.body.slice(0, 80)}`)
    return rec.body
  }

  openConnections (): number { return this.sockets.size }

  /** Resolves once at least `n` requests were closed by the client before their response ended. */
  async waitForClose (n = 1, timeoutMs = 2000): Promise<RecordedRequest[]> {
    const closed = (): RecordedRequest[] => this.requests.filter((r) => r.closedEarly)
    await this.waitUntil(() => closed().length >= n, timeoutMs, () => `${closed().length} of ${n} requests closed early`)
    return closed()
  }

  /** Resolves once at least `n` requests have arrived (their bodies read). */
  async waitForRequests (n = 1, timeoutMs = 2000): Promise<RecordedRequest[]> {
    await this.waitUntil(() => this.arrived >= n, timeoutMs, () => `${this.arrived} of ${n} requests arrived`)
    return this.requests.slice()
  }

  /** The answer the mock gives a request when nothing is scripted (for a script to adapt). */
  defaultAnswer (req: RecordedRequest): CannedAnswer {
    const route = routeOf(req.path)
    const protocol = protocolOf(req.path)
    const body = typeof req.body === 'string' ? {} : req.body
    const seq = this.seqOf.get(req) ?? ++this.seq
    const headers = this.idHeaders(protocol, seq)
    if (route === 'count_tokens') return { status: 200, body: { input_tokens: promptTokens(body) }, headers }
    if (route === 'gemini_count') return { status: 200, body: { totalTokens: promptTokens(isObj(body.generateContentRequest) ? body.generateContentRequest : body) }, headers }
    if (route === 'responses') return this.responsesAnswer(body, seq, headers)
    if (route === 'embeddings' || route === 'images' || route === 'gemini_embed' || route === 'gemini_batch_embed') {
      const answer = route === 'embeddings'
        ? openaiEmbeddings(body)
        : route === 'images' ? openaiImages(body, Math.floor(Date.now() / 1000), 100) : geminiEmbeddings(body, route === 'gemini_embed' ? 'embedContent' : 'batchEmbedContents')
      return typeof answer === 'string' ? { status: 400, body: errorJson(protocol, 400, answer), headers } : { status: 200, body: answer, headers }
    }
    if (route === 'gemini' && asksForImages(body)) {
      const answer = geminiImages(body, geminiRoute(req.path)?.model ?? '', seq)
      answer.usageMetadata = { ...answer.usageMetadata as Json, promptTokenCount: promptTokens(body), totalTokenCount: promptTokens(body) + ((answer.usageMetadata as Json).candidatesTokenCount as number) }
      return { status: 200, body: answer, headers }
    }
    if (route === 'gemini' || route === 'gemini_stream') {
      const view = { ...readRequest(body, 'gemini'), model: geminiRoute(req.path)?.model ?? '', stream: route === 'gemini_stream' }
      const completion = this.complete(view, 'gemini', seq, promptTokens(body))
      if (view.stream) return { status: 200, stream: completionFrames('gemini', completion), headers, frameDelayMs: this.frameDelayMs }
      return { status: 200, body: completionJson('gemini', completion), headers }
    }
    const view = readRequest(body, protocol)
    const completion = this.complete(view, protocol, seq, promptTokens(body))
    if (view.stream) return { status: 200, stream: completionFrames(protocol, completion, view.includeUsage), headers, frameDelayMs: this.frameDelayMs }
    return { status: 200, body: completionJson(protocol, completion), headers }
  }

  async close (): Promise<void> {
    this.shuttingDown = true
    for (const life of this.lives) life.abort()
    const sockets = [...this.sockets].map(async (socket) => await new Promise<void>((resolve) => {
      if (socket.destroyed) resolve()
      else socket.once('close', () => resolve())
    }))
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()))
    this.server.closeAllConnections()
    await Promise.all([closed, ...sockets])
  }

  // -------------------------------------------------------------------------------------------

  private async waitUntil (done: () => boolean, timeoutMs: number, describe: () => string): Promise<void> {
    if (done()) return
    await new Promise<void>((resolve, reject) => {
      const check = (): void => {
        if (!done()) return
        clearTimeout(timer)
        this.waiters.delete(check)
        resolve()
      }
      const timer = setTimeout(() => {
        this.waiters.delete(check)
        reject(new Error(`mock upstream: timed out after ${timeoutMs} ms: ${describe()}`))
      }, timeoutMs)
      this.waiters.add(check)
    })
  }

  private notify (): void { for (const w of [...this.waiters]) w() }

  private idHeaders (protocol: Protocol, seq: number): Record<string, string> {
    const id = `req_mock${seq}`
    if (protocol === 'gemini') return { 'x-mock-request-id': id }
    return protocol === 'openai' ? { 'x-request-id': id, 'openai-processing-ms': '1' } : { 'request-id': id }
  }

  /** A Responses answer: the completion an OpenAI model gives, as Responses JSON or events. */
  private responsesAnswer (body: Json, seq: number, headers: Record<string, string>): CannedAnswer {
    const view = responsesView(body)
    const c = this.complete(view, 'openai', seq, promptTokens(body))
    const ctx: ResponsesCtx = { id: `mock${seq}`, created: c.created, model: view.model, clientRequest: body }
    const usage: Usage = { prompt_tokens: c.usage.input + c.usage.cacheRead, cached_input_tokens: c.usage.cacheRead, completion_tokens: c.usage.output, cache_creation_input_tokens: 0, reasoning_tokens: 0 }
    const incomplete = c.stopReason === 'max_tokens' ? 'max_output_tokens' : null
    // the writer names a call back from the flat name the gateway would give a namespaced tool
    const called = (name: string): string => { const ns = view.namespaces.get(name); return ns === undefined ? name : flatToolName(ns, name) }
    if (!view.stream) {
      const parts = c.blocks.flatMap((b): OutputPart[] => b.type === 'text' ? [{ kind: 'text', text: b.pieces.join('') }] : b.type === 'tool_use' ? [{ kind: 'call', id: b.id, name: called(b.name), arguments: b.pieces.join('') }] : [])
      return { status: 200, body: buildResponse(ctx, parts, incomplete, usage), headers }
    }
    const w = new ResponseWriter(ctx)
    const frames: string[] = []
    const flush = (): void => { for (const ev of w.take()) frames.push(serialize(ev)) }
    w.start()
    flush()
    for (const b of c.blocks) {
      if (b.type === 'thinking') continue
      const at = b.type === 'text' ? w.message() : w.call(b.id, called(b.name))
      flush()
      for (const piece of b.pieces) { w.append(at, piece); flush() }
      w.close(at)
      flush()
    }
    w.finish(incomplete, usage)
    flush()
    return { status: 200, stream: frames, headers, frameDelayMs: this.frameDelayMs }
  }

  private complete (view: RequestView, protocol: Protocol, seq: number, input: number): Completion {
    const asked = /use (the tool|all tools)/i.test(view.lastUserText)
    const calls = toolsToCall(view, asked, /use all tools/i.test(view.lastUserText))
    const blocks: OutputBlock[] = []
    let output = 0
    let thoughts = 0
    if (view.thinking) {
      const pieces = words(`Thinking about: ${firstWords(view.lastUserText)}`)
      const signature = protocol === 'gemini' ? Buffer.from(`sig_mock${seq}`).toString('base64') : `sig_mock${seq}`
      blocks.push({ type: 'thinking', pieces, signature })
      output += pieces.length
      thoughts = pieces.length
    }
    let stopReason: Completion['stopReason']
    let stopSequence: string | null = null
    if (calls.length > 0) {
      if (protocol === 'messages' && view.toolChoice.mode === 'auto') {
        const pieces = words(`I will use ${calls.map((t) => t.name).join(' and ')}.`)
        blocks.push({ type: 'text', pieces })
        output += pieces.length
      }
      calls.forEach((t, i) => {
        const args = JSON.stringify(sampleArguments(t.schema))
        blocks.push({ type: 'tool_use', id: `${protocol === 'openai' ? 'call_' : 'toolu_'}mock${seq}_${i}`, name: t.name, pieces: fragments(args) })
        output += Math.max(1, Math.ceil(args.length / 4))
      })
      stopReason = 'tool_use'
    } else {
      const text = view.toolResult !== null
        ? `The tool returned: ${firstWords(view.toolResult)}`
        : `Echo: ${firstWords(view.lastUserText) || '(no text)'}`
      const shaped = shapeText(text, view, (pieces) => pieces.length)
      if (shaped.pieces.length > 0) blocks.push({ type: 'text', pieces: shaped.pieces })
      output += shaped.pieces.length
      stopReason = shaped.stopReason
      stopSequence = shaped.stopSequence
    }
    return {
      id: protocol === 'openai' ? `chatcmpl-mock${seq}` : protocol === 'gemini' ? `mock${seq}` : `msg_mock${seq}`,
      model: view.model,
      created: Math.floor(Date.now() / 1000),
      blocks,
      stopReason,
      stopSequence,
      usage: { input, cacheRead: this.cachedTokens, cacheCreation: protocol === 'messages' ? this.cacheCreationTokens : 0, output, thoughts }
    }
  }

  /** Takes one use of a fault switch when it applies to `path`. */
  private take<K extends keyof Faults> (name: K, path: string, rec: RecordedRequest): Exclude<Faults[K], false> | undefined {
    const f = this.faults[name]
    if (f === undefined || f === false) return undefined
    if (typeof f === 'object') {
      if (f.path !== undefined && f.path !== path) return undefined
      if (f.times !== undefined) {
        if (f.times <= 0) { delete this.faults[name]; return undefined }
        f.times--
        if (f.times === 0) delete this.faults[name]
      }
    }
    rec.faults.push(name)
    return f as Exclude<Faults[K], false>
  }

  private async handle (req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', this.url)
    const rec: RecordedRequest = {
      method: req.method ?? 'GET',
      path: url.pathname,
      query: Object.fromEntries(url.searchParams),
      headers: req.headers,
      body: '',
      rawBody: '',
      apiKey: null,
      status: null,
      faults: [],
      closed: false,
      closedEarly: false,
      reset: false
    }
    this.requests.push(rec)
    const seq = ++this.seq
    this.seqOf.set(rec, seq)
    const life = new AbortController()
    this.lives.add(life)
    res.once('close', () => {
      rec.closed = true
      if (!res.writableEnded && !rec.reset && !this.shuttingDown) rec.closedEarly = true
      life.abort()
      this.lives.delete(life)
      this.notify()
    })

    const chunks: Buffer[] = []
    try {
      for await (const chunk of req) chunks.push(chunk as Buffer)
    } catch {
      return
    }
    rec.rawBody = Buffer.concat(chunks).toString('utf8')
    let parsed: unknown
    try { parsed = JSON.parse(rec.rawBody) } catch { parsed = undefined }
    rec.body = isObj(parsed) ? parsed : rec.rawBody
    const route = routeOf(rec.path)
    const protocol = protocolOf(rec.path)
    const auth = typeof req.headers.authorization === 'string' ? /^bearer\s+(.+)$/i.exec(req.headers.authorization)?.[1]?.trim() : undefined
    let apiKey = protocol === 'messages' && typeof req.headers['x-api-key'] === 'string' ? req.headers['x-api-key'] : auth
    if (protocol === 'gemini') apiKey = typeof req.headers['x-goog-api-key'] === 'string' ? req.headers['x-goog-api-key'] : rec.query.key ?? auth
    rec.apiKey = apiKey !== undefined && apiKey !== '' ? apiKey : null
    this.arrived++
    this.notify()

    const delay = this.take('delayMs', rec.path, rec)
    if (delay !== undefined && !await this.pause(typeof delay === 'number' ? delay : delay.ms, life.signal)) return
    if (this.take('hang', rec.path, rec) !== undefined) return
    if (this.take('resetBeforeResponse', rec.path, rec) !== undefined) { this.destroy(rec, res); return }

    const headers = this.idHeaders(protocol, seq)
    const error = (status: number, message: string, type?: string, code?: string | null, extra: Record<string, string> = {}): Delivery => ({
      status, headers: { 'content-type': 'application/json', ...headers, ...extra }, chunks: [JSON.stringify(errorJson(protocol, status, message, type, code))], stream: false, frameDelayMs: 0
    })

    const fault = this.take('status', rec.path, rec)
    let answer: Delivery
    if (fault !== undefined) {
      const f = typeof fault === 'number' ? { status: fault } : fault
      answer = error(f.status, f.message ?? `Simulated upstream error ${f.status}.`, f.type, f.code, f.headers)
    } else {
      answer = await this.answer(rec, route, protocol, seq, error)
    }
    await this.deliver(rec, res, answer, life.signal)
  }

  private async answer (rec: RecordedRequest, route: Route | undefined, protocol: Protocol, seq: number, error: (status: number, message: string, type?: string, code?: string | null) => Delivery): Promise<Delivery> {
    if (route === undefined) return error(404, `Invalid URL (${rec.method} ${rec.path})`, protocol === 'messages' ? 'not_found_error' : undefined)
    if (rec.method !== 'POST') return error(405, `Invalid method for URL (${rec.method} ${rec.path})`)

    const expected = this.keys[protocol as keyof MockUpstream['keys']]
    if (protocol === 'gemini') {
      if (rec.apiKey === null) return error(403, 'Method doesn\'t allow unregistered callers (callers without established identity). Please use API Key or other form of API consumer identity to call this API.')
      if (expected !== null && rec.apiKey !== expected) return error(400, 'API key not valid. Please pass a valid API key.')
    } else {
      if (rec.apiKey === null) {
        return protocol === 'openai'
          ? error(401, "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).", undefined, null)
          : error(401, 'x-api-key header is required')
      }
      if (expected !== null && rec.apiKey !== expected) {
        return protocol === 'openai' ? error(401, `Incorrect API key provided: ${rec.apiKey.slice(0, 6)}***.`) : error(401, 'invalid x-api-key')
      }
    }
    if (protocol === 'messages' && typeof rec.headers['anthropic-version'] !== 'string') return error(400, 'anthropic-version: header is required')
    if (typeof rec.body === 'string') return error(400, 'The request body is not valid JSON.')
    if (this.validate) {
      const problem = route === 'responses'
        ? checkResponses(rec.body)
        : route === 'embeddings' || route === 'images'
          ? checkMedia(rec.body, route)
          : route === 'gemini_embed' || route === 'gemini_batch_embed'
            ? checkGeminiEmbed(rec.body, route === 'gemini_batch_embed', geminiRoute(rec.path)?.model ?? '')
            : protocol === 'gemini' ? checkGemini(rec.body, route === 'gemini_count', this.requireThoughtSignatures) : protocol === 'openai' ? checkChat(rec.body) : checkMessages(rec.body, route === 'count_tokens')
      if (problem !== null) return error(400, problem)
    }

    let canned: CannedAnswer | undefined
    const i = this.queue.findIndex((a) => !('path' in a) || a.path === undefined || a.path === rec.path)
    if (i !== -1) {
      const entry = this.queue.splice(i, 1)[0] as CannedAnswer | { fn: ScriptFn }
      canned = 'fn' in entry ? await entry.fn(rec) : entry
    } else if (this.handler !== null) {
      canned = await this.handler(rec)
    }
    canned ??= this.defaultAnswer(rec)

    const idHeaders = this.idHeaders(protocol, seq)
    if ('stream' in canned) {
      return { status: canned.status ?? 200, headers: { ...SSE_HEADERS, ...idHeaders, ...canned.headers }, chunks: canned.stream, stream: true, frameDelayMs: canned.frameDelayMs ?? 0 }
    }
    const text = typeof canned.body === 'string' ? canned.body : JSON.stringify(canned.body ?? {})
    const type = typeof canned.body === 'string' ? 'text/plain; charset=utf-8' : 'application/json'
    return { status: canned.status ?? 200, headers: { 'content-type': type, ...idHeaders, ...canned.headers }, chunks: [text], stream: false, frameDelayMs: 0 }
  }

  private async deliver (rec: RecordedRequest, res: ServerResponse, d: Delivery, signal: AbortSignal): Promise<void> {
    if (signal.aborted) return
    const resetAt = this.take('resetMidStream', rec.path, rec)
    const idle = this.take('idleMidStreamMs', rec.path, rec)
    const slow = this.take('slowFramesMs', rec.path, rec)
    let chunks = d.chunks
    if (!d.stream && (resetAt !== undefined || idle !== undefined || slow !== undefined)) {
      const text = chunks.join('')
      const half = Math.ceil(text.length / 2)
      chunks = [text.slice(0, half), text.slice(half)]
    }
    rec.status = d.status
    if (!d.stream && chunks.length === 1) {
      res.writeHead(d.status, { ...d.headers, 'content-length': String(Buffer.byteLength(chunks[0] as string)) })
      res.end(chunks[0])
      return
    }
    res.writeHead(d.status, d.headers)
    res.flushHeaders()
    const resetAfter = resetAt === undefined ? -1 : typeof resetAt === 'number' ? resetAt : resetAt.afterFrames
    const idleMs = idle === undefined ? 0 : typeof idle === 'number' ? idle : idle.ms
    const idleAfter = idle === undefined || typeof idle === 'number' ? 1 : idle.afterFrames ?? 1
    const slowMs = slow === undefined ? 0 : typeof slow === 'number' ? slow : slow.ms
    let flushed: Promise<void> = Promise.resolve()
    for (let i = 0; i <= chunks.length; i++) {
      if (resetAfter !== -1 && i === Math.min(resetAfter, chunks.length)) {
        // the frames before the reset reach the client first
        await flushed
        this.destroy(rec, res)
        return
      }
      if (i === chunks.length) break
      if (i > 0) {
        const until = i === idleAfter && idle !== undefined && typeof idle !== 'number' ? idle.until : undefined
        if (until !== undefined && !await this.held(until, signal)) return
        const wait = (slowMs > 0 ? slowMs : d.frameDelayMs) + (i === idleAfter ? idleMs : 0)
        if (!await this.pause(wait, signal)) return
      }
      let written!: () => void
      flushed = new Promise<void>((resolve) => { written = resolve })
      if (!res.write(chunks[i], () => written())) {
        await new Promise<void>((resolve) => {
          const done = (): void => { res.off('drain', done); res.off('close', done); resolve() }
          res.on('drain', done)
          res.on('close', done)
        })
        if (signal.aborted) return
      }
    }
    res.end()
  }

  /** Waits until `until` settles; false when the exchange ended first. */
  private async held (until: Promise<unknown>, signal: AbortSignal): Promise<boolean> {
    if (signal.aborted) return false
    let onAbort!: () => void
    const aborted = new Promise<void>((resolve) => { onAbort = resolve; signal.addEventListener('abort', onAbort, { once: true }) })
    await Promise.race([until.then(() => {}, () => {}), aborted])
    signal.removeEventListener('abort', onAbort)
    return !signal.aborted
  }

  /** Waits `ms` (0: one turn of the event loop); false when the exchange ended meanwhile. */
  private async pause (ms: number, signal: AbortSignal): Promise<boolean> {
    try {
      if (ms > 0) await sleep(ms, undefined, { signal })
      else await new Promise<void>((resolve) => setImmediate(resolve))
    } catch {
      return false
    }
    return !signal.aborted
  }

  private destroy (rec: RecordedRequest, res: ServerResponse): void {
    rec.reset = true
    res.socket?.destroy()
    res.destroy()
  }
}

// ---------------------------------------------------------------------------------------------
// Reading a Responses request (what the simulated model needs of it)

const partsText = (content: unknown): string => typeof content === 'string'
  ? content
  : objects(content).filter((p) => typeof p.text === 'string').map((p) => p.text as string).join(' ')

/** The view of a Responses request, and the namespace of each namespaced tool, by its own name. */
function responsesView (body: Json): RequestView & { namespaces: Map<string, string> } {
  const items = typeof body.input === 'string' ? [{ role: 'user', content: body.input }] : objects(body.input)
  let lastUserText = ''
  for (let i = items.length - 1; i >= 0; i--) {
    const item = items[i] as Json
    if (item.role === 'user' && (item.type ?? 'message') === 'message') { lastUserText = partsText(item.content); break }
  }
  const results: string[] = []
  for (let i = items.length - 1; i >= 0 && items[i]?.type === 'function_call_output'; i--) results.unshift(partsText(items[i]?.output))
  const tools: ToolDef[] = []
  const namespaces = new Map<string, string>()
  const fn = (t: Json): ToolDef => ({ name: t.name as string, schema: isObj(t.parameters) ? t.parameters : {} })
  for (const t of objects(body.tools)) {
    if (t.type === 'function' && typeof t.name === 'string') tools.push(fn(t))
    if (t.type === 'namespace' && typeof t.name === 'string') {
      for (const child of objects(t.tools)) {
        if (child.type === 'function' && typeof child.name === 'string') { tools.push(fn(child)); namespaces.set(child.name, t.name) }
      }
    }
  }
  const tc = body.tool_choice
  let toolChoice: RequestView['toolChoice'] = { mode: 'auto', name: null }
  if (tc === 'none') toolChoice = { mode: 'none', name: null }
  else if (tc === 'required') toolChoice = { mode: 'any', name: null }
  else if (isObj(tc) && tc.type === 'function' && typeof tc.name === 'string') toolChoice = { mode: 'tool', name: tc.name }
  const max = body.max_output_tokens
  return {
    model: typeof body.model === 'string' ? body.model : '',
    stream: body.stream === true,
    includeUsage: false,
    tools,
    toolChoice,
    parallelToolCalls: body.parallel_tool_calls !== false,
    lastUserText,
    toolResult: results.length > 0 ? results.join(' ') : null,
    maxTokens: typeof max === 'number' && Number.isInteger(max) && max > 0 ? max : null,
    stop: [],
    thinking: false,
    namespaces
  }
}

// ---------------------------------------------------------------------------------------------
// Request checks the real services make (a subset: those a gateway's translation can get wrong)

function checkResponses (body: Json): string | null {
  if (typeof body.model !== 'string' || body.model === '') return "Missing required parameter: 'model'."
  if (typeof body.previous_response_id === 'string') return `Previous response with id '${body.previous_response_id}' not found.`
  if (typeof body.input !== 'string' && !Array.isArray(body.input)) return "Missing required parameter: 'input'."
  const calls = new Set<string>()
  for (const item of objects(body.input)) {
    if (item.type === 'function_call') calls.add(String(item.call_id))
    if (item.type === 'function_call_output' && !calls.has(String(item.call_id))) return `No tool call found for function call output with call_id ${String(item.call_id)}.`
  }
  return null
}

function checkChat (body: Json): string | null {
  if (typeof body.model !== 'string' || body.model === '') return 'you must provide a model parameter'
  if (!Array.isArray(body.messages) || body.messages.length === 0) return "[] is too short - 'messages'"
  if (body.stream_options !== undefined && body.stream_options !== null && body.stream !== true) {
    return "The 'stream_options' parameter is only allowed when 'stream' is enabled."
  }
  const messages = body.messages as unknown[]
  let pending: string[] = []
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]
    if (!isObj(m)) return `Invalid type for 'messages[${i}]': expected an object.`
    if (!['system', 'developer', 'user', 'assistant', 'tool', 'function'].includes(String(m.role))) {
      return `Invalid value: '${String(m.role)}'. Supported values are: 'system', 'assistant', 'user', 'function', 'tool', and 'developer'.`
    }
    if (m.role === 'tool') {
      const id = m.tool_call_id
      if (typeof id !== 'string' || !pending.includes(id)) {
        return "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'."
      }
      pending = pending.filter((p) => p !== id)
      continue
    }
    if (pending.length > 0) {
      return `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${pending.join(', ')}`
    }
    if (m.role === 'assistant') {
      for (const [j, call] of objects(m.tool_calls).entries()) {
        const fn = call.function
        if (typeof call.id !== 'string' || !isObj(fn) || typeof fn.name !== 'string') return `Missing required parameter: 'messages[${i}].tool_calls[${j}].function'.`
        if (typeof fn.arguments !== 'string') return `Invalid type for 'messages[${i}].tool_calls[${j}].function.arguments': expected a string.`
        pending.push(call.id)
      }
    }
  }
  if (pending.length > 0) {
    return `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${pending.join(', ')}`
  }
  return null
}

function checkMessages (body: Json, countOnly: boolean): string | null {
  if (typeof body.model !== 'string' || body.model === '') return 'model: Field required'
  if (!countOnly && !(typeof body.max_tokens === 'number' && Number.isInteger(body.max_tokens) && body.max_tokens > 0)) return 'max_tokens: Field required'
  if (!Array.isArray(body.messages)) return 'messages: Field required'
  if (body.stop_sequences !== undefined && !(Array.isArray(body.stop_sequences) && body.stop_sequences.every((s) => typeof s === 'string'))) {
    return 'stop_sequences: Input should be a valid list of strings'
  }
  for (const [i, t] of objects(body.tools).entries()) {
    if (typeof t.name !== 'string') return `tools.${i}.name: Field required`
    if ((t.type === undefined || t.type === 'custom') && !isObj(t.input_schema)) return `tools.${i}.custom.input_schema: Field required`
  }
  const messages = body.messages as unknown[]
  let toolUses: string[] = []
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i]
    if (!isObj(m)) return `messages.${i}: Input should be a valid dictionary`
    if (!['user', 'assistant', 'system'].includes(String(m.role))) return `messages.${i}.role: Input should be 'user' or 'assistant'`
    const last = i === messages.length - 1
    if (typeof m.content === 'string') {
      if (m.content === '' && !(last && m.role === 'assistant')) return `messages.${i}: all messages must have non-empty content except for the optional final assistant message`
    } else if (!Array.isArray(m.content)) {
      return `messages.${i}.content: Input should be a valid string or list`
    } else if (m.content.length === 0 && !(last && m.role === 'assistant')) {
      return `messages.${i}: all messages must have non-empty content except for the optional final assistant message`
    }
    const blocks = Array.isArray(m.content) ? m.content : []
    const results: string[] = []
    let sawOther = false
    for (const [j, b] of blocks.entries()) {
      if (!isObj(b)) return `messages.${i}.content.${j}: Input should be a valid dictionary`
      if (b.type === 'text' && (typeof b.text !== 'string' || b.text === '')) return 'messages: text content blocks must be non-empty'
      if (b.type === 'tool_use') {
        if (m.role !== 'assistant') return `messages.${i}.content.${j}: tool_use blocks are only allowed in assistant messages`
        if (!isObj(b.input)) return `messages.${i}.content.${j}.tool_use.input: Input should be a valid dictionary`
      }
      if (b.type === 'tool_result') {
        if (sawOther) return `messages.${i}: tool_result blocks must come before any other content in a user message`
        results.push(String(b.tool_use_id))
      } else {
        sawOther = true
      }
    }
    const unexpected = results.filter((id) => !toolUses.includes(id))
    if (unexpected.length > 0) {
      return `messages.${i}.content.0: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${unexpected.join(', ')}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`
    }
    const missing = toolUses.filter((id) => !results.includes(id))
    if (missing.length > 0) {
      return `messages.${i - 1}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ${missing.join(', ')}. Each \`tool_use\` block must have a corresponding \`tool_result\` block in the next message.`
    }
    toolUses = m.role === 'assistant' ? blocks.filter(isObj).filter((b) => b.type === 'tool_use').map((b) => String(b.id)) : []
  }
  return null
}

// Google rejects a field it does not know ("Invalid JSON payload received. Unknown name …"): a
// translation that leaks a field of another protocol fails here as it would there.
const GEMINI_FIELDS = new Set(['contents', 'systemInstruction', 'tools', 'toolConfig', 'generationConfig', 'safetySettings', 'cachedContent'])
const GENERATION_FIELDS = new Set([
  'stopSequences', 'responseMimeType', 'responseSchema', 'responseJsonSchema', 'responseModalities', 'candidateCount', 'maxOutputTokens',
  'temperature', 'topP', 'topK', 'seed', 'presencePenalty', 'frequencyPenalty', 'responseLogprobs', 'logprobs', 'enableEnhancedCivicAnswers',
  'speechConfig', 'thinkingConfig', 'imageConfig', 'mediaResolution'
])
const PART_DATA = ['text', 'inlineData', 'fileData', 'functionCall', 'functionResponse', 'executableCode', 'codeExecutionResult']

function checkGemini (body: Json, countOnly: boolean, signatures: boolean): string | null {
  const request = countOnly && isObj(body.generateContentRequest) ? body.generateContentRequest : body
  const unknown = (where: string, key: string): string => `Invalid JSON payload received. Unknown name "${key}"${where}: Cannot find field.`
  for (const key of Object.keys(request)) if (!GEMINI_FIELDS.has(key) && !(countOnly && key === 'model')) return unknown('', key)
  if (isObj(request.generationConfig)) {
    for (const key of Object.keys(request.generationConfig)) if (!GENERATION_FIELDS.has(key)) return unknown(' at \'generation_config\'', key)
  }
  if (!Array.isArray(request.contents) || request.contents.length === 0) return '* GenerateContentRequest.contents: contents is not specified'
  let calls: string[] = []
  for (const [i, c] of (request.contents as unknown[]).entries()) {
    if (!isObj(c)) return `Invalid value at 'contents[${i}]'`
    if (c.role !== undefined && c.role !== 'user' && c.role !== 'model') return 'Please use a valid role: user, model.'
    if (!Array.isArray(c.parts) || c.parts.length === 0) return `* GenerateContentRequest.contents[${i}].parts: contents.parts must not be empty.`
    const responses: string[] = []
    for (const [j, p] of c.parts.entries()) {
      if (!isObj(p)) return `Invalid value at 'contents[${i}].parts[${j}]'`
      const data = PART_DATA.filter((k) => p[k] !== undefined)
      if (data.length !== 1) return `* GenerateContentRequest.contents[${i}].parts[${j}].data: required oneof field 'data' must have one initialized field`
      if (p.text !== undefined && typeof p.text !== 'string') return `Invalid value at 'contents[${i}].parts[${j}].text'`
      if (isObj(p.functionResponse)) responses.push(String(p.functionResponse.name))
      if (p.functionCall !== undefined && c.role !== 'model') return `* GenerateContentRequest.contents[${i}].parts[${j}].function_call: a function call must be in a model turn.`
    }
    if (responses.length > 0 && (responses.length !== calls.length || responses.some((n) => !calls.includes(n)))) {
      return 'Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.'
    }
    calls = c.role === 'model' ? c.parts.filter(isObj).flatMap((p) => isObj(p.functionCall) ? [String(p.functionCall.name)] : []) : []
  }
  for (const [i, t] of objects(request.tools).entries()) {
    for (const [j, d] of objects(t.functionDeclarations).entries()) {
      if (typeof d.name !== 'string' || d.name === '') return `* GenerateContentRequest.tools[${i}].function_declarations[${j}].name: Name cannot be empty.`
      if (d.parameters !== undefined && d.parametersJsonSchema !== undefined) return `* GenerateContentRequest.tools[${i}].function_declarations[${j}]: parameters and parameters_json_schema are mutually exclusive.`
    }
  }
  if (signatures) {
    const contents = request.contents.filter(isObj)
    let start = 0
    for (let i = contents.length - 1; i >= 0; i--) {
      const c = contents[i] as Json
      if (c.role !== 'model' && objects(c.parts).some((p) => p.functionResponse === undefined)) { start = i + 1; break }
    }
    for (const [k, c] of contents.slice(start).entries()) {
      const first = c.role === 'model' ? objects(c.parts).find((p) => p.functionCall !== undefined) : undefined
      if (first !== undefined && typeof first.thoughtSignature !== 'string') {
        return `Function call is missing a thought_signature in functionCall parts. This is required for tools to work correctly, and missing thought_signature may lead to degraded model performance. Additional data, function call \`default_api:${String((first.functionCall as Json).name)}\` , position ${start + k}.`
      }
    }
  }
  return null
}

function checkMedia (body: Json, route: 'embeddings' | 'images'): string | null {
  if (typeof body.model !== 'string' || body.model === '') return 'you must provide a model parameter'
  if (route === 'images') return typeof body.prompt === 'string' && body.prompt !== '' ? null : "Missing required parameter: 'prompt'."
  if (body.input === undefined || body.input === null) return "Missing required parameter: 'input'."
  if (body.encoding_format !== undefined && body.encoding_format !== 'float' && body.encoding_format !== 'base64') return "Invalid value for 'encoding_format': must be 'float' or 'base64'."
  return null
}

const EMBED_FIELDS = new Set(['model', 'content', 'taskType', 'title', 'outputDimensionality'])

/** Google's embedContent / batchEmbedContents: known fields only, and every request of a batch naming the path's model. */
function checkGeminiEmbed (body: Json, batch: boolean, model: string): string | null {
  const unknown = (key: string): string => `Invalid JSON payload received. Unknown name "${key}": Cannot find field.`
  const requests = batch ? body.requests : [body]
  if (batch) for (const key of Object.keys(body)) if (key !== 'requests') return unknown(key)
  if (!Array.isArray(requests) || requests.length === 0) return '* BatchEmbedContentsRequest.requests: requests is not specified'
  for (const [i, r] of requests.entries()) {
    if (!isObj(r)) return `Invalid value at 'requests[${i}]'`
    for (const key of Object.keys(r)) if (!EMBED_FIELDS.has(key)) return unknown(key)
    if (batch && r.model !== `models/${model}`) return `* BatchEmbedContentsRequest.requests[${i}].model: the model of every request must be models/${model}, the model of the batch.`
    if (!isObj(r.content) || !Array.isArray(r.content.parts) || r.content.parts.length === 0) return '* EmbedContentRequest.content: content is not specified'
  }
  return null
}

/** Starts a mock upstream on 127.0.0.1 on a free port. */
export async function startMockUpstream (opts: MockOptions = {}): Promise<MockUpstream> {
  const server = createServer({ keepAliveTimeout: 5_000 })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(0, '127.0.0.1', () => { server.off('error', reject); resolve() })
  })
  return new MockUpstream(server, opts)
}
