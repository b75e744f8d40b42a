import type { ClientEvent, Endpoint } from '../../plugins/api/types.js'
import { isObj } from '../kernel/json.js'
import type { Json } from './types.js'

// Where the text sits in a protocol's bodies: what a user wrote in a request, what the model
// wrote in a whole answer, and the text deltas of a streamed answer. Each codec says it for its
// own protocol (<protocol>/text.ts); plugins that read or rewrite text (guardrails, a PII filter,
// a logger) reach them through plugins/api/content-text.ts without knowing the shapes. Only
// conversational text is visited: not tool schemas, not tool-call arguments, not images.
//
// A body is walked as it is, with no shape assumed: it is rewritten in place and the rest of it
// left as it came, so each field is checked where it is read; a request (or an answer a plugin
// may have changed) is typed loosely for that reason, where a typed view would claim checks
// nobody made.

export type Rewrite = (text: string) => string

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

/** A protocol's texts: in its requests, its whole answers and its stream events. */
export interface CodecText {
  /** Rewrites, in place, every text of a request; `endpoint` says which of the protocol's calls it is (chat when not given). */
  request: (body: Json, fn: Rewrite, endpoint?: Endpoint) => void
  /** Rewrites, in place, every text of a whole (non-streamed) answer. */
  answer: (body: Json, fn: Rewrite) => void
  stream: StreamText
}

/** Rewrites a content field: a string, or the `text` of its text parts (any of `types`); a Messages tool result's own content too. */
export function mapContent (holder: Json, field: string, fn: Rewrite, types: ReadonlySet<string>): void {
  const content = holder[field]
  if (typeof content === 'string') { holder[field] = fn(content); return }
  if (!Array.isArray(content)) return
  for (const part of content) {
    if (!isObj(part)) continue
    if (types.has(part.type as string) && typeof part.text === 'string') part.text = fn(part.text)
    else if (part.type === 'tool_result') mapContent(part, 'content', fn, types)
  }
}

/** A copy of an event whose data may be changed (the original is kept for the events not rewritten). */
export const clone = (ev: ClientEvent): ClientEvent => ({ ...ev, data: structuredClone(ev.data) })
