import { NoBackground, NoStoredHistory, UnsupportedOnUpstream } from '../kernel/errors.js'
import type { Json, TranslateCtx } from './types.js'
import { isObj } from '../kernel/json.js'
import { flatToolName } from '../kernel/tool-names.js'

// A Responses request read into one neutral shape that both translated pairs (towards Chat
// Completions and towards Messages) build their upstream body from, plus the route's checks.
// Every top-level field is mapped, accepted without effect, refused, or dropped and reported.

export type Part =
  | { type: 'text', text: string }
  /** `field`: where the URL sits in the request, for a 400 naming it. */
  | { type: 'image', url: string, detail?: string, field: string }
  | { type: 'audio', data: unknown, format: unknown }

/** The conversation in order; `call`/`result` are a tool call and its result, matched by id. */
export type Turn =
  | { role: 'system', text: string }
  | { role: 'user', parts: Part[] }
  | { role: 'assistant', text: string }
  | { role: 'call', id: string, name: string, arguments: string }
  | { role: 'result', id: string, output: string | Part[] }

export interface Tool { name: string, description?: string, parameters?: unknown, strict?: boolean }

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
  /** text.format when it asks for JSON: `{type: 'json_object'}` or `{type: 'json_schema', name, schema, strict, description}`. */
  format?: Json
  verbosity?: string
  effort?: string
  user?: string
  safetyIdentifier?: string
  metadata?: Json
  promptCacheKey?: string
  /** Fields the Responses API does not define but the model lists as supported: sent as they are. */
  extra: Json
  dropped: string[]
}

const str = (v: unknown): string | undefined => typeof v === 'string' ? v : undefined
const num = (v: unknown): number | undefined => typeof v === 'number' && Number.isFinite(v) ? v : undefined

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

const callName = (item: Json): string => {
  const name = str(item.name) ?? ''
  return typeof item.namespace === 'string' && item.namespace !== '' ? flatToolName(item.namespace, name) : name
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

/** Read and acted on by the pairs (`stop` is no Responses field, but costs nothing to honour). */
const MAPPED = new Set([
  'model', 'input', 'stream', 'instructions', 'tools', 'tool_choice', 'parallel_tool_calls', 'max_output_tokens', 'temperature',
  'top_p', 'stop', 'text', 'reasoning', 'metadata', 'user', 'safety_identifier', 'prompt_cache_key'
])
// Accepted without effect: nothing is stored (store), client-side bookkeeping no model sees
// (client_metadata), stream obfuscation that is never added (stream_options), and the refused
// stateful fields when they are null or false.
const ACCEPTED = new Set(['store', 'client_metadata', 'stream_options', 'previous_response_id', 'conversation', 'background'])

export function normalise (body: Json, ctx: TranslateCtx): Normalised {
  refuseStateful(body)
  const out: Normalised = { instructions: null, turns: [], tools: [], extra: {}, dropped: [] }
  const drop = (name: string): void => { if (!out.dropped.includes(name)) out.dropped.push(name) }

  for (const key of Object.keys(body)) {
    if (MAPPED.has(key) || ACCEPTED.has(key) || body[key] === undefined || body[key] === null) continue
    if (key === 'prompt') throw new UnsupportedOnUpstream({ feature: 'A stored prompt (prompt)', model: ctx.model })
    if (key === 'truncation' && body.truncation === 'disabled') continue // what the gateway does anyway
    if (key === 'include') {
      // encrypted reasoning can only be asked for: no reasoning item the gateway writes has any
      for (const what of Array.isArray(body.include) ? body.include : []) if (what !== 'reasoning.encrypted_content') drop(`include.${String(what)}`)
      continue
    }
    if (ctx.supported?.has(key) === true) out.extra[key] = body[key]
    else drop(key)
  }

  if (typeof body.instructions === 'string' && body.instructions !== '') out.instructions = body.instructions
  out.turns = readInput(body.input, ctx, drop)
  readTools(body, out, drop)

  if (typeof body.stream === 'boolean') out.stream = body.stream
  const max = num(body.max_output_tokens)
  if (max !== undefined) out.maxOutputTokens = max
  const temperature = num(body.temperature)
  if (temperature !== undefined) out.temperature = temperature
  const topP = num(body.top_p)
  if (topP !== undefined) out.topP = topP
  if (typeof body.stop === 'string' && body.stop !== '') out.stop = [body.stop]
  else if (Array.isArray(body.stop) && body.stop.length > 0) out.stop = body.stop.filter((s): s is string => typeof s === 'string')

  if (isObj(body.text)) {
    const format = body.text.format
    if (isObj(format) && (format.type === 'json_object' || format.type === 'json_schema')) out.format = format
    if (typeof body.text.verbosity === 'string') out.verbosity = body.text.verbosity
  }
  if (isObj(body.reasoning)) {
    for (const [key, value] of Object.entries(body.reasoning)) {
      if (value === null || value === undefined) continue
      if (key === 'effort' && typeof value === 'string') out.effort = value
      // summaries are a way of showing reasoning, not an input of the model
      else if (key !== 'summary' && key !== 'generate_summary') drop(`reasoning.${key}`)
    }
  }
  if (isObj(body.metadata) && Object.keys(body.metadata).length > 0) out.metadata = body.metadata
  const user = str(body.user)
  if (user !== undefined && user !== '') out.user = user
  const safety = str(body.safety_identifier)
  if (safety !== undefined && safety !== '') out.safetyIdentifier = safety
  const cacheKey = str(body.prompt_cache_key)
  if (cacheKey !== undefined && cacheKey !== '') out.promptCacheKey = cacheKey
  return out
}

function readParts (content: unknown, at: string, ctx: TranslateCtx): Part[] {
  if (typeof content === 'string') return content === '' ? [] : [{ type: 'text', text: content }]
  const parts: Part[] = []
  for (const [j, p] of (Array.isArray(content) ? content : []).entries()) {
    if (!isObj(p)) continue
    switch (p.type) {
      case 'input_text':
      case 'output_text':
      case 'text':
        if (typeof p.text === 'string' && p.text !== '') parts.push({ type: 'text', text: p.text })
        break
      case 'refusal':
        if (typeof p.refusal === 'string' && p.refusal !== '') parts.push({ type: 'text', text: p.refusal })
        break
      case 'input_image': {
        const url = typeof p.image_url === 'string' ? p.image_url : str((p.image_url as Json | undefined)?.url)
        if (url === undefined) throw new UnsupportedOnUpstream({ feature: `An image by file_id (${at}.content[${j}])`, model: ctx.model })
        const part: Part = { type: 'image', url, field: `${at}.content[${j}].image_url` }
        if (typeof p.detail === 'string') part.detail = p.detail
        parts.push(part)
        break
      }
      case 'input_audio': {
        const audio = isObj(p.input_audio) ? p.input_audio : p
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
  for (const [i, item] of (Array.isArray(input) ? input : []).entries()) {
    if (!isObj(item)) continue
    const at = `input[${i}]`
    const type = item.type ?? (item.role !== undefined ? 'message' : undefined)
    switch (type) {
      case 'message': {
        const parts = readParts(item.content, at, ctx)
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
        turns.push({ role: 'call', id: str(item.call_id) ?? '', name: callName(item), arguments: str(item.arguments) ?? '' })
        break
      case 'function_call_output': {
        const output = typeof item.output === 'string' ? item.output : readParts(item.output, at, ctx)
        turns.push({ role: 'result', id: str(item.call_id) ?? '', output })
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
  const fn = (t: Json, name: string): Tool => {
    const tool: Tool = { name }
    if (typeof t.description === 'string') tool.description = t.description
    if (t.parameters !== undefined && t.parameters !== null) tool.parameters = t.parameters
    if (typeof t.strict === 'boolean') tool.strict = t.strict
    return tool
  }
  for (const t of Array.isArray(body.tools) ? body.tools : []) {
    if (!isObj(t)) continue
    if (t.type === 'function' && typeof t.name === 'string') {
      out.tools.push(fn(t, t.name))
    } else if (t.type === 'namespace' && typeof t.name === 'string') {
      for (const child of Array.isArray(t.tools) ? t.tools : []) {
        if (!isObj(child)) continue
        if (child.type === 'function' && typeof child.name === 'string') out.tools.push(fn(child, flatToolName(t.name, child.name)))
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
  } else if (isObj(choice) && choice.type === 'function' && typeof choice.name === 'string') {
    out.toolChoice = { mode: 'tool', name: callName(choice) }
  } else if (isObj(choice) && choice.type === 'allowed_tools') {
    const allowed = new Set((Array.isArray(choice.tools) ? choice.tools : []).filter(isObj).map(callName))
    out.tools = out.tools.filter((t) => allowed.has(t.name))
    out.toolChoice = { mode: choice.mode === 'required' ? 'required' : 'auto' }
  } else if (choice !== undefined && choice !== null) {
    drop('tool_choice') // a built-in tool's choice: that tool is not sent
  }
  if (typeof body.parallel_tool_calls === 'boolean') out.parallelToolCalls = body.parallel_tool_calls
}

/**
 * Whether the model takes a parameter whose support varies from model to model (reasoning
 * effort, verbosity, Messages' output_config): any of `names` among its supported parameters,
 * or no list to go by.
 */
export function allows (ctx: TranslateCtx, ...names: string[]): boolean {
  return ctx.supported === undefined || names.some((name) => ctx.supported?.has(name) === true)
}

/** Reasoning effort as Messages' output_config.effort names it (it has no `none` or `minimal`). */
export function messagesEffort (effort: string): string | undefined {
  if (effort === 'none' || effort === 'minimal') return 'low'
  return ['low', 'medium', 'high', 'xhigh', 'max'].includes(effort) ? effort : undefined
}
