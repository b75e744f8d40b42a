import type { ContentBlockParam, DocumentBlockParam, ImageBlockParam, ToolResultBlockParam } from '@anthropic-ai/sdk/resources/messages'
import { errorBody, InvalidField, messagesTypeFor } from '../kernel/errors.js'
import { joinText } from '../protocols/content.js'
import { column, Dropped, entry, isObj, kindOf, list, optBoolean, optCount, optEntry, optNumber, optText, sortFields, strings, text } from '../protocols/fields.js'
import { asThinkingSignature, finishOf, fromThinkingSignature, geminiUpstreamPath, googleError, usageFromGemini, type Finish } from '../protocols/gemini/wire.js'
import { candidatesOf, clientCallId, ContentsBuilder, fileData, geminiToolConfig, geminiTools, streamError, THINKING_BUDGET, type Piece, type ToolSpec } from '../protocols/gemini/body.js'
import { geminiAnswer, type GeminiGenerationConfig, type GeminiPart, type GeminiRequest, type GeminiThinkingConfig, type GeminiToolConfig, type JsonSchema } from '../protocols/gemini/types.js'
import { upstreamMessage } from '../protocols/upstream-error.js'
import type { Json, SseEvent, StreamMapper, TranslateCtx, TranslatedRequest, TranslatorPair, Usage } from './types.js'
import { event, message, messageEnd, messageStart, type AnswerBlock } from '../protocols/messages/writer.js'
import { MESSAGES_FIELDS } from '../protocols/messages/table.js'
import { noteCache, readMessagesRequest, readMessagesTools, readMessagesTurns } from '../protocols/messages/request.js'

// A Messages client in front of a Gemini upstream. Thought summaries come back as thinking
// blocks; a Gemini thought signature goes back to Gemini from the thinking block that carries it
// (or, for a function call, from the tool_use id), and a thinking block of an Anthropic model,
// whose signature Gemini could not read, is left out.

const STOP: Record<Finish, string> = { stop: 'end_turn', tool: 'tool_use', length: 'max_tokens', filter: 'refusal' }

// The fate of each Messages field toward a Gemini upstream.
const FIELDS = column(MESSAGES_FIELDS, 'gemini')

/** An image or document source → a Gemini part (null: a kind of source this pair does not map). */
function sourcePart (source: ImageBlockParam['source'] | DocumentBlockParam['source'], at: string, fallbackType: string): GeminiPart | null {
  switch (source.type) {
    case 'base64':
      return { inlineData: { mimeType: text(source.media_type, `${at}.media_type`), data: text(source.data, `${at}.data`) } }
    case 'url': {
      const part = fileData(text(source.url, `${at}.url`))
      if (part.fileData.mimeType === undefined) part.fileData.mimeType = fallbackType
      return part
    }
    case 'text':
      return { text: text(source.data, `${at}.data`) }
    case 'content':
      return { text: joinText(source.content, `${at}.content`, () => {}) }
  }
  return null
}

/** The text of a tool result's content; its images go next to it as parts of their own. */
function toolResultContent (block: ToolResultBlockParam, at: string, dropped: Dropped): { text: string, media: GeminiPart[] } {
  if (typeof block.content === 'string' || block.content === undefined || block.content === null) return { text: block.content ?? '', media: [] }
  const texts: string[] = []
  const media: GeminiPart[] = []
  for (const [i, raw] of list(block.content, `${at}.content`).entries()) {
    const b = entry(raw, `${at}.content[${i}]`)
    if (b.type === 'text') texts.push(text(b.text, `${at}.content[${i}].text`))
    else if (b.type === 'image' || b.type === 'document') {
      const part = sourcePart(entry(b.source, `${at}.content[${i}].source`), `${at}.content[${i}].source`, b.type === 'image' ? 'image/jpeg' : 'application/pdf')
      if (part === null) dropped.add(`messages.tool_result.${kindOf(b.type)}`)
      else media.push(part)
    } else dropped.add(`messages.tool_result.${kindOf(b.type)}`)
  }
  return { text: texts.join('\n'), media }
}

function userTurn (blocks: readonly ContentBlockParam[], at: string, contents: ContentsBuilder, dropped: Dropped): void {
  const results: GeminiPart[] = []
  const parts: GeminiPart[] = []
  for (const [j, b] of blocks.entries()) {
    const bat = `${at}.content[${j}]`
    noteCache(b, dropped)
    switch (b.type) {
      case 'text': {
        const t = text(b.text, `${bat}.text`)
        if (t !== '') parts.push({ text: t })
        break
      }
      case 'image':
      case 'document': {
        const part = sourcePart(entry(b.source, `${bat}.source`), `${bat}.source`, b.type === 'image' ? 'image/jpeg' : 'application/pdf')
        if (part === null) dropped.add(`messages.${b.type}`)
        else parts.push(part)
        break
      }
      case 'tool_result': {
        const { text: t, media } = toolResultContent(b, bat, dropped)
        const response = b.is_error === true ? { error: t === '' ? 'error' : t } : { output: t }
        results.push(contents.result(text(b.tool_use_id, `${bat}.tool_use_id`), `${bat}.tool_use_id`, response))
        parts.push(...media)
        break
      }
      default:
        dropped.add(`messages.${kindOf(b.type)}`)
    }
  }
  contents.push('user', [...results, ...parts])
}

function assistantTurn (blocks: readonly ContentBlockParam[], at: string, contents: ContentsBuilder, dropped: Dropped): void {
  const parts: GeminiPart[] = []
  // the signature of an empty thinking block belongs to the part after it
  let pending: string | undefined
  const add = (part: GeminiPart): void => {
    if (pending !== undefined && part.thoughtSignature === undefined) part.thoughtSignature = pending
    pending = undefined
    parts.push(part)
  }
  for (const [j, b] of blocks.entries()) {
    const bat = `${at}.content[${j}]`
    noteCache(b, dropped)
    switch (b.type) {
      case 'text': {
        const t = text(b.text, `${bat}.text`)
        if (t !== '') add({ text: t })
        break
      }
      case 'tool_use':
        add(contents.call(text(b.id, `${bat}.id`), text(b.name, `${bat}.name`), isObj(b.input) ? b.input : {}))
        break
      case 'thinking': {
        const signature = fromThinkingSignature(b.signature)
        if (signature === undefined) { dropped.add('messages.thinking'); break }
        const t = optText(b.thinking, `${bat}.thinking`) ?? ''
        if (t === '') pending = signature
        else add({ text: t, thought: true, thoughtSignature: signature })
        break
      }
      default:
        dropped.add(`messages.${kindOf(b.type)}`) // redacted thinking, server tool blocks
    }
  }
  const last = parts[parts.length - 1]
  if (pending !== undefined && last !== undefined && last.thoughtSignature === undefined) last.thoughtSignature = pending
  contents.push('model', parts)
}

function tools (body: Json, dropped: Dropped): ToolSpec[] {
  return readMessagesTools(readMessagesRequest(body), dropped).map((t) => {
    const tool: ToolSpec = { name: t.name }
    if (t.description !== undefined) tool.description = t.description
    if (t.schema !== undefined) tool.parameters = t.schema
    if (t.strict === true) dropped.add('tools.strict')
    return tool
  })
}

function toolConfig (body: Json, dropped: Dropped): GeminiToolConfig | undefined {
  const choice = optEntry(body.tool_choice, 'tool_choice')
  if (choice === undefined) return undefined
  if (optBoolean(choice.disable_parallel_tool_use, 'tool_choice.disable_parallel_tool_use') === true) dropped.add('tool_choice.disable_parallel_tool_use')
  switch (choice.type) {
    case 'auto': return geminiToolConfig('AUTO')
    case 'any': return geminiToolConfig('ANY')
    case 'none': return geminiToolConfig('NONE')
    case 'tool': return geminiToolConfig('ANY', [text(choice.name, 'tool_choice.name')])
    default: throw new InvalidField({ field: 'tool_choice.type', reason: 'must be auto, any, tool or none' })
  }
}

/** thinking (or, without it, output_config.effort) → thinkingConfig. */
function thinkingConfig (body: Json, effort: unknown, dropped: Dropped): GeminiThinkingConfig | undefined {
  const thinking = optEntry(body.thinking, 'thinking')
  let config: GeminiThinkingConfig | undefined
  switch (thinking?.type) {
    case undefined: break
    case 'disabled': config = { thinkingBudget: 0 }; break
    case 'adaptive': config = { thinkingBudget: -1, includeThoughts: true }; break
    case 'enabled': {
      const budget = thinking.budget_tokens
      if (typeof budget !== 'number' || !Number.isInteger(budget) || budget < 0) throw new InvalidField({ field: 'thinking.budget_tokens', reason: 'must be a non-negative integer' })
      config = { thinkingBudget: budget, includeThoughts: true }
      break
    }
    default: dropped.add('thinking')
  }
  if (effort === undefined || effort === null) return config
  const budget = typeof effort === 'string' ? THINKING_BUDGET.get(effort) : undefined
  if (config !== undefined || budget === undefined) dropped.add('output_config.effort')
  return config ?? (budget === undefined ? undefined : { thinkingBudget: budget })
}

function responseSchema (format: unknown, field: string, dropped: Dropped): JsonSchema | undefined {
  const f = optEntry(format, field)
  if (f === undefined) return undefined
  if (f.type === 'json_schema' && isObj(f.schema)) return f.schema
  dropped.add(field)
  return undefined
}

function request (body: Json): TranslatedRequest {
  const dropped = new Dropped()
  const read = readMessagesTurns(readMessagesRequest(body), dropped)
  const system = [read.system, ...read.turns.flatMap((t) => t.role === 'system' ? [t.text] : [])].filter((t) => t !== '')
  const contents = new ContentsBuilder()
  for (const t of read.turns) {
    if (t.role === 'user') userTurn(t.blocks, t.at, contents, dropped)
    else if (t.role === 'assistant') assistantTurn(t.blocks, t.at, contents, dropped)
  }

  const out: GeminiRequest = { contents: contents.build() }
  if (system.length > 0) out.systemInstruction = { parts: [{ text: system.join('\n\n') }] }
  const defined = tools(body, dropped)
  const config = toolConfig(body, dropped)
  if (defined.length > 0) {
    out.tools = geminiTools(defined)
    if (config !== undefined) out.toolConfig = config
  } else if (config?.functionCallingConfig?.mode === 'ANY') {
    dropped.add('tool_choice')
  }

  const generation: GeminiGenerationConfig = {}
  const set = <K extends keyof GeminiGenerationConfig>(key: K, value: GeminiGenerationConfig[K]): void => { if (value !== undefined) generation[key] = value }
  set('temperature', optNumber(body.temperature, 'temperature'))
  set('topP', optNumber(body.top_p, 'top_p'))
  set('topK', optNumber(body.top_k, 'top_k'))
  set('maxOutputTokens', optCount(body.max_tokens, 'max_tokens'))
  if (body.stop_sequences !== undefined && body.stop_sequences !== null) {
    const stop = strings(body.stop_sequences, 'stop_sequences')
    if (stop.length > 0) generation.stopSequences = stop
  }
  const output = optEntry(body.output_config, 'output_config')
  if (output !== undefined) sortFields(output, { format: 'mapped', effort: 'mapped' }, dropped, undefined, 'output_config.')
  const schema = responseSchema(output?.format, 'output_config.format', dropped) ?? responseSchema(body.output_format, 'output_format', dropped)
  if (schema !== undefined) {
    generation.responseMimeType = 'application/json'
    generation.responseJsonSchema = schema
  }
  set('thinkingConfig', thinkingConfig(body, output?.effort, dropped))
  if (Object.keys(generation).length > 0) out.generationConfig = generation
  sortFields(body, FIELDS, dropped)
  return { body: out, dropped: dropped.list() }
}

/** A candidate's pieces → Messages content blocks. */
function blocksOf (pieces: Piece[], ctx: TranslateCtx): AnswerBlock[] {
  const blocks: AnswerBlock[] = []
  let calls = 0
  for (const p of pieces) {
    const last = blocks[blocks.length - 1]
    if (p.kind === 'thought') {
      let thought = last?.type === 'thinking' && last.signature === '' ? last : undefined
      if (thought !== undefined) thought.thinking = String(thought.thinking) + p.text
      else blocks.push(thought = { type: 'thinking', thinking: p.text, signature: '' })
      if (p.signature !== undefined) thought.signature = asThinkingSignature(p.signature)
    } else if (p.kind === 'text') {
      if (p.signature !== undefined) {
        if (last?.type === 'thinking' && last.signature === '') last.signature = asThinkingSignature(p.signature)
        else blocks.push({ type: 'thinking', thinking: '', signature: asThinkingSignature(p.signature) })
      }
      const prev = blocks[blocks.length - 1]
      if (prev?.type === 'text') prev.text = String(prev.text) + p.text
      else if (p.text !== '') blocks.push({ type: 'text', text: p.text })
    } else {
      blocks.push({ type: 'tool_use', id: clientCallId(ctx, 'toolu_', calls++, p), name: p.name, input: p.args })
    }
  }
  return blocks
}

function response (body: Json, ctx: TranslateCtx) {
  const answer = geminiAnswer(body)
  const candidate = candidatesOf(answer)[0]
  const content = candidate === undefined ? [] : blocksOf(candidate.pieces, ctx)
  const usage = usageFromGemini(answer.usageMetadata)
  return {
    body: message(ctx, content, STOP[finishOf(candidate?.finishReason, content.some((b) => b.type === 'tool_use'))], usage),
    usage
  }
}

function error (status: number, body: unknown): Json {
  return errorBody('messages', { status, message: upstreamMessage(status, googleError(body)) })
}

function stream (ctx: TranslateCtx): StreamMapper {
  const ev = event
  let started = false
  let open: { index: number, kind: 'thinking' | 'text', signature?: string } | null = null
  let next = 0
  let calls = 0
  let usage: Usage | null = null
  let stopped = false
  let stopReason: string | null = null
  const relayed: string[] = []

  const start = (): SseEvent[] => {
    if (started) return []
    started = true
    return [messageStart(ctx, usage)]
  }
  const close = (): SseEvent[] => {
    if (open === null) return []
    const out: SseEvent[] = []
    if (open.signature !== undefined) out.push(ev('content_block_delta', { index: open.index, delta: { type: 'signature_delta', signature: asThinkingSignature(open.signature) } }))
    out.push(ev('content_block_stop', { index: open.index }))
    open = null
    return out
  }
  const begin = (kind: 'thinking' | 'text', signature?: string): SseEvent[] => {
    const out = close()
    open = { index: next++, kind }
    if (signature !== undefined) open.signature = signature
    out.push(ev('content_block_start', { index: open.index, content_block: kind === 'text' ? { type: 'text', text: '' } : { type: 'thinking', thinking: '', signature: '' } }))
    return out
  }
  const delta = (d: Json): SseEvent => ev('content_block_delta', { index: open?.index ?? 0, delta: d })
  const piece = (p: Piece): SseEvent[] => {
    const out: SseEvent[] = []
    if (p.kind === 'thought') {
      if (open?.kind !== 'thinking' || open.signature !== undefined) out.push(...begin('thinking', p.signature))
      else if (p.signature !== undefined) open.signature = p.signature
      if (p.text !== '') { relayed.push(p.text); out.push(delta({ type: 'thinking_delta', thinking: p.text })) }
      return out
    }
    if (p.kind === 'text') {
      if (p.signature !== undefined && open?.kind === 'thinking' && open.signature === undefined) open.signature = p.signature
      else if (p.signature !== undefined && open?.kind !== 'text') out.push(...begin('thinking', p.signature), ...close())
      // a signature arriving inside a text block has no place left: Gemini does not require it back
      if (p.text === '') return out
      if (open?.kind !== 'text') out.push(...begin('text'))
      relayed.push(p.text)
      out.push(delta({ type: 'text_delta', text: p.text }))
      return out
    }
    out.push(...close())
    const index = next++
    const args = JSON.stringify(p.args)
    relayed.push(args)
    out.push(
      ev('content_block_start', { index, content_block: { type: 'tool_use', id: clientCallId(ctx, 'toolu_', calls++, p), name: p.name, input: {} } }),
      ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: args } }),
      ev('content_block_stop', { index })
    )
    return out
  }
  const stop = (): SseEvent[] => {
    if (stopped || stopReason === null) return []
    stopped = true
    return [
      ...close(),
      ...messageEnd(stopReason as string, usage)
    ]
  }

  return {
    push (frameIn: SseEvent): SseEvent[] {
      if (stopped) return []
      let data: unknown
      try { data = JSON.parse(frameIn.data) } catch { return [] }
      if (!isObj(data)) return []
      const chunk = geminiAnswer(data)
      const failure = streamError(chunk)
      if (failure !== null) return [ev('error', { error: { type: messagesTypeFor(failure.status), message: failure.message } })]
      if (chunk.usageMetadata !== undefined) usage = usageFromGemini(chunk.usageMetadata) ?? usage
      const out = start()
      const candidate = candidatesOf(chunk).find((c) => c.index === 0)
      if (candidate === undefined) return out
      for (const p of candidate.pieces) out.push(...piece(p))
      if (candidate.finishReason !== null) {
        stopReason = STOP[finishOf(candidate.finishReason, calls > 0)]
        out.push(...stop())
      }
      return out
    },
    end: () => stop(),
    usage: () => usage,
    relayedText: () => relayed.join(''),
    finished: () => stopped
  }
}

export const messagesToGemini: TranslatorPair = { client: 'messages', upstream: 'gemini', path: geminiUpstreamPath, request, response, error, stream }
