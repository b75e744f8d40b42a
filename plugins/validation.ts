import { isIP } from 'node:net'
import type { CatalogModel } from './catalog.js'
import { InvalidBody, InvalidField, InvalidVideoUrl, MissingField, ModalityNotSupported } from './errors.js'
import { checkResponsesBody } from './translation/responses-request.js'
import type { Json, Protocol } from './translation/types.js'

// Checks made before anything is forwarded (spec "Endpoints" rules 1–4, PRODUCT.md §6.5), as
// pure functions of the client's body and the catalog model.

/** The fields the gateway reads itself; they are never dropped as unsupported. */
const STRUCTURAL: Record<Protocol, ReadonlySet<string>> = {
  openai: new Set(['model', 'messages', 'stream', 'stream_options']),
  messages: new Set(['model', 'messages', 'max_tokens', 'system', 'stream']),
  // and what the service itself decides (nothing is stored, no history is kept)
  responses: new Set(['model', 'input', 'instructions', 'stream', 'store', 'include', 'client_metadata', 'stream_options', 'truncation', 'previous_response_id', 'conversation', 'background'])
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
 * reported (PRODUCT.md §6.5). A max_tokens above the model's declared output cap is lowered to it.
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

/** Refuses media the model cannot take and every video_url that is not a public http(s) URL. */
export function checkMedia (body: Json, model: CatalogModel, protocol: Protocol): void {
  const need = (modality: string): void => {
    if (!model.inputModalities.has(modality)) throw new ModalityNotSupported({ model: model.id, modality })
  }
  const visitParts = (content: unknown): void => {
    if (!Array.isArray(content)) return
    for (const part of content) {
      if (part === null || typeof part !== 'object') continue
      const p = part as Json
      switch (p.type) {
        case 'image_url':
        case 'image':
        case 'input_image':
          need('image')
          break
        case 'video_url': {
          const url = (p.video_url as Json | undefined)?.url
          if (typeof url !== 'string' || !isPublicHttpUrl(url)) throw new InvalidVideoUrl()
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
          visitParts(p.content)
          break
      }
    }
  }
  if (protocol === 'responses') {
    for (const item of Array.isArray(body.input) ? body.input as Json[] : []) visitParts(item.type === 'function_call_output' ? item.output : item.content)
    return
  }
  for (const m of body.messages as Json[]) visitParts(m.content)
  if (protocol === 'messages') visitParts(body.system)
}

const BLOCKED_HOST_SUFFIXES = ['.localhost', '.local', '.internal', '.lan', '.home.arpa']

/** http(s), a host that is not loopback, private, link-local or otherwise internal. */
export function isPublicHttpUrl (raw: string): boolean {
  let url: URL
  try {
    url = new URL(raw)
  } catch {
    return false
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return false
  if (url.username !== '' || url.password !== '') return false
  const host = url.hostname.toLowerCase().replace(/^\[|\]$/g, '').replace(/\.$/, '')
  if (host === '' || host === 'localhost' || !host.includes('.') && isIP(host) === 0) return false
  if (BLOCKED_HOST_SUFFIXES.some((s) => host.endsWith(s))) return false
  const family = isIP(host)
  if (family === 4) return isPublicIPv4(host)
  if (family === 6) return isPublicIPv6(host)
  return true
}

function isPublicIPv4 (ip: string): boolean {
  const [a, b] = ip.split('.').map(Number) as [number, number]
  if (a === 0 || a === 10 || a === 127) return false // this network, private, loopback
  if (a === 169 && b === 254) return false // link-local (cloud metadata)
  if (a === 172 && b >= 16 && b <= 31) return false
  if (a === 192 && b === 168) return false
  if (a === 100 && b >= 64 && b <= 127) return false // carrier-grade NAT
  if (a >= 224) return false // multicast, reserved, broadcast
  return true
}

function isPublicIPv6 (ip: string): boolean {
  const v = ip.toLowerCase()
  if (v === '::' || v === '::1') return false
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(v)
  if (mapped !== null) return isPublicIPv4(mapped[1] as string)
  // the URL parser writes IPv4-mapped addresses in hex: ::ffff:7f00:1
  const hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(v)
  if (hex !== null) {
    const hi = parseInt(hex[1] as string, 16)
    const lo = parseInt(hex[2] as string, 16)
    return isPublicIPv4(`${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`)
  }
  const first = parseInt(v.split(':')[0] || '0', 16)
  if ((first & 0xfe00) === 0xfc00) return false // unique local fc00::/7
  if ((first & 0xffc0) === 0xfe80) return false // link-local fe80::/10
  if ((first & 0xff00) === 0xff00) return false // multicast
  return true
}
