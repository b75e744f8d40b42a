import type { Message, RawMessageStreamEvent } from '@anthropic-ai/sdk/resources/messages'
import { isObj } from '../fields.js'
import { clone, mapContent, type CodecText, type Rewrite, type StreamText } from '../text.js'
import type { Json } from '../types.js'

// The texts of Messages (engine/protocols/text.ts): the system prompt and the messages' contents
// (a string or text blocks, a tool result's own content), an answer's text blocks, a stream's
// text deltas by block index (and a text block started with text already in it).

const BLOCKS = new Set(['text'])

const block = (d: Json): string => `b${String(d.index)}`

function request (body: Json, fn: Rewrite): void {
  mapContent(body, 'system', fn, BLOCKS)
  if (!Array.isArray(body.messages)) return
  for (const m of body.messages) if (isObj(m)) mapContent(m, 'content', fn, BLOCKS)
}

function answer (body: Json, fn: Rewrite): void {
  // a message as the SDK types it, each field checked where read
  const message = body as object as Partial<Message>
  for (const b of Array.isArray(message.content) ? message.content : []) {
    if (isObj(b) && b.type === 'text' && typeof b.text === 'string') b.text = fn(b.text)
  }
}

const stream: StreamText = {
  deltas (ev) {
    // an event is read loosely: besides the SDK's events, a stream may carry an `error` one
    const d = ev.data
    if (d.type === 'content_block_delta' && isObj(d.delta) && d.delta.type === 'text_delta' && typeof d.delta.text === 'string' && d.delta.text !== '') return [{ block: block(d), text: d.delta.text }]
    if (d.type === 'content_block_start' && isObj(d.content_block) && d.content_block.type === 'text' && typeof d.content_block.text === 'string' && d.content_block.text !== '') return [{ block: block(d), text: d.content_block.text }]
    return []
  },
  withDeltas (ev, texts) {
    const copy = clone(ev)
    const d = copy.data
    const text = texts.get(block(d)) ?? ''
    if (d.type === 'content_block_delta' && isObj(d.delta)) d.delta.text = text
    else if (d.type === 'content_block_start' && isObj(d.content_block)) d.content_block.text = text
    return copy
  },
  textEvent (_like, at, text) {
    return { event: 'content_block_delta', data: { type: 'content_block_delta', index: Number(at.slice(1)), delta: { type: 'text_delta', text } } satisfies RawMessageStreamEvent }
  },
  closes (ev) {
    const d = ev.data
    if (d.type === 'content_block_stop') return [block(d)]
    if (d.type === 'message_delta' || d.type === 'message_stop' || d.type === 'error') return 'all'
    return []
  },
  mapWholeTexts () {}
}

export const messagesText: CodecText = { request, answer, stream }
