import { InvalidField, UnsupportedOnUpstream } from '../../kernel/errors.js'
import { column, Dropped, entry, isObj, kindOf, list, optBoolean, optCount, optEntry, optNumber, optText, sortFields, strings, text } from '../fields.js'
import { MESSAGES_FIELDS } from '../messages/table.js'
import type { Json, TranslateCtx } from '../../translation/types.js'
import type { CachePoint, ConverseBody, ConverseContentBlock, ConverseDocumentFormat, ConverseImage, ConverseMessage, JsonDocument, SystemBlock, ToolChoice, ToolEntry, ToolResult, ToolResultContent, ToolSpecBody } from './types.js'

// The Converse writer: a Messages request (the richest shape: tool ids, thinking and its
// signatures, cache breakpoints) → a Converse request. Every client protocol reaches Converse
// through its pair to Messages, then this. A wrong type is a 400 naming the field; what Converse
// cannot carry is dropped under its Messages name (compose.ts reports it by the client's). The
// Messages body is read as untrusted (a Messages client's own body reaches here as it came): each
// field used is checked by the strict readers, and what is written is typed by the SDK's Converse
// shapes.

const FIELDS = column(MESSAGES_FIELDS, 'converse')

const IMAGE_FORMATS = new Map<string, ConverseImage['format']>([['image/png', 'png'], ['image/jpeg', 'jpeg'], ['image/gif', 'gif'], ['image/webp', 'webp']])

// Fields Converse has no place for except additionalModelRequestFields, which it hands to the
// model as they are: sent there when the model takes them (an Anthropic model on Bedrock, or one
// whose supported_parameters list them), else reported.
const MODEL_FIELDS = ['top_k', 'thinking'] as const

/** An Anthropic model on Bedrock takes Anthropic's own fields (`anthropic.claude…`, `us.anthropic.claude…`, an inference profile ARN naming one). */
export const isAnthropicModel = (upstreamModel: string): boolean => /(^|[.:/])anthropic\./.test(upstreamModel)

/** A cache_control breakpoint → the cache point that follows the block it marks. */
function cachePoint (block: Json, field: string): CachePoint | null {
  const cc = optEntry(block.cache_control, `${field}.cache_control`)
  if (cc === undefined) return null
  const ttl = optText(cc.ttl, `${field}.cache_control.ttl`)
  if (ttl === '1h' || ttl === '5m') return { cachePoint: { type: 'default', ttl } }
  if (ttl !== undefined) throw new InvalidField({ field: `${field}.cache_control.ttl`, reason: 'must be 5m or 1h' })
  return { cachePoint: { type: 'default' } }
}

function image (block: Json, at: string, model: string): ConverseImage {
  const source = entry(block.source, `${at}.source`)
  if (source.type === 'url') throw new UnsupportedOnUpstream({ feature: 'An image by URL', model })
  if (source.type !== 'base64') throw new InvalidField({ field: `${at}.source.type`, reason: 'must be base64 or url' })
  const format = IMAGE_FORMATS.get(text(source.media_type, `${at}.source.media_type`))
  if (format === undefined) throw new InvalidField({ field: `${at}.source.media_type`, reason: 'must be image/png, image/jpeg, image/gif or image/webp' })
  return { format, source: { bytes: text(source.data, `${at}.source.data`) } }
}

// Bedrock takes a document name of letters, digits, spaces, hyphens, parentheses and brackets only
const docName = (title: string | undefined, n: number): string => {
  const name = (title ?? '').replace(/[^A-Za-z0-9\s\-()[\]]/g, ' ').replace(/\s+/g, ' ').trim()
  return name === '' ? `document ${n}` : name.slice(0, 200)
}

function document (block: Json, at: string, n: number, model: string): ConverseContentBlock {
  const source = entry(block.source, `${at}.source`)
  const name = docName(optText(block.title, `${at}.title`), n)
  if (source.type === 'base64' && source.media_type === 'application/pdf') return { document: { format: 'pdf', name, source: { bytes: text(source.data, `${at}.source.data`) } } }
  if (source.type === 'text') return { document: { format: 'txt' satisfies ConverseDocumentFormat, name, source: { text: text(source.data, `${at}.source.data`) } } }
  throw new UnsupportedOnUpstream({ feature: `A ${typeof source.type === 'string' ? source.type : 'non-PDF'} document`, model })
}

function toolResult (block: Json, at: string, model: string, dropped: Dropped): ConverseContentBlock {
  const content: ToolResultContent[] = []
  const raw = block.content
  if (typeof raw === 'string') content.push({ text: raw })
  else {
    for (const [j, b] of list(raw, `${at}.content`).entries()) {
      const bat = `${at}.content[${j}]`
      const part = entry(b, bat)
      if (part.type === 'text') content.push({ text: text(part.text, `${bat}.text`) })
      else if (part.type === 'image') content.push({ image: image(part, bat, model) })
      else dropped.add(`messages.tool_result.${kindOf(part.type)}`)
    }
  }
  // Converse wants some content in a result; an empty one says so in words
  if (content.length === 0) content.push({ text: '' })
  const out: ToolResult = { toolUseId: text(block.tool_use_id, `${at}.tool_use_id`), content }
  if (optBoolean(block.is_error, `${at}.is_error`) === true) out.status = 'error'
  return { toolResult: out }
}

function blocks (m: Json, at: string, model: string, dropped: Dropped, docs: { n: number }): ConverseContentBlock[] {
  if (typeof m.content === 'string') return m.content === '' ? [] : [{ text: m.content }]
  const out: ConverseContentBlock[] = []
  for (const [j, raw] of list(m.content, `${at}.content`).entries()) {
    const bat = `${at}.content[${j}]`
    const b = entry(raw, bat)
    switch (b.type) {
      case 'text': {
        // Converse refuses a blank text block
        const t = text(b.text, `${bat}.text`)
        if (t.trim() !== '') out.push({ text: t })
        break
      }
      case 'image':
        out.push({ image: image(b, bat, model) })
        break
      case 'document':
        out.push(document(b, bat, ++docs.n, model))
        break
      case 'tool_use':
        out.push({ toolUse: { toolUseId: text(b.id, `${bat}.id`), name: text(b.name, `${bat}.name`), input: (optEntry(b.input, `${bat}.input`) ?? {}) as JsonDocument } })
        break
      case 'tool_result':
        out.push(toolResult(b, bat, model, dropped))
        break
      case 'thinking': {
        const signature = optText(b.signature, `${bat}.signature`)
        out.push({ reasoningContent: { reasoningText: { text: text(b.thinking, `${bat}.thinking`), ...(signature !== undefined ? { signature } : {}) } } })
        break
      }
      case 'redacted_thinking':
        out.push({ reasoningContent: { redactedContent: text(b.data, `${bat}.data`) } })
        break
      default:
        if (typeof b.type !== 'string') throw new InvalidField({ field: `${bat}.type`, reason: 'must be a string' })
        dropped.add(`messages.${kindOf(b.type)}`) // server tool blocks, search results, containers
        continue
    }
    const point = cachePoint(b, bat)
    if (point !== null) out.push(point)
  }
  return out
}

function system (body: Json, dropped: Dropped): SystemBlock[] | undefined {
  const s = body.system
  if (s === undefined || s === null) return undefined
  if (typeof s === 'string') return s.trim() === '' ? undefined : [{ text: s }]
  const out: SystemBlock[] = []
  for (const [i, raw] of list(s, 'system').entries()) {
    const at = `system[${i}]`
    const b = entry(raw, at)
    if (b.type !== 'text') { dropped.add(`system.${kindOf(b.type)}`); continue }
    const t = text(b.text, `${at}.text`)
    if (t.trim() !== '') out.push({ text: t })
    const point = cachePoint(b, at)
    if (point !== null) out.push(point)
  }
  return out.length > 0 ? out : undefined
}

function tools (body: Json, dropped: Dropped): ToolEntry[] {
  const out: ToolEntry[] = []
  for (const [i, raw] of list(body.tools, 'tools').entries()) {
    const at = `tools[${i}]`
    const t = entry(raw, at)
    // a server tool (web_search_20250305, bash_20250124…) runs at Anthropic's API only
    if (t.input_schema === undefined && t.type !== undefined && t.type !== null && t.type !== 'custom') { dropped.add(`tools.${kindOf(t.type)}`); continue }
    const spec: ToolSpecBody = { name: text(t.name, `${at}.name`), inputSchema: { json: (optEntry(t.input_schema, `${at}.input_schema`) ?? { type: 'object', properties: {} }) as JsonDocument } }
    const description = optText(t.description, `${at}.description`)
    if (description !== undefined && description !== '') spec.description = description
    if (optBoolean(t.strict, `${at}.strict`) === true) dropped.add('tools.strict')
    out.push({ toolSpec: spec })
    const point = cachePoint(t, at)
    if (point !== null) out.push(point)
  }
  return out
}

function toolChoice (body: Json, dropped: Dropped): ToolChoice | 'none' | undefined {
  const choice = optEntry(body.tool_choice, 'tool_choice')
  if (choice === undefined) return undefined
  if (optBoolean(choice.disable_parallel_tool_use, 'tool_choice.disable_parallel_tool_use') === true) dropped.add('tool_choice.disable_parallel_tool_use')
  switch (choice.type) {
    case 'auto': return { auto: {} }
    case 'any': return { any: {} }
    case 'tool': return { tool: { name: text(choice.name, 'tool_choice.name') } }
    case 'none': return 'none'
    default: throw new InvalidField({ field: 'tool_choice.type', reason: 'must be auto, any, tool or none' })
  }
}

/** A Messages request → the Converse request for `ctx.upstreamModel`, and what it could not carry. */
export function converseRequest (body: Json, ctx: Pick<TranslateCtx, 'model' | 'upstreamModel' | 'defaultMaxTokens' | 'supported'>): { body: ConverseBody, dropped: string[] } {
  const dropped = new Dropped()
  const docs = { n: 0 }
  const messages: ConverseMessage[] = []
  for (const [i, raw] of list(body.messages, 'messages').entries()) {
    const at = `messages[${i}]`
    const m = entry(raw, at)
    if (m.role !== 'user' && m.role !== 'assistant') throw new InvalidField({ field: `${at}.role`, reason: 'must be user or assistant' })
    const content = blocks(m, at, ctx.model, dropped, docs)
    if (content.length === 0) continue
    // Converse wants turns to alternate: consecutive turns of one role become one
    const last = messages[messages.length - 1]
    if (last !== undefined && last.role === m.role) last.content.push(...content)
    else messages.push({ role: m.role, content })
  }
  const out: ConverseBody = { messages }
  const sys = system(body, dropped)
  if (sys !== undefined) out.system = sys

  const inference: NonNullable<ConverseBody['inferenceConfig']> = { maxTokens: optCount(body.max_tokens, 'max_tokens') ?? ctx.defaultMaxTokens }
  const temperature = optNumber(body.temperature, 'temperature')
  if (temperature !== undefined) inference.temperature = temperature
  const topP = optNumber(body.top_p, 'top_p')
  if (topP !== undefined) inference.topP = topP
  if (body.stop_sequences !== undefined && body.stop_sequences !== null) {
    const stops = strings(body.stop_sequences, 'stop_sequences')
    if (stops.length > 0) inference.stopSequences = stops
  }
  out.inferenceConfig = inference

  const defined = tools(body, dropped)
  const choice = toolChoice(body, dropped)
  if (defined.length > 0) {
    // Converse has no "none": the tools stay declared (earlier tool turns need them) and the choice is reported
    if (choice === 'none') dropped.add('tool_choice')
    out.toolConfig = choice === undefined || choice === 'none' ? { tools: defined } : { tools: defined, toolChoice: choice }
  } else if (choice !== undefined && choice !== 'none' && !('auto' in choice)) {
    dropped.add('tool_choice') // no tool left to force
  } else if (messages.some((m) => m.content.some((b) => 'toolUse' in b || 'toolResult' in b))) {
    // Converse refuses tool blocks without a toolConfig; a client that stopped declaring its tools gets a placeholder per name
    const names = new Set<string>()
    for (const m of messages) for (const b of m.content) if (b.toolUse?.name !== undefined) names.add(b.toolUse.name)
    if (names.size > 0) out.toolConfig = { tools: [...names].map((name) => ({ toolSpec: { name, inputSchema: { json: { type: 'object' } } } })) }
  }

  const extra: Record<string, JsonDocument> = {}
  const takes = (field: string): boolean => isAnthropicModel(ctx.upstreamModel) || ctx.supported?.has(field) === true
  for (const field of MODEL_FIELDS) {
    const value = body[field]
    if (value === undefined || value === null) continue
    if (field === 'top_k') optCount(value, 'top_k')
    else entry(value, field)
    if (takes(field)) extra[field] = value as JsonDocument
    else dropped.add(field)
  }
  if (Object.keys(extra).length > 0) out.additionalModelRequestFields = extra
  // metadata's user id and other Messages-only fields: by the table
  if (isObj(body)) sortFields(body, FIELDS, dropped)
  return { body: out, dropped: dropped.list() }
}
