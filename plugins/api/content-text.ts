import type { Json } from '../../engine/translation/types.js'
import type { CallProtocol, Endpoint } from './types.js'
import { isObj } from '../../engine/kernel/json.js'
import { CODECS } from '../../engine/protocols/index.js'
import type { Rewrite, StreamText } from '../../engine/protocols/text.js'

export type { StreamText, TextDelta } from '../../engine/protocols/text.js'

// The conversational text of requests, answers and stream events in any client protocol, for
// plugins that read or rewrite text (guardrails, a PII filter, a logger) without knowing each
// protocol's shapes: each protocol's codec knows where its texts sit (engine/protocols/<p>/text.ts);
// an MCP tool call's arguments and results are read here. Only conversational text is visited:
// not tool schemas, not tool-call arguments, not images.

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
  // embeddings and image prompts come in OpenAI's bodies, whatever the call's protocol, save Gemini's own embeddings
  const owner = (endpoint === 'embeddings' && protocol !== 'gemini') || endpoint === 'images.generations' ? 'openai' : protocol
  CODECS[owner].text.request(body, fn, endpoint)
}

/** An embeddings request whose input is token ids (`[1, 2]`, `[[1, 2], [3]]`): text no rule can read. */
export function hasTokenInput (body: Json): boolean {
  return Array.isArray(body.input) && body.input.some((v: unknown) => typeof v === 'number' || Array.isArray(v))
}

/** Rewrites, in place, every text of a whole (non-streamed) answer in the client's protocol (what an MCP server answered a tool call: see mapToolResult). */
export function mapResponseText (protocol: CallProtocol, body: Json, fn: Rewrite): void {
  if (protocol === 'mcp') mapToolResult(body, fn)
  else CODECS[protocol].text.answer(body, fn)
}

// an MCP tool call's result is never streamed
const noStream: StreamText = { deltas: () => [], withDeltas: (ev) => ev, textEvent: (like) => like, closes: () => [], mapWholeTexts () {} }

export function streamText (protocol: CallProtocol): StreamText {
  return protocol === 'mcp' ? noStream : CODECS[protocol].text.stream
}
