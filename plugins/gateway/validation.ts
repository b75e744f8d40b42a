import type { CatalogModel } from './catalog.js'
import { InvalidBody, InvalidField, InvalidImageUrl, InvalidVideoUrl, MissingField, ModalityNotSupported } from './errors.js'
import { firstHostResolvingToBlockedAddress, mediaUrlProblem, type DataUris, type Lookup, type NamedHost } from './media-url.js'
import { checkResponsesBody } from '../translation/responses-request.js'
import type { Json, Protocol } from '../translation/types.js'

// Checks made before anything is forwarded (docs/api.md), as
// pure functions of the client's body and the catalog model.

/** The fields the gateway reads itself; they are never dropped as unsupported. */
const STRUCTURAL: Record<Protocol, ReadonlySet<string>> = {
  openai: new Set(['model', 'messages', 'stream', 'stream_options']),
  messages: new Set(['model', 'messages', 'max_tokens', 'system', 'stream']),
  // and what the service itself decides (nothing is stored, no history is kept)
  responses: new Set(['model', 'input', 'instructions', 'stream', 'store', 'include', 'client_metadata', 'stream_options', 'truncation', 'previous_response_id', 'conversation', 'background']),
  // the settings inside generationConfig and toolConfig are mapped or dropped (and reported) by the pairs
  gemini: new Set(['model', 'contents', 'systemInstruction', 'generationConfig', 'toolConfig', 'safetySettings', 'cachedContent'])
}

/**
 * How deep a request body may nest objects and arrays. Real requests (tool schemas included) stay
 * far below it; a body nested thousands deep would overflow the stack of every recursive walk
 * after parsing (JSON.stringify, token estimates), so it is refused where it is parsed.
 */
export const MAX_JSON_DEPTH = 64

/** Does a parsed JSON value nest objects and arrays more than `max` levels deep? Not recursive. */
export function nestedDeeperThan (value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 1]]
  for (let top = stack.pop(); top !== undefined; top = stack.pop()) {
    const [node, depth] = top
    if (node === null || typeof node !== 'object') continue
    if (depth > max) return true
    for (const child of Array.isArray(node) ? node : Object.values(node)) {
      if (child !== null && typeof child === 'object') stack.push([child, depth + 1])
    }
  }
  return false
}

/**
 * The names a Responses field has among a model's supported_parameters, which name the Chat
 * Completions fields: `max_output_tokens` is supported when `max_tokens` is, and so on.
 */
const RESPONSES_ALIASES: Record<string, readonly string[]> = {
  max_output_tokens: ['max_output_tokens', 'max_tokens', 'max_completion_tokens'],
  text: ['text', 'response_format'],
  reasoning: ['reasoning', 'reasoning_effort'],
  safety_identifier: ['safety_identifier', 'user']
}
const CHAT_TO_RESPONSES = new Map<string, string>([['max_tokens', 'max_output_tokens'], ['max_completion_tokens', 'max_output_tokens']])

const supports = (model: CatalogModel, protocol: Protocol, key: string): boolean =>
  protocol === 'responses' && Object.hasOwn(RESPONSES_ALIASES, key)
    ? (RESPONSES_ALIASES[key] as readonly string[]).some((name) => model.supportedParameters.has(name))
    : model.supportedParameters.has(key)

export function checkBody (body: unknown, protocol: Protocol): Json {
  if (protocol === 'responses') return checkResponsesBody(body)
  if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new InvalidBody()
  const b = body as Json
  if (b.model === undefined || b.model === null || b.model === '') throw new MissingField({ field: 'model' })
  if (typeof b.model !== 'string') throw new InvalidField({ field: 'model', reason: 'must be a string' })
  if (b.messages === undefined || b.messages === null) throw new MissingField({ field: 'messages' })
  if (!Array.isArray(b.messages)) throw new InvalidField({ field: 'messages', reason: 'must be an array' })
  if (b.messages.length === 0) throw new InvalidField({ field: 'messages', reason: 'must not be empty' })
  for (const [i, m] of b.messages.entries()) {
    if (m === null || typeof m !== 'object' || typeof (m as Json).role !== 'string') {
      throw new InvalidField({ field: `messages[${i}]`, reason: 'must be an object with a role' })
    }
  }
  if (b.stream !== undefined && typeof b.stream !== 'boolean') throw new InvalidField({ field: 'stream', reason: 'must be a boolean' })
  if (protocol === 'messages') {
    if (b.max_tokens === undefined || b.max_tokens === null) throw new MissingField({ field: 'max_tokens' })
    if (!Number.isInteger(b.max_tokens) || (b.max_tokens as number) < 1) throw new InvalidField({ field: 'max_tokens', reason: 'must be a positive integer' })
  } else if (b.max_tokens !== undefined && b.max_tokens !== null && (!Number.isInteger(b.max_tokens) || (b.max_tokens as number) < 1)) {
    throw new InvalidField({ field: 'max_tokens', reason: 'must be a positive integer' })
  }
  return b
}

export interface ParamResult { body: Json, dropped: string[] }

/**
 * default_parameters fill omitted fields; fields outside supported_parameters are dropped and
 * reported. A max_tokens above the model's declared output cap is lowered to it.
 */
export function applyParameters (body: Json, model: CatalogModel, protocol: Protocol): ParamResult {
  const structural = STRUCTURAL[protocol]
  const out: Json = {}
  const dropped: string[] = []
  for (const key in body) {
    if (structural.has(key) || supports(model, protocol, key)) out[key] = body[key]
    else dropped.push(key)
  }
  for (const [name, value] of Object.entries(model.config.default_parameters)) {
    const key = protocol === 'responses' ? CHAT_TO_RESPONSES.get(name) ?? name : name
    if (out[key] === undefined && !dropped.includes(key)) out[key] = value
  }
  const cap = model.config.max_output_tokens
  if (cap !== undefined) {
    for (const key of ['max_tokens', 'max_completion_tokens', 'max_output_tokens']) {
      if (typeof out[key] === 'number' && (out[key] as number) > cap) out[key] = cap
    }
  }
  return { body: out, dropped }
}

/**
 * Refuses media the model cannot take and every media URL that plugins/gateway/media-url.ts does not
 * allow: chat image_url (string or {url}) and video_url, Messages image and document url sources
 * (in content, tool_result content and system). Returns the URLs' host names, for the optional
 * DNS check (checkMediaHostsByDns).
 */
export function checkMedia (body: Json, model: CatalogModel, protocol: Protocol): NamedHost[] {
  const named: NamedHost[] = []
  const need = (modality: string): void => {
    if (!model.inputModalities.has(modality)) throw new ModalityNotSupported({ model: model.id, modality })
  }
  const image = (url: unknown, dataUris: DataUris, field: string): void => {
    if (mediaUrlProblem(url, dataUris, (host) => named.push({ host, kind: 'image', field })) !== undefined) throw new InvalidImageUrl({ field })
  }
  const visitParts = (content: unknown, path: string): void => {
    if (!Array.isArray(content)) return
    for (const [i, part] of content.entries()) {
      if (part === null || typeof part !== 'object') continue
      const p = part as Json
      const at = `${path}[${i}]`
      switch (p.type) {
        case 'image_url':
        case 'input_image': {
          // chat: image_url (a string or {url}); Responses: image_url (a string), or file_id
          const v = p.image_url
          if (v !== undefined || p.type === 'image_url') image(typeof v === 'string' ? v : (v as Json | null | undefined)?.url, 'image', `${at}.image_url`)
          need('image')
          break
        }
        case 'image':
        case 'document': {
          const source = p.source as Json | null | undefined
          if (source?.type === 'url') image(source.url, 'none', `${at}.source.url`)
          if (p.type === 'image') need('image')
          break
        }
        case 'video_url': {
          const url = (p.video_url as Json | undefined)?.url
          if (mediaUrlProblem(url, 'none', (host) => named.push({ host, kind: 'video', field: `${at}.video_url.url` })) !== undefined) throw new InvalidVideoUrl()
          need('video')
          break
        }
        case 'video':
          need('video')
          break
        case 'input_audio':
          need('audio')
          break
        case 'tool_result':
          visitParts(p.content, `${at}.content`)
          break
      }
    }
  }
  if (protocol === 'responses') {
    for (const [i, item] of (Array.isArray(body.input) ? body.input as Json[] : []).entries()) {
      if (item === null || typeof item !== 'object') continue
      if (item.type === 'function_call_output') visitParts(item.output, `input[${i}].output`)
      else visitParts(item.content, `input[${i}].content`)
    }
    return named
  }
  for (const [i, m] of (body.messages as Json[]).entries()) visitParts(m.content, `messages[${i}].content`)
  if (protocol === 'messages') visitParts(body.system, 'system')
  return named
}

/**
 * With `server.media_urls.resolve_hosts` on, after checkMedia: refuses a call whose media URL
 * names a host that does not resolve or resolves to an address that is not public.
 */
export async function checkMediaHostsByDns (hosts: NamedHost[], lookup?: Lookup): Promise<void> {
  if (hosts.length === 0) return
  const bad = await firstHostResolvingToBlockedAddress(hosts, lookup)
  if (bad === undefined) return
  throw bad.kind === 'video' ? new InvalidVideoUrl() : new InvalidImageUrl({ field: bad.field })
}
