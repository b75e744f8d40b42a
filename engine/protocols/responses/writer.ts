import type {
  FunctionTool, NamespaceTool, Response, ResponseFunctionToolCall, ResponseOutputItem, ResponseOutputMessage, ResponseOutputText,
  ResponseReasoningItem, ResponseStreamEvent, ResponseUsage
} from 'openai/resources/responses/responses'
import type { Reasoning } from 'openai/resources/shared'
import { errorBody } from '../../kernel/errors.js'
import { upstreamMessage } from '../upstream-error.js'
import { clientRequestOf, namespacedTools } from './request.js'
import { frame } from '../sse.js'
import type { Json, SseEvent, TranslateCtx, Usage } from '../types.js'
import { usageFromMessages } from '../messages/usage.js'
import { usageFromOpenAI } from '../chat/usage.js'
import { isObj } from '../../kernel/json.js'

// The Responses answer both translated pairs write: the response object, its output items, and
// its event stream. What the two clients that matter read of that stream:
//
// Codex CLI (codex-rs, the Responses SSE reader):
// - It parses each `data:` as JSON and dispatches on its `type`; unknown types are skipped.
// - `response.created` (with a `response`) starts the turn. Text is shown from
//   `response.output_text.delta`, but the turn's items (assistant messages, function calls,
//   reasoning) are taken from `response.output_item.done` only: a tool runs when its done item
//   arrives, as `{type: "function_call", name, namespace?, call_id, arguments}` (a call to a tool
//   of a `namespace` comes back with the tool's own name and its `namespace`). Reasoning is shown
//   from `response.reasoning_summary_text.delta` and `.reasoning_summary_part.added`, which need
//   `summary_index`.
// - The turn ends only on `response.completed`, whose `response.id` must be a string; its
//   `usage`, optional, must then carry integer `input_tokens`, `output_tokens` and
//   `total_tokens` (`input_tokens_details.cached_tokens` and
//   `output_tokens_details.reasoning_tokens` are read when present).
// - A stream that closes without `response.completed` is an error ("stream closed before
//   response.completed") and is retried; so is `response.incomplete` in recent releases
//   ("Incomplete response returned, reason: …"). `response.failed` is an error from its
//   `response.error.{code, message}`: `context_length_exceeded`, `insufficient_quota` end the
//   turn, `rate_limit_exceeded` is retried after the delay its message names, any other code is
//   retried. An `error` event falls under the skipped unknown types.
//
// openai SDK (`responses.stream().finalResponse()`, lib/responses/ResponseStream):
// - The first event must be `response.created`; later events patch that snapshot by
//   `output_index` / `content_index` (an index with no item or part throws), and
//   `response.completed` / `.incomplete` / `.failed` replace it whole, so their `response`
//   must carry the full output. An event type it does not know throws.
// - finalResponse() answers the last snapshot (whatever its status) and rejects only a stream
//   with no event at all. A data object with a top-level `error` key throws; `error` events
//   (`{type: "error", code, message}`) and `response.failed` do not.
//
// So a failure after the first byte ends the stream with one `response.failed` (after
// `response.created` when nothing was sent yet): both clients read it, neither reads `error`.

export type ResponsesCtx = Pick<TranslateCtx, 'id' | 'created' | 'model' | 'clientRequest'>

type Status = 'in_progress' | 'completed' | 'incomplete' | 'failed'
export type IncompleteReason = 'max_output_tokens' | 'content_filter'
/** A failed response's error: its code is the upstream's own where it gave one, not only the SDK's few. */
export interface Failure { code: string, message: string }

/**
 * A Responses answer as it goes over the wire: the SDK's Response without `output_text` (a
 * property the SDK adds to what it reads), with `store` (sent, not in the SDK's type), `usage`
 * null until the answer ends, and an error code that is any upstream's. A type, not an
 * interface: a pair hands it on as a JSON object, which only an object type is.
 */
export type ResponsesAnswer = Omit<Response, 'output_text' | 'usage' | 'error'> & {
  store?: boolean
  usage?: ResponsesUsage | null
  error: Failure | null
}

/** A response's usage, its input details the cached tokens alone when the gateway writes it (it has no cache writes to count). */
export type ResponsesUsage = Omit<ResponseUsage, 'input_tokens_details'> & { input_tokens_details: Pick<ResponseUsage.InputTokensDetails, 'cached_tokens'> }

type OnWire<E> = E extends { response: Response } ? Omit<E, 'response'> & { response: ResponsesAnswer } : E
/** An event of a Responses stream, whose `response`, where it has one, is the wire's answer. */
export type ResponsesStreamEvent = OnWire<ResponseStreamEvent>

type Unnumber<E> = E extends unknown ? Omit<E, 'sequence_number'> : never
/** An event before it is numbered. */
export type UnnumberedEvent = Unnumber<ResponsesStreamEvent>

const n = (v: unknown): number | undefined => typeof v === 'number' && Number.isFinite(v) && v >= 0 ? Math.floor(v) : undefined

// ---------------------------------------------------------------------------------------------
// Usage

function withReasoning (usage: Usage | null, reasoning: unknown): Usage | null {
  const r = n(reasoning)
  return usage !== null && r !== undefined ? { ...usage, reasoning_tokens: r } : usage
}

export const usageFromChat = (u: unknown): Usage | null =>
  withReasoning(usageFromOpenAI(u), isObj(u) && isObj(u.completion_tokens_details) ? u.completion_tokens_details.reasoning_tokens : undefined)

export const usageFromAnthropic = (u: unknown): Usage | null =>
  withReasoning(usageFromMessages(u), isObj(u) && isObj(u.output_tokens_details) ? u.output_tokens_details.thinking_tokens : undefined)

export function usageFromResponses (u: unknown): Usage | null {
  if (!isObj(u)) return null
  const input = isObj(u.input_tokens_details) ? u.input_tokens_details : {}
  const output = isObj(u.output_tokens_details) ? u.output_tokens_details : {}
  return withReasoning({
    prompt_tokens: n(u.input_tokens) ?? 0,
    cached_input_tokens: n(input.cached_tokens) ?? 0,
    completion_tokens: n(u.output_tokens) ?? 0,
    cache_creation_input_tokens: 0
  }, output.reasoning_tokens)
}

export function toResponsesUsage (u: Usage): ResponsesUsage {
  return {
    input_tokens: u.prompt_tokens,
    input_tokens_details: { cached_tokens: u.cached_input_tokens },
    output_tokens: u.completion_tokens,
    output_tokens_details: { reasoning_tokens: u.reasoning_tokens ?? 0 },
    total_tokens: u.prompt_tokens + u.completion_tokens
  }
}

// ---------------------------------------------------------------------------------------------
// Errors

/** An upstream error status and body → the numeric-code shape, keeping the upstream's own code. */
export function responsesError (status: number, body: unknown): Json {
  const e = (body as { error?: unknown } | null)?.error
  const code = isObj(e) && (typeof e.code === 'string' || typeof e.code === 'number') ? e.code : undefined
  const type = isObj(e) && typeof e.type === 'string' ? e.type : undefined
  return errorBody('openai', { status, message: upstreamMessage(status, body), code, openaiType: type })
}

const FAILURE_CODES: Record<string, string> = {
  rate_limit_error: 'rate_limit_exceeded',
  overloaded_error: 'server_is_overloaded'
}

/** The `response.error.code` of a failure: the codes Codex acts on where one fits, else server_error. */
export function failureCode (e: { status?: number, code?: unknown, type?: unknown }): string {
  if (typeof e.code === 'string' && e.code !== '') return e.code
  if (typeof e.type === 'string' && FAILURE_CODES[e.type] !== undefined) return FAILURE_CODES[e.type] as string
  if (e.status === 429) return 'rate_limit_exceeded'
  return 'server_error'
}

// ---------------------------------------------------------------------------------------------
// The response object and its items

const echoTools = (tools: unknown): Array<FunctionTool | NamespaceTool> =>
  (Array.isArray(tools) ? tools as unknown[] : []).filter((t): t is FunctionTool | NamespaceTool => isObj(t) && (t.type === 'function' || t.type === 'namespace'))

/** The response object: its outcome, with the request's own settings echoed as the API does. */
export function responseObject (ctx: ResponsesCtx, status: Status, output: ResponseOutputItem[], usage: Usage | null, extra: { incomplete?: IncompleteReason | null, error?: Failure | null } = {}): ResponsesAnswer {
  const req = clientRequestOf(ctx)
  const reasoning: Reasoning = isObj(req.reasoning) ? req.reasoning : {}
  const out: ResponsesAnswer = {
    id: `resp_${ctx.id}`,
    object: 'response',
    created_at: ctx.created,
    status,
    background: false,
    error: extra.error ?? null,
    incomplete_details: extra.incomplete === undefined || extra.incomplete === null ? null : { reason: extra.incomplete },
    instructions: typeof req.instructions === 'string' ? req.instructions : null,
    max_output_tokens: typeof req.max_output_tokens === 'number' ? req.max_output_tokens : null,
    metadata: isObj(req.metadata) ? req.metadata : {},
    model: ctx.model,
    output,
    parallel_tool_calls: req.parallel_tool_calls !== false,
    previous_response_id: null,
    reasoning: { effort: reasoning.effort ?? null, summary: reasoning.summary ?? null },
    store: false,
    temperature: typeof req.temperature === 'number' ? req.temperature : null,
    text: isObj(req.text) ? req.text : { format: { type: 'text' } },
    tool_choice: req.tool_choice ?? 'auto',
    tools: echoTools(req.tools),
    top_p: typeof req.top_p === 'number' ? req.top_p : null,
    truncation: 'disabled',
    usage: usage === null ? null : toResponsesUsage(usage)
  }
  if (typeof req.user === 'string') out.user = req.user
  if (typeof req.safety_identifier === 'string') out.safety_identifier = req.safety_identifier
  if (typeof req.prompt_cache_key === 'string') out.prompt_cache_key = req.prompt_cache_key
  return out
}

type Names = Map<string, { namespace: string, name: string }>

type ItemStatus = Exclude<Status, 'failed'>

const textPart = (text: string): ResponseOutputText => ({ type: 'output_text', text, annotations: [] })

function messageItem (id: string, status: ItemStatus, text: string | null): ResponseOutputMessage {
  return { id, type: 'message', status, role: 'assistant', content: text === null ? [] : [textPart(text)] }
}

function callItem (id: string, status: ItemStatus, callId: string, flat: string, args: string, names: Names): ResponseFunctionToolCall {
  const named = names.get(flat)
  const item: ResponseFunctionToolCall = { id, type: 'function_call', status, arguments: args, call_id: callId, name: named?.name ?? flat }
  if (named !== undefined) item.namespace = named.namespace
  return item
}

function reasoningItem (id: string, text: string | null): ResponseReasoningItem {
  return { id, type: 'reasoning', summary: text === null ? [] : [{ type: 'summary_text', text }] }
}

/** One output item of a finished answer, in the upstream-neutral terms both pairs read into. */
export type OutputPart =
  | { kind: 'text', text: string }
  | { kind: 'call', id: string, name: string, arguments: string }
  | { kind: 'reasoning', text: string }

const PREFIX = { text: 'msg', call: 'fc', reasoning: 'rs' } as const
const itemId = (ctx: ResponsesCtx, kind: keyof typeof PREFIX, index: number): string => `${PREFIX[kind]}_${ctx.id}_${index}`

/** The whole (non-streamed) response. */
export function buildResponse (ctx: ResponsesCtx, parts: OutputPart[], incomplete: IncompleteReason | null, usage: Usage | null): ResponsesAnswer {
  const names = namespacedTools(ctx.clientRequest?.tools)
  const output = parts.map((p, i) => {
    const id = itemId(ctx, p.kind, i)
    if (p.kind === 'text') return messageItem(id, 'completed', p.text)
    if (p.kind === 'call') return callItem(id, 'completed', p.id, p.name, p.arguments, names)
    return reasoningItem(id, p.text)
  })
  return responseObject(ctx, incomplete === null ? 'completed' : 'incomplete', output, usage, { incomplete })
}

// ---------------------------------------------------------------------------------------------
// The event stream

interface Slot { kind: keyof typeof PREFIX, id: string, index: number, text: string, callId: string, name: string, open: boolean }

/**
 * Writes the Responses event stream of one answer. The pairs call it as upstream frames arrive
 * (open an item, append to it, close it, finish) and take() the frames it queued; every frame
 * is `event: <type>` with `{type, sequence_number, …}`, numbered from 0.
 */
export class ResponseWriter {
  private readonly ctx: ResponsesCtx
  private readonly names: Names
  private readonly slots: Slot[] = []
  private readonly queue: SseEvent[] = []
  private readonly relayed: string[] = []
  private seq = 0
  private started = false
  private end: 'completed' | 'incomplete' | 'failed' | null = null

  constructor (ctx: ResponsesCtx) {
    this.ctx = ctx
    this.names = namespacedTools(ctx.clientRequest?.tools)
  }

  /** The frames written since the last call. */
  take (): SseEvent[] { return this.queue.splice(0) }

  /** True once response.completed or response.incomplete was written. */
  finished (): boolean { return this.end === 'completed' || this.end === 'incomplete' }

  /** True once any terminal event was written: nothing more is. */
  ended (): boolean { return this.end !== null }

  relayedText (): string { return this.relayed.join('') }

  start (): void {
    if (this.started) return
    this.started = true
    const response = responseObject(this.ctx, 'in_progress', [], null)
    this.emit({ type: 'response.created', response })
    this.emit({ type: 'response.in_progress', response })
  }

  /** Opens an assistant message; answers its output index. */
  message (): number {
    const slot = this.open('text')
    this.emit({ type: 'response.output_item.added', output_index: slot.index, item: messageItem(slot.id, 'in_progress', null) })
    this.emit({ type: 'response.content_part.added', item_id: slot.id, output_index: slot.index, content_index: 0, part: textPart('') })
    return slot.index
  }

  /** Opens a function call; `name` is the flat name the upstream called. */
  call (callId: string, name: string): number {
    const slot = this.open('call')
    slot.callId = callId
    slot.name = name
    this.emit({ type: 'response.output_item.added', output_index: slot.index, item: this.itemOf(slot, 'in_progress') })
    return slot.index
  }

  /** Opens a reasoning item with one summary part. */
  reasoning (): number {
    const slot = this.open('reasoning')
    this.emit({ type: 'response.output_item.added', output_index: slot.index, item: reasoningItem(slot.id, null) })
    this.emit({ type: 'response.reasoning_summary_part.added', item_id: slot.id, output_index: slot.index, summary_index: 0, part: { type: 'summary_text', text: '' } })
    return slot.index
  }

  /** Appends text, arguments or reasoning to the open item at `index`. */
  append (index: number, delta: string): void {
    const slot = this.slots[index]
    if (slot === undefined || !slot.open || delta === '' || this.end !== null) return
    slot.text += delta
    this.relayed.push(delta)
    const at = { item_id: slot.id, output_index: slot.index }
    if (slot.kind === 'text') this.emit({ type: 'response.output_text.delta', ...at, content_index: 0, delta, logprobs: [] })
    else if (slot.kind === 'call') this.emit({ type: 'response.function_call_arguments.delta', ...at, delta })
    else this.emit({ type: 'response.reasoning_summary_text.delta', ...at, summary_index: 0, delta })
  }

  close (index: number): void {
    const slot = this.slots[index]
    if (slot === undefined || !slot.open || this.end !== null) return
    slot.open = false
    const at = { item_id: slot.id, output_index: slot.index }
    if (slot.kind === 'text') {
      this.emit({ type: 'response.output_text.done', ...at, content_index: 0, text: slot.text, logprobs: [] })
      this.emit({ type: 'response.content_part.done', ...at, content_index: 0, part: textPart(slot.text) })
    } else if (slot.kind === 'call') {
      this.emit({ type: 'response.function_call_arguments.done', ...at, name: this.callOf(slot, 'completed').name, arguments: slot.text })
    } else {
      this.emit({ type: 'response.reasoning_summary_text.done', ...at, summary_index: 0, text: slot.text })
      this.emit({ type: 'response.reasoning_summary_part.done', ...at, summary_index: 0, part: { type: 'summary_text', text: slot.text } })
    }
    this.emit({ type: 'response.output_item.done', output_index: slot.index, item: this.itemOf(slot, 'completed') })
  }

  /** Closes what is open and ends with response.completed, or response.incomplete with its reason. */
  finish (incomplete: IncompleteReason | null, usage: Usage | null): void {
    if (this.end !== null) return
    this.start()
    for (const slot of this.slots) this.close(slot.index)
    const response = responseObject(this.ctx, incomplete === null ? 'completed' : 'incomplete', this.output(), usage, { incomplete })
    if (incomplete === null) this.emit({ type: 'response.completed', response })
    else this.emit({ type: 'response.incomplete', response })
    this.end = incomplete === null ? 'completed' : 'incomplete'
  }

  /** Ends with response.failed (after response.created when nothing was written yet). */
  fail (failure: Failure, usage: Usage | null = null): void {
    if (this.end !== null) return
    this.start()
    this.emit({ type: 'response.failed', response: responseObject(this.ctx, 'failed', this.output(), usage, { error: failure }) })
    this.end = 'failed'
  }

  private open (kind: Slot['kind']): Slot {
    this.start()
    const index = this.slots.length
    const slot: Slot = { kind, id: itemId(this.ctx, kind, index), index, text: '', callId: '', name: '', open: true }
    this.slots.push(slot)
    return slot
  }

  private itemOf (slot: Slot, status: ItemStatus): ResponseOutputItem {
    if (slot.kind === 'text') return messageItem(slot.id, status, slot.text)
    if (slot.kind === 'call') return this.callOf(slot, status)
    return reasoningItem(slot.id, slot.text)
  }

  private callOf (slot: Slot, status: ItemStatus): ResponseFunctionToolCall {
    return callItem(slot.id, status, slot.callId, slot.name, slot.text, this.names)
  }

  private output (): ResponseOutputItem[] {
    return this.slots.map((s) => this.itemOf(s, s.open ? 'in_progress' : 'completed'))
  }

  private emit (event: UnnumberedEvent): void {
    if (this.end !== null) return
    // `type` first, then the number, as every frame has them
    this.queue.push(frame(Object.assign({ type: event.type, sequence_number: this.seq++ }, event), event.type))
  }
}
