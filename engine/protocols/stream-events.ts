import { isObj } from './fields.js'
import { SseParser } from './sse.js'
import type { Json, Usage } from './types.js'

// What every codec's stream half shares. Each codec folds a stream of its protocol back into
// the whole answer (`aggregate`: what a client that had asked for no stream would have been
// sent; for keeping a stream's answer in a cache and reading one whole), and replays a whole
// answer as its stream (`replay`: the events a provider would have sent for it, text and tool
// arguments in several deltas, so that the official SDKs' stream helpers rebuild the same answer;
// for a cache hit a client asked to stream). Both are pure: no I/O, no clock.

/** One event of a stream: its SSE event name and its data, as text or parsed. */
export interface StreamEventLike {
  event?: string
  data: string | Json
}

export interface AggregateOptions {
  /**
   * The call's usage, in the gateway's normalised form, for a stream that did not carry it
   * (a chat stream whose client did not ask for the usage chunk).
   */
  usage?: Usage | null
}

export const DONE = Symbol('done')

/** An event's data as a JSON object; DONE for `[DONE]`; null for anything else. */
export function parsed (ev: StreamEventLike): Json | typeof DONE | null {
  if (typeof ev.data !== 'string') return isObj(ev.data) ? ev.data : null
  if (ev.data === '[DONE]') return DONE
  if (ev.data === '' || ev.data[0] !== '{') return null
  try {
    const v = JSON.parse(ev.data) as unknown
    return isObj(v) ? v : null
  } catch {
    return null
  }
}

/** The events of a stream given as its text or as events already. */
export function eventsOf (stream: string | Iterable<StreamEventLike>): Iterable<StreamEventLike> {
  if (typeof stream !== 'string') return stream
  const parser = new SseParser()
  return [...parser.push(stream), ...parser.end()]
}

/** The objects of a list (none when it is no list), typed as the list is. */
export function objects<T extends object> (v: readonly T[] | null | undefined): T[]
export function objects (v: unknown): Json[]
export function objects (v: unknown): object[] {
  return Array.isArray(v) ? v.filter(isObj) : []
}
export const str = (v: unknown): string => typeof v === 'string' ? v : ''

const PIECE = 48

/**
 * How a replay cuts a text into its deltas: `text` (an answer's or a thought's), `arguments` (a
 * tool call's JSON). By default in pieces of about PIECE characters; the demo provider streams
 * word by word.
 */
export type Splitter = (text: string, kind: 'text' | 'arguments') => string[]

export const PIECES: Splitter = (text) => pieces(text)

/** `text` in pieces of about PIECE characters, cut after a space where there is one. */
export function pieces (text: string): string[] {
  const out: string[] = []
  let at = 0
  while (at < text.length) {
    let end = Math.min(text.length, at + PIECE)
    if (end < text.length) {
      const space = text.lastIndexOf(' ', end)
      if (space > at) end = space + 1
    }
    // never split a surrogate pair
    if (end < text.length && /[\uD800-\uDBFF]/.test(text[end - 1] ?? '')) end++
    out.push(text.slice(at, end))
    at = end
  }
  return out
}
