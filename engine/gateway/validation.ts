import type { CatalogModel } from './catalog.js'
import { InvalidBody, InvalidField, InvalidImageUrl, InvalidVideoUrl, MissingField, ModalityNotSupported } from '../kernel/errors.js'
import { firstHostResolvingToBlockedAddress, mediaUrlProblem, type DataUris, type Lookup, type NamedHost } from './media-url.js'
import { firstProblem } from '../kernel/schema-check.js'
import { fileType } from '../protocols/gemini/request.js'
import { CODECS } from '../protocols/index.js'
import type { Json, Protocol } from '../translation/types.js'
import { geminiPartObjects, type BodyObjects } from './body-objects.js'
import { isObj } from '../kernel/json.js'

// Checks made before anything is forwarded (docs/api.md), as pure functions of the client's body
// and the catalog model. A body's shape is its schema's (./request-schemas.ts); what is checked
// here is what a schema cannot say: media against the model and the URL rules, and the
// parameters a model takes.

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

const given = (v: unknown): boolean => v !== undefined && v !== null

/**
 * A body checked against its call's schema (./request-schemas.ts), for a body Fastify did not
 * validate itself (Google's method calls share one route, and a countTokens body may wrap its
 * request): the first problem as the route validation reports it.
 */
export function validBody (schema: object, body: unknown): Json {
  if (!isObj(body)) throw new InvalidBody()
  const problem = firstProblem(schema, body)
  if (problem === null) return body
  throw problem.missing ? new MissingField({ field: problem.path }) : new InvalidField({ field: problem.path, reason: problem.what })
}

export interface ParamResult { body: Json, dropped: string[] }

/**
 * default_parameters fill omitted fields; fields outside supported_parameters are dropped and
 * reported. A max_tokens above the model's declared output cap is lowered to it.
 */
export function applyParameters (body: Json, model: CatalogModel, protocol: Protocol): ParamResult {
  if (protocol === 'gemini') return applyGeminiParameters(body, model)
  const structural = CODECS[protocol].structural
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

// The names a generationConfig setting has among a model's supported_parameters (Chat Completions
// names): any one of them supports it.
const GEMINI_SETTINGS = new Map<string, readonly string[]>([
  ['temperature', ['temperature']],
  ['topP', ['top_p']],
  ['topK', ['top_k']],
  ['maxOutputTokens', ['max_tokens', 'max_completion_tokens', 'max_output_tokens']],
  ['stopSequences', ['stop', 'stop_sequences']],
  ['candidateCount', ['n']],
  ['presencePenalty', ['presence_penalty']],
  ['frequencyPenalty', ['frequency_penalty']],
  ['seed', ['seed']],
  ['responseMimeType', ['response_format']],
  ['responseSchema', ['response_format']],
  ['responseJsonSchema', ['response_format']],
  ['thinkingConfig', ['reasoning_effort', 'reasoning', 'thinking']],
  ['responseLogprobs', ['logprobs']],
  ['logprobs', ['top_logprobs']]
])

// Settings whose value asks for nothing beyond the default: kept, never reported, whatever the model lists.
const GEMINI_NEUTRAL = new Map([['candidateCount', '1'], ['responseMimeType', '"text/plain"'], ['responseLogprobs', 'false']])

// default_parameters (Chat Completions names) as generationConfig settings.
const GEMINI_DEFAULTS = new Map([
  ['temperature', 'temperature'], ['top_p', 'topP'], ['top_k', 'topK'], ['max_tokens', 'maxOutputTokens'], ['max_completion_tokens', 'maxOutputTokens'],
  ['max_output_tokens', 'maxOutputTokens'], ['stop', 'stopSequences'], ['stop_sequences', 'stopSequences'], ['presence_penalty', 'presencePenalty'],
  ['frequency_penalty', 'frequencyPenalty'], ['seed', 'seed']
])

/**
 * applyParameters for a Gemini body: its settings sit in generationConfig and toolConfig, under
 * Google's names, so they are checked against supported_parameters by their Chat Completions
 * names (`generationConfig.topK` is supported when `top_k` is); dropped ones are reported by
 * their path. Settings the table does not know are left to the pairs, which map or report them.
 */
function applyGeminiParameters (body: Json, model: CatalogModel): ParamResult {
  const structural = CODECS.gemini.structural
  const supported = model.supportedParameters
  const out: Json = {}
  const dropped: string[] = []
  for (const key in body) {
    if (structural.has(key) || supported.has(key)) out[key] = body[key]
    else dropped.push(key)
  }
  const config: Json = isObj(body.generationConfig) ? { ...body.generationConfig } : {}
  for (const key of Object.keys(config)) {
    const names = GEMINI_SETTINGS.get(key)
    if (names === undefined || !given(config[key]) || names.some((n) => supported.has(n))) continue
    if (GEMINI_NEUTRAL.get(key) === JSON.stringify(config[key])) continue
    delete config[key]
    dropped.push(`generationConfig.${key}`)
  }
  for (const [name, value] of Object.entries(model.config.default_parameters)) {
    const key = GEMINI_DEFAULTS.get(name)
    if (key === undefined || given(config[key]) || dropped.includes(`generationConfig.${key}`)) continue
    config[key] = key === 'stopSequences' && typeof value === 'string' ? [value] : value
  }
  const cap = model.config.max_output_tokens
  if (cap !== undefined && typeof config.maxOutputTokens === 'number' && config.maxOutputTokens > cap) config.maxOutputTokens = cap
  if (Object.keys(config).length > 0) out.generationConfig = config
  else delete out.generationConfig
  if (isObj(body.toolConfig) && given(body.toolConfig.functionCallingConfig) && !supported.has('tool_choice')) {
    const { functionCallingConfig: _, ...rest } = body.toolConfig
    if (Object.keys(rest).length > 0) out.toolConfig = rest
    else delete out.toolConfig
    dropped.push('toolConfig.functionCallingConfig')
  }
  return { body: out, dropped }
}

/** The input modality of a MIME type: image, video or audio; none for documents and text. */
function modalityOf (mimeType: string): string | null {
  const type = mimeType.toLowerCase()
  if (type.startsWith('image/')) return 'image'
  if (type.startsWith('video/')) return 'video'
  if (type.startsWith('audio/')) return 'audio'
  return null
}

/** Content part types that name nothing at a provider and hold no media: text, reasoning, the client's tool calls. */
const INERT_PARTS = new Set(['text', 'input_text', 'output_text', 'refusal', 'thinking', 'redacted_thinking', 'tool_use', 'server_tool_use', 'mcp_tool_use', 'search_result'])

/**
 * Refuses media the model cannot take and every media URL that engine/gateway/media-url.ts does not
 * allow: chat image_url (string or {url}) and video_url, Messages image and document url sources
 * (in content, tool_result content, a document's content and system), Gemini inlineData and
 * fileData (in contents, function responses and the system instruction). Returns the URLs' host
 * names, for the optional DNS check (checkMediaHostsByDns). On the same walk, notes in `objects`
 * what the parts name of the provider accounts (body-objects.ts: the caller notes the top
 * level's): ids of files, Responses items, media URLs; a part of a type it does not know is
 * searched for the fields that name objects.
 */
export function checkMedia (body: Json, model: CatalogModel, protocol: Protocol, objects?: BodyObjects): NamedHost[] {
  const named: NamedHost[] = []
  const need = (modality: string): void => {
    if (!model.inputModalities.has(modality)) throw new ModalityNotSupported({ model: model.id, modality })
  }
  const image = (url: unknown, dataUris: DataUris, field: string): void => {
    if (mediaUrlProblem(url, dataUris, (host) => named.push({ host, kind: 'image', field })) !== undefined) throw new InvalidImageUrl({ field })
    objects?.url(url as string, field)
  }
  const visitParts = (content: unknown, path: string): void => {
    if (!Array.isArray(content)) return
    for (const [i, part] of content.entries()) {
      if (part === null || typeof part !== 'object') continue
      const p = part as Json
      const at = `${path}[${i}]`
      if (INERT_PARTS.has(p.type as string)) continue
      switch (p.type) {
        case 'image_url':
        case 'input_image': {
          // chat: image_url (a string or {url}); Responses: image_url (a string), or file_id
          const v = p.image_url
          if (v !== undefined || p.type === 'image_url') image(typeof v === 'string' ? v : (v as Json | null | undefined)?.url, 'image', `${at}.image_url`)
          if (p.type === 'input_image') objects?.id(p.file_id, `${at}.file_id`)
          need('image')
          break
        }
        case 'image':
        case 'document': {
          const source = p.source as Json | null | undefined
          if (source?.type === 'url') image(source.url, 'none', `${at}.source.url`)
          // a document made of content blocks (text, images)
          else if (source?.type === 'content') visitParts(source.content, `${at}.source.content`)
          else if (source?.type === 'file') objects?.id(source.file_id, `${at}.source.file_id`)
          else if (isObj(source) && source.type !== 'base64' && source.type !== 'text') objects?.cannotRead(`${at}.source.type`)
          if (p.type === 'image') need('image')
          break
        }
        case 'file':
          // chat: a file by its id, or its data
          if (isObj(p.file)) objects?.id(p.file.file_id, `${at}.file.file_id`)
          else objects?.scan(p, at)
          break
        case 'input_file':
        case 'container_upload':
          objects?.id(p.file_id, `${at}.file_id`)
          break
        case 'video_url': {
          const url = (p.video_url as Json | undefined)?.url
          if (mediaUrlProblem(url, 'none', (host) => named.push({ host, kind: 'video', field: `${at}.video_url.url` })) !== undefined) throw new InvalidVideoUrl()
          objects?.url(url as string, `${at}.video_url.url`)
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
        default:
          objects?.scan(p, at)
      }
    }
  }
  if (protocol === 'gemini') {
    const visitGemini = (parts: unknown, path: string): void => {
      for (const [i, part] of (Array.isArray(parts) ? parts : []).entries()) {
        if (!isObj(part)) continue
        const at = `${path}[${i}]`
        if (isObj(part.inlineData)) {
          const modality = modalityOf(typeof part.inlineData.mimeType === 'string' ? part.inlineData.mimeType : '')
          if (modality !== null) need(modality)
        } else if (isObj(part.fileData)) {
          const uri = part.fileData.fileUri
          const field = `${at}.fileData.fileUri`
          const modality = modalityOf(fileType(typeof part.fileData.mimeType === 'string' ? part.fileData.mimeType : undefined, typeof uri === 'string' ? uri : ''))
          const kind = modality === 'video' ? 'video' : 'image'
          if (mediaUrlProblem(uri, 'none', (host) => named.push({ host, kind, field })) !== undefined) {
            throw kind === 'video' ? new InvalidVideoUrl() : new InvalidImageUrl({ field })
          }
          objects?.url(uri as string, field)
          if (modality !== null) need(modality)
        } else if (isObj(part.functionResponse)) {
          visitGemini(part.functionResponse.parts, `${at}.functionResponse.parts`)
        }
        if (objects !== undefined) geminiPartObjects(part, at, objects)
      }
    }
    for (const [i, c] of (body.contents as unknown[]).entries()) if (isObj(c)) visitGemini(c.parts, `contents[${i}].parts`)
    if (isObj(body.systemInstruction)) visitGemini(body.systemInstruction.parts, 'systemInstruction.parts')
    return named
  }
  if (protocol === 'responses') {
    for (const [i, item] of (Array.isArray(body.input) ? body.input as Json[] : []).entries()) {
      if (item === null || typeof item !== 'object') continue
      const at = `input[${i}]`
      switch (item.type ?? (item.role !== undefined ? 'message' : undefined)) {
        case 'function_call_output':
        case 'custom_tool_call_output':
          visitParts(item.output, `${at}.output`)
          break
        case 'message':
        case 'function_call':
        case 'custom_tool_call':
          visitParts(item.content, `${at}.content`)
          break
        // the provider looks up a reasoning item by its id unless the item carries its content, and a referenced item always
        case 'reasoning':
          if (item.encrypted_content === undefined || item.encrypted_content === null) objects?.id(item.id, `${at}.id`)
          break
        case 'item_reference':
          objects?.id(item.id, `${at}.id`)
          break
        default:
          visitParts(item.content, `${at}.content`)
          objects?.scan(item, at)
      }
    }
    return named
  }
  for (const [i, m] of (body.messages as Json[]).entries()) {
    visitParts(m.content, `messages[${i}].content`)
    // a chat assistant message may name an earlier answer's audio, which the provider keeps
    if (protocol === 'openai' && isObj(m.audio)) objects?.id(m.audio.id, `messages[${i}].audio.id`)
  }
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
