import type { FastifyContextConfig, FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify'
import { Transform, type Readable, type TransformCallback } from 'node:stream'
import type { ProviderConfig } from '../config/schema.js'
import type { Principal } from '../plugins/api/index.js'
import { callOf, hooksOf } from '../plugins/gateway/core.js'
import type { CatalogModel } from '../plugins/gateway/catalog.js'
import { InvalidField, InvalidJson, MissingField, PassthroughPath, RequestTooLarge, UnreadableModel } from '../plugins/kernel/errors.js'
import { admit, grantedProvider, grantedUpstreamModel } from '../plugins/gateway/gate.js'
import { relayBytes, relayJson, relayMapped, relayStream, send, type Pipe } from '../plugins/gateway/pipeline.js'
import { geminiPassthrough } from '../plugins/translation/gemini-passthrough.js'
import { embeddingsPassthrough } from '../plugins/translation/embeddings-passthrough.js'
import { messagesPassthrough, openaiPassthrough } from '../plugins/translation/passthrough.js'
import { responsesPassthrough } from '../plugins/translation/responses-passthrough.js'
import { maskCredentials, maskHeaders } from '../plugins/upstream/credentials.js'
import type { Json, TranslateCtx, TranslatorPair } from '../plugins/translation/types.js'

// /passthrough/{provider}/*: a provider's own API (batches, files, audio, moderation, its model
// list...) behind the gateway's keys, any method, request and answer streamed as they are. It is
// a metered call like any other and is admitted by the same gate as every other call: the chain's
// IP rate limit and auth, then here the key's grant of the provider, the path check, the model
// the call names among those the key may use, and the admission hooks (idempotency, limits,
// budget, quota, balance, guardrails). Then dispatch through the provider's own connection pool,
// the relay, the end of the call.
//
// What an endpoint costs decides how it is admitted:
//   metered     POST chat/completions, messages, responses, embeddings; a Gemini provider's
//               {model}:generateContent and :streamGenerateContent. The JSON body (or the Gemini
//               path) must name a catalog model of this provider that the key may use: its
//               upstream name, or a dated or versioned snapshot of it; it is billed at that
//               model's prices from the usage the answer reports, read by the same-protocol
//               translator pairs, which leave the bytes as they are. Any other model: 404, nothing
//               sent.
//   free        reads and deletions (GET, HEAD, OPTIONS, DELETE), and the POSTs that cost nothing
//               (FREE below: uploads, moderation, token counts, cancellations): no charge; a JSON
//               body that names a model must name one the key may use.
//   unmetered   every other POST, PUT or PATCH (batch and fine-tuning jobs, audio, images...): it
//               may spend at the provider without reporting what. The balance and quota plugins
//               refuse it while a balance, a budget or a quota applies; a model its JSON body
//               names must be one the key may use, and one the gateway cannot read (a multipart
//               upload) only a key granted every model may call.
//
// The client's credentials (a Gemini client's ?key= included), cookies, OpenAI's organization and
// project headers, forwarding headers and the gateway's own headers never reach the provider,
// whose configured headers and key win over a client's header of any case. The provider's answers
// come back unchanged but for its cookies, which never reach the client, and its credentials,
// masked in an error's body and headers (see plugins/upstream/).

const METHODS: HTTPMethods[] = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS']

/** The pairs that read the endpoints reporting usage, by the last segments of the path. */
const READERS: Array<[string, TranslatorPair]> = [
  ['/chat/completions', openaiPassthrough],
  ['/messages', messagesPassthrough],
  ['/responses', responsesPassthrough],
  ['/embeddings', { ...embeddingsPassthrough, stream: () => { throw new Error('embeddings are never streamed') } }]
]

/** A Gemini model's method: the model (below `models/`, or a tuned model's collection) and the method. */
const GEMINI_METHOD = /(?:^|\/)((?:models|tunedModels)\/[^?]+):([A-Za-z]+)$/
/** The Gemini methods whose answers report usage. */
const GEMINI_METERED = new Set(['generateContent', 'streamGenerateContent'])

/** The POSTs that cost nothing at a provider: uploads, moderation, token counts, cancellations. */
const FREE = [/\/files$/, /\/uploads(?:\/[^/]+\/(?:parts|complete|cancel))?$/, /\/moderations$/, /\/cancel$/, /\/count_tokens$/, /\/input_tokens$/, /:countTokens$/]

/** Headers that never go to the provider: the client's credentials, cookies, its organization and project at OpenAI, forwarding headers, and the gateway's own. */
const CLIENT_ONLY = new Set(['authorization', 'x-api-key', 'x-goog-api-key', 'cookie', 'idempotency-key', 'x-locale', 'proxy-authorization', 'forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-forwarded-port', 'x-real-ip', 'via', 'openai-organization', 'openai-project'])
/** Hop-by-hop headers (RFC 9110 §7.6.1) and what the connection itself sets: never copied across. */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host'])

// what every way out of the base path needs: an escape, a backslash, a NUL, a dot segment, a scheme, `//`
const MAYBE_ESCAPE = /[%\\.:\0]|\/\//

/** Why the path after the provider's prefix could leave its base path, or null when it cannot. */
export function pathEscape (rawPath: string): string | null {
  if (!MAYBE_ESCAPE.test(rawPath)) return null
  if (rawPath.includes('\\')) return 'backslash'
  if (/%(2f|5c)/i.test(rawPath)) return 'encoded slash'
  if (rawPath.startsWith('//')) return 'network-path reference'
  let decoded: string
  try {
    decoded = decodeURIComponent(rawPath)
  } catch {
    return 'malformed escape'
  }
  if (/^\/?[a-z][a-z0-9+.-]*:/i.test(decoded)) return 'absolute URL'
  for (const segment of decoded.split('/')) if (segment === '..' || segment === '.') return 'dot segment'
  if (decoded.includes('\\') || decoded.includes('\0')) return 'backslash or NUL'
  return null
}

/** Reads a request body stream into text, refusing it past `limit` bytes. */
async function readBody (stream: Readable, limit: number, limitMb: number): Promise<string> {
  return await new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    stream.on('data', (chunk: Buffer) => {
      size += chunk.length
      if (size > limit) {
        stream.destroy()
        reject(new RequestTooLarge({ limit_mb: limitMb }))
        return
      }
      chunks.push(chunk)
    })
    stream.once('end', () => { resolve(chunks.length === 1 ? (chunks[0] as Buffer).toString('utf8') : Buffer.concat(chunks).toString('utf8')) })
    stream.once('error', reject)
  })
}

/** Counts the bytes of a streamed upload, failing it past the body limit. */
class UploadLimit extends Transform {
  private size = 0
  constructor (private readonly limit: number, private readonly limitMb: number) { super() }
  override _transform (chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.size += chunk.length
    if (this.size > this.limit) cb(new RequestTooLarge({ limit_mb: this.limitMb }))
    else cb(null, chunk)
  }
}

/** The model name a Gemini path gives (`models/gemini-2.5-flash` is `gemini-2.5-flash`), as a catalog's upstream_model names it. */
function upstreamName (name: string): string {
  let decoded = name
  try { decoded = decodeURIComponent(name) } catch {}
  return decoded.startsWith('models/') ? decoded.slice('models/'.length) : decoded
}

const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v)
const isStream = (v: unknown): v is Readable => typeof (v as Readable | undefined)?.pipe === 'function'

/** The provider's answer headers the client gets: all but hop-by-hop ones and cookies (and the length, when the body may be re-sent). */
function answerHeaders (headers: Record<string, string | string[] | undefined>, keepLength: boolean): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {}
  for (const [name, value] of Object.entries(headers)) {
    if (value === undefined || HOP.has(name) || name === 'set-cookie' || name === 'set-cookie2' || (!keepLength && name === 'content-length')) continue
    out[name] = value
  }
  return out
}

/**
 * The request target in origin form (`/path?query`): an absolute-form target
 * (`http://host/passthrough/...`, which HTTP/1.1 servers must accept) is routed by its path too.
 */
export function originForm (target: string): string {
  if (target.startsWith('/')) return target
  const m = /^[a-z][a-z0-9+.-]*:\/\/[^/?#]*/i.exec(target)
  if (m === null) return target
  const rest = target.slice(m[0].length)
  return rest.startsWith('/') ? rest : `/${rest}`
}

type Cost = 'metered' | 'free' | 'unmetered'

const READS = new Set(['GET', 'HEAD', 'OPTIONS', 'DELETE'])

const isJsonType = (type: string | undefined): boolean => type !== undefined && /^application\/(?:[\w.+-]*\+)?json\b/i.test(type)

export interface PassthroughOptions { providers: ProviderConfig[] }

/** A target path and query without the query's `key` parameters (a Gemini client's gateway key). */
function withoutKey (target: string): string {
  const q = target.indexOf('?')
  if (q === -1) return target
  const kept = target.slice(q + 1).split('&').filter((pair) => pair !== '' && decodeName(pair.split('=', 1)[0] as string) !== 'key')
  return kept.length === 0 ? target.slice(0, q) : `${target.slice(0, q)}?${kept.join('&')}`
}

function decodeName (name: string): string {
  try {
    return decodeURIComponent(name.replace(/\+/g, ' '))
  } catch {
    return name
  }
}

/** The pass-through routes of every provider with `passthrough: true`; registered under /passthrough in the chain's scope. */
export default async function passthroughRoutes (scope: FastifyInstance, opts: PassthroughOptions): Promise<void> {
  const gateway = scope.gateway
  const hooks = hooksOf(gateway)
  const { config } = gateway
  const limitMb = config.server.body_limit_mb
  const limit = Math.floor(limitMb * 1024 * 1024)
  // the gateway's own headers ({prefix}*), not sent on; with an empty prefix there are none to tell apart
  const gatewayHeader = gateway.headers.trace.slice(0, gateway.headers.trace.length - 'Trace-ID'.length).toLowerCase()

  // bodies are the provider's business: kept as the stream they are, read here only when the call is metered
  scope.removeAllContentTypeParsers()
  scope.addContentTypeParser('*', (_request, payload, done) => { done(null, payload) })

  /** The client's headers as they go to the provider. */
  function forwarded (request: FastifyRequest, rewritten: boolean): Record<string, string | string[]> {
    const out: Record<string, string | string[]> = {}
    for (const [name, value] of Object.entries(request.headers)) {
      if (value === undefined || HOP.has(name) || CLIENT_ONLY.has(name) || (gatewayHeader !== '' && name.startsWith(gatewayHeader))) continue
      // a body the gateway re-serialized has a length of its own; one it reads comes unencoded
      if (rewritten && (name === 'content-length' || name === 'accept-encoding')) continue
      out[name] = value
    }
    return out
  }

  for (const provider of opts.providers) {
    const prefix = `/passthrough/${provider.id}`
    const messages = provider.protocol === 'messages'
    const gemini = provider.protocol === 'gemini'

    async function handle (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
      const p: Pipe = { gateway, hooks, request, reply, call: callOf(request) }
      const call = p.call
      const raw = originForm(request.raw.url ?? '').slice(prefix.length)
      // the key a Gemini client may give in the query is the gateway's: never sent on
      const target = gemini ? withoutKey(raw) : raw
      const path = target.split('?', 1)[0] ?? ''
      const why = pathEscape(path)
      if (why !== null) throw new PassthroughPath({ reason: why })
      call.routedTo(provider.id)
      // pass-through spends the provider's own key: never without a gateway key that was granted it
      const principal = grantedProvider(request.principal, provider.id)
      if (Number(request.headers['content-length'] ?? 0) > limit) throw new RequestTooLarge({ limit_mb: limitMb })

      const method = request.method
      const geminiCall = gemini ? GEMINI_METHOD.exec(path) : null
      const reader = method !== 'POST' ? undefined : gemini ? (geminiCall !== null && GEMINI_METERED.has(geminiCall[2] as string) ? geminiPassthrough : undefined) : READERS.find(([end]) => path.endsWith(end))?.[1]
      const cost: Cost = reader !== undefined ? 'metered' : READS.has(method) || FREE.some((re) => re.test(path)) ? 'free' : 'unmetered'
      const stream = isStream(request.body) ? request.body : undefined
      let parsed: Json | null = null
      let upload: string | Readable | undefined
      if (stream !== undefined && (reader !== undefined || isJsonType(request.headers['content-type']))) {
        // read whole: what it costs, or which model it names, is in it
        const text = await readBody(stream, limit, limitMb)
        let json: unknown
        try { json = JSON.parse(text) } catch {}
        if (isObj(json)) parsed = json
        else if (reader !== undefined) throw new InvalidJson()
        else upload = text
      } else if (stream !== undefined) {
        upload = stream.pipe(new UploadLimit(limit, limitMb))
      }
      if (reader !== undefined) call.speaks(reader.client)
      const model = modelOf(principal, geminiCall, parsed, cost, method, path, upload)
      call.resolved(model, geminiCall !== null ? geminiCall[2] === 'streamGenerateContent' : parsed?.stream === true, model?.upstreamModel)
      if (cost === 'free') call.free()
      else if (cost === 'unmetered') call.spendsUnread()
      const body = await admit(p, model, parsed ?? {})
      // the name the client gave (a snapshot's, perhaps) is the one sent on
      const name = geminiCall !== null ? upstreamName(geminiCall[1] as string) : typeof parsed?.model === 'string' ? parsed.model : ''
      const ctx: TranslateCtx = {
        model: model?.id ?? '',
        upstreamModel: name,
        id: request.id.replace(/-/g, ''),
        created: Math.floor(call.startedAt / 1000),
        stream: call.stream,
        includeUsage: isObj(body.stream_options) && body.stream_options.include_usage === true,
        flatten: false,
        defaultMaxTokens: config.translation.default_max_tokens
      }
      // a JSON body goes up as the hooks left it, through the pair (a chat stream asks for its usage)
      const sent = parsed === null ? upload : reader !== undefined ? reader.request(body, ctx).body : body
      const answer = await send(p, {
        providers: [provider.id],
        model,
        plan: () => ({ method, path: target, body: sent, protocol: provider.protocol, headers: forwarded(request, parsed !== null), forwarded: true })
      })
      const status = answer.res.statusCode
      const secrets = answer.upstream.secrets
      reply.status(status)
      // an error may echo the provider's key: read whole and masked
      if (status >= 400 && method !== 'HEAD') return await relayMapped(p, answer, maskHeaders(answerHeaders(answer.res.headers, false), secrets), (text) => maskCredentials(text, secrets))
      if (reader === undefined || parsed === null || method === 'HEAD') return relayBytes(p, answer, maskHeaders(answerHeaders(answer.res.headers, true), secrets))
      const headers = maskHeaders(answerHeaders(answer.res.headers, false), secrets)
      const sse = String(answer.res.headers['content-type'] ?? '').includes('text/event-stream')
      // a Gemini stream asked for without alt=sse comes as one JSON array of chunks
      return sse ? relayStream(p, answer, { pair: reader, ctx, headers }) : await relayJson(p, answer, { pair: reader, ctx, headers, array: geminiCall !== null })
    }

    /**
     * The catalog model a call names, which the key must be granted: a Gemini path's, or a JSON
     * body's `model`. A metered call must name one; a call whose body the gateway cannot read may
     * name any, so only a key granted every model may make it when it may spend.
     */
    function modelOf (principal: Principal, geminiCall: RegExpExecArray | null, parsed: Json | null, cost: Cost, method: string, path: string, upload: string | Readable | undefined): CatalogModel | null {
      if (geminiCall !== null) return grantedUpstreamModel(gateway, principal, provider.id, upstreamName(geminiCall[1] as string))
      if (parsed !== null && parsed.model !== undefined) {
        if (typeof parsed.model !== 'string' || parsed.model === '') throw new InvalidField({ field: 'model', reason: 'must be a model name' })
        return grantedUpstreamModel(gateway, principal, provider.id, parsed.model)
      }
      if (cost === 'metered') throw new MissingField({ field: 'model' })
      if (cost === 'unmetered' && upload !== undefined && !principal.models.includes('*')) {
        throw new UnreadableModel({ method, path: path.slice(0, 200), provider: provider.id })
      }
      return null
    }

    const routeConfig: FastifyContextConfig = { family: messages ? 'messages' : gemini ? 'gemini' : 'openai', apiKeyHeader: messages || (gemini ? 'x-goog-api-key' : false), metered: true, endpoint: 'passthrough', protocol: provider.protocol }
    if (gemini) routeConfig.apiKeyQuery = 'key'
    scope.route({ method: METHODS, url: `/${provider.id}`, config: routeConfig, handler: handle })
    scope.route({ method: METHODS, url: `/${provider.id}/*`, config: routeConfig, handler: handle })
  }
}
