import type { ChatCompletion, ChatCompletionChunk } from 'openai/resources/chat/completions'
import type { ClientEvent } from '../../../plugins/api/types.js'
import { isObj } from '../fields.js'
import { clone, mapContent, type CodecText, type Rewrite, type StreamText, type TextDelta } from '../text.js'
import type { Json } from '../types.js'

// The texts of Chat Completions (engine/protocols/text.ts): the messages' contents (a string or
// text parts), a choice's message, a chunk's content deltas by choice; and the bodies of the
// OpenAI endpoints beside it, embeddings' input and an image generation's prompt.

const PARTS = new Set(['text'])

/** A chunk as the SDK types it; an event is not trusted for all that, so each field read is checked first. */
const chunkOf = (ev: ClientEvent): ChatCompletionChunk => ev.data as object as ChatCompletionChunk

const block = (c: { index?: number }): string => `c${String(c.index ?? 0)}`

function request (body: Json, fn: Rewrite, endpoint?: string): void {
  if (endpoint === 'embeddings') {
    if (typeof body.input === 'string') body.input = fn(body.input)
    else if (Array.isArray(body.input)) body.input = body.input.map((v: unknown) => typeof v === 'string' ? fn(v) : v)
    return
  }
  if (endpoint === 'images.generations') {
    if (typeof body.prompt === 'string') body.prompt = fn(body.prompt)
    return
  }
  if (!Array.isArray(body.messages)) return
  for (const m of body.messages) if (isObj(m)) mapContent(m, 'content', fn, PARTS)
}

function answer (body: Json, fn: Rewrite): void {
  // a completion as the SDK types it, each field checked where read
  const completion = body as object as Partial<ChatCompletion>
  for (const c of Array.isArray(completion.choices) ? completion.choices : []) {
    if (isObj(c) && isObj(c.message) && typeof c.message.content === 'string') c.message.content = fn(c.message.content)
  }
  // an image generation's answer: the prompt as the model rewrote it
  for (const d of Array.isArray(body.data) ? body.data : []) {
    if (isObj(d) && typeof d.revised_prompt === 'string') d.revised_prompt = fn(d.revised_prompt)
  }
}

const stream: StreamText = {
  deltas (ev) {
    const out: TextDelta[] = []
    const chunk = chunkOf(ev)
    for (const c of Array.isArray(chunk.choices) ? chunk.choices : []) {
      if (isObj(c) && isObj(c.delta) && typeof c.delta.content === 'string' && c.delta.content !== '') out.push({ block: block(c), text: c.delta.content })
    }
    return out
  },
  withDeltas (ev, texts) {
    const copy = clone(ev)
    const chunk = chunkOf(copy)
    for (const c of Array.isArray(chunk.choices) ? chunk.choices : []) {
      if (isObj(c) && isObj(c.delta) && typeof c.delta.content === 'string') c.delta.content = texts.get(block(c)) ?? ''
    }
    return copy
  },
  textEvent (like, at, text) {
    const { choices: _choices, usage: _usage, ...rest } = like.data
    const choice: ChatCompletionChunk.Choice = { index: Number(at.slice(1)), delta: { content: text }, finish_reason: null, logprobs: null }
    return { ...like, data: { ...rest, choices: [choice] } }
  },
  closes (ev) {
    const out: string[] = []
    const chunk = chunkOf(ev)
    for (const c of Array.isArray(chunk.choices) ? chunk.choices : []) {
      if (isObj(c) && c.finish_reason !== null && c.finish_reason !== undefined) out.push(block(c))
    }
    return out
  },
  mapWholeTexts () {}
}

export const chatText: CodecText = { request, answer, stream }
