import type { Response } from 'openai/resources/responses/responses'
import { isObj } from '../fields.js'
import { clone, mapContent, type CodecText, type Rewrite, type StreamText } from '../text.js'
import type { Json } from '../types.js'

// The texts of Responses (engine/protocols/text.ts): the instructions and the input (a string,
// or messages' contents and function call outputs), an answer's message items, a stream's text
// deltas by item and content part, and the whole texts its `.done` events and its final
// response repeat.

const PARTS = new Set(['input_text', 'output_text', 'text'])

/** A text delta's block: its item and its content part. */
const block = (d: Json): string => `${String(d.item_id)}:${String(d.content_index)}`

function request (body: Json, fn: Rewrite): void {
  if (typeof body.instructions === 'string') body.instructions = fn(body.instructions)
  if (typeof body.input === 'string') { body.input = fn(body.input); return }
  if (!Array.isArray(body.input)) return
  for (const item of body.input) {
    if (!isObj(item)) continue
    if (item.type === 'function_call_output') mapContent(item, 'output', fn, PARTS)
    else if (item.type === undefined || item.type === 'message') mapContent(item, 'content', fn, PARTS)
  }
}

/** Rewrites, in place, the text of a response's message items. */
function mapOutput (output: unknown, fn: Rewrite): void {
  for (const item of Array.isArray(output) ? output : []) if (isObj(item) && item.type === 'message') mapContent(item, 'content', fn, PARTS)
}

// a response as the SDK types it, each field checked where read
const answer = (body: Json, fn: Rewrite): void => { mapOutput((body as object as Partial<Response>).output, fn) }

// events are read loosely: each field is checked where read, and a stream may carry an `error` event the SDK's union has apart
const stream: StreamText = {
  deltas (ev) {
    const d = ev.data
    if (d.type === 'response.output_text.delta' && typeof d.delta === 'string' && d.delta !== '') return [{ block: block(d), text: d.delta }]
    return []
  },
  withDeltas (ev, texts) {
    const copy = clone(ev)
    copy.data.delta = texts.get(block(copy.data)) ?? ''
    return copy
  },
  textEvent (like, _block, text) {
    return { ...like, data: { ...like.data, delta: text } }
  },
  closes (ev) {
    const d = ev.data
    if (d.type === 'response.output_text.done') return [block(d)]
    if (d.type === 'response.completed' || d.type === 'response.incomplete' || d.type === 'response.failed' || d.type === 'error') return 'all'
    return []
  },
  mapWholeTexts (ev, fn) {
    const d = ev.data
    if (d.type === 'response.output_text.done' && typeof d.text === 'string') d.text = fn(d.text)
    else if (d.type === 'response.content_part.done' && isObj(d.part) && typeof d.part.text === 'string') d.part.text = fn(d.part.text)
    else if (d.type === 'response.output_item.done' && isObj(d.item) && d.item.type === 'message') mapContent(d.item, 'content', fn, PARTS)
    else if (isObj(d.response)) mapOutput(d.response.output, fn)
  }
}

export const responsesText: CodecText = { request, answer, stream }
