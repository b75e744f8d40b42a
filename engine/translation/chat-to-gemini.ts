import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions'
import { errorBody, InvalidField, openaiTypeFor, UnsupportedOnUpstream } from '../kernel/errors.js'
import { column, Dropped, entry, isObj, kindOf, list, optBoolean, optCount, optEntry, optText, sortFields, strings, text } from '../protocols/fields.js'
import { finishOf, geminiUpstreamPath, googleError, usageFromGemini, type Finish } from '../protocols/gemini/wire.js'
import { candidatesOf, clientCallId, ContentsBuilder, fileData, geminiToolConfig, geminiTools, imagePart, inlineData, streamError, THINKING_BUDGET, type Piece, type ToolSpec } from '../protocols/gemini/body.js'
import { geminiAnswer, type GeminiGenerationConfig, type GeminiPart, type GeminiRequest, type GeminiToolConfig } from '../protocols/gemini/types.js'
import { upstreamMessage } from '../protocols/upstream-error.js'
import { frame } from '../protocols/sse.js'
import type { Json, SseEvent, StreamMapper, TranslateCtx, TranslatedRequest, TranslatorPair, Usage } from './types.js'
import { assistantMessage, chatUsage, chunk as chatChunk, completion, streamEnd, type FinishReason, type ToolCall } from '../protocols/chat/writer.js'
import { CHAT_FIELDS } from '../protocols/chat/table.js'
import { readChatRequest, readChatTurns } from '../protocols/chat/request.js'

// An OpenAI Chat Completions client in front of a Gemini upstream (generateContent). Thoughts
// have no place in a chat answer and are left out; the thought signature of a function call
// rides in the tool call's id and goes back on its part.

const FINISH: Record<Finish, FinishReason> = { stop: 'stop', tool: 'tool_calls', length: 'length', filter: 'content_filter' }

// The fate of each Chat Completions field toward a Gemini upstream.
const FIELDS = column(CHAT_FIELDS, 'gemini')

function optNumber (v: unknown, field: string): number | undefined {
  if (v === undefined || v === null) return undefined
  if (typeof v !== 'number' || !Number.isFinite(v)) throw new InvalidField({ field, reason: 'must be a number' })
  return v
}

/** A user's content (string or parts) → Gemini parts. */
function userParts (content: unknown, field: string, ctx: TranslateCtx): GeminiPart[] {
  if (typeof content === 'string') return content === '' ? [] : [{ text: content }]
  const out: GeminiPart[] = []
  for (const [i, raw] of list(content, field).entries()) {
    const at = `${field}[${i}]`
    const part = entry(raw, at)
    switch (part.type) {
      case 'text': {
        const t = text(part.text, `${at}.text`)
        if (t !== '') out.push({ text: t })
        break
      }
      case 'image_url': {
        const url = typeof part.image_url === 'string' ? part.image_url : text(entry(part.image_url, `${at}.image_url`).url, `${at}.image_url.url`)
        out.push(imagePart(url))
        break
      }
      case 'input_audio': {
        const audio = entry(part.input_audio, `${at}.input_audio`)
        const format = text(audio.format, `${at}.input_audio.format`)
        out.push({ inlineData: { mimeType: `audio/${format}`, data: text(audio.data, `${at}.input_audio.data`) } })
        break
      }
      case 'file': {
        const file = entry(part.file, `${at}.file`)
        const data = optText(file.file_data, `${at}.file.file_data`)
        const inline = data === undefined ? null : inlineData(data)
        if (inline === null) throw new UnsupportedOnUpstream({ feature: 'A file by file_id', model: ctx.model })
        out.push(inline)
        break
      }
      case 'video_url':
        out.push(fileData(text(entry(part.video_url, `${at}.video_url`).url, `${at}.video_url.url`)))
        break
      default:
        throw new InvalidField({ field: `${at}.type`, reason: 'must be text, image_url, input_audio, file or video_url' })
    }
  }
  return out
}

function tools (body: Json, dropped: Dropped): ToolSpec[] {
  const out: ToolSpec[] = []
  for (const [i, raw] of list(body.tools, 'tools').entries()) {
    const at = `tools[${i}]`
    const t = entry(raw, at)
    if (t.type !== 'function' && t.type !== undefined) { dropped.add(`tools.${kindOf(t.type)}`); continue }
    const fn = entry(t.function, `${at}.function`)
    const tool: ToolSpec = { name: text(fn.name, `${at}.function.name`) }
    const description = optText(fn.description, `${at}.function.description`)
    if (description !== undefined) tool.description = description
    const parameters = optEntry(fn.parameters, `${at}.function.parameters`)
    if (parameters !== undefined) tool.parameters = parameters
    // Gemini keeps to the schema on its own; there is no switch for it
    if (optBoolean(fn.strict, `${at}.function.strict`) === true) dropped.add('tools.strict')
    out.push(tool)
  }
  return out
}

function toolConfig (body: Json, dropped: Dropped): GeminiToolConfig | undefined {
  const choice = body.tool_choice
  if (optBoolean(body.parallel_tool_calls, 'parallel_tool_calls') === false) dropped.add('parallel_tool_calls')
  if (choice === undefined || choice === null) return undefined
  if (choice === 'auto') return geminiToolConfig('AUTO')
  if (choice === 'none') return geminiToolConfig('NONE')
  if (choice === 'required') return geminiToolConfig('ANY')
  if (!isObj(choice)) throw new InvalidField({ field: 'tool_choice', reason: 'must be auto, none, required or an object' })
  if (choice.type === 'function') return geminiToolConfig('ANY', [text(entry(choice.function, 'tool_choice.function').name, 'tool_choice.function.name')])
  if (choice.type === 'allowed_tools') {
    const allowed = entry(choice.allowed_tools, 'tool_choice.allowed_tools')
    const names = list(allowed.tools, 'tool_choice.allowed_tools.tools').map((t, i) => {
      const tool = entry(t, `tool_choice.allowed_tools.tools[${i}]`)
      return text(entry(tool.function, `tool_choice.allowed_tools.tools[${i}].function`).name, `tool_choice.allowed_tools.tools[${i}].function.name`)
    })
    return geminiToolConfig(allowed.mode === 'required' ? 'ANY' : 'AUTO', names)
  }
  if (choice.type === 'custom') { dropped.add('tool_choice'); return undefined }
  throw new InvalidField({ field: 'tool_choice.type', reason: 'must be function, custom or allowed_tools' })
}

function generationConfig (body: Json, dropped: Dropped): GeminiGenerationConfig {
  const config: GeminiGenerationConfig = {}
  const set = <K extends keyof GeminiGenerationConfig>(key: K, value: GeminiGenerationConfig[K]): void => { if (value !== undefined) config[key] = value }
  set('temperature', optNumber(body.temperature, 'temperature'))
  set('topP', optNumber(body.top_p, 'top_p'))
  set('topK', optNumber(body.top_k, 'top_k'))
  set('maxOutputTokens', optCount(body.max_completion_tokens, 'max_completion_tokens') ?? optCount(body.max_tokens, 'max_tokens'))
  if (body.stop !== undefined && body.stop !== null) {
    const stop = strings(body.stop, 'stop')
    if (stop.length > 0) config.stopSequences = stop
  }
  const n = optCount(body.n, 'n')
  if (n !== undefined && n > 1) config.candidateCount = n
  set('presencePenalty', optNumber(body.presence_penalty, 'presence_penalty'))
  set('frequencyPenalty', optNumber(body.frequency_penalty, 'frequency_penalty'))
  const seed = optNumber(body.seed, 'seed')
  if (seed !== undefined) config.seed = seed
  const format = optEntry(body.response_format, 'response_format')
  if (format?.type === 'json_object') config.responseMimeType = 'application/json'
  else if (format?.type === 'json_schema') {
    const schema = optEntry(format.json_schema, 'response_format.json_schema')?.schema
    config.responseMimeType = 'application/json'
    if (isObj(schema)) config.responseJsonSchema = schema
  } else if (format !== undefined && format.type !== 'text') {
    dropped.add('response_format')
  }
  const effort = optText(body.reasoning_effort, 'reasoning_effort')
  if (effort !== undefined) {
    const budget = THINKING_BUDGET.get(effort)
    if (budget === undefined) dropped.add('reasoning_effort')
    else config.thinkingConfig = { thinkingBudget: budget }
  }
  return config
}

function request (body: Json, ctx: TranslateCtx): TranslatedRequest {
  const dropped = new Dropped()
  const system: string[] = []
  const contents = new ContentsBuilder()
  for (const turn of readChatTurns(readChatRequest(body).messages, dropped)) {
    switch (turn.role) {
      case 'system':
        system.push(turn.text)
        break
      case 'user':
        contents.push('user', userParts(turn.content, turn.at, ctx))
        break
      case 'assistant': {
        const parts: GeminiPart[] = []
        const t = turn.texts.join('\n')
        if (t !== '') parts.push({ text: t })
        for (const call of turn.calls) parts.push(contents.call(call.id, call.name, call.input))
        contents.push('model', parts)
        break
      }
      case 'tool':
        contents.push('user', [contents.result(turn.id, turn.at, { output: turn.text })])
        break
    }
  }

  const out: GeminiRequest = { contents: contents.build() }
  if (system.length > 0) out.systemInstruction = { parts: [{ text: system.join('\n\n') }] }
  const defined = tools(body, dropped)
  const config = toolConfig(body, dropped)
  if (defined.length > 0) {
    out.tools = geminiTools(defined)
    if (config !== undefined) out.toolConfig = config
  } else if (config?.functionCallingConfig?.mode === 'ANY') {
    dropped.add('tool_choice') // no tool left to force
  }
  const generation = generationConfig(body, dropped)
  if (Object.keys(generation).length > 0) out.generationConfig = generation
  sortFields(body, FIELDS, dropped)
  return { body: out, dropped: dropped.list() }
}

function response (body: Json, ctx: TranslateCtx) {
  const answer = geminiAnswer(body)
  let calls = 0
  const choices: ChatCompletion.Choice[] = candidatesOf(answer).map((c) => {
    const text = c.pieces.flatMap((p) => p.kind === 'text' ? [p.text] : []).join('')
    const toolCalls: ToolCall[] = c.pieces.flatMap((p) => p.kind === 'call'
      ? [{ id: clientCallId(ctx, 'call_', calls++, p), type: 'function' as const, function: { name: p.name, arguments: JSON.stringify(p.args) } }]
      : [])
    return {
      index: c.index,
      message: assistantMessage(text, toolCalls),
      finish_reason: FINISH[finishOf(c.finishReason, toolCalls.length > 0)],
      logprobs: null
    }
  })
  if (choices.length === 0) choices.push({ index: 0, message: { role: 'assistant', content: '', refusal: null }, finish_reason: 'stop', logprobs: null })
  const usage = usageFromGemini(answer.usageMetadata)
  const out = completion(ctx, choices, usage === null ? null : chatUsage(usage))
  return { body: { ...out }, usage }
}

function error (status: number, body: unknown): Json {
  return errorBody('openai', { status, message: upstreamMessage(status, googleError(body)) })
}

function stream (ctx: TranslateCtx): StreamMapper {
  // per candidate: how many calls it made, and how it finished
  const seen = new Map<number, { calls: number, finish: FinishReason | null }>()
  let calls = 0
  let usage: Usage | null = null
  let done = false
  const relayed: string[] = []

  const chunk = (index: number, delta: ChatCompletionChunk.Choice.Delta, finish: FinishReason | null = null): SseEvent => chatChunk(ctx, index, delta, finish)
  const finish = (): SseEvent[] => {
    if (done) return []
    done = true
    return streamEnd(ctx, usage === null ? null : chatUsage(usage))
  }
  const piece = (index: number, state: { calls: number }, p: Piece): SseEvent[] => {
    if (p.kind === 'text') {
      if (p.text === '') return []
      relayed.push(p.text)
      return [chunk(index, { content: p.text })]
    }
    if (p.kind !== 'call') return []
    const k = state.calls++
    const args = JSON.stringify(p.args)
    relayed.push(args)
    return [
      chunk(index, { tool_calls: [{ index: k, id: clientCallId(ctx, 'call_', calls++, p), type: 'function', function: { name: p.name, arguments: '' } }] }),
      chunk(index, { tool_calls: [{ index: k, function: { arguments: args } }] })
    ]
  }

  return {
    push (ev: SseEvent): SseEvent[] {
      if (done) return []
      let data: unknown
      try { data = JSON.parse(ev.data) } catch { return [] }
      if (!isObj(data)) return []
      const answer = geminiAnswer(data)
      const failure = streamError(answer)
      if (failure !== null) return [frame({ error: { message: failure.message, type: openaiTypeFor(failure.status), param: null, code: failure.code } })]
      if (answer.usageMetadata !== undefined) usage = usageFromGemini(answer.usageMetadata) ?? usage
      const out: SseEvent[] = []
      for (const c of candidatesOf(answer)) {
        let state = seen.get(c.index)
        if (state === undefined) {
          state = { calls: 0, finish: null }
          seen.set(c.index, state)
          out.push(chunk(c.index, { role: 'assistant', content: '' }))
        }
        if (state.finish !== null) continue
        for (const p of c.pieces) out.push(...piece(c.index, state, p))
        if (c.finishReason !== null) {
          state.finish = FINISH[finishOf(c.finishReason, state.calls > 0)]
          out.push(chunk(c.index, {}, state.finish))
        }
      }
      if (seen.size > 0 && [...seen.values()].every((s) => s.finish !== null)) out.push(...finish())
      return out
    },
    end: () => seen.size > 0 && [...seen.values()].some((s) => s.finish !== null) ? finish() : [],
    usage: () => usage,
    relayedText: () => relayed.join(''),
    finished: () => done
  }
}

export const chatToGemini: TranslatorPair = { client: 'openai', upstream: 'gemini', path: geminiUpstreamPath, request, response, error, stream }
