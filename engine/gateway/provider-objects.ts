import type { ProviderConfig } from '../../config/schema.js'
import type { Json } from '../translation/types.js'
import type { Classified } from './passthrough-target.js'
import { isObj } from '../kernel/json.js'

// What a pass-through call reaches of the objects a provider keeps for the operator's account
// (files, uploads, batches, vector stores, fine-tuning jobs, cached contents...): the gateway
// records each object created through pass-through as its creator organization's, and lets a
// call reach only its own. Each endpoint is one of:
//
//   none            reaches no object: model calls, counts, moderation, audio, images, model lists
//   create          makes an object: its answer is read for the new id, recorded as the caller's
//   list            lists objects: the answer is filtered to the caller's own
//   member          one object, by the id in the path: the caller's own, or 404 with nothing sent;
//                   an answer naming objects the provider made for it (a batch's output file) is
//                   read, and those recorded as the caller's too
//   unattributable  any other endpoint (assistants, threads, stored responses and completions,
//                   containers, admin APIs...): refused, as the gateway cannot tell whose the
//                   objects it reaches are
//
// A request body may name objects too (a batch's input file, a message's file, a cached content):
// each must be the caller's. Pure functions of the path and bodies; the store is the route's.

type Protocol = ProviderConfig['protocol']

/** An object at a provider: the kind it is filed under, and its id as the provider names it. */
export interface ObjectRef { kind: string, id: string }

/** How a list answer holds its objects and how its pages follow each other. */
interface Listing {
  /** The fields that may hold the array (the first present is used). */
  items: readonly string[]
  /** The field of an item that holds its id. */
  id: 'id' | 'name'
  /** `after`/`after_id`: the next page starts after an id (the gateway reads on to fill a page); `token`: an opaque page token. */
  cursor: 'after' | 'after_id' | 'token'
}

/** A path through an answer (`*`: each element of an array) to ids of objects of `kind`; `uri`: a Gemini file's URI, whose name is the id. */
type Yield = [readonly string[], string, 'uri'?]

export interface Collection {
  kind: string
  /** The collection's path below the API version, lower case (`fine_tuning/jobs`). */
  path: readonly string[]
  /** Gemini names an object with its collection (`files/abc`): this is that prefix. */
  named?: string
  /** POST on the collection makes an object; false when another endpoint does (a Gemini model method). */
  createdHere: boolean
  list?: Listing
  /** The sub-paths below an object's id (`''`: the object itself; `*`: any) and the methods they take. */
  members: Readonly<Record<string, readonly string[]>>
  /** Sub-paths whose answers are read for the objects they yield (`''`: the object itself). */
  reads?: readonly string[]
  yields?: readonly Yield[]
}

export type ObjectAccess =
  | { kind: 'none' }
  | { kind: 'create', collection: Collection }
  | { kind: 'list', collection: Collection }
  | { kind: 'member', collection: Collection, id: string, sub: string, reads: boolean, removes: boolean }
  | { kind: 'unattributable' }

const ANY = ['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE']
const OPENAI_LIST: Listing = { items: ['data'], id: 'id', cursor: 'after' }
const ANTHROPIC_LIST: Listing = { items: ['data'], id: 'id', cursor: 'after_id' }

const COLLECTIONS: Record<Protocol, readonly Collection[]> = {
  openai: [
    { kind: 'files', path: ['files'], createdHere: true, list: OPENAI_LIST, members: { '': ['GET', 'HEAD', 'DELETE'], content: ['GET', 'HEAD'] } },
    { kind: 'uploads', path: ['uploads'], createdHere: true, members: { parts: ['POST'], complete: ['POST'], cancel: ['POST'] }, reads: ['complete'], yields: [[['file', 'id'], 'files']] },
    { kind: 'batches', path: ['batches'], createdHere: true, list: OPENAI_LIST, members: { '': ['GET', 'HEAD'], cancel: ['POST'] }, reads: ['', 'cancel'], yields: [[['output_file_id'], 'files'], [['error_file_id'], 'files']] },
    { kind: 'vector_stores', path: ['vector_stores'], createdHere: true, list: OPENAI_LIST, members: { '': ['GET', 'HEAD', 'POST', 'DELETE'], '*': ANY } },
    { kind: 'fine_tuning_jobs', path: ['fine_tuning', 'jobs'], createdHere: true, list: OPENAI_LIST, members: { '': ['GET', 'HEAD'], events: ['GET', 'HEAD'], checkpoints: ['GET', 'HEAD'], cancel: ['POST'], pause: ['POST'], resume: ['POST'] }, reads: [''], yields: [[['result_files', '*'], 'files']] }
  ],
  messages: [
    { kind: 'files', path: ['files'], createdHere: true, list: ANTHROPIC_LIST, members: { '': ['GET', 'HEAD', 'DELETE'], content: ['GET', 'HEAD'] } },
    { kind: 'message_batches', path: ['messages', 'batches'], createdHere: true, list: ANTHROPIC_LIST, members: { '': ['GET', 'HEAD', 'DELETE'], results: ['GET', 'HEAD'], cancel: ['POST'] } }
  ],
  gemini: [
    { kind: 'files', path: ['files'], named: 'files', createdHere: true, list: { items: ['files'], id: 'name', cursor: 'token' }, members: { '': ['GET', 'HEAD', 'DELETE'], download: ['GET', 'HEAD'] } },
    {
      kind: 'batches',
      path: ['batches'],
      named: 'batches',
      createdHere: false,
      list: { items: ['batches', 'operations'], id: 'name', cursor: 'token' },
      members: { '': ['GET', 'HEAD', 'DELETE'], cancel: ['POST'] },
      reads: [''],
      yields: [[['response', 'responsesFile'], 'files'], [['output', 'responsesFile'], 'files'], [['metadata', 'output', 'responsesFile'], 'files']]
    },
    { kind: 'cached_contents', path: ['cachedcontents'], named: 'cachedContents', createdHere: true, list: { items: ['cachedContents'], id: 'name', cursor: 'token' }, members: { '': ['GET', 'HEAD', 'PATCH', 'DELETE'] } },
    // a long-running model method's operation (a video being generated), polled at models/{m}/operations/{op}
    { kind: 'operations', path: [], createdHere: false, members: { '': ['GET', 'HEAD'] }, reads: [''], yields: [[['response', 'generateVideoResponse', 'generatedSamples', '*', 'video', 'uri'], 'files', 'uri']] }
  ],
  // Bedrock's runtime API keeps no objects of an account's (its batch jobs are another service's)
  converse: []
}

const byKind = (protocol: Protocol, kind: string): Collection => COLLECTIONS[protocol].find((c) => c.kind === kind) as Collection

/** Endpoints that reach no provider-side object, by method and path below the API version (`{}`: any one segment). */
const STATELESS: Record<Protocol, ReadonlyArray<[string, string]>> = {
  openai: [
    ['POST', 'chat/completions'], ['POST', 'completions'], ['POST', 'responses'], ['POST', 'responses/input_tokens'], ['POST', 'embeddings'],
    ['POST', 'moderations'], ['POST', 'audio/speech'], ['POST', 'audio/transcriptions'], ['POST', 'audio/translations'],
    ['POST', 'images/generations'], ['POST', 'images/edits'], ['POST', 'images/variations'], ['GET', 'models'], ['GET', 'models/{}']
  ],
  messages: [['POST', 'messages'], ['POST', 'messages/count_tokens'], ['POST', 'complete'], ['GET', 'models'], ['GET', 'models/{}']],
  gemini: [['GET', 'models'], ['GET', 'models/{}']],
  converse: [['POST', 'model/{}/converse'], ['POST', 'model/{}/converse-stream'], ['POST', 'model/{}/invoke'], ['POST', 'model/{}/invoke-with-response-stream'], ['POST', 'model/{}/count-tokens']]
}
/** A Gemini model's methods that reach no object. */
const GEMINI_STATELESS = new Set(['generatecontent', 'streamgeneratecontent', 'counttokens', 'embedcontent', 'batchembedcontents', 'predict'])
/** A Gemini model's methods that make an object, and its kind. */
const GEMINI_CREATES: Record<string, string> = { batchgeneratecontent: 'batches', predictlongrunning: 'operations' }

const matches = (pattern: string, segments: readonly string[]): boolean => {
  const parts = pattern.split('/')
  return parts.length === segments.length && parts.every((p, i) => p === '{}' || p === segments[i])
}

const startsWith = (segments: readonly string[], head: readonly string[]): boolean => head.every((s, i) => segments[i] === s)

/** What a call reaches of the provider's objects (see the file's head). */
export function objectAccess (protocol: Protocol, method: string, c: Classified): ObjectAccess {
  const m = method === 'HEAD' ? 'GET' : method
  // a preflight reaches nothing
  if (m === 'OPTIONS') return { kind: 'none' }
  const { segments, raw } = c
  if (protocol === 'gemini') {
    if (c.pathModel !== null && c.method !== null && m === 'POST' && segments.length === 2 && (segments[0] === 'models' || segments[0] === 'tunedmodels')) {
      const lower = c.method.toLowerCase()
      if (GEMINI_STATELESS.has(lower)) return { kind: 'none' }
      const kind = GEMINI_CREATES[lower]
      return kind === undefined ? { kind: 'unattributable' } : { kind: 'create', collection: byKind(protocol, kind) }
    }
    // models/{m}/operations/{op}
    if (segments.length === 4 && segments[0] === 'models' && segments[2] === 'operations' && m === 'GET') {
      return { kind: 'member', collection: byKind(protocol, 'operations'), id: raw.join('/'), sub: '', reads: true, removes: false }
    }
  }
  if (STATELESS[protocol].some(([verb, pattern]) => verb === m && matches(pattern, segments))) return { kind: 'none' }
  for (const collection of COLLECTIONS[protocol]) {
    const n = collection.path.length
    if (n === 0 || !startsWith(segments, collection.path)) continue
    if (segments.length === n) {
      if (m === 'POST' && collection.createdHere) return { kind: 'create', collection }
      if (m === 'GET' && collection.list !== undefined) return { kind: 'list', collection }
      return { kind: 'unattributable' }
    }
    let idPart = raw[n] as string
    let sub = raw.slice(n + 1).join('/').toLowerCase()
    if (collection.named !== undefined) {
      // Gemini: `files/abc:download`, `batches/123:cancel`; the object's name holds its collection
      if (sub !== '') return { kind: 'unattributable' }
      const colon = idPart.indexOf(':')
      if (colon !== -1) {
        sub = idPart.slice(colon + 1).toLowerCase()
        idPart = idPart.slice(0, colon)
      }
    }
    if (idPart === '') return { kind: 'unattributable' }
    const allowed = collection.members[sub] ?? (sub !== '' ? collection.members['*'] : undefined)
    if (allowed === undefined || !allowed.includes(m)) return { kind: 'unattributable' }
    const id = collection.named !== undefined ? `${collection.named}/${idPart}` : idPart
    return { kind: 'member', collection, id, sub, reads: collection.reads?.includes(sub) === true, removes: m === 'DELETE' && sub === '' }
  }
  return { kind: 'unattributable' }
}

/** The longest id the gateway records: a provider's are far shorter. */
const MAX_ID = 256

const isId = (v: unknown): v is string => typeof v === 'string' && v !== '' && v.length <= MAX_ID

/** The strings at `path` in `value` (`*`: each element of an array). */
function stringsAt (value: unknown, path: readonly string[], out: string[]): void {
  if (path.length === 0) {
    if (isId(value)) out.push(value)
    return
  }
  const [head, ...rest] = path
  if (head === '*') {
    if (Array.isArray(value)) for (const v of value) stringsAt(v, rest, out)
  } else if (isObj(value)) {
    stringsAt(value[head as string], rest, out)
  }
}

/** A Gemini file's name in one of its URIs (`https://…/v1beta/files/abc:download?alt=media`), or the name itself. */
export function geminiFileName (uri: string): string | undefined {
  const m = /^(?:https?:\/\/[^/?#]+(?:\/[^/?#]+)*?)?\/?(files\/[A-Za-z0-9_-]+)(?::[A-Za-z]+)?(?:[?#].*)?$/.exec(uri)
  return m?.[1]
}

/** The object a create answer made: its `id`, or a Gemini name (an upload's is under `file`). */
export function createdBy (collection: Collection, answer: Json): ObjectRef[] {
  const id = collection.named !== undefined ? (isObj(answer.file) ? answer.file.name : answer.name) : answer.id
  return isId(id) ? [{ kind: collection.kind, id }, ...yieldedBy(collection, answer)] : []
}

/** The objects an answer about one object of `collection` names that the provider made for it (a batch's output file). */
export function yieldedBy (collection: Collection, answer: Json): ObjectRef[] {
  const out: ObjectRef[] = []
  for (const [path, kind, form] of collection.yields ?? []) {
    const found: string[] = []
    stringsAt(answer, path, found)
    for (const v of found) {
      const id = form === 'uri' ? geminiFileName(v) : v
      if (id !== undefined) out.push({ kind, id })
    }
  }
  return out
}

/** The array a list answer holds its objects in, and its field name; undefined when the answer is no list. */
export function listItems (collection: Collection, answer: Json): { field: string, items: Json[] } | undefined {
  for (const field of collection.list?.items ?? []) {
    const v = answer[field]
    if (Array.isArray(v)) return { field, items: v.filter(isObj) }
  }
  return undefined
}

/** An item's id in a list. */
export const itemId = (collection: Collection, item: Json): string | undefined => {
  const v = item[collection.list?.id ?? 'id']
  return isId(v) ? v : undefined
}

/** Body fields that name provider-side objects, by protocol: the field, and the kind each id is of. */
const REFERENCES: Record<Protocol, ReadonlyMap<string, string>> = {
  openai: new Map([
    ['file_id', 'files'], ['file_ids', 'files'], ['input_file_id', 'files'], ['training_file', 'files'], ['validation_file', 'files'],
    ['vector_store_id', 'vector_stores'], ['vector_store_ids', 'vector_stores'], ['previous_response_id', 'responses'], ['conversation', 'conversations'],
    ['container', 'containers'], ['container_id', 'containers'], ['prompt', 'prompts'], ['audio', 'audio']
  ]),
  messages: new Map([['file_id', 'files'], ['container', 'containers'], ['skill_id', 'skills']]),
  // Google's JSON takes a field by its proto name too
  gemini: new Map([
    ['cachedContent', 'cached_contents'], ['cached_content', 'cached_contents'], ['fileUri', 'files'], ['file_uri', 'files'], ['fileName', 'files'], ['file_name', 'files'],
    ['fileSearchStoreNames', 'file_search_stores'], ['file_search_store_names', 'file_search_stores']
  ]),
  converse: new Map()
}

/**
 * Fields whose object value names an object by its `id` (Anthropic's container, OpenAI's
 * conversation, a stored prompt, an earlier answer's audio); `prompt` and `audio` as strings are
 * no references (a completion's prompt text, audio data).
 */
const HELD_BY_ID = new Set(['container', 'conversation', 'prompt', 'audio'])
const ID_ONLY_IN_OBJECT = new Set(['prompt', 'audio'])

/** Is `field` a field that names provider-side objects in `protocol`'s bodies? */
export const namesObjects = (protocol: Protocol, field: string): boolean => REFERENCES[protocol].has(field)

/**
 * Calls `found` with each id that a field of `value` names an object by, at any depth but inside
 * `metadata` (the client's own labels, which the provider never reads as references): the kind of
 * object, the id (a non-empty string) and the field's name. Iterative, and without a copy of any
 * object's entries: it walks every body pass-through reads.
 */
export function walkReferences (protocol: Protocol, value: unknown, found: (kind: string, id: string, field: string) => void): void {
  const fields = REFERENCES[protocol]
  const add = (kind: string, v: unknown, field: string): void => {
    if (typeof v === 'string' && v !== '') found(kind, v, field)
  }
  const stack: unknown[] = [value]
  while (stack.length > 0) {
    const node = stack.pop()
    if (node === null || typeof node !== 'object') continue
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const v: unknown = node[i]
        if (v !== null && typeof v === 'object') stack.push(v)
      }
      continue
    }
    const o = node as Json
    for (const field in o) {
      if (field === 'metadata') continue
      const v = o[field]
      const kind = fields.get(field)
      // Anthropic's own skills (pptx, xlsx...) are everyone's
      if (kind !== undefined && !(field === 'skill_id' && o.type === 'anthropic')) {
        if (Array.isArray(v)) for (const item of v) add(kind, item, field)
        else if (isObj(v)) { if (HELD_BY_ID.has(field)) add(kind, v.id, field) } else if (!ID_ONLY_IN_OBJECT.has(field)) add(kind, v, field)
      }
      if (v !== null && typeof v === 'object') stack.push(v)
    }
  }
}

/**
 * The provider-side objects a request body names (walkReferences). A Gemini `fileUri` names a
 * file when it is one of the Files API's URIs on one of `hosts` (the provider's); other URIs are
 * media the provider fetches.
 */
export function referencesIn (protocol: Protocol, body: Json, hosts: readonly string[]): ObjectRef[] {
  const out: ObjectRef[] = []
  walkReferences(protocol, body, (kind, id, field) => {
    if (field !== 'fileUri' && field !== 'file_uri') out.push({ kind, id })
    else {
      const file = fileOnHost(id, hosts)
      if (file !== undefined) out.push({ kind, id: file })
    }
  })
  return out
}

/**
 * A Files API file's name (`files/abc`) in a URI, when the URI is plainly one as written: no
 * escape and no dot segment (the path as parsed is the path as sent, so the provider reads the
 * same name); undefined otherwise.
 */
export function plainGeminiFile (raw: string, u: URL): string | undefined {
  const rest = raw.slice(raw.indexOf('//') + 2)
  const slash = rest.indexOf('/')
  if (slash === -1 || rest.slice(slash) !== `${u.pathname}${u.search}${u.hash}`) return undefined
  return /^(?:\/[A-Za-z0-9._-]+)*\/(files\/[A-Za-z0-9_-]+)(?::download)?$/.exec(u.pathname)?.[1]
}

/**
 * The Gemini Files API file a URI on one of `hosts`, or a bare `files/…` name, names. One that is
 * not plainly a file's name (an escape, a dot segment, another path) names an object the gateway
 * cannot tell: it is returned as it is, an id no organization made.
 */
function fileOnHost (uri: string, hosts: readonly string[]): string | undefined {
  if (uri.startsWith('files/')) return geminiFileName(uri) ?? uri
  let u: URL
  try {
    u = new URL(uri)
  } catch {
    return undefined
  }
  return hosts.includes(u.host.toLowerCase()) ? plainGeminiFile(uri, u) ?? uri : undefined
}
