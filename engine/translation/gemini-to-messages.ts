import type { ContentBlockParam, DocumentBlockParam, ImageBlockParam, MessageParam, TextBlockParam, ThinkingConfigParam, ToolResultBlockParam } from '@anthropic-ai/sdk/resources/messages'
import { UnsupportedOnUpstream } from '../kernel/errors.js'
import { isMessagesImageType } from '../protocols/content.js'
import { isObj, type Dropped } from '../protocols/fields.js'
import { geminiError, packThinking, type PackedThinking } from '../protocols/gemini/wire.js'
import { candidate, chunk, errorChunk, responseBody } from '../protocols/gemini/writer.js'
import { allowedTools, dropToward, includeThoughts, readGeminiRequest, type InRequest, type InPart } from '../protocols/gemini/request.js'
import type { GeminiFinishReason, GeminiFunctionCall, GeminiPart } from '../protocols/gemini/types.js'
import { THINKING_BUDGET } from '../protocols/gemini/body.js'
import { allows } from '../protocols/responses/request.js'
import type { Json, SseEvent, StreamMapper, TranslateCtx, TranslatedRequest, TranslatorPair, Usage } from './types.js'
import { usageFromMessages } from '../protocols/messages/usage.js'

// A Gemini client in front of a Messages upstream. Thinking blocks come back as thought parts
// (when the client asks for them) and, with their signatures, packed into the thoughtSignature
// of the part that follows them: a Gemini client keeps that part and sends it back, and the
// blocks go up again ahead of it, as Anthropic requires of a tool loop with thinking on.

const FINISH = new Map<string, GeminiFinishReason>([
  ['end_turn', 'STOP'],
  ['stop_sequence', 'STOP'],
  ['pause_turn', 'STOP'],
  ['tool_use', 'STOP'],
  ['max_tokens', 'MAX_TOKENS'],
  ['model_context_window_exceeded', 'MAX_TOKENS'],
  ['refusal', 'SAFETY']
])
const finishOf = (stop: unknown): GeminiFinishReason => (typeof stop === 'string' ? FINISH.get(stop) : undefined) ?? 'STOP'

// An Anthropic thinking budget is at least 1024 tokens and less than max_tokens.
const MIN_BUDGET = 1024
const MEDIUM_BUDGET = THINKING_BUDGET.get('medium') ?? 8192

/** Tool-use ids are [A-Za-z0-9_-] at Anthropic; other characters a client's id may hold become `_`. */
const toolId = (id: string): string => id.replace(/[^A-Za-z0-9_-]/g, '_')

/** A user's media or text part → a Messages content block. */
function block (p: Extract<InPart, { kind: 'text' | 'inline' | 'file' }>, ctx: TranslateCtx): TextBlockParam | ImageBlockParam | DocumentBlockParam {
  if (p.kind === 'text') return { type: 'text', text: p.text }
  const type = p.mimeType.toLowerCase()
  if (p.kind === 'file') {
    if (type.startsWith('image/')) return { type: 'image', source: { type: 'url', url: p.uri } }
    if (type === 'application/pdf') return { type: 'document', source: { type: 'url', url: p.uri } }
    throw new UnsupportedOnUpstream({ feature: `A ${p.mimeType} file by URL`, model: ctx.model })
  }
  if (isMessagesImageType(type)) return { type: 'image', source: { type: 'base64', media_type: type, data: p.data } }
  if (type === 'application/pdf') return { type: 'document', source: { type: 'base64', media_type: 'application/pdf', data: p.data } }
  if (type === 'text/plain') return { type: 'document', source: { type: 'text', media_type: 'text/plain', data: Buffer.from(p.data, 'base64').toString('utf8') } }
  throw new UnsupportedOnUpstream({ feature: `${p.mimeType} input`, model: ctx.model })
}

function userContent (parts: InPart[], ctx: TranslateCtx): ContentBlockParam[] {
  const results: ContentBlockParam[] = []
  const rest: ContentBlockParam[] = []
  for (const p of parts) {
    if (p.kind === 'result') {
      const content: Array<TextBlockParam | ImageBlockParam | DocumentBlockParam> = p.output === '' ? [] : [{ type: 'text', text: p.output }]
      for (const m of p.media) content.push(block(m, ctx))
      const result: ToolResultBlockParam = { type: 'tool_result', tool_use_id: toolId(p.id), content: p.media.length === 0 ? p.output : content }
      if (p.isError) result.is_error = true
      results.push(result)
    } else if (p.kind === 'text' || p.kind === 'inline' || p.kind === 'file') {
      rest.push(block(p, ctx))
    }
  }
  // tool results lead their user turn (Anthropic wants them before any text)
  return [...results, ...rest]
}

function assistantContent (parts: InPart[], dropped: Dropped): ContentBlockParam[] {
  const out: ContentBlockParam[] = []
  for (const p of parts) {
    if (p.kind === 'thinking') out.push(...p.blocks)
    else if (p.kind === 'text') out.push({ type: 'text', text: p.text })
    else if (p.kind === 'call') out.push({ type: 'tool_use', id: toolId(p.id), name: p.name, input: p.args })
    else if (p.kind === 'inline') dropped.add('contents.inlineData')
    else if (p.kind === 'file') dropped.add('contents.fileData')
  }
  return out
}

/**
 * thinkingConfig → thinking, where Anthropic's rules allow it: a budget of at least 1024 below
 * max_tokens, no forced tool use, and, in a tool loop, the model's last turn starting with its
 * thinking. Otherwise the config is reported, not bent.
 */
function thinking (r: InRequest, messages: MessageParam[], maxTokens: number | undefined, ctx: TranslateCtx): { thinking?: ThinkingConfigParam, maxTokens: number } {
  const fallback = maxTokens ?? ctx.defaultMaxTokens
  const t = r.thinking
  if (t === undefined) return { maxTokens: fallback }
  if (t.budget === 0 || t.level === 'minimal') return { thinking: { type: 'disabled' }, maxTokens: fallback }
  const drop = (): { maxTokens: number } => { r.dropped.add('generationConfig.thinkingConfig'); return { maxTokens: fallback } }
  if (!allows(ctx, 'thinking') || r.toolMode === 'ANY') return drop()
  const last = messages[messages.length - 1]
  const previous = messages[messages.length - 2]
  const looping = last?.role === 'user' && Array.isArray(last.content) && last.content.some((b) => b.type === 'tool_result')
  if (looping && previous?.role === 'assistant' && !(Array.isArray(previous.content) && ['thinking', 'redacted_thinking'].includes(String((previous.content[0] as ContentBlockParam | undefined)?.type)))) return drop()
  const budget = t.budget === undefined || t.budget === -1 ? THINKING_BUDGET.get(t.level ?? 'medium') ?? MEDIUM_BUDGET : t.budget
  if (budget < MIN_BUDGET) return drop()
  // without the client's own max_tokens, the default is what the answer gets on top of its thinking
  if (maxTokens === undefined) return { thinking: { type: 'enabled', budget_tokens: budget }, maxTokens: budget + ctx.defaultMaxTokens }
  if (budget >= maxTokens) return drop()
  return { thinking: { type: 'enabled', budget_tokens: budget }, maxTokens }
}

function request (body: Json, ctx: TranslateCtx): TranslatedRequest {
  const r = readGeminiRequest(body, ctx)
  const dropped = r.dropped
  if (r.candidateCount !== undefined && r.candidateCount > 1) throw new UnsupportedOnUpstream({ feature: 'candidateCount > 1', model: ctx.model })
  const messages: MessageParam[] = []
  for (const turn of r.turns) {
    const role = turn.role === 'user' ? 'user' : 'assistant'
    const content = turn.role === 'user' ? userContent(turn.parts, ctx) : assistantContent(turn.parts, dropped)
    if (content.length === 0) continue
    const last = messages[messages.length - 1]
    if (last?.role === role) {
      // a turn's content is always a list here
      const merged = [...(last.content as ContentBlockParam[]), ...content]
      last.content = role === 'user' ? [...merged.filter((b) => b.type === 'tool_result'), ...merged.filter((b) => b.type !== 'tool_result')] : merged
    } else messages.push({ role, content })
  }

  const think = thinking(r, messages, r.maxOutputTokens, ctx)
  const out: Json = { model: ctx.upstreamModel, messages, max_tokens: think.maxTokens }
  if (r.system !== null) out.system = r.system
  if (ctx.stream) out.stream = true
  if (think.thinking !== undefined) out.thinking = think.thinking
  const enabled = think.thinking?.type === 'enabled'
  // extended thinking takes no sampling settings but a temperature of 1 and a top_p of at least 0.95
  if (r.temperature !== undefined) {
    if (enabled && r.temperature !== 1) dropped.add('generationConfig.temperature')
    else out.temperature = r.temperature
  }
  if (r.topP !== undefined) {
    if (enabled && r.topP < 0.95) dropped.add('generationConfig.topP')
    else out.top_p = r.topP
  }
  if (r.topK !== undefined) {
    if (enabled) dropped.add('generationConfig.topK')
    else out.top_k = r.topK
  }
  if (r.stop !== undefined) out.stop_sequences = r.stop
  // what Messages has no field for (the penalties, seed): its column of the table
  dropToward(r, 'messages')

  const tools = allowedTools(r)
  if (tools.length > 0) {
    out.tools = tools.map((t) => {
      const tool: Json = { name: t.name, input_schema: t.parameters ?? { type: 'object', properties: {} } }
      if (t.description !== undefined) tool.description = t.description
      return tool
    })
    if (r.toolMode === 'NONE') out.tool_choice = { type: 'none' }
    else if (r.toolMode === 'AUTO') out.tool_choice = { type: 'auto' }
    else if (r.toolMode === 'ANY') {
      const only = tools.length === 1 ? tools[0] : undefined
      out.tool_choice = only !== undefined && r.allowed !== undefined ? { type: 'tool', name: only.name } : { type: 'any' }
    }
  } else if (r.toolMode === 'ANY') {
    dropped.add('toolConfig')
  }

  // structured output is refused by the models that predate output_config
  if (r.format?.type === 'json_schema' && allows(ctx, 'output_config')) out.output_config = { format: { type: 'json_schema', schema: r.format.schema } }
  else if (r.format !== undefined) dropped.add('generationConfig.responseMimeType')
  return { body: out, dropped: dropped.list() }
}

/** Messages content blocks → Gemini parts: thoughts shown when asked for, every thinking block packed into the signature of the part after it. */
class Parts {
  private pending: PackedThinking[] = []

  constructor (private readonly thoughts: boolean) {}

  /** A thinking or redacted_thinking block, whole: it goes up again with the next part. */
  hold (b: Json): void {
    // a redacted block's data goes back as it came, Anthropic's to judge
    this.pending.push(b.type === 'thinking' ? { type: 'thinking', thinking: typeof b.thinking === 'string' ? b.thinking : '', signature: typeof b.signature === 'string' ? b.signature : '' } : { type: 'redacted_thinking', data: b.data as string })
  }

  /** Thinking text as a thought part, when the client shows thoughts. */
  thought (text: unknown): GeminiPart[] {
    return this.thoughts && typeof text === 'string' && text !== '' ? [{ text, thought: true }] : []
  }

  /** A text or functionCall part, carrying the thinking before it. */
  part (p: GeminiPart): GeminiPart {
    if (this.pending.length > 0) {
      p.thoughtSignature = packThinking(this.pending)
      this.pending = []
    }
    return p
  }
}

function response (body: Json, ctx: TranslateCtx) {
  const out = new Parts(includeThoughts(ctx))
  const parts: GeminiPart[] = []
  for (const b of Array.isArray(body.content) ? body.content.filter(isObj) : []) {
    if (b.type === 'thinking' || b.type === 'redacted_thinking') {
      parts.push(...out.thought(b.thinking))
      out.hold(b)
    } else if (b.type === 'text' && typeof b.text === 'string' && b.text !== '') parts.push(out.part({ text: b.text }))
    else if (b.type === 'tool_use') {
      const call: GeminiFunctionCall = { name: typeof b.name === 'string' ? b.name : '', args: isObj(b.input) ? b.input : {} }
      if (typeof b.id === 'string' && b.id !== '') call.id = b.id
      parts.push(out.part({ functionCall: call }))
    }
  }
  const usage = usageFromMessages(body.usage)
  return { body: responseBody(ctx, [candidate(0, parts, finishOf(body.stop_reason))], usage), usage }
}

function stream (ctx: TranslateCtx): StreamMapper {
  const out = new Parts(includeThoughts(ctx))
  // the block being streamed, by its index: text goes out as it comes, thinking and tool calls whole
  const blocks = new Map<number, Json>()
  let raw: Json | null = null
  let finish: GeminiFinishReason | null = null
  let done = false
  const relayed: string[] = []
  const usage = (): Usage | null => raw === null ? null : usageFromMessages(raw)
  const emit = (parts: GeminiPart[]): SseEvent[] => parts.length === 0 ? [] : [chunk(ctx, [candidate(0, parts)])]
  const objectAt = (o: Json, key: string): Json => isObj(o[key]) ? o[key] as Json : {}

  return {
    push (ev: SseEvent): SseEvent[] {
      if (done) return []
      let data: unknown
      if (ev.value !== undefined) data = ev.value
      else try { data = JSON.parse(ev.data) } catch { return [] }
      if (!isObj(data)) return []
      const index = typeof data.index === 'number' ? data.index : -1
      switch (data.type ?? ev.event) {
        case 'message_start':
          raw = { ...objectAt(objectAt(data, 'message'), 'usage') }
          return []
        case 'content_block_start': {
          const b = objectAt(data, 'content_block')
          if (b.type === 'text') {
            blocks.set(index, { type: 'text', first: true })
            const t = typeof b.text === 'string' ? b.text : ''
            if (t === '') return []
            relayed.push(t)
            ;(blocks.get(index) as Json).first = false
            return emit([out.part({ text: t })])
          }
          if (b.type === 'thinking') {
            const t = typeof b.thinking === 'string' ? b.thinking : ''
            blocks.set(index, { type: 'thinking', thinking: t, signature: typeof b.signature === 'string' ? b.signature : '' })
            relayed.push(t)
            return emit(out.thought(t))
          }
          if (b.type === 'redacted_thinking') blocks.set(index, { type: 'redacted_thinking', data: b.data })
          else if (b.type === 'tool_use') blocks.set(index, { type: 'tool_use', id: b.id, name: b.name, json: '' })
          return []
        }
        case 'content_block_delta': {
          const b = blocks.get(index)
          const d = objectAt(data, 'delta')
          if (b === undefined) return []
          if (b.type === 'text' && d.type === 'text_delta' && typeof d.text === 'string' && d.text !== '') {
            relayed.push(d.text)
            const part: GeminiPart = { text: d.text }
            // the thinking before the text rides on its first part
            const sent = b.first === true ? out.part(part) : part
            b.first = false
            return emit([sent])
          }
          if (b.type === 'thinking' && d.type === 'thinking_delta' && typeof d.thinking === 'string') {
            b.thinking = String(b.thinking) + d.thinking
            relayed.push(d.thinking)
            return emit(out.thought(d.thinking))
          } else if (b.type === 'thinking' && d.type === 'signature_delta' && typeof d.signature === 'string') {
            b.signature = String(b.signature) + d.signature
          } else if (b.type === 'tool_use' && d.type === 'input_json_delta' && typeof d.partial_json === 'string') {
            b.json = String(b.json) + d.partial_json
            relayed.push(d.partial_json)
          }
          return []
        }
        case 'content_block_stop': {
          const b = blocks.get(index)
          blocks.delete(index)
          if (b?.type === 'thinking' || b?.type === 'redacted_thinking') out.hold(b)
          if (b?.type === 'tool_use') {
            let args: unknown = {}
            try { args = b.json === '' ? {} : JSON.parse(String(b.json)) } catch { args = { raw: b.json } }
            const call: GeminiFunctionCall = { name: typeof b.name === 'string' ? b.name : '', args: isObj(args) ? args : { value: args } }
            if (typeof b.id === 'string' && b.id !== '') call.id = b.id
            return emit([out.part({ functionCall: call })])
          }
          return []
        }
        case 'message_delta': {
          raw = { ...raw, ...objectAt(data, 'usage') }
          const stop = objectAt(data, 'delta').stop_reason
          if (typeof stop === 'string') finish = finishOf(stop)
          return []
        }
        case 'message_stop':
          done = true
          return [chunk(ctx, [candidate(0, [], finish ?? 'STOP')], usage())]
        case 'error': {
          const e = objectAt(data, 'error')
          const status = e.type === 'rate_limit_error' ? 429 : e.type === 'overloaded_error' ? 503 : e.type === 'invalid_request_error' ? 400 : 500
          return [errorChunk(status, typeof e.message === 'string' ? e.message : 'The upstream provider failed.')]
        }
        default:
          return [] // ping
      }
    },
    end () {
      if (done || finish === null) return []
      done = true
      return [chunk(ctx, [candidate(0, [], finish)], usage())]
    },
    usage,
    relayedText: () => relayed.join(''),
    finished: () => done
  }
}

/** The Gemini fields each Messages field is made from (see TranslatorPair.messagesOrigins). */
const ORIGINS = {
  top_k: ['generationConfig.topK'],
  thinking: ['generationConfig.thinkingConfig'],
  output_config: ['generationConfig.responseJsonSchema', 'generationConfig.responseSchema', 'generationConfig.responseMimeType'],
  tool_choice: ['toolConfig']
} as const

export const geminiToMessages: TranslatorPair = { client: 'gemini', upstream: 'messages', path: '/v1/messages', request, response, error: geminiError, stream, messagesOrigins: ORIGINS }
