import { Readable } from 'node:stream'
import { errorBody } from '../kernel/errors.js'
import { estimateTokens } from '../kernel/estimate.js'
import { assistantMessage, completion, type FinishReason, type ToolCall } from '../protocols/chat/writer.js'
import { toOpenAIUsage } from '../protocols/chat/usage.js'
import { candidate, chunk, responseBody } from '../protocols/gemini/writer.js'
import { schemaFromGemini } from '../protocols/gemini/wire.js'
import type { GeminiFinishReason } from '../protocols/gemini/types.js'
import type { Platform } from './platforms/types.js'
import { replayStream, type Splitter } from '../protocols/index.js'
import { message, type AnswerBlock } from '../protocols/messages/writer.js'
import { serialize } from '../protocols/sse.js'
import { contentText, embeddingInputs, openaiList, type EmbeddingInput } from '../translation/embeddings.js'
import type { Json, Protocol, Usage } from '../translation/types.js'
import { DEMO_DIMENSIONS, demoPng, demoVector, ratioOf, sizeOf } from './demo-media.js'
import type { CallAbort, UpstreamClient, UpstreamRequest, UpstreamResponse } from './types.js'

// the built-in demo is its own vendor: answered in-process, no credentials
const DEMO_PLATFORM: Platform = { name: 'vendor', traceName: null, baseUrl: '', configured: true, target: (call) => ({ path: call.path, body: call.body }), authorize: () => ({}), secrets: () => [] }
import { isObj } from '../kernel/json.js'

// The built-in demo upstream: answers in-process, in any upstream protocol, with the bytes a real
// provider would send (JSON or SSE, usage included), so a fresh install serves real requests
// with no provider key. Text is canned and deterministic; token counts are estimates (about four
// characters a token, never 0); streams go word by word and stop at once on abort. It also makes
// embeddings (OpenAI's /embeddings, Gemini's embedContent and batchEmbedContents) and images
// (OpenAI's /images/generations, a Gemini generateContent asking for image output): demo-media.ts.
//
// A request is read into one view whatever its protocol; the simulated model makes one neutral
// answer of it (text, thinking and tool calls in the pieces a stream sends them in, a stop reason,
// usage), which each protocol's writers render, whole or streamed: the same writers the
// translation pairs answer clients with, so the demo writes no wire format of its own. The
// reading, the answer and the rendering are exported: the test mock upstream
// (test/mock-upstream.ts) answers with the same protocol bytes and differs only in what it says.

// ---------------------------------------------------------------------------------------------
// Reading a request, any protocol

export interface ToolDef { name: string, schema: Json }

/** What a simulated model needs to know about a request, whatever its protocol. */
export interface RequestView {
  model: string
  stream: boolean
  /** OpenAI only: stream_options.include_usage on a streaming request. */
  includeUsage: boolean
  tools: ToolDef[]
  /** `tool`: the named tool must be called; `any`: some tool must be called. */
  toolChoice: { mode: 'auto' | 'none' | 'any' | 'tool', name: string | null }
  parallelToolCalls: boolean
  /** Text parts of the last `user` message. */
  lastUserText: string
  /** Text of the tool result(s) ending the conversation; null when the last turn is not one. */
  toolResult: string | null
  maxTokens: number | null
  stop: string[]
  /** Extended thinking asked for (Messages), or thoughts shown (Gemini's includeThoughts). */
  thinking: boolean
}

const objects = (v: unknown): Json[] => Array.isArray(v) ? v.filter(isObj) : []

/** The text of a content field: a string, or the `text` of its text parts / blocks. */
export function textOf (content: unknown): string {
  if (typeof content === 'string') return content
  const parts: string[] = []
  for (const p of objects(content)) if (p.type === 'text' && typeof p.text === 'string') parts.push(p.text)
  return parts.join(' ')
}

function positiveInt (v: unknown): number | null {
  return typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : null
}

// How much of a request is read: the start of the last user message (enough to quote it and to
// spot a tool's name in it) and the first tools (OpenAI's own limit). Searching a whole large
// message for each of many tool names would cost their product.
const READ_CHARS = 10_000
const READ_TOOLS = 128

export function readRequest (body: Json, protocol: Protocol): RequestView {
  if (protocol === 'gemini') return readGemini(body)
  const messages = objects(body.messages)
  const last = messages[messages.length - 1]
  let lastUserText = ''
  for (let i = messages.length - 1; i >= 0; i--) {
    if (messages[i]?.role === 'user') { lastUserText = textOf(messages[i]?.content).slice(0, READ_CHARS); break }
  }

  let toolResult: string | null = null
  if (protocol === 'openai') {
    const results: string[] = []
    for (let i = messages.length - 1; i >= 0 && messages[i]?.role === 'tool'; i--) results.unshift(textOf(messages[i]?.content))
    if (results.length > 0) toolResult = results.join(' ')
  } else if (last?.role === 'user') {
    const results = objects(last.content).filter((b) => b.type === 'tool_result').map((b) => textOf(b.content))
    if (results.length > 0) toolResult = results.join(' ')
  }

  const tools: ToolDef[] = []
  for (const t of objects(body.tools).slice(0, READ_TOOLS)) {
    if (protocol === 'openai') {
      const fn = t.function
      if (t.type === 'function' && isObj(fn) && typeof fn.name === 'string') tools.push({ name: fn.name, schema: isObj(fn.parameters) ? fn.parameters : {} })
    } else if (typeof t.name === 'string' && (t.type === undefined || t.type === 'custom')) {
      // typed entries without a schema are server tools (web search…), never answered with tool_use
      tools.push({ name: t.name, schema: isObj(t.input_schema) ? t.input_schema : {} })
    }
  }

  const tc = body.tool_choice
  let toolChoice: RequestView['toolChoice'] = { mode: 'auto', name: null }
  let parallelToolCalls = true
  if (protocol === 'openai') {
    if (tc === 'none') toolChoice = { mode: 'none', name: null }
    else if (tc === 'required') toolChoice = { mode: 'any', name: null }
    else if (isObj(tc) && tc.type === 'function' && isObj(tc.function) && typeof tc.function.name === 'string') toolChoice = { mode: 'tool', name: tc.function.name }
    parallelToolCalls = body.parallel_tool_calls !== false
  } else if (isObj(tc)) {
    if (tc.type === 'none' || tc.type === 'any') toolChoice = { mode: tc.type, name: null }
    else if (tc.type === 'tool' && typeof tc.name === 'string') toolChoice = { mode: 'tool', name: tc.name }
    parallelToolCalls = tc.disable_parallel_tool_use !== true
  }

  const rawStop = protocol === 'openai' ? body.stop : body.stop_sequences
  const stop = (typeof rawStop === 'string' ? [rawStop] : Array.isArray(rawStop) ? rawStop : [])
    .filter((s): s is string => typeof s === 'string' && s !== '')
  const stream = body.stream === true
  const thinkingType = isObj(body.thinking) ? body.thinking.type : undefined

  return {
    model: typeof body.model === 'string' ? body.model : '',
    stream,
    includeUsage: protocol === 'openai' && stream && isObj(body.stream_options) && body.stream_options.include_usage === true,
    tools,
    toolChoice,
    parallelToolCalls,
    lastUserText,
    toolResult,
    maxTokens: protocol === 'openai' ? positiveInt(body.max_completion_tokens) ?? positiveInt(body.max_tokens) : positiveInt(body.max_tokens),
    stop,
    thinking: protocol === 'messages' && (thinkingType === 'enabled' || thinkingType === 'adaptive')
  }
}

const partsText = (parts: unknown): string => objects(parts).filter((p) => typeof p.text === 'string' && p.thought !== true).map((p) => p.text as string).join(' ')

/** A Gemini request: the model is named by the path and the stream by the method, so neither is read here. */
function readGemini (body: Json): RequestView {
  const contents = objects(body.contents)
  const last = contents[contents.length - 1]
  let lastUserText = ''
  for (let i = contents.length - 1; i >= 0; i--) {
    const c = contents[i] as Json
    if ((c.role ?? 'user') === 'user' && objects(c.parts).some((p) => typeof p.text === 'string')) { lastUserText = partsText(c.parts).slice(0, READ_CHARS); break }
  }
  const results = last === undefined || last.role === 'model' ? [] : objects(last.parts).flatMap((p) => isObj(p.functionResponse) ? [p.functionResponse] : [])
  const resultText = (r: Json): string => isObj(r.response) && typeof r.response.output === 'string' ? r.response.output : JSON.stringify(r.response ?? {})

  const tools: ToolDef[] = []
  for (const t of objects(body.tools)) {
    for (const d of objects(t.functionDeclarations)) {
      if (tools.length >= READ_TOOLS || typeof d.name !== 'string') continue
      const schema = isObj(d.parametersJsonSchema) ? d.parametersJsonSchema : isObj(d.parameters) ? schemaFromGemini(d.parameters) as Json : {}
      tools.push({ name: d.name, schema })
    }
  }
  const fc = isObj(body.toolConfig) && isObj(body.toolConfig.functionCallingConfig) ? body.toolConfig.functionCallingConfig : {}
  const allowed = Array.isArray(fc.allowedFunctionNames) ? fc.allowedFunctionNames.filter((n): n is string => typeof n === 'string') : []
  let toolChoice: RequestView['toolChoice'] = { mode: 'auto', name: null }
  if (fc.mode === 'NONE') toolChoice = { mode: 'none', name: null }
  else if (fc.mode === 'ANY') toolChoice = allowed.length === 1 ? { mode: 'tool', name: allowed[0] as string } : { mode: 'any', name: null }

  const g = isObj(body.generationConfig) ? body.generationConfig : {}
  const stop = (Array.isArray(g.stopSequences) ? g.stopSequences : []).filter((s): s is string => typeof s === 'string' && s !== '')
  return {
    model: '',
    stream: false,
    includeUsage: false,
    tools,
    toolChoice,
    parallelToolCalls: true,
    lastUserText,
    toolResult: results.length > 0 ? results.map(resultText).join(' ') : null,
    maxTokens: positiveInt(g.maxOutputTokens),
    stop,
    thinking: isObj(g.thinkingConfig) && g.thinkingConfig.includeThoughts === true
  }
}

/** The tools to call, or [] for a text answer: a forced choice always calls. */
export function toolsToCall (view: RequestView, asked: boolean, all: boolean): ToolDef[] {
  const { tools, toolChoice } = view
  if (tools.length === 0 || toolChoice.mode === 'none') return []
  if (toolChoice.mode === 'tool') {
    const named = tools.find((t) => t.name === toolChoice.name)
    return named === undefined ? [] : [named]
  }
  if (toolChoice.mode === 'auto' && (!asked || view.toolResult !== null)) return []
  if (all && view.parallelToolCalls) return tools
  const mentioned = tools.find((t) => view.lastUserText.includes(t.name))
  return [mentioned ?? tools[0] as ToolDef]
}

/** Arguments that satisfy a JSON schema, built from its types, enums, consts and defaults. */
export function sampleArguments (schema: Json, name = 'value', depth = 0): unknown {
  if (schema.const !== undefined) return schema.const
  if (schema.default !== undefined) return schema.default
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0]
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type
  const min = typeof schema.minimum === 'number' ? schema.minimum : null
  switch (type) {
    case 'integer': return min !== null ? Math.ceil(min) : 1
    case 'number': return min !== null ? min : 1
    case 'boolean': return true
    case 'null': return null
    case 'array': {
      if (depth > 4) return []
      return [sampleArguments(isObj(schema.items) ? schema.items : {}, name, depth + 1)]
    }
    case 'string': return `example ${name}`
    default: {
      if (depth > 4) return {}
      const props = isObj(schema.properties) ? schema.properties : {}
      if (type !== 'object' && Object.keys(props).length === 0) return `example ${name}`
      const out: Json = {}
      for (const [key, sub] of Object.entries(props)) out[key] = sampleArguments(isObj(sub) ? sub : {}, key, depth + 1)
      return out
    }
  }
}

// ---------------------------------------------------------------------------------------------
// What the simulated model answers, protocol-neutral

export type StopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use'

/** Each block's `pieces` are its stream deltas, in order; joined they are its whole text. */
export type OutputBlock =
  | { type: 'text', pieces: string[] }
  | { type: 'thinking', pieces: string[], signature: string }
  | { type: 'tool_use', id: string, name: string, pieces: string[] }

/** Input split the Anthropic way: `input` excludes the cache reads and writes; `thoughts`, when given, is the part of `output` spent thinking. */
export interface OutputUsage { input: number, cacheRead: number, cacheCreation: number, output: number, thoughts?: number }

export interface Completion {
  /** The answer's id, which each protocol's writer prefixes as its provider does (`chatcmpl-`, `msg_`). */
  id: string
  model: string
  /** Unix seconds (OpenAI's `created`). */
  created: number
  blocks: OutputBlock[]
  stopReason: StopReason
  stopSequence: string | null
  usage: OutputUsage
}

/** Words with their leading whitespace: joined they give the text back (trailing space aside). */
export const words = (text: string): string[] => text.match(/\s*\S+/g) ?? []

/**
 * The text a model would emit: cut before the first stop sequence, then to at most `maxTokens`
 * by `cost` (tokens of the first k pieces), keeping at least one piece.
 */
export function shapeText (text: string, view: Pick<RequestView, 'stop' | 'maxTokens'>, cost: (pieces: string[]) => number): { pieces: string[], stopReason: StopReason, stopSequence: string | null } {
  let at = -1
  let stopSequence: string | null = null
  for (const s of view.stop) {
    const i = text.indexOf(s)
    if (i !== -1 && (at === -1 || i < at)) { at = i; stopSequence = s }
  }
  let pieces = words(at === -1 ? text : text.slice(0, at))
  if (view.maxTokens !== null && cost(pieces) > view.maxTokens) {
    let k = 1
    while (k < pieces.length && cost(pieces.slice(0, k + 1)) <= view.maxTokens) k++
    pieces = pieces.slice(0, k)
    return { pieces, stopReason: 'max_tokens', stopSequence: null }
  }
  return { pieces, stopReason: stopSequence === null ? 'end_turn' : 'stop_sequence', stopSequence }
}

/** Split a JSON text into fragments of at most `size` characters, as providers stream arguments. */
export function fragments (text: string, size = 12): string[] {
  const out: string[] = []
  for (let i = 0; i < text.length; i += size) out.push(text.slice(i, i + size))
  return out.length === 0 ? [''] : out
}

// ---------------------------------------------------------------------------------------------
// Rendering: the neutral answer written by each protocol's writers (engine/protocols/<p>/
// writer.ts), streamed by the codecs' replay of a whole answer (cut word by word) or Gemini's
// chunk writer, framed by sse.ts

const FINISH_REASON: Record<StopReason, FinishReason> = { end_turn: 'stop', stop_sequence: 'stop', max_tokens: 'length', tool_use: 'tool_calls' }
// Gemini says STOP after its calls too
const GEMINI_FINISH: Record<StopReason, GeminiFinishReason> = { end_turn: 'STOP', stop_sequence: 'STOP', max_tokens: 'MAX_TOKENS', tool_use: 'STOP' }

const joined = (b: OutputBlock): string => b.pieces.join('')
const args = (b: OutputBlock): unknown => { const text = joined(b); return text === '' ? {} : JSON.parse(text) as unknown }

/** The answer's usage as the gateway reads every protocol's: all input in prompt_tokens, thoughts part of the output. */
function usageOf (c: Completion): Usage {
  const u = c.usage
  const usage: Usage = { prompt_tokens: u.input + u.cacheRead + u.cacheCreation, cached_input_tokens: u.cacheRead, completion_tokens: u.output, cache_creation_input_tokens: u.cacheCreation }
  if ((u.thoughts ?? 0) > 0) usage.reasoning_tokens = u.thoughts
  return usage
}

/**
 * A completion's Gemini parts, each a list of pieces as a stream sends them: thoughts as thought
 * parts, a call whole; a thinking block's signature goes on the first part after it, where
 * Gemini puts its own.
 */
function geminiParts (c: Completion): Json[][] {
  const out: Json[][] = []
  let signature: string | undefined
  const sign = (part: Json): Json => {
    if (signature !== undefined) part.thoughtSignature = signature
    signature = undefined
    return part
  }
  for (const b of c.blocks) {
    if (b.type === 'thinking') {
      out.push(b.pieces.map((p) => ({ text: p, thought: true })))
      signature = b.signature
    } else if (b.type === 'text') {
      out.push(b.pieces.map((p, i) => i === 0 ? sign({ text: p }) : { text: p }))
    } else {
      out.push([sign({ functionCall: { name: b.name, args: args(b) } })])
    }
  }
  return out
}

/** The whole answer (a non-streaming response body). Thinking blocks exist only in the Messages and Gemini protocols. */
export function completionJson (protocol: Protocol, c: Completion): Json {
  const usage = usageOf(c)
  if (protocol === 'gemini') {
    // whole parts: the pieces of a text or a thought joined
    const parts = geminiParts(c).flatMap((pieces) => {
      const [first, ...rest] = pieces
      if (first === undefined) return []
      return typeof first.text === 'string' ? [{ ...first, text: pieces.map((p) => p.text).join('') }] : [first, ...rest]
    })
    return responseBody(c, [candidate(0, parts, GEMINI_FINISH[c.stopReason])], usage)
  }
  if (protocol === 'openai') {
    const text = c.blocks.filter((b) => b.type === 'text').map(joined).join('')
    const calls: ToolCall[] = c.blocks.flatMap((b) => b.type === 'tool_use' ? [{ id: b.id, type: 'function' as const, function: { name: b.name, arguments: joined(b) } }] : [])
    return { ...completion(c, [{ index: 0, message: assistantMessage(text, calls), finish_reason: FINISH_REASON[c.stopReason], logprobs: null }], toOpenAIUsage(usage)) }
  }
  const content = c.blocks.map((b): AnswerBlock => {
    if (b.type === 'text') return { type: 'text', text: joined(b) }
    if (b.type === 'thinking') return { type: 'thinking', thinking: joined(b), signature: b.signature }
    return { type: 'tool_use', id: b.id, name: b.name, input: args(b) }
  })
  return message(c, content, c.stopReason, usage, c.stopSequence)
}

/** A stream's deltas as the demo sends them: text word by word, arguments in fragments. */
const byWords: Splitter = (text, kind) => kind === 'text' ? words(text) : fragments(text)

/** The SSE frames of a streamed answer, each a complete frame ending with a blank line. */
export function completionFrames (protocol: Protocol, c: Completion, includeUsage = false): string[] {
  if (protocol === 'gemini') return geminiFrames(c)
  const whole = completionJson(protocol, c)
  // a Chat Completions stream says its usage only when asked to
  if (protocol === 'openai' && !includeUsage) delete whole.usage
  return replayStream(protocol, whole, c, byWords).map((ev) => serialize(ev))
}

/**
 * A Gemini stream: a chunk per piece, each with the prompt's count; the last piece comes with
 * the finish reason and the whole usage. Google ends its frames with CRLF pairs, kept here so
 * that the gateway's parser meets them.
 */
function geminiFrames (c: Completion): string[] {
  const usage = usageOf(c)
  const opening: Usage = { prompt_tokens: usage.prompt_tokens, cached_input_tokens: 0, completion_tokens: 0, cache_creation_input_tokens: 0 }
  const pieces = geminiParts(c).flat()
  const last = pieces.pop() ?? { text: '' }
  const events = [...pieces.map((part) => chunk(c, [candidate(0, [part])], opening)), chunk(c, [candidate(0, [last], GEMINI_FINISH[c.stopReason])], usage)]
  return events.map((ev) => `data: ${ev.data}\r\n\r\n`)
}

const OPENAI_ERROR_TYPE: Record<number, string> = { 403: 'permission_denied', 429: 'requests' }
const OPENAI_ERROR_CODE: Record<number, string> = { 401: 'invalid_api_key', 429: 'rate_limit_exceeded' }

/**
 * The provider's own error body for a status (`type` overrides the usual type for it, Google's
 * status name on Gemini). Messages and Gemini errors are the shapes the gateway writes too;
 * OpenAI's own carries `param` and its string code, where the gateway's carries the status.
 */
export function errorJson (protocol: Protocol, status: number, message: string, type?: string, code?: string | null): Json {
  if (protocol === 'openai' || protocol === 'responses') {
    const t = type ?? OPENAI_ERROR_TYPE[status] ?? (status >= 500 ? 'server_error' : 'invalid_request_error')
    return { error: { message, type: t, param: null, code: code === undefined ? OPENAI_ERROR_CODE[status] ?? null : code } }
  }
  const body = errorBody(protocol, { status, message, messagesType: type })
  if (protocol === 'gemini' && type !== undefined) (body.error as Json).status = type
  return body
}

// ---------------------------------------------------------------------------------------------
// The demo provider

export interface DemoOptions {
  /** Pause between stream frames; 0 sends them all at once. Default MODELGATE_DEMO_DELAY_MS, else 5. */
  chunkDelayMs?: number
}

const SENTENCES = [
  'This answer comes from the modelgate demo provider, so no provider key was needed.',
  'Point a model at a real provider in config/gateway.yaml to get real answers.',
  'Every call is metered: tokens, cached input and cost land in the usage records.',
  'Streaming, tool calls and every protocol work here just as they do upstream.'
]

/** About four characters a token, and never 0 for non-empty text. */

const inputText = (body: Json): string => JSON.stringify([body.system ?? null, body.messages ?? [], body.tools ?? null])

function demoCompletion (view: RequestView, protocol: Protocol, body: Json, seq: number, created: number): Completion {
  const id = `demo${seq}`
  const input = Math.max(1, estimateTokens(inputText(body)))
  const asked = /\btools?\b/i.test(view.lastUserText) || view.tools.some((t) => view.lastUserText.includes(t.name))
  const calls = toolsToCall(view, asked, false)
  if (calls.length > 0) {
    const blocks: OutputBlock[] = calls.map((t, i) => ({
      type: 'tool_use',
      id: `${protocol === 'openai' ? 'call_' : 'toolu_'}demo${seq}_${i}`,
      name: t.name,
      pieces: fragments(JSON.stringify(sampleArguments(t.schema)))
    }))
    const output = blocks.reduce((n, b) => n + estimateTokens(b.type === 'tool_use' ? b.name + joined(b) : ''), 0)
    return { id, model: view.model, created, blocks, stopReason: 'tool_use', stopSequence: null, usage: { input, cacheRead: 0, cacheCreation: 0, output } }
  }
  const quote = (text: string): string => words(text.trim()).slice(0, 12).join('').trim()
  const intro = view.toolResult !== null
    ? `The tool answered "${quote(view.toolResult)}".`
    : view.lastUserText.trim() === '' ? 'You sent no text.' : `You said: "${quote(view.lastUserText)}".`
  let hash = 0
  for (const ch of view.lastUserText) hash = (hash * 31 + (ch.codePointAt(0) ?? 0)) % 1_000_003
  const text = `Hello from ${view.model === '' ? 'the demo model' : view.model}. ${intro} ${SENTENCES[hash % SENTENCES.length] as string}`
  const cost = (pieces: string[]): number => estimateTokens(pieces.join(''))
  const shaped = shapeText(text, view, cost)
  const output = Math.min(cost(shaped.pieces), view.maxTokens ?? Infinity)
  const blocks: OutputBlock[] = shaped.pieces.length > 0 ? [{ type: 'text', pieces: shaped.pieces }] : []
  return { id, model: view.model, created, blocks, stopReason: shaped.stopReason, stopSequence: shaped.stopSequence, usage: { input, cacheRead: 0, cacheCreation: 0, output } }
}

function abortError (): Error {
  return Object.assign(new Error('This operation was aborted'), { name: 'AbortError', code: 'UND_ERR_ABORTED' })
}

/** A body that emits `frames` one by one, `delayMs` apart; abort (or destroy) stops it and its timer at once. */
function paced (frames: string[], delayMs: number, signal: CallAbort): Readable {
  let i = 0
  let timer: NodeJS.Timeout | null = null
  const push = (): void => {
    timer = null
    if (i < frames.length) stream.push(frames[i++])
    if (i >= frames.length) stream.push(null)
  }
  const stream = new Readable({
    read () {
      if (timer !== null || i >= frames.length) return
      if (i === 0 || delayMs === 0) push()
      else timer = setTimeout(push, delayMs)
    },
    destroy (err, cb) {
      if (timer !== null) { clearTimeout(timer); timer = null }
      cb(err)
    }
  })
  // An aborted HTTP body errors with an AbortError; without a listener that would crash the process.
  const onAbort = (): void => { stream.destroy(stream.listenerCount('error') > 0 ? abortError() : undefined) }
  signal.once('abort', onAbort)
  stream.once('close', () => signal.removeListener('abort', onAbort))
  return stream
}

function jsonResponse (status: number, body: Json, headers: Record<string, string>): UpstreamResponse {
  return { statusCode: status, headers: { 'content-type': 'application/json', ...headers }, body: Readable.from([JSON.stringify(body)]) }
}

function configuredDelay (): number {
  const env = Number(process.env.MODELGATE_DEMO_DELAY_MS)
  return process.env.MODELGATE_DEMO_DELAY_MS !== undefined && Number.isFinite(env) && env >= 0 ? env : 5
}

/** A Gemini path: the model it names and its method; null for any other path. */
export type GeminiMethod = 'generateContent' | 'streamGenerateContent' | 'countTokens' | 'embedContent' | 'batchEmbedContents'

export function geminiRoute (path: string): { model: string, method: GeminiMethod } | null {
  const m = /^\/v1(?:beta)?\/(?:models\/)?(.+):(generateContent|streamGenerateContent|countTokens|embedContent|batchEmbedContents)$/.exec(path)
  if (m === null) return null
  let model: string
  try { model = decodeURIComponent(m[1] as string) } catch { return null }
  return { model, method: m[2] as GeminiMethod }
}

const geminiInput = (body: Json): string => JSON.stringify([body.systemInstruction ?? null, body.contents ?? [], body.tools ?? null])

// ---------------------------------------------------------------------------------------------
// Embeddings and images (demo-media.ts computes the vectors and draws the PNGs)

/** OpenAI's /embeddings: one demo vector per input; a string is an error message (400). */
export function openaiEmbeddings (body: Json, tokens: (input: EmbeddingInput) => number = demoTokens): Json | string {
  const inputs = embeddingInputs(body.input)
  if (inputs.length === 0) return "'$.input' is invalid. Please check the API reference: https://platform.openai.com/docs/api-reference."
  const dims = body.dimensions ?? DEMO_DIMENSIONS
  if (typeof dims !== 'number' || !Number.isInteger(dims) || dims < 1 || dims > DEMO_DIMENSIONS) return `This model supports dimensions from 1 to ${DEMO_DIMENSIONS}.`
  const vectors = inputs.map((input) => demoVector(input, dims))
  return openaiList(vectors, body.encoding_format, body.model as string, inputs.reduce((n, input) => n + tokens(input), 0))
}

const demoTokens = (input: EmbeddingInput): number => typeof input === 'string' ? Math.max(1, estimateTokens(input)) : input.length

/** Google's embedContent or batchEmbedContents: one demo vector per content; a string is an error message (400). */
export function geminiEmbeddings (body: Json, method: 'embedContent' | 'batchEmbedContents'): Json | string {
  const requests = method === 'embedContent' ? [body] : objects(body.requests)
  if (requests.length === 0) return '* BatchEmbedContentsRequest.requests: requests is not specified'
  const values: number[][] = []
  for (const r of requests) {
    if (!isObj(r.content) || !Array.isArray(r.content.parts) || r.content.parts.length === 0) return '* EmbedContentRequest.content: content is not specified'
    const dims = r.outputDimensionality ?? DEMO_DIMENSIONS
    if (typeof dims !== 'number' || !Number.isInteger(dims) || dims < 1 || dims > DEMO_DIMENSIONS) return `* EmbedContentRequest.output_dimensionality: must be from 1 to ${DEMO_DIMENSIONS}`
    values.push(demoVector(contentText(r.content), dims))
  }
  return method === 'embedContent' ? { embedding: { values: values[0] } } : { embeddings: values.map((v) => ({ values: v })) }
}

/** OpenAI's /images/generations: `n` demo PNGs of the prompt, as b64_json (or data: URLs for response_format url). */
export function openaiImages (body: Json, created: number, outputPerImage = 256): Json | string {
  if (typeof body.prompt !== 'string' || body.prompt === '') return "Missing required parameter: 'prompt'."
  const n = body.n ?? 1
  if (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > 10) return 'n must be from 1 to 10.'
  const { width, height } = sizeOf(body.size)
  const prompt = body.prompt
  const data = Array.from({ length: n }, (_, i) => {
    const b64 = demoPng(prompt, width, height, i).toString('base64')
    return body.response_format === 'url' ? { url: `data:image/png;base64,${b64}` } : { b64_json: b64 }
  })
  const input = Math.max(1, estimateTokens(prompt))
  return { created, data, usage: { input_tokens: input, input_tokens_details: { text_tokens: input, image_tokens: 0 }, output_tokens: n * outputPerImage, total_tokens: input + n * outputPerImage } }
}

/** A generateContent request asking for image output (generationConfig.responseModalities). */
export function asksForImages (body: Json): boolean {
  const config = isObj(body.generationConfig) ? body.generationConfig : {}
  return Array.isArray(config.responseModalities) && config.responseModalities.some((m) => String(m).toUpperCase() === 'IMAGE')
}

/** A Gemini image model's answer: one candidate per candidateCount, each with one inline PNG of the last user text. */
export function geminiImages (body: Json, model: string, seq: number, tokensPerImage = 1290): Json {
  const config = isObj(body.generationConfig) ? body.generationConfig : {}
  const n = typeof config.candidateCount === 'number' && config.candidateCount > 0 ? config.candidateCount : 1
  const { width, height } = ratioOf(isObj(config.imageConfig) ? config.imageConfig.aspectRatio : undefined)
  const prompt = readRequest(body, 'gemini').lastUserText
  const candidates = Array.from({ length: n }, (_, i) => ({
    content: { role: 'model', parts: [{ inlineData: { mimeType: 'image/png', data: demoPng(prompt, width, height, i).toString('base64') } }] },
    finishReason: 'STOP',
    index: i
  }))
  const input = Math.max(1, estimateTokens(geminiInput(body)))
  return { candidates, usageMetadata: { promptTokenCount: input, candidatesTokenCount: n * tokensPerImage, totalTokenCount: input + n * tokensPerImage }, modelVersion: model, responseId: `demo${seq}` }
}

export function createDemoClient (id: string, protocol: Protocol, opts: DemoOptions = {}): UpstreamClient {
  const delayMs = opts.chunkDelayMs ?? configuredDelay()
  const live = new Set<Readable>()
  let seq = 0
  const answerPath = protocol === 'openai' ? '/chat/completions' : '/v1/messages'
  // the model is named by the path, and whether to stream by its method
  const answerGemini = (req: UpstreamRequest, n: number): UpstreamResponse => {
    const fail = (status: number, message: string): UpstreamResponse => jsonResponse(status, errorJson('gemini', status, message), {})
    const route = geminiRoute(req.path.split('?')[0] as string)
    if (route === null) return fail(404, `Unknown path ${req.path}`)
    let body: unknown
    try { body = typeof req.body === 'string' ? JSON.parse(req.body) : undefined } catch { body = undefined }
    if (!isObj(body)) return fail(400, 'Invalid JSON payload received.')
    if (route.method === 'embedContent' || route.method === 'batchEmbedContents') {
      const answer = geminiEmbeddings(body, route.method)
      return typeof answer === 'string' ? fail(400, answer) : jsonResponse(200, answer, {})
    }
    const inner = route.method === 'countTokens' && isObj(body.generateContentRequest) ? body.generateContentRequest : body
    if (!Array.isArray(inner.contents) || inner.contents.length === 0) return fail(400, '* GenerateContentRequest.contents: contents is not specified')
    if (route.method === 'countTokens') return jsonResponse(200, { totalTokens: Math.max(1, estimateTokens(geminiInput(inner))) }, {})
    if (asksForImages(body)) return jsonResponse(200, geminiImages(body, route.model, n), {})

    const view = { ...readRequest(body, 'gemini'), model: route.model, stream: route.method === 'streamGenerateContent' }
    const completion = demoCompletion(view, 'gemini', { messages: body.contents, system: body.systemInstruction, tools: body.tools }, n, Math.floor(Date.now() / 1000))
    if (!view.stream) return jsonResponse(200, completionJson('gemini', completion), {})
    const stream = paced(completionFrames('gemini', completion), delayMs, req.signal)
    live.add(stream)
    stream.once('close', () => live.delete(stream))
    return { statusCode: 200, headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' }, body: stream }
  }

  return {
    id,
    protocol,
    responses: false,
    secrets: [],
    platform: DEMO_PLATFORM,
    async request (req: UpstreamRequest): Promise<UpstreamResponse> {
      if (req.signal.aborted) throw abortError()
      seq++
      if (protocol === 'gemini') return answerGemini(req, seq)
      const requestId = `req_demo${seq}`
      const headers: Record<string, string> = protocol === 'openai' ? { 'x-request-id': requestId } : { 'request-id': requestId }
      const fail = (status: number, message: string): UpstreamResponse => jsonResponse(status, errorJson(protocol, status, message), headers)
      const path = req.path.split('?')[0]
      const media = protocol === 'openai' && (path === '/embeddings' || path === '/images/generations')
      if (path !== answerPath && !media && !(protocol === 'messages' && path === '/v1/messages/count_tokens')) return fail(404, `Unknown path ${req.path}`)

      let body: unknown
      if (typeof req.body !== 'string') return fail(400, 'The request body is not valid JSON.')
      try { body = JSON.parse(req.body) } catch { return fail(400, 'The request body is not valid JSON.') }
      if (!isObj(body)) return fail(400, 'The request body must be a JSON object.')
      if (typeof body.model !== 'string' || body.model === '') return fail(400, 'model: Field required')
      if (media) {
        const answer = path === '/embeddings' ? openaiEmbeddings(body) : openaiImages(body, Math.floor(Date.now() / 1000))
        return typeof answer === 'string' ? fail(400, answer) : jsonResponse(200, answer, headers)
      }
      if (!Array.isArray(body.messages)) return fail(400, 'messages: Field required')

      if (path === '/v1/messages/count_tokens') {
        return jsonResponse(200, { input_tokens: Math.max(1, estimateTokens(inputText(body))) }, headers)
      }
      if (protocol === 'messages' && positiveInt(body.max_tokens) === null) return fail(400, 'max_tokens: Field required')

      const view = readRequest(body, protocol)
      const completion = demoCompletion(view, protocol, body, seq, Math.floor(Date.now() / 1000))
      if (!view.stream) return jsonResponse(200, completionJson(protocol, completion), headers)

      const stream = paced(completionFrames(protocol, completion, view.includeUsage), delayMs, req.signal)
      live.add(stream)
      stream.once('close', () => live.delete(stream))
      return { statusCode: 200, headers: { 'content-type': 'text/event-stream; charset=utf-8', 'cache-control': 'no-cache', ...headers }, body: stream }
    },
    async close (): Promise<void> {
      for (const s of live) s.destroy()
      live.clear()
    }
  }
}
