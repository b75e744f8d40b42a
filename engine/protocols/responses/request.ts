import type { FunctionTool, ResponseCreateParamsBase, ResponseFormatTextJSONSchemaConfig, ResponseInputAudio, ResponseInputImage } from 'openai/resources/responses/responses'
import type { Metadata } from 'openai/resources/shared'
import type { OutputConfig } from '@anthropic-ai/sdk/resources/messages'
import { InvalidField, NoBackground, NoStoredHistory, UnsupportedOnUpstream } from '../../kernel/errors.js'
import { entry, list, optBoolean, optCount, optEntry, optNumber, optText, read, readFields, strings, text, type Fate } from '../fields.js'
import { RESPONSES_CONFIG_FIELDS, RESPONSES_FIELDS } from './table.js'
import type { Json, TranslateCtx } from '../types.js'
import { isObj } from '../../kernel/json.js'
import { flatToolName } from '../../kernel/tool-names.js'

// A Responses request read into one neutral shape that both translated pairs (towards Chat
// Completions and towards Messages) build their upstream body from, plus the route's checks.
// Every field's fate toward each upstream protocol is in table.ts: the reader reads
// what a column keeps, and each pair reports what its column drops (`dropToward`).

/** A Responses request: the SDK's fields, and two the API does not define that the gateway takes. */
export interface ResponsesRequest extends ResponseCreateParamsBase {
  /** Chat Completions' stop sequences, which cost nothing to honour. */
  stop?: string | string[] | null
  /** The Codex CLI's bookkeeping: taken, never sent. */
  client_metadata?: unknown
}

/**
 * The client's request of a Responses call, which its answer echoes (ctx.clientRequest). The
 * route has checked its structural fields (engine/gateway/validation.ts); each field the answer
 * echoes is checked again where it is read, one of a wrong type echoed as the API's default.
 */
export function clientRequestOf (ctx: Pick<TranslateCtx, 'clientRequest'>): ResponsesRequest {
  return (ctx.clientRequest ?? {}) as ResponsesRequest
}

/** A part of a message or of a tool's output; an image's detail and an audio's fields are passed as the client wrote them. */
export type Part =
  | { type: 'text', text: string }
  /** `field`: where the URL sits in the request, for a 400 naming it. */
  | { type: 'image', url: string, detail?: ResponseInputImage['detail'], field: string }
  | { type: 'audio', data: ResponseInputAudio.InputAudio['data'], format: ResponseInputAudio.InputAudio['format'] }

/** The conversation in order; `call`/`result` are a tool call and its result, matched by id. */
export type Turn =
  | { role: 'system', text: string }
  | { role: 'user', parts: Part[] }
  | { role: 'assistant', text: string }
  | { role: 'call', id: string, name: string, arguments: string }
  | { role: 'result', id: string, output: string | Part[] }

export interface Tool { name: string, description?: string, parameters?: NonNullable<FunctionTool['parameters']>, strict?: boolean }

/**
 * text.format when it asks for JSON. A json_schema's fields are as the pairs read them: one of a
 * wrong type is left out, as absent, and its schema is passed as the client wrote it.
 */
export type Format =
  | { type: 'json_object' }
  | { type: 'json_schema', name?: string, schema?: ResponseFormatTextJSONSchemaConfig['schema'] | null, strict?: boolean, description?: string }

export type ToolChoice = { mode: 'auto' | 'none' | 'required' } | { mode: 'tool', name: string }

export interface Normalised {
  instructions: string | null
  turns: Turn[]
  tools: Tool[]
  toolChoice?: ToolChoice
  parallelToolCalls?: boolean
  maxOutputTokens?: number
  stream?: boolean
  temperature?: number
  topP?: number
  stop?: string[]
  format?: Format
  verbosity?: string
  effort?: string
  /** reasoning.summary, or generate_summary (its older name), when a string. */
  summary?: string
  user?: string
  safetyIdentifier?: string
  /** Passed along as the client sent it: its values are the upstream's to check. */
  metadata?: Metadata
  promptCacheKey?: string
  /** Fields the Responses API does not define but the model lists as supported: sent as they are. */
  extra: Record<string, unknown>
  dropped: string[]
}

const str = (v: unknown): string | undefined => typeof v === 'string' ? v : undefined

// ---------------------------------------------------------------------------------------------
// Tool names: a namespaced tool is called upstream by one flat name (kernel/tool-names.ts), and
// named back on the way out

/** Flat name → the namespace and name the client declared, for every namespaced function tool. */
export function namespacedTools (tools: unknown): Map<string, { namespace: string, name: string }> {
  const map = new Map<string, { namespace: string, name: string }>()
  for (const t of Array.isArray(tools) ? tools : []) {
    if (!isObj(t) || t.type !== 'namespace' || typeof t.name !== 'string') continue
    for (const child of Array.isArray(t.tools) ? t.tools : []) {
      if (isObj(child) && child.type === 'function' && typeof child.name === 'string') {
        map.set(flatToolName(t.name, child.name), { namespace: t.name, name: child.name })
      }
    }
  }
  return map
}

/** The flat name a call (or a tool choice) names its tool by; `at`: where it sits, for a 400 naming a wrong type. */
const callName = (item: Json, at?: string): string => {
  const name = (at === undefined ? str(item.name) : optText(item.name, `${at}.name`)) ?? ''
  const namespace = at === undefined ? str(item.namespace) : optText(item.namespace, `${at}.namespace`)
  return namespace !== undefined && namespace !== '' ? flatToolName(namespace, name) : name
}

// ---------------------------------------------------------------------------------------------
// The route's checks

/** Refuses what only a service that stores responses could answer. */
/** The fields of a stateful Responses call, which this stateless gateway refuses (400) rather than ignores. */
export function refuseStateful (body: Json): void {
  for (const field of ['previous_response_id', 'conversation']) {
    if (body[field] !== undefined && body[field] !== null) throw new NoStoredHistory({ field })
  }
  if (body.background === true) throw new NoBackground()
}

// ---------------------------------------------------------------------------------------------
// Reading the request

type Upstream = 'openai' | 'messages' | 'gemini'
type Row = Readonly<Record<Upstream, Fate>>
// what some column keeps, read below; a field every column drops is reported (or sent as the model lists it)
const READ = readFields(RESPONSES_FIELDS)
const READ_CONFIG = readFields(RESPONSES_CONFIG_FIELDS)
const under = (prefix: string): ReadonlySet<string> => new Set([...READ_CONFIG].filter((k) => k.startsWith(prefix)).map((k) => k.slice(prefix.length)))
const READ_TEXT = under('text.')
const READ_REASONING = under('reasoning.')

export function normalise (body: Json, ctx: TranslateCtx): Normalised {
  refuseStateful(body)
  const out: Normalised = { instructions: null, turns: [], tools: [], extra: {}, dropped: [] }
  const drop = (name: string): void => { if (!out.dropped.includes(name)) out.dropped.push(name) }

  for (const key of Object.keys(body)) {
    if (body[key] === undefined || body[key] === null) continue
    if (key === 'prompt') throw new UnsupportedOnUpstream({ feature: 'A stored prompt (prompt)', model: ctx.model })
    if (key === 'include') {
      for (const [i, what] of list(body.include, 'include').entries()) if (text(what, `include[${i}]`) !== 'reasoning.encrypted_content') drop(`include.${what}`)
      continue
    }
    // what a column keeps is read below; the refused ones were refused above when they ask for anything
    if (READ.has(key)) continue
    if (key === 'truncation' && body.truncation === 'disabled') continue // what the gateway does anyway
    if (ctx.supported?.has(key) === true) out.extra[key] = body[key]
    else drop(key)
  }

  const instructions = optText(body.instructions, 'instructions')
  if (instructions !== undefined && instructions !== '') out.instructions = instructions
  out.turns = readInput(body.input, ctx, drop)
  readTools(body, out, drop)

  const stream = optBoolean(body.stream, 'stream')
  if (stream !== undefined) out.stream = stream
  const max = optCount(body.max_output_tokens, 'max_output_tokens')
  if (max !== undefined) out.maxOutputTokens = max
  const temperature = optNumber(body.temperature, 'temperature')
  if (temperature !== undefined) out.temperature = temperature
  const topP = optNumber(body.top_p, 'top_p')
  if (topP !== undefined) out.topP = topP
  const stop = strings(body.stop, 'stop').filter((s) => s !== '')
  if (stop.length > 0) out.stop = stop

  const textConfig = optEntry(body.text, 'text')
  if (textConfig !== undefined) {
    for (const key of Object.keys(textConfig)) if (!READ_TEXT.has(key) && textConfig[key] !== null) drop(`text.${key}`)
    const format = optEntry(textConfig.format, 'text.format')
    if (format?.type === 'json_object') out.format = { type: 'json_object' }
    else if (format?.type === 'json_schema') {
      out.format = {
        type: 'json_schema',
        name: str(format.name),
        // passed along as the client wrote it: the upstream checks it
        schema: format.schema as ResponseFormatTextJSONSchemaConfig['schema'] | null | undefined,
        strict: typeof format.strict === 'boolean' ? format.strict : undefined,
        description: str(format.description)
      }
    }
    const verbosity = optText(textConfig.verbosity, 'text.verbosity')
    if (verbosity !== undefined) out.verbosity = verbosity
  }
  const reasoning = optEntry(body.reasoning, 'reasoning')
  if (reasoning !== undefined) {
    for (const [key, value] of Object.entries(reasoning)) {
      if (value === null || value === undefined) continue
      if (key === 'effort') out.effort = text(value, 'reasoning.effort')
      // summaries are read by the pairs that can show them
      else if (!READ_REASONING.has(key)) drop(`reasoning.${key}`)
    }
    const summary = reasoning.summary ?? reasoning.generate_summary
    if (typeof summary === 'string') out.summary = summary
  }
  const metadata = optEntry(body.metadata, 'metadata')
  // passed along as the client wrote it: the upstream checks its values
  if (metadata !== undefined && Object.keys(metadata).length > 0) out.metadata = metadata as Metadata
  const user = optText(body.user, 'user')
  if (user !== undefined && user !== '') out.user = user
  const safety = optText(body.safety_identifier, 'safety_identifier')
  if (safety !== undefined && safety !== '') out.safetyIdentifier = safety
  const cacheKey = optText(body.prompt_cache_key, 'prompt_cache_key')
  if (cacheKey !== undefined && cacheKey !== '') out.promptCacheKey = cacheKey
  return out
}

// A field some column drops and the reader reads, as the request sets it (undefined: not set)
const SETTINGS: Readonly<Record<string, (r: Normalised) => unknown>> = {
  metadata: (r) => r.metadata,
  prompt_cache_key: (r) => r.promptCacheKey,
  user: (r) => r.user,
  safety_identifier: (r) => r.safetyIdentifier,
  'text.verbosity': (r) => r.verbosity
}

type Column = Array<[string, (r: Normalised) => unknown]>

function droppedColumn (table: Readonly<Record<string, Row>>, upstream: Upstream): Column {
  const out: Column = []
  for (const [name, row] of Object.entries(table)) {
    if (row[upstream] !== 'dropped' || !read(row)) continue
    const setting = SETTINGS[name]
    if (setting === undefined) throw new Error(`responses field ${name}: dropped toward ${upstream} but read with no setting to report it by`)
    out.push([name, setting])
  }
  return out
}

const UPSTREAMS: Upstream[] = ['openai', 'messages', 'gemini']
const DROPPED = {
  fields: Object.fromEntries(UPSTREAMS.map((u) => [u, droppedColumn(RESPONSES_FIELDS, u)])) as Record<Upstream, Column>,
  config: Object.fromEntries(UPSTREAMS.map((u) => [u, droppedColumn(RESPONSES_CONFIG_FIELDS, u)])) as Record<Upstream, Column>
}

/**
 * Reports in `r.dropped` the fields the request sets that `upstream`'s column drops, in the
 * table's order: those of the top level (`fields`), or of text and reasoning (`config`), or both.
 */
export function dropToward (r: Normalised, upstream: Upstream, which: 'fields' | 'config' | 'both' = 'both'): void {
  if (which !== 'config') for (const [name, setting] of DROPPED.fields[upstream]) if (setting(r) !== undefined && !r.dropped.includes(name)) r.dropped.push(name)
  if (which !== 'fields') for (const [name, setting] of DROPPED.config[upstream]) if (setting(r) !== undefined && !r.dropped.includes(name)) r.dropped.push(name)
}

function readParts (content: unknown, at: string, ctx: TranslateCtx): Part[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }]
  const parts: Part[] = []
  for (const [j, raw] of list(content, at).entries()) {
    const here = `${at}[${j}]`
    const p = entry(raw, here)
    switch (p.type) {
      case 'input_text':
      case 'output_text':
      case 'text': {
        const t = text(p.text, `${here}.text`)
        if (t !== '') parts.push({ type: 'text', text: t })
        break
      }
      case 'refusal': {
        const t = text(p.refusal, `${here}.refusal`)
        if (t !== '') parts.push({ type: 'text', text: t })
        break
      }
      case 'input_image': {
        const url = typeof p.image_url === 'string' ? p.image_url : optText(optEntry(p.image_url, `${here}.image_url`)?.url, `${here}.image_url.url`)
        if (url === undefined) throw new UnsupportedOnUpstream({ feature: `An image by file_id (${here})`, model: ctx.model })
        const part: Part = { type: 'image', url, field: `${here}.image_url` }
        const detail = optText(p.detail, `${here}.detail`)
        // passed along as the client wrote it: the upstream checks it
        if (detail !== undefined) part.detail = detail as ResponseInputImage['detail']
        parts.push(part)
        break
      }
      case 'input_audio': {
        // passed along as the client wrote it, unread: the upstream checks it
        const audio = (isObj(p.input_audio) ? p.input_audio : p) as unknown as ResponseInputAudio.InputAudio
        parts.push({ type: 'audio', data: audio.data, format: audio.format })
        break
      }
      case 'input_file':
        throw new UnsupportedOnUpstream({ feature: 'File input', model: ctx.model })
    }
  }
  return parts
}

const textOfParts = (parts: Part[]): string => parts.flatMap((p) => p.type === 'text' ? [p.text] : []).join('\n')

function readInput (input: unknown, ctx: TranslateCtx, drop: (name: string) => void): Turn[] {
  if (typeof input === 'string') return input === '' ? [] : [{ role: 'user', parts: [{ type: 'text', text: input }] }]
  const turns: Turn[] = []
  for (const [i, raw] of list(input, 'input').entries()) {
    const at = `input[${i}]`
    const item = entry(raw, at)
    const type = item.type ?? (item.role !== undefined ? 'message' : undefined)
    switch (type) {
      case 'message': {
        const parts = readParts(item.content, `${at}.content`, ctx)
        if (item.role === 'system' || item.role === 'developer') {
          const text = textOfParts(parts)
          if (text !== '') turns.push({ role: 'system', text })
        } else if (item.role === 'assistant') {
          const text = parts.flatMap((p) => p.type === 'text' ? [p.text] : []).join('')
          if (text !== '') turns.push({ role: 'assistant', text })
        } else if (parts.length > 0) {
          turns.push({ role: 'user', parts })
        }
        break
      }
      case 'function_call':
        turns.push({ role: 'call', id: optText(item.call_id, `${at}.call_id`) ?? '', name: callName(item, at), arguments: optText(item.arguments, `${at}.arguments`) ?? '' })
        break
      case 'function_call_output': {
        const output = typeof item.output === 'string' ? item.output : readParts(item.output, `${at}.output`, ctx)
        turns.push({ role: 'result', id: optText(item.call_id, `${at}.call_id`) ?? '', output })
        break
      }
      case 'reasoning':
        break // the model's earlier reasoning: history the upstream cannot take back, not a request field
      case 'item_reference':
        throw new NoStoredHistory({ field: `${at} (item_reference)` })
      default:
        drop(`input.${String(type)}`)
    }
  }
  return turns
}

function readTools (body: Json, out: Normalised, drop: (name: string) => void): void {
  const fn = (t: Json, name: string, at: string): Tool => {
    const tool: Tool = { name }
    const description = optText(t.description, `${at}.description`)
    if (description !== undefined) tool.description = description
    const parameters = optEntry(t.parameters, `${at}.parameters`)
    if (parameters !== undefined) tool.parameters = parameters
    const strict = optBoolean(t.strict, `${at}.strict`)
    if (strict !== undefined) tool.strict = strict
    return tool
  }
  for (const [i, raw] of list(body.tools, 'tools').entries()) {
    const at = `tools[${i}]`
    const t = entry(raw, at)
    if (t.type === 'function') {
      out.tools.push(fn(t, text(t.name, `${at}.name`), at))
    } else if (t.type === 'namespace') {
      const namespace = text(t.name, `${at}.name`)
      for (const [j, rawChild] of list(t.tools, `${at}.tools`).entries()) {
        const childAt = `${at}.tools[${j}]`
        const child = entry(rawChild, childAt)
        if (child.type === 'function') out.tools.push(fn(child, flatToolName(namespace, text(child.name, `${childAt}.name`)), childAt))
        else drop(`tools.${String(child.type)}`)
      }
    } else {
      // built-in tools (web_search, file_search, code_interpreter, mcp…) run on OpenAI's side only
      drop(`tools.${String(t.type)}`)
    }
  }

  const choice = body.tool_choice
  if (choice === 'auto' || choice === 'none' || choice === 'required') {
    out.toolChoice = { mode: choice }
  } else if (typeof choice === 'string') {
    throw new InvalidField({ field: 'tool_choice', reason: 'must be auto, none, required or an object' })
  } else if (choice !== undefined && choice !== null) {
    const c = entry(choice, 'tool_choice')
    if (c.type === 'function') {
      text(c.name, 'tool_choice.name')
      out.toolChoice = { mode: 'tool', name: callName(c, 'tool_choice') }
    } else if (c.type === 'allowed_tools') {
      const allowed = new Set(list(c.tools, 'tool_choice.tools').map((t, i) => callName(entry(t, `tool_choice.tools[${i}]`), `tool_choice.tools[${i}]`)))
      out.tools = out.tools.filter((t) => allowed.has(t.name))
      out.toolChoice = { mode: c.mode === 'required' ? 'required' : 'auto' }
    } else {
      drop('tool_choice') // a built-in tool's choice: that tool is not sent
    }
  }
  const parallel = optBoolean(body.parallel_tool_calls, 'parallel_tool_calls')
  if (parallel !== undefined) out.parallelToolCalls = parallel
}

/**
 * Whether the model takes a parameter whose support varies from model to model (reasoning
 * effort, verbosity, Messages' output_config): any of `names` among its supported parameters,
 * or no list to go by.
 */
export function allows (ctx: TranslateCtx, ...names: string[]): boolean {
  return ctx.supported === undefined || names.some((name) => ctx.supported?.has(name) === true)
}

type MessagesEffort = NonNullable<OutputConfig['effort']>
const MESSAGES_EFFORTS: ReadonlySet<string> = new Set<MessagesEffort>(['low', 'medium', 'high', 'xhigh', 'max'])
const isMessagesEffort = (effort: string): effort is MessagesEffort => MESSAGES_EFFORTS.has(effort)

/** Reasoning effort as Messages' output_config.effort names it (it has no `none` or `minimal`). */
export function messagesEffort (effort: string): MessagesEffort | undefined {
  if (effort === 'none' || effort === 'minimal') return 'low'
  return isMessagesEffort(effort) ? effort : undefined
}
