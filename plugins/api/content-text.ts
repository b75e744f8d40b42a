import type { ClientEvent, Endpoint } from './types.js'
import type { Json } from '../../engine/translation/types.js'
import type { CallProtocol } from './types.js'
import { isObj } from '../../engine/kernel/json.js'

// Where the text sits in each client protocol: what a user wrote in a request, what the model
// wrote in a whole answer, and the text deltas of a streamed answer. For plugins that read or
// rewrite text (guardrails, a PII filter, a logger) without knowing each protocol's shapes.
// Only conversational text is visited: not tool schemas, not tool-call arguments, not images.

type Rewrite = (text: string) => string

/** Rewrites a content field: a string, or the `text` of its text parts (any of `types`). */
function mapContent (holder: Json, field: string, fn: Rewrite, types: ReadonlySet<string>): void {
  const content = holder[field]
  if (typeof content === 'string') { holder[field] = fn(content); return }
  if (!Array.isArray(content)) return
  for (const part of content) {
    if (!isObj(part)) continue
    if (types.has(part.type as string) && typeof part.text === 'string') part.text = fn(part.text)
    else if (part.type === 'tool_result') mapContent(part, 'content', fn, types)
  }
}

const CHAT_PARTS = new Set(['text'])
const MESSAGES_BLOCKS = new Set(['text'])
const RESPONSES_PARTS = new Set(['input_text', 'output_text', 'text'])

/** Rewrites, in place, the text parts of Gemini contents (not thoughts), and the text output of function responses. */
function mapGeminiParts (parts: unknown, fn: Rewrite): void {
  for (const part of Array.isArray(parts) ? parts : []) {
    if (!isObj(part) || part.thought === true) continue
    if (typeof part.text === 'string') part.text = fn(part.text)
    else if (isObj(part.functionResponse) && isObj(part.functionResponse.response) && typeof part.functionResponse.response.output === 'string') {
      part.functionResponse.response.output = fn(part.functionResponse.response.output)
    }
  }
}

/** Rewrites, in place, every string inside `value` (an MCP tool call's arguments, a result's structured content). */
function mapStrings (holder: Json | unknown[], key: string | number, fn: Rewrite): void {
  // iterative: a hostile nesting depth cannot overflow the stack
  const stack: Array<[Json | unknown[], string | number]> = [[holder, key]]
  while (stack.length > 0) {
    const [h, k] = stack.pop() as [Json | unknown[], string | number]
    const v = (h as Record<string | number, unknown>)[k]
    if (typeof v === 'string') (h as Record<string | number, unknown>)[k] = fn(v)
    else if (Array.isArray(v)) for (let i = 0; i < v.length; i++) stack.push([v, i])
    else if (isObj(v)) for (const kk of Object.keys(v)) stack.push([v, kk])
  }
}

/**
 * Rewrites, in place, the text of what an MCP server answered a tool call: a result (its text
 * content, the text of an embedded resource, every string of its structured content), a JSON-RPC
 * error `{error: {code, message, data}}` (its message and every string of its data), or a
 * progress notification `{method: 'notifications/progress', params}` (its message).
 */
function mapToolResult (body: Json, fn: Rewrite): void {
  if (isObj(body.error)) {
    if (typeof body.error.message === 'string') body.error.message = fn(body.error.message)
    if (body.error.data !== undefined) mapStrings(body.error, 'data', fn)
    return
  }
  if (body.method === 'notifications/progress') {
    if (isObj(body.params) && typeof body.params.message === 'string') body.params.message = fn(body.params.message)
    return
  }
  for (const c of Array.isArray(body.content) ? body.content : []) {
    if (!isObj(c)) continue
    if (c.type === 'text' && typeof c.text === 'string') c.text = fn(c.text)
    else if (c.type === 'resource' && isObj(c.resource) && typeof c.resource.text === 'string') c.resource.text = fn(c.resource.text)
  }
  if (isObj(body.structuredContent)) mapStrings(body, 'structuredContent', fn)
}

/**
 * Rewrites, in place, every text of a request in the client's protocol; `endpoint` says which of
 * its calls (the texts to embed, an image's prompt; chat when not given). Token ids given as an
 * embedding's input are no text: see hasTokenInput. An MCP tool call: every string of its arguments.
 */
export function mapRequestText (protocol: CallProtocol, body: Json, fn: Rewrite, endpoint?: Endpoint): void {
  if (protocol === 'mcp') {
    if (isObj(body.arguments)) mapStrings(body, 'arguments', fn)
    return
  }
  if (endpoint === 'embeddings') {
    if (protocol === 'gemini') {
      for (const r of Array.isArray(body.requests) ? body.requests : [body]) if (isObj(r) && isObj(r.content)) mapGeminiParts(r.content.parts, fn)
    } else if (typeof body.input === 'string') body.input = fn(body.input)
    else if (Array.isArray(body.input)) body.input = body.input.map((v: unknown) => typeof v === 'string' ? fn(v) : v)
    return
  }
  if (endpoint === 'images.generations') {
    if (typeof body.prompt === 'string') body.prompt = fn(body.prompt)
    return
  }
  if (protocol === 'gemini') {
    if (typeof body.systemInstruction === 'string') body.systemInstruction = fn(body.systemInstruction)
    else if (isObj(body.systemInstruction)) mapGeminiParts(body.systemInstruction.parts, fn)
    for (const c of Array.isArray(body.contents) ? body.contents : []) if (isObj(c)) mapGeminiParts(c.parts, fn)
    return
  }
  if (protocol === 'responses') {
    if (typeof body.instructions === 'string') body.instructions = fn(body.instructions)
    if (typeof body.input === 'string') { body.input = fn(body.input); return }
    if (!Array.isArray(body.input)) return
    for (const item of body.input) {
      if (!isObj(item)) continue
      if (item.type === 'function_call_output') mapContent(item, 'output', fn, RESPONSES_PARTS)
      else if (item.type === undefined || item.type === 'message') mapContent(item, 'content', fn, RESPONSES_PARTS)
    }
    return
  }
  const types = protocol === 'openai' ? CHAT_PARTS : MESSAGES_BLOCKS
  if (protocol === 'messages') mapContent(body, 'system', fn, types)
  if (!Array.isArray(body.messages)) return
  for (const m of body.messages) if (isObj(m)) mapContent(m, 'content', fn, types)
}

/** An embeddings request whose input is token ids (`[1, 2]`, `[[1, 2], [3]]`): text no rule can read. */
export function hasTokenInput (body: Json): boolean {
  return Array.isArray(body.input) && body.input.some((v: unknown) => typeof v === 'number' || Array.isArray(v))
}

/** Rewrites, in place, every text of a whole (non-streamed) answer in the client's protocol (what an MCP server answered a tool call: see mapToolResult). */
export function mapResponseText (protocol: CallProtocol, body: Json, fn: Rewrite): void {
  if (protocol === 'mcp') {
    mapToolResult(body, fn)
  } else if (protocol === 'openai') {
    for (const c of Array.isArray(body.choices) ? body.choices : []) {
      if (isObj(c) && isObj(c.message) && typeof c.message.content === 'string') c.message.content = fn(c.message.content)
    }
    // an image generation's answer: the prompt as the model rewrote it
    for (const d of Array.isArray(body.data) ? body.data : []) {
      if (isObj(d) && typeof d.revised_prompt === 'string') d.revised_prompt = fn(d.revised_prompt)
    }
  } else if (protocol === 'messages') {
    for (const b of Array.isArray(body.content) ? body.content : []) {
      if (isObj(b) && b.type === 'text' && typeof b.text === 'string') b.text = fn(b.text)
    }
  } else if (protocol === 'gemini') {
    for (const c of Array.isArray(body.candidates) ? body.candidates : []) if (isObj(c) && isObj(c.content)) mapGeminiParts(c.content.parts, fn)
  } else {
    mapResponsesOutput(body.output, fn)
  }
}

function mapResponsesOutput (output: unknown, fn: Rewrite): void {
  for (const item of Array.isArray(output) ? output : []) if (isObj(item) && item.type === 'message') mapContent(item, 'content', fn, RESPONSES_PARTS)
}

/** A text delta of a streamed answer and the text block it belongs to. */
export interface TextDelta { block: string, text: string }

/** How the text of one client protocol's stream events is read and rewritten. */
export interface StreamText {
  /** The text deltas an event carries (several, for an OpenAI chunk of several choices). */
  deltas: (ev: ClientEvent) => TextDelta[]
  /** A copy of the event whose deltas are replaced by `texts` (by block); a delta missing there is emptied. */
  withDeltas: (ev: ClientEvent, texts: ReadonlyMap<string, string>) => ClientEvent
  /** A text-only event for `block` carrying `text`, shaped like `like` (an event of that block). */
  textEvent: (like: ClientEvent, block: string, text: string) => ClientEvent
  /** The blocks whose text is complete once this event is seen ('all': every open block). */
  closes: (ev: ClientEvent) => string[] | 'all'
  /** Rewrites, in place, the whole texts some events repeat (a Responses `.done` event, the final response). */
  mapWholeTexts: (ev: ClientEvent, fn: Rewrite) => void
}

const clone = (ev: ClientEvent): ClientEvent => ({ ...ev, data: structuredClone(ev.data) })

const chatStream: StreamText = {
  deltas (ev) {
    const out: TextDelta[] = []
    for (const c of Array.isArray(ev.data.choices) ? ev.data.choices : []) {
      if (isObj(c) && isObj(c.delta) && typeof c.delta.content === 'string' && c.delta.content !== '') out.push({ block: `c${String(c.index ?? 0)}`, text: c.delta.content })
    }
    return out
  },
  withDeltas (ev, texts) {
    const copy = clone(ev)
    for (const c of Array.isArray(copy.data.choices) ? copy.data.choices : []) {
      if (isObj(c) && isObj(c.delta) && typeof c.delta.content === 'string') c.delta.content = texts.get(`c${String(c.index ?? 0)}`) ?? ''
    }
    return copy
  },
  textEvent (like, block, text) {
    const { choices: _choices, usage: _usage, ...rest } = like.data
    return { ...like, data: { ...rest, choices: [{ index: Number(block.slice(1)), delta: { content: text }, finish_reason: null, logprobs: null }] } }
  },
  closes (ev) {
    const out: string[] = []
    for (const c of Array.isArray(ev.data.choices) ? ev.data.choices : []) {
      if (isObj(c) && c.finish_reason !== null && c.finish_reason !== undefined) out.push(`c${String(c.index ?? 0)}`)
    }
    return out
  },
  mapWholeTexts () {}
}

const messagesStream: StreamText = {
  deltas (ev) {
    const d = ev.data
    if (d.type === 'content_block_delta' && isObj(d.delta) && d.delta.type === 'text_delta' && typeof d.delta.text === 'string' && d.delta.text !== '') return [{ block: `b${String(d.index)}`, text: d.delta.text }]
    if (d.type === 'content_block_start' && isObj(d.content_block) && d.content_block.type === 'text' && typeof d.content_block.text === 'string' && d.content_block.text !== '') return [{ block: `b${String(d.index)}`, text: d.content_block.text }]
    return []
  },
  withDeltas (ev, texts) {
    const copy = clone(ev)
    const d = copy.data
    const text = texts.get(`b${String(d.index)}`) ?? ''
    if (d.type === 'content_block_delta' && isObj(d.delta)) d.delta.text = text
    else if (d.type === 'content_block_start' && isObj(d.content_block)) d.content_block.text = text
    return copy
  },
  textEvent (_like, block, text) {
    return { event: 'content_block_delta', data: { type: 'content_block_delta', index: Number(block.slice(1)), delta: { type: 'text_delta', text } } }
  },
  closes (ev) {
    const d = ev.data
    if (d.type === 'content_block_stop') return [`b${String(d.index)}`]
    if (d.type === 'message_delta' || d.type === 'message_stop' || d.type === 'error') return 'all'
    return []
  },
  mapWholeTexts () {}
}

const responsesStream: StreamText = {
  deltas (ev) {
    const d = ev.data
    if (d.type === 'response.output_text.delta' && typeof d.delta === 'string' && d.delta !== '') return [{ block: `${String(d.item_id)}:${String(d.content_index)}`, text: d.delta }]
    return []
  },
  withDeltas (ev, texts) {
    const copy = clone(ev)
    copy.data.delta = texts.get(`${String(copy.data.item_id)}:${String(copy.data.content_index)}`) ?? ''
    return copy
  },
  textEvent (like, _block, text) {
    return { ...like, data: { ...like.data, delta: text } }
  },
  closes (ev) {
    const d = ev.data
    if (d.type === 'response.output_text.done') return [`${String(d.item_id)}:${String(d.content_index)}`]
    if (d.type === 'response.completed' || d.type === 'response.incomplete' || d.type === 'response.failed' || d.type === 'error') return 'all'
    return []
  },
  mapWholeTexts (ev, fn) {
    const d = ev.data
    if (d.type === 'response.output_text.done' && typeof d.text === 'string') d.text = fn(d.text)
    else if (d.type === 'response.content_part.done' && isObj(d.part) && typeof d.part.text === 'string') d.part.text = fn(d.part.text)
    else if (d.type === 'response.output_item.done' && isObj(d.item) && d.item.type === 'message') mapContent(d.item, 'content', fn, RESPONSES_PARTS)
    else if (isObj(d.response)) mapResponsesOutput(d.response.output, fn)
  }
}

/** A candidate's text parts in one Gemini chunk (thoughts aside), joined: a chunk's text is one delta of its candidate. */
function geminiTexts (c: Json): string[] {
  const parts = isObj(c.content) && Array.isArray(c.content.parts) ? c.content.parts : []
  return parts.filter((p): p is Json => isObj(p) && p.thought !== true && typeof p.text === 'string').map((p) => p.text as string)
}

const candidateIndex = (c: Json): string => `c${String(c.index ?? 0)}`

const geminiStream: StreamText = {
  deltas (ev) {
    const out: TextDelta[] = []
    for (const c of Array.isArray(ev.data.candidates) ? ev.data.candidates : []) {
      if (!isObj(c)) continue
      const text = geminiTexts(c).join('')
      if (text !== '') out.push({ block: candidateIndex(c), text })
    }
    return out
  },
  withDeltas (ev, texts) {
    const copy = clone(ev)
    for (const c of Array.isArray(copy.data.candidates) ? copy.data.candidates : []) {
      if (!isObj(c) || !isObj(c.content) || !Array.isArray(c.content.parts)) continue
      // the candidate's new text goes in its first text part; its other text parts are emptied
      let text: string | undefined = texts.get(candidateIndex(c)) ?? ''
      for (const p of c.content.parts) {
        if (!isObj(p) || p.thought === true || typeof p.text !== 'string') continue
        p.text = text ?? ''
        text = undefined
      }
    }
    return copy
  },
  textEvent (like, block, text) {
    const { candidates: _candidates, usageMetadata: _usage, ...rest } = like.data
    return { ...like, data: { ...rest, candidates: [{ content: { role: 'model', parts: [{ text }] }, index: Number(block.slice(1)) }] } }
  },
  closes (ev) {
    const out: string[] = []
    for (const c of Array.isArray(ev.data.candidates) ? ev.data.candidates : []) {
      if (isObj(c) && typeof c.finishReason === 'string' && c.finishReason !== '') out.push(candidateIndex(c))
    }
    return ev.data.error !== undefined ? 'all' : out
  },
  mapWholeTexts () {}
}

// an MCP tool call's result is never streamed
const noStream: StreamText = { deltas: () => [], withDeltas: (ev) => ev, textEvent: (like) => like, closes: () => [], mapWholeTexts () {} }

const STREAMS: Record<CallProtocol, StreamText> = { openai: chatStream, messages: messagesStream, responses: responsesStream, gemini: geminiStream, mcp: noStream }

export function streamText (protocol: CallProtocol): StreamText {
  return STREAMS[protocol]
}
