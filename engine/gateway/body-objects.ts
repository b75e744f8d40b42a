import type { Config, ProviderConfig } from '../../config/schema.js'
import type { Store } from '../store/types.js'
import { InvalidImageUrl, ObjectNotFound, UnreadableReference, type GatewayError } from '../kernel/errors.js'
import { isPromise, type MaybePromise } from '../kernel/maybe-promise.js'
import type { Json, Protocol } from '../translation/types.js'
import { mediaUrlProblem } from './media-url.js'
import { plainGeminiFile, walkReferences } from './provider-objects.js'

// The objects of the operator's provider accounts that the body of a /v1 call names (a file, a
// vector store, a container, a cached content, a stored item...), and the providers the call may
// then go to. An object lives in one provider's account: a provider that would read one is sent
// the call only when the caller's organization made it there through pass-through, or when the
// operator shares that provider's objects (`passthrough_shared`). A call no provider may be sent
// is refused (404) and nothing is sent; failover stays among the providers left.
//
// What a body names is noted while the body is checked (validation.ts walks the content parts
// anyway; the top level and the tools are read by `topLevelObjects`), so a call naming nothing
// pays no store lookup and no second walk:
//   ids          in the terms of the client's protocol: a Chat or Responses body's are OpenAI's, a
//                Messages body's Anthropic's, a Gemini body's Google's. A provider reads them
//                only when it is spoken to in the client's protocol (a Responses client's: a
//                provider serving Responses itself); the translators to the other protocols
//                refuse them or drop them, and never carry one across.
//   urls         media URLs (an image or video URL, a Gemini fileUri): a Gemini provider reads
//                every one as fileData, whatever protocol the client spoke, and one on its own
//                host or on Google's Files API host names a file of its account. Elsewhere a URL
//                is media the provider fetches.
//   unreadable   a field that may name an object in a form the gateway cannot read (a source of
//                an unknown type, an id that is no string, a URL on a Files API host that is no
//                plain file URI): refused where it would be read, since the gateway cannot tell.
// A part, tool or item of a type the gateway does not know is searched whole for the fields
// that name objects in its protocol (provider-objects.ts).

export type Account = ProviderConfig['protocol']

/** The account a client protocol's ids belong to. */
const ACCOUNT: Record<Protocol, Account> = { openai: 'openai', responses: 'openai', messages: 'messages', gemini: 'gemini' }

/** The longest id looked up: a provider's are far shorter. */
const MAX_ID = 256

/** Where Google's Files API serves the files of an API key's project, beside a Gemini provider's own host. */
const GOOGLE_FILES_HOST = 'generativelanguage.googleapis.com'

/** What a call's body names of provider accounts, noted as it is checked. */
export class BodyObjects {
  readonly ids: string[] = []
  readonly urls: Array<{ url: string, field: string }> = []
  readonly unreadable: string[] = []
  readonly account: Account

  constructor (readonly client: Protocol) {
    this.account = ACCOUNT[client]
  }

  get empty (): boolean {
    return this.ids.length === 0 && this.urls.length === 0 && this.unreadable.length === 0
  }

  /** The id a field known to name an object holds; a value that is no id cannot be read. */
  id (value: unknown, field: string): void {
    if (value === undefined || value === null) return
    if (typeof value === 'string' && value !== '' && value.length <= MAX_ID) this.ids.push(value)
    else this.unreadable.push(field)
  }

  /** Each id of a list that a field known to name objects holds. */
  idList (value: unknown, field: string): void {
    if (value === undefined || value === null) return
    if (!Array.isArray(value)) this.unreadable.push(field)
    else for (const [i, v] of value.entries()) this.id(v, `${field}[${i}]`)
  }

  /** A media URL that passed the URL rules (a data: URI names nothing). */
  url (url: string, field: string): void {
    if (!url.startsWith('data:')) this.urls.push({ url, field })
  }

  cannotRead (field: string): void {
    this.unreadable.push(field)
  }

  /**
   * A construct of a type the gateway does not know: each field in it that names objects in the
   * client protocol's terms. A Gemini file URI found so is held to the media URL rules too.
   */
  scan (value: unknown, field: string): void {
    walkReferences(this.account, value, (_kind, id, name) => {
      if (name !== 'fileUri' && name !== 'file_uri') this.id(id, field)
      else if (mediaUrlProblem(id, 'none') !== undefined) throw new InvalidImageUrl({ field })
      else this.url(id, field)
    })
  }
}

/** Tool types that name nothing at a provider: the client's own functions. */
const FUNCTION_TOOLS = new Set(['function', 'custom', 'namespace'])

/**
 * Top-level fields that name nothing at a provider, in any of the protocols: settings of the
 * call. The content (messages, input, contents, system) is read as it is checked.
 */
const SETTINGS = new Set([
  'model', 'messages', 'input', 'contents', 'content', 'requests', 'system', 'systemInstruction', 'instructions', 'stream', 'stream_options',
  'temperature', 'top_p', 'top_k', 'topP', 'topK', 'max_tokens', 'max_completion_tokens', 'max_output_tokens', 'max_tool_calls', 'n', 'stop',
  'stop_sequences', 'seed', 'presence_penalty', 'frequency_penalty', 'logit_bias', 'logprobs', 'top_logprobs', 'response_format', 'text',
  'reasoning', 'reasoning_effort', 'thinking', 'output_config', 'tool_choice', 'parallel_tool_calls', 'user', 'safety_identifier',
  'prompt_cache_key', 'service_tier', 'store', 'include', 'truncation', 'background', 'modalities', 'verbosity', 'prediction',
  'web_search_options', 'generationConfig', 'toolConfig', 'safetySettings', 'encoding_format', 'dimensions', 'taskType', 'title',
  'outputDimensionality', 'size', 'quality', 'output_format', 'output_compression', 'moderation', 'style', 'client_metadata'
])

/**
 * What the top level of a body names (`body` as it is sent: after the parameters the model does
 * not take are dropped): its tools, a Messages container, a stored prompt, a Gemini cached
 * content, and whatever a field the gateway does not know holds. A setting of the call is only
 * looked up in a set; the tools that are the client's own functions are not walked.
 */
export function topLevelObjects (body: Json, objects: BodyObjects): void {
  for (const key in body) {
    const v = body[key]
    if (v === undefined || v === null || key === 'metadata' || SETTINGS.has(key)) continue
    if (key !== 'tools') {
      objects.scan({ [key]: v }, key)
      continue
    }
    if (!Array.isArray(v)) continue
    for (let i = 0; i < v.length; i++) {
      const t: unknown = v[i]
      if (t === null || typeof t !== 'object') continue
      // a Messages custom tool has an input_schema (and no type, or `custom`); a Gemini tool is keyed by its kind
      const tool = t as Json
      if (objects.client === 'gemini') geminiTool(tool, `tools[${i}]`, objects)
      else if (!FUNCTION_TOOLS.has(tool.type as string) && !(objects.client === 'messages' && tool.input_schema !== undefined)) objects.scan(tool, `tools[${i}]`)
    }
  }
}

/** The fields of a Gemini part that the media checks read, or that hold no media and name nothing. */
const GEMINI_READ = new Set(['text', 'thought', 'thoughtSignature', 'inlineData', 'fileData', 'functionCall', 'functionResponse', 'executableCode', 'codeExecutionResult', 'videoMetadata'])

/** Any other field of a Gemini part (Google takes the proto names too: `file_data`, `function_response`...) is searched for the objects it names. */
export function geminiPartObjects (part: Json, at: string, objects: BodyObjects): void {
  for (const key in part) if (!GEMINI_READ.has(key)) objects.scan({ [key]: part[key] }, `${at}.${key}`)
}

/** Gemini's function declarations and built-in tools name nothing; a file search names its stores, by either spelling. */
function geminiTool (tool: Json, at: string, objects: BodyObjects): void {
  for (const key in tool) {
    if (key === 'functionDeclarations' || key === 'function_declarations') continue
    objects.scan(tool[key], `${at}.${key}`)
  }
}

/** What the object check needs of a provider. */
interface ProviderAccount { account: Account, responses: boolean, shared: boolean, fileHosts: ReadonlySet<string> }

const accounts = new WeakMap<Readonly<Config>, ReadonlyMap<string, ProviderAccount>>()

const bareHost = (host: string): string => host.toLowerCase().replace(/\.+$/, '')

function accountsOf (config: Readonly<Config>): ReadonlyMap<string, ProviderAccount> {
  let map = accounts.get(config)
  if (map === undefined) {
    map = new Map(config.providers.map((p) => {
      const hosts = new Set(p.protocol === 'gemini' ? [GOOGLE_FILES_HOST] : [])
      if (p.protocol === 'gemini' && p.base_url !== undefined && URL.canParse(p.base_url)) hosts.add(bareHost(new URL(p.base_url).hostname))
      return [p.id, { account: p.protocol, responses: p.responses, shared: p.passthrough_shared, fileHosts: hosts }]
    }))
    accounts.set(config, map)
  }
  return map
}

interface FileUrl { url: string, field: string, host: string, u: URL }

/** Why a provider may not be sent the call (null: it may); `native`: the provider speaks the client's protocol, its refusal the most telling. */
interface Verdict { refusal: GatewayError | null, native: boolean }

/**
 * The providers among `providers` that the call may go to, given what its body names (see the
 * file's head): at each, every object it would read there must be one `org` made (none without
 * a key), unless the provider's objects are shared. When none is left, the call is refused: 404
 * `object_not_found`, or 400 `unreadable_reference` for a field the gateway cannot read. A body
 * that names nothing costs nothing: the same list comes back at once.
 */
export function reachableProviders (config: Readonly<Config>, store: Store, org: string | null, providers: readonly string[], objects: BodyObjects): MaybePromise<readonly string[]> {
  if (objects.empty) return providers
  const byId = accountsOf(config)
  const client = objects.client
  let urls: FileUrl[] | null = null
  const verdicts: Array<MaybePromise<Verdict>> = providers.map((id) => {
    const p = byId.get(id)
    const native = p !== undefined && (client === 'responses' ? p.account === 'openai' && p.responses : p.account === client)
    if (p === undefined || p.shared) return { refusal: null, native }
    const refuse = (refusal: GatewayError): Verdict => ({ refusal, native })
    // ids reach a provider only through a pair of the client's own protocol
    const ids = native ? [...objects.ids] : []
    if (native && objects.unreadable.length > 0) return refuse(new UnreadableReference({ field: (objects.unreadable[0] as string).slice(0, 200), provider: id }))
    if (p.account === 'gemini' && objects.urls.length > 0) {
      urls ??= objects.urls.flatMap(({ url, field }) => {
        try {
          const u = new URL(url)
          return [{ url, field, host: bareHost(u.hostname), u }]
        } catch {
          return []
        }
      })
      for (const f of urls) {
        if (!p.fileHosts.has(f.host)) continue
        const file = plainGeminiFile(f.url, f.u)
        if (file === undefined) return refuse(new UnreadableReference({ field: f.field.slice(0, 200), provider: id }))
        ids.push(file)
      }
    }
    if (ids.length === 0) return { refusal: null, native }
    if (org === null) return refuse(new ObjectNotFound({ id: (ids[0] as string).slice(0, 200), provider: id }))
    const owned = store.objects.owned(id, org, ids)
    const judge = (mine: Set<string>): Verdict => {
      const foreign = ids.find((i) => !mine.has(i))
      return foreign === undefined ? { refusal: null, native } : refuse(new ObjectNotFound({ id: foreign.slice(0, 200), provider: id }))
    }
    return isPromise(owned) ? owned.then(judge) : judge(owned)
  })
  const decide = (settled: Verdict[]): readonly string[] => {
    const open = providers.filter((_id, i) => settled[i]?.refusal === null)
    if (open.length === providers.length) return providers
    if (open.length > 0) return open
    const refusals = settled.filter((v) => v.refusal !== null)
    const refusal = (refusals.find((v) => v.native) ?? refusals[0] as Verdict).refusal as GatewayError
    throw refusal
  }
  return verdicts.some(isPromise) ? Promise.all(verdicts.map(async (v) => await v)).then(decide) : decide(verdicts as Verdict[])
}
