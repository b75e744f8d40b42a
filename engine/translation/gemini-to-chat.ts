import type { ChatCompletionAssistantMessageParam, ChatCompletionContentPart, ChatCompletionMessageFunctionToolCall, ChatCompletionMessageParam } from 'openai/resources/chat/completions'
import { UnsupportedOnUpstream } from '../kernel/errors.js'
import { parseToolArguments, textOf } from '../protocols/content.js'
import { isObj, type Dropped } from '../protocols/fields.js'
import { geminiError } from '../protocols/gemini/wire.js'
import { candidate, chunk, errorChunk, responseBody } from '../protocols/gemini/writer.js'
import { allowedTools, dropToward, effortOf, readGeminiRequest, type InPart } from '../protocols/gemini/request.js'
import type { GeminiCandidate, GeminiFinishReason, GeminiFunctionCall, GeminiPart } from '../protocols/gemini/types.js'
import { usageFromChat } from '../protocols/responses/writer.js'
import type { Json, SseEvent, StreamMapper, TranslateCtx, TranslatedRequest, TranslatorPair, Usage } from './types.js'

// A Gemini client in front of an OpenAI Chat Completions upstream. Function calls get their
// ids on the way out (the upstream's, which a client may send back); results without an id are
// paired with their calls by the Gemini codec's reader (protocols/gemini/request.ts).

const FINISH = new Map<string, GeminiFinishReason>([['stop', 'STOP'], ['length', 'MAX_TOKENS'], ['tool_calls', 'STOP'], ['function_call', 'STOP'], ['content_filter', 'SAFETY']])
const finishOf = (reason: unknown): GeminiFinishReason => (typeof reason === 'string' ? FINISH.get(reason) : undefined) ?? 'STOP'

/** A video by URL, as vLLM and SGLang take one; OpenAI's types have no such part. */
interface VideoUrlPart { type: 'video_url', video_url: { url: string } }
type UserPart = ChatCompletionContentPart | VideoUrlPart
type ChatMessage = ChatCompletionMessageParam | { role: 'user', content: UserPart[] }

const AUDIO = new Map<string, 'wav' | 'mp3'>([['audio/wav', 'wav'], ['audio/x-wav', 'wav'], ['audio/wave', 'wav'], ['audio/mp3', 'mp3'], ['audio/mpeg', 'mp3']])

/** A user's media or text part → a Chat Completions content part. */
function chatPart (p: Extract<InPart, { kind: 'text' | 'inline' | 'file' }>, ctx: TranslateCtx): UserPart {
  if (p.kind === 'text') return { type: 'text', text: p.text }
  const type = p.mimeType.toLowerCase()
  if (p.kind === 'file') {
    if (type.startsWith('image/')) return { type: 'image_url', image_url: { url: p.uri } }
    if (type.startsWith('video/')) return { type: 'video_url', video_url: { url: p.uri } }
    throw new UnsupportedOnUpstream({ feature: `A ${p.mimeType} file by URL`, model: ctx.model })
  }
  if (type.startsWith('image/')) return { type: 'image_url', image_url: { url: `data:${p.mimeType};base64,${p.data}` } }
  const audio = AUDIO.get(type)
  if (audio !== undefined) return { type: 'input_audio', input_audio: { data: p.data, format: audio } }
  if (type === 'application/pdf') return { type: 'file', file: { filename: 'document.pdf', file_data: `data:${p.mimeType};base64,${p.data}` } }
  if (type.startsWith('text/')) return { type: 'text', text: Buffer.from(p.data, 'base64').toString('utf8') }
  throw new UnsupportedOnUpstream({ feature: `${p.mimeType} input`, model: ctx.model })
}

function userMessages (parts: InPart[], ctx: TranslateCtx, dropped: Dropped): ChatMessage[] {
  const out: ChatMessage[] = []
  const content: UserPart[] = []
  for (const p of parts) {
    if (p.kind === 'result') {
      if (p.media.length > 0) dropped.add('contents.functionResponse.parts') // a tool message holds text only
      out.push({ role: 'tool', tool_call_id: p.id, content: p.output })
    } else if (p.kind === 'text' || p.kind === 'inline' || p.kind === 'file') {
      content.push(chatPart(p, ctx))
    }
  }
  if (content.length > 0) {
    const only = content[0] as UserPart
    out.push(content.length === 1 && only.type === 'text' ? { role: 'user', content: only.text } : { role: 'user', content })
  }
  return out
}

function assistantMessage (parts: InPart[], dropped: Dropped): ChatCompletionAssistantMessageParam | null {
  const texts: string[] = []
  const calls: ChatCompletionMessageFunctionToolCall[] = []
  for (const p of parts) {
    if (p.kind === 'text') texts.push(p.text)
    else if (p.kind === 'call') calls.push({ id: p.id, type: 'function', function: { name: p.name, arguments: JSON.stringify(p.args) } })
    else if (p.kind === 'inline') dropped.add('contents.inlineData')
    else if (p.kind === 'file') dropped.add('contents.fileData')
  }
  const text = texts.join('')
  if (calls.length > 0) return { role: 'assistant', content: text === '' ? null : text, tool_calls: calls }
  return text === '' ? null : { role: 'assistant', content: text }
}

function request (body: Json, ctx: TranslateCtx): TranslatedRequest {
  const r = readGeminiRequest(body, ctx)
  const dropped = r.dropped
  const messages: ChatMessage[] = []
  if (r.system !== null) messages.push({ role: 'system', content: r.system })
  for (const turn of r.turns) {
    if (turn.role === 'user') messages.push(...userMessages(turn.parts, ctx, dropped))
    else {
      const m = assistantMessage(turn.parts, dropped)
      if (m !== null) messages.push(m)
    }
  }

  const out: Json = { model: ctx.upstreamModel, messages }
  if (ctx.stream) {
    out.stream = true
    out.stream_options = { include_usage: true }
  }
  const tools = allowedTools(r)
  if (tools.length > 0) {
    out.tools = tools.map((t) => {
      const fn: Json = { name: t.name }
      if (t.description !== undefined) fn.description = t.description
      if (t.parameters !== undefined) fn.parameters = t.parameters
      return { type: 'function', function: fn }
    })
    if (r.toolMode === 'NONE') out.tool_choice = 'none'
    else if (r.toolMode === 'AUTO') out.tool_choice = 'auto'
    else if (r.toolMode === 'ANY') {
      const only = tools.length === 1 ? tools[0] : undefined
      out.tool_choice = only !== undefined && r.allowed !== undefined ? { type: 'function', function: { name: only.name } } : 'required'
    }
  } else if (r.toolMode === 'ANY') {
    dropped.add('toolConfig') // no tool left to force
  }

  if (r.temperature !== undefined) out.temperature = r.temperature
  if (r.topP !== undefined) out.top_p = r.topP
  if (r.topK !== undefined) {
    // no OpenAI field, but OpenAI-compatible servers (vLLM, SGLang) take it
    if (ctx.supported?.has('top_k') === true) out.top_k = r.topK
    else dropped.add('generationConfig.topK')
  }
  if (r.maxOutputTokens !== undefined) {
    // max_tokens is the older name, refused by OpenAI's reasoning models; a catalog may ask for it
    const legacy = ctx.supported?.has('max_tokens') === true && !ctx.supported.has('max_completion_tokens')
    out[legacy ? 'max_tokens' : 'max_completion_tokens'] = r.maxOutputTokens
  }
  if (r.stop !== undefined) out.stop = r.stop
  if (r.candidateCount !== undefined && r.candidateCount > 1) out.n = r.candidateCount
  if (r.presencePenalty !== undefined) out.presence_penalty = r.presencePenalty
  if (r.frequencyPenalty !== undefined) out.frequency_penalty = r.frequencyPenalty
  if (r.seed !== undefined) out.seed = r.seed
  if (r.format?.type === 'json_object') out.response_format = { type: 'json_object' }
  else if (r.format?.type === 'json_schema') out.response_format = { type: 'json_schema', json_schema: { name: 'response', schema: r.format.schema } }
  if (r.thinking !== undefined) {
    const effort = effortOf(r.thinking)
    // refused by the models that do not reason; asking one of those for no reasoning loses nothing
    if (ctx.supported?.has('reasoning_effort') === true) out.reasoning_effort = effort
    else if (effort !== 'none') dropped.add('generationConfig.thinkingConfig')
  }
  // none today: every generationConfig field a Chat Completions upstream lacks the reader drops
  dropToward(r, 'openai')
  return { body: out, dropped: dropped.list() }
}

function candidates (choices: unknown): GeminiCandidate[] {
  return (Array.isArray(choices) ? choices.filter(isObj) : []).map((c, i) => {
    const message = isObj(c.message) ? c.message : {}
    const parts: GeminiPart[] = []
    const text = typeof message.content === 'string' ? message.content : textOf(message.content)
    if (text !== '') parts.push({ text })
    for (const tc of Array.isArray(message.tool_calls) ? message.tool_calls.filter(isObj) : []) {
      const fn = isObj(tc.function) ? tc.function : {}
      const call: GeminiFunctionCall = { name: typeof fn.name === 'string' ? fn.name : '', args: parseToolArguments(fn.arguments) }
      if (typeof tc.id === 'string' && tc.id !== '') call.id = tc.id
      parts.push({ functionCall: call })
    }
    return candidate(typeof c.index === 'number' && Number.isInteger(c.index) && c.index >= 0 ? c.index : i, parts, finishOf(c.finish_reason))
  })
}

function response (body: Json, ctx: TranslateCtx) {
  const usage = usageFromChat(body.usage)
  return { body: responseBody(ctx, candidates(body.choices), usage), usage }
}

const STREAM_STATUS = new Map([['rate_limit_error', 429], ['rate_limit_exceeded', 429], ['insufficient_quota', 429], ['overloaded_error', 503], ['server_is_overloaded', 503]])

interface Call { id: string, name: string, args: string }
interface Choice { calls: Map<number, Call>, finish: GeminiFinishReason | null }

function stream (ctx: TranslateCtx): StreamMapper {
  const choices = new Map<number, Choice>()
  let usage: Usage | null = null
  let done = false
  const relayed: string[] = []

  const choice = (index: number): Choice => {
    let c = choices.get(index)
    if (c === undefined) { c = { calls: new Map(), finish: null }; choices.set(index, c) }
    return c
  }
  /** Gemini sends a call whole: the calls of a choice go out once their arguments are complete. */
  const flush = (index: number, c: Choice): SseEvent[] => {
    if (c.calls.size === 0) return []
    const parts = [...c.calls.values()].map((call): GeminiPart => {
      const fc: GeminiFunctionCall = { name: call.name, args: parseToolArguments(call.args) }
      if (call.id !== '') fc.id = call.id
      return { functionCall: fc }
    })
    c.calls.clear()
    return [chunk(ctx, [candidate(index, parts)])]
  }
  const finish = (): SseEvent[] => {
    if (done) return []
    done = true
    const out: SseEvent[] = []
    for (const [index, c] of choices) out.push(...flush(index, c))
    const ended = [...choices].flatMap(([index, c]) => c.finish === null ? [] : [candidate(index, [], c.finish)])
    out.push(chunk(ctx, ended, usage))
    return out
  }

  return {
    push (ev: SseEvent): SseEvent[] {
      if (done) return []
      if (ev.data === '[DONE]') return [...choices.values()].some((c) => c.finish !== null) ? finish() : []
      let data: unknown
      try { data = JSON.parse(ev.data) } catch { return [] }
      if (!isObj(data)) return []
      if (data.error !== undefined && data.error !== null) {
        const e = isObj(data.error) ? data.error : { message: String(data.error) }
        const status = (typeof e.type === 'string' ? STREAM_STATUS.get(e.type) : undefined) ?? (typeof e.code === 'string' ? STREAM_STATUS.get(e.code) : undefined) ?? 500
        return [errorChunk(status, typeof e.message === 'string' ? e.message : 'The upstream provider failed.')]
      }
      if (data.usage !== undefined && data.usage !== null) usage = usageFromChat(data.usage)
      const out: SseEvent[] = []
      for (const raw of Array.isArray(data.choices) ? data.choices.filter(isObj) : []) {
        const index = typeof raw.index === 'number' && Number.isInteger(raw.index) && raw.index >= 0 ? raw.index : 0
        const c = choice(index)
        const delta = isObj(raw.delta) ? raw.delta : {}
        if (typeof delta.content === 'string' && delta.content !== '') {
          out.push(...flush(index, c))
          relayed.push(delta.content)
          out.push(chunk(ctx, [candidate(index, [{ text: delta.content }])]))
        }
        for (const tc of Array.isArray(delta.tool_calls) ? delta.tool_calls.filter(isObj) : []) {
          const fn = isObj(tc.function) ? tc.function : {}
          const key = typeof tc.index === 'number' ? tc.index : 0
          let call = c.calls.get(key)
          if (call === undefined) {
            call = { id: '', name: '', args: '' }
            c.calls.set(key, call)
          }
          if (typeof tc.id === 'string' && tc.id !== '') call.id = tc.id
          if (typeof fn.name === 'string' && fn.name !== '') call.name = fn.name
          if (typeof fn.arguments === 'string') { call.args += fn.arguments; relayed.push(fn.arguments) }
        }
        if (raw.finish_reason !== null && raw.finish_reason !== undefined && c.finish === null) {
          out.push(...flush(index, c))
          c.finish = finishOf(raw.finish_reason)
        }
      }
      // the usage chunk comes after finish_reason: the last chunk waits for it
      if (usage !== null && choices.size > 0 && [...choices.values()].every((c) => c.finish !== null)) out.push(...finish())
      return out
    },
    end: () => [...choices.values()].some((c) => c.finish !== null) ? finish() : [],
    usage: () => usage,
    relayedText: () => relayed.join(''),
    finished: () => done
  }
}

export const geminiToChat: TranslatorPair = { client: 'gemini', upstream: 'openai', path: '/chat/completions', request, response, error: geminiError, stream }
