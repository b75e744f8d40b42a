import type { IncomingHttpHeaders } from 'node:http'
import type { Endpoint } from '../../plugins/api/index.js'
import { InvalidField } from '../kernel/errors.js'
import type { Json } from '../translation/types.js'

// The tags a call carries, for spend by team and feature: the `{prefix}Tags` header
// (`team-a, feature-x`) and, on the chat and Responses routes, OpenAI's `metadata.tags` (a
// comma-separated string, as OpenAI's metadata values are strings). Anthropic's and Gemini's
// bodies hold none. Tags go on the usage record only, never on a metric.

export const MAX_TAGS = 10
export const TAG_PATTERN = /^[A-Za-z0-9._:-]{1,64}$/

/** No tags: shared by every untagged call. */
export const NO_TAGS: readonly string[] = Object.freeze([])

// A client sends the same tags header call after call: its checked tags are kept by its text
// (frozen, shared by the calls that sent it), at most HEADERS_KEPT texts, forgotten all at once.
const HEADERS_KEPT = 512
/** The longest header text kept: ten tags of 64 characters and their separators. */
const MAX_KEPT_HEADER = 1024
const byHeader = new Map<string, readonly string[]>()

/** The checked tags of a header's text, from the ones kept or read now (a bad tag answers 400, and is not kept). */
function headerTags (raw: string, headerName: string): readonly string[] {
  let tags = byHeader.get(raw)
  if (tags === undefined) {
    const list: string[] = []
    addList(raw, headerName, list)
    tags = list.length === 0 ? NO_TAGS : Object.freeze(list)
    if (byHeader.size >= HEADERS_KEPT) byHeader.clear()
    byHeader.set(raw, tags)
  }
  return tags
}

/** Adds the tags of a comma-separated list to `into` (once each), or throws 400 naming `field` and the bad tag. */
function addList (list: string, field: string, into: string[]): void {
  for (const part of list.split(',')) {
    const tag = part.trim()
    if (tag === '') continue // `a, b,` and an empty header name no tag
    if (!TAG_PATTERN.test(tag)) throw new InvalidField({ field, reason: `tag "${tag.slice(0, 80)}" must be 1 to 64 letters, digits or . _ : -` })
    if (!into.includes(tag)) into.push(tag)
  }
  if (into.length > MAX_TAGS) throw new InvalidField({ field, reason: `at most ${MAX_TAGS} tags per call` })
}

/**
 * The call's tags from `header` (lower-case name, `headerName` as the error names it) and, on chat
 * and the Responses API, the body's `metadata.tags`; NO_TAGS when there are none. A bad tag answers
 * 400. (A pass-through body is the provider's: its metadata is left alone.)
 */
export function callTags (headers: IncomingHttpHeaders, header: string, headerName: string, endpoint: Endpoint, body: Json): readonly string[] {
  const raw = headers[header]
  let meta: unknown
  if ((endpoint === 'chat.completions' || endpoint === 'responses') && body !== null && typeof body === 'object' && !Array.isArray(body)) {
    const m = body.metadata
    if (m !== null && typeof m === 'object' && !Array.isArray(m)) meta = (m as Record<string, unknown>).tags
  }
  if (raw === undefined && meta === undefined) return NO_TAGS
  if (meta === undefined && typeof raw === 'string' && raw.length <= MAX_KEPT_HEADER) return headerTags(raw, headerName)
  const tags: string[] = []
  if (raw !== undefined) addList(Array.isArray(raw) ? raw.join(',') : raw, headerName, tags)
  if (meta !== undefined) {
    if (typeof meta !== 'string') throw new InvalidField({ field: 'metadata.tags', reason: 'must be a comma-separated string' })
    addList(meta, 'metadata.tags', tags)
  }
  return tags.length === 0 ? NO_TAGS : tags
}
