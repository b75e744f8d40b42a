import type { FastifyContextConfig, FastifyInstance, FastifyReply, FastifyRequest, HTTPMethods } from 'fastify'
import { Transform, type Readable, type TransformCallback } from 'node:stream'
import type { ProviderConfig } from '../config/schema.js'
import type { Principal } from '../plugins/api/index.js'
import { callOf, hooksOf } from '../engine/gateway/core.js'
import type { CatalogModel } from '../engine/gateway/catalog.js'
import {
  BodyTooDeep, InvalidField, InvalidJson, MissingField, ObjectNotFound, PassthroughPath, RequestTooLarge, UnattributableEndpoint, UnforwardableRequest,
  UnreadableModel, UpstreamUnavailable
} from '../engine/kernel/errors.js'
import { admit, grantedProvider, grantedUpstreamModel } from '../engine/gateway/gate.js'
import { bedrockStreams, bedrockTargetProblem, classify, classifyBedrock, targetProblem, type Classified, type Cost, type Reader } from '../engine/gateway/passthrough-target.js'
import { relayBytes, relayJson, relayMapped, relayMeteredBytes, relayStream, readWhole, send, sendRead, type Pipe } from '../engine/gateway/pipeline.js'
import { bedrockStreamMeter, converseReader, invokeReader } from '../engine/protocols/converse/passthrough.js'
import { createdBy, itemId, listItems, objectAccess, referencesIn, yieldedBy, type ObjectAccess, type ObjectRef } from '../engine/gateway/provider-objects.js'
import { MAX_JSON_DEPTH, nestedDeeperThan } from '../engine/gateway/validation.js'
import { geminiPassthrough } from '../engine/translation/passthrough.js'
import { embeddingsPassthrough } from '../engine/translation/embeddings-passthrough.js'
import { messagesPassthrough, openaiPassthrough } from '../engine/translation/passthrough.js'
import { responsesPassthrough } from '../engine/translation/passthrough.js'
import { maskCredentials, maskHeaders } from '../engine/upstream/credentials.js'
import { parseJson, type Answer } from '../engine/upstream/dispatch.js'
import type { Json, Protocol, TranslateCtx, TranslatorPair } from '../engine/translation/types.js'
import { providerBaseUrl } from '../engine/upstream/platforms/index.js'
import { isObj } from '../engine/kernel/json.js'

// /passthrough/{provider}/*: a provider's own API (batches, files, audio, moderation, its model
// list...) behind the gateway's keys, any method, request and answer streamed as they are. It is
// a metered call like any other and is admitted by the same gate as every other call: the chain's
// IP rate limit and auth, then here the request target (read as the provider will route it:
// engine/gateway/passthrough-target.ts), the key's grant of the provider, the provider-side
// objects the call reaches (engine/gateway/provider-objects.ts), the models it names among those
// the key may use, and the admission hooks (idempotency, limits, budget, quota, balance,
// guardrails). Then dispatch through the provider's own connection pool, the relay, the end of
// the call.
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
//               (uploads, moderation, token counts, cancellations): no charge.
//   unmetered   every other POST, PUT or PATCH (batch and fine-tuning jobs, audio, images...): it
//               may spend at the provider without reporting what. The balance and quota plugins
//               refuse it while a balance, a budget or a quota applies; a model its body names
//               must be one the key may use, and one the gateway cannot read (a multipart upload)
//               only a key granted every model may call.
// A model a path names (`models/{m}`, a Gemini model's method) needs the key's grant whatever
// the endpoint costs, as a model a JSON body names does.
//
// Unless the provider has `passthrough_shared: true`, the objects of its account (files,
// batches...) are its tenants' apart: an object made through pass-through is recorded as its
// organization's, and a call reaches only its own organization's (404 otherwise, nothing sent);
// lists are filtered; endpoints whose objects the gateway cannot attribute are refused; and every
// body but an upload's is read, for the objects it names.
//
// The client's credentials (a Gemini client's ?key= included), cookies, OpenAI's organization and
// project headers, forwarding and hop-by-hop headers (`Expect` among them) and the gateway's own
// headers never reach the provider, whose configured headers and key win over a client's header
// of any case. The provider's answers come back unchanged but for its cookies, which never reach
// the client, and its credentials, masked in an error's body and headers (see engine/upstream/).

const METHODS: HTTPMethods[] = ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS']

/** The pairs that read the endpoints reporting usage. */
const READERS: Record<Reader, TranslatorPair> = {
  chat: openaiPassthrough,
  messages: messagesPassthrough,
  responses: responsesPassthrough,
  embeddings: { ...embeddingsPassthrough, stream: () => { throw new Error('embeddings are never streamed') } },
  gemini: geminiPassthrough,
  converse: converseReader,
  invoke: invokeReader
}

/** Headers that never go to the provider: the client's credentials, cookies, its organization and project at OpenAI, forwarding headers, and the gateway's own. */
const CLIENT_ONLY = new Set(['authorization', 'x-api-key', 'x-goog-api-key', 'api-key', 'cookie', 'idempotency-key', 'x-locale', 'proxy-authorization', 'forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-forwarded-port', 'x-real-ip', 'via', 'openai-organization', 'openai-project'])
/**
 * Hop-by-hop headers (RFC 9110 §7.6.1), what the connection itself sets, and `Expect`, whose
 * 100-continue this server has already answered: never copied across. A header the client's
 * `Connection` names is hop-by-hop too.
 */
const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'te', 'trailer', 'transfer-encoding', 'upgrade', 'host', 'expect', 'http2-settings'])
/** Headers that would have the provider route the call by another method than the one it was classified by. */
const METHOD_OVERRIDES = ['x-http-method-override', 'x-http-method', 'x-method-override']

/** The header names a `Connection` header lists: hop-by-hop for this connection only. */
function connectionNamed (value: string | string[] | undefined): Set<string> | null {
  if (value === undefined) return null
  const names = new Set<string>()
  for (const token of String(value).split(',')) names.add(token.trim().toLowerCase())
  return names
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

/**
 * The client's upload as it goes to the provider, within the body limit. An upload its client
 * cuts short fails with an error of the request's own, which never counts against the provider.
 */
function uploadOf (stream: Readable, limit: number, limitMb: number): Readable {
  const out = new UploadLimit(limit, limitMb)
  const cut = (err?: Error): void => {
    if (!stream.readableEnded) out.destroy(new UnforwardableRequest({ reason: 'the client\'s body ended before its length' }, { cause: err }))
  }
  stream.once('error', cut)
  stream.once('close', () => { cut() })
  return stream.pipe(out)
}

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

/** A target with its query parameter `name` set to `value` (a list's cursor). */
function withParam (target: string, name: string, value: string): string {
  const q = target.indexOf('?')
  const params = new URLSearchParams(q === -1 ? '' : target.slice(q + 1))
  params.set(name, value)
  return `${q === -1 ? target : target.slice(0, q)}?${params.toString()}`
}

/** The pages a list reads on at most to fill the page a client asked for with its own objects. */
const MAX_LIST_PAGES = 10
/** How many of the caller's objects a list that names no limit is read on to hold (Anthropic's default page). */
const DEFAULT_PAGE = 20

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
  function forwarded (request: FastifyRequest, rewritten: boolean, bedrock: boolean): Record<string, string | string[]> {
    const out: Record<string, string | string[]> = {}
    const named = connectionNamed(request.headers.connection)
    for (const [name, value] of Object.entries(request.headers)) {
      if (value === undefined || HOP.has(name) || CLIENT_ONLY.has(name) || named?.has(name) === true || (gatewayHeader !== '' && name.startsWith(gatewayHeader))) continue
      // an AWS client's own signing headers: the gateway signs the call itself
      if (bedrock && name.startsWith('x-amz-')) continue
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
    const shared = provider.passthrough_shared
    // AWS Bedrock's paths name the model and the operation (classifyBedrock); its bodies are its own
    const bedrock = provider.platform === 'bedrock'
    const protocol = provider.protocol as Protocol
    const base = new URL(providerBaseUrl(provider))
    const basePath = base.pathname.replace(/\/+$/, '')
    // the hosts whose Gemini file URIs name this account's files
    const fileHosts = [base.host.toLowerCase(), 'generativelanguage.googleapis.com']
    const objects = gateway.store.objects

    async function handle (request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
      const p: Pipe = { gateway, hooks, request, reply, call: callOf(request) }
      const call = p.call
      const url = originForm(request.raw.url ?? '')
      // the router matched the prefix decoded: as sent, it must be the prefix itself
      if (!url.startsWith(prefix)) throw new PassthroughPath({ reason: 'percent-encoding' })
      const raw = url.slice(prefix.length)
      // the key a Gemini client may give in the query is the gateway's: never sent on
      const target = gemini ? withoutKey(raw) : raw
      const why = bedrock ? bedrockTargetProblem(target) : targetProblem(target)
      if (why !== null) throw new PassthroughPath({ reason: why })
      const path = target.split('?', 1)[0] ?? ''
      call.routedTo(provider.id)
      // pass-through spends the provider's own key: never without a gateway key that was granted it
      const principal = grantedProvider(request.principal, provider.id)
      for (const name of METHOD_OVERRIDES) {
        if (request.headers[name] !== undefined) throw new UnforwardableRequest({ reason: `${name} would have the provider route the call by another method` })
      }
      if (Number(request.headers['content-length'] ?? 0) > limit) throw new RequestTooLarge({ limit_mb: limitMb })

      const method = request.method
      const c = bedrock ? classifyBedrock(method, path) : classify(protocol, method, path, provider.platform)
      // the gateway's Vertex AI credentials reach the provider's own project and location only
      if (provider.platform === 'vertex' && !inVertexScope(path)) throw new PassthroughPath({ reason: 'a project or location other than the provider\'s' })
      const reader = c.reader === null ? undefined : READERS[c.reader]
      const access: ObjectAccess = shared ? { kind: 'none' } : objectAccess(provider.protocol, method, c)
      if (access.kind === 'unattributable') throw new UnattributableEndpoint({ method, path: path === '' ? '/' : path.slice(0, 200), provider: provider.id })
      const stream = isStream(request.body) ? request.body : undefined
      // a body that is no upload is read whole, whatever its type, unless the account is shared:
      // the objects it names must be the caller's
      const verbatim = isUpload(c)
      const readAll = reader !== undefined || (!shared && !verbatim)
      let parsed: Json | null = null
      let text = ''
      let upload: string | Readable | undefined
      if (stream !== undefined && (readAll || isJsonType(request.headers['content-type']))) {
        // read whole: what it costs, or which model it names, is in it
        text = await readBody(stream, limit, limitMb)
        let json: unknown
        try { json = JSON.parse(text) } catch {}
        // the walks after parsing are iterative, but a provider's parser need not be
        if (json !== null && typeof json === 'object' && nestedDeeperThan(json, MAX_JSON_DEPTH)) throw new BodyTooDeep({ max: MAX_JSON_DEPTH })
        if (isObj(json)) parsed = json
        else if (reader !== undefined || (readAll && text.trim() !== '')) throw new InvalidJson()
        // an upload's bytes go on as they came, a JSON file's too
        if ((parsed === null || verbatim) && text !== '') upload = text
      } else if (stream !== undefined) {
        upload = uploadOf(stream, limit, limitMb)
      }
      if (reader !== undefined) call.speaks(reader.client)
      // an upload read as JSON said what it names; one not read may name any model
      const model = modelOf(principal, c, parsed, c.cost, method, path, parsed === null ? upload : undefined)
      if (!shared) await reachable(principal, access, parsed)
      call.resolved(model, c.reader === 'gemini' ? c.method?.toLowerCase() === 'streamgeneratecontent' : bedrock ? bedrockStreams(c) : parsed?.stream === true, model?.upstreamModel)
      if (c.cost === 'free') call.free()
      else if (c.cost === 'unmetered') call.spendsUnread()
      const body = await admit(p, model, parsed ?? {})
      // the name the client gave (a snapshot's, perhaps) is the one sent on
      const name = c.reader === 'gemini' || provider.platform !== undefined ? c.pathModel ?? '' : typeof parsed?.model === 'string' ? parsed.model : ''
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
      // (Vertex AI's rawPredict takes no model in its body: the path names it)
      const sent = parsed === null || verbatim ? upload : reader !== undefined && !(provider.platform === 'vertex' && c.reader === 'messages') ? reader.request(body, ctx).body : body
      const headers = forwarded(request, parsed !== null && !verbatim, bedrock)
      const answer = await send(p, {
        providers: [provider.id],
        model,
        plan: () => ({ method, path: target, body: sent, protocol, headers, forwarded: true })
      })
      const status = answer.res.statusCode
      const secrets = answer.upstream.secrets
      reply.status(status)
      // an error may echo the provider's key: read whole and masked
      if (status >= 400 && method !== 'HEAD') return await relayMapped(p, answer, answered(request, answer, false), (error) => maskCredentials(error, secrets))
      if (method !== 'HEAD' && status < 300 && readsAnswer(access)) return await objectAnswer(p, answer, access, principal, target, headers)
      if (reader === undefined || parsed === null || method === 'HEAD') return relayBytes(p, answer, answered(request, answer, true))
      const out = answered(request, answer, false)
      // a Bedrock event stream goes to the client as it came (its SDK reads the framing), its usage read on the way
      if (bedrock && String(answer.res.headers['content-type'] ?? '').startsWith('application/vnd.amazon.eventstream')) {
        return relayMeteredBytes(p, answer, answered(request, answer, true), bedrockStreamMeter(c.reader === 'converse' ? 'converse' : 'invoke', ctx))
      }
      const sse = String(answer.res.headers['content-type'] ?? '').includes('text/event-stream')
      // a Gemini stream asked for without alt=sse comes as one JSON array of chunks
      return sse ? relayStream(p, answer, { pair: reader, ctx, headers: out }) : await relayJson(p, answer, { pair: reader, ctx, headers: out, array: c.reader === 'gemini' })
    }

    /** A Vertex AI path below projects/ names the provider's project and location (compared as Google does: case-sensitively). */
    function inVertexScope (path: string): boolean {
      const parts = path.split('/').filter((s) => s !== '')
      const at = parts.indexOf('projects')
      if (at === -1) return true
      return parts[at + 1] === provider.project && (parts.length <= at + 2 || (parts[at + 2] === 'locations' && parts[at + 3] === provider.location))
    }

    /** Endpoints whose body is the client's file, sent on as it comes. */
    function isUpload (c: Classified): boolean {
      if (c.cost === 'metered') return false
      const s = c.segments.join('/')
      if (s === 'files') return true
      if (provider.protocol !== 'openai') return false
      return /^uploads\/[^/]+\/parts$/.test(s) || s === 'audio/transcriptions' || s === 'audio/translations' || s === 'images/edits' || s === 'images/variations'
    }

    /**
     * The catalog model a call names, which the key must be granted: a path's (`models/{m}`,
     * a Gemini model's method) and a JSON body's `model`, each; a Gemini call is the path's
     * model's, any other the body's. A metered call must name one; a call whose body the gateway
     * cannot read may name any, so only a key granted every model may make it when it may spend.
     */
    function modelOf (principal: Principal, c: Classified, parsed: Json | null, cost: Cost, method: string, path: string, upload: string | Readable | undefined): CatalogModel | null {
      const inPath = c.pathModel === null ? null : grantedUpstreamModel(gateway, principal, provider.id, c.pathModel)
      let inBody: CatalogModel | null = null
      if (parsed !== null && parsed.model !== undefined) {
        if (typeof parsed.model !== 'string' || parsed.model === '') throw new InvalidField({ field: 'model', reason: 'must be a model name' })
        inBody = grantedUpstreamModel(gateway, principal, provider.id, gemini && parsed.model.startsWith('models/') ? parsed.model.slice('models/'.length) : parsed.model)
      }
      // a platform's URL names the model it calls (Azure's deployment, Vertex AI's model); its body's is not read there
      const model = gemini || provider.platform !== undefined ? inPath ?? inBody : inBody ?? inPath
      if (model !== null) return model
      if (cost === 'metered') throw new MissingField({ field: 'model' })
      if (cost === 'unmetered' && upload !== undefined && !principal.models.includes('*')) {
        throw new UnreadableModel({ method, path: path.slice(0, 200), provider: provider.id })
      }
      return null
    }

    /** Refuses, with nothing sent, a call that reaches an object its organization did not make: the path's, or one its body names. */
    async function reachable (principal: Principal, access: ObjectAccess, parsed: Json | null): Promise<void> {
      const ids = access.kind === 'member' ? [access.id] : []
      if (parsed !== null) for (const ref of referencesIn(provider.protocol, parsed, fileHosts)) ids.push(ref.id)
      if (ids.length === 0) return
      const owned = await objects.owned(provider.id, principal.org, ids)
      const foreign = ids.find((id) => !owned.has(id))
      if (foreign !== undefined) throw new ObjectNotFound({ id: foreign.slice(0, 200), provider: provider.id })
    }

    const readsAnswer = (access: ObjectAccess): boolean =>
      access.kind === 'create' || access.kind === 'list' || (access.kind === 'member' && (access.reads || access.removes))

    /** Records what an answer says of the caller's objects (made, yielded, deleted), filters a list to them, and sends it. */
    async function objectAnswer (p: Pipe, answer: Answer, access: ObjectAccess, principal: Principal, target: string, headers: Record<string, string | string[]>): Promise<FastifyReply> {
      const out = answered(p.request, answer, false)
      if (access.kind === 'list') return await sendRead(p, answer.res.statusCode, out, await ownList(p, answer, access.collection, principal, target, headers))
      const text = await readWhole(p, answer)
      const json = parseJson(text)
      const owner = { org: principal.org, project: principal.project }
      if (access.kind === 'member' && access.removes) await objects.forget(provider.id, access.id)
      else if (isObj(json)) {
        const made: ObjectRef[] = access.kind === 'create' ? createdBy(access.collection, json) : access.kind === 'member' ? yieldedBy(access.collection, json) : []
        if (made.length > 0) await objects.claim(provider.id, made, owner, gateway.clock.now())
      }
      return await sendRead(p, answer.res.statusCode, out, text)
    }

    /**
     * The provider's answer headers as the client gets them: masked, and a Gemini resumable
     * upload's URL made the same URL through this gateway, so that each step of the upload (the
     * last names the file made) comes this way too.
     */
    function answered (request: FastifyRequest, answer: Answer, keepLength: boolean): Record<string, string | string[]> {
      const out = maskHeaders(answerHeaders(answer.res.headers, keepLength), answer.upstream.secrets)
      const upload = out['x-goog-upload-url']
      if (gemini && typeof upload === 'string') out['x-goog-upload-url'] = throughGateway(request, upload)
      return out
    }

    /**
     * A list answer with the caller's objects only. A list paged by ids is read on, page after
     * page (MAX_LIST_PAGES at most), until it holds as many of the caller's objects as the client
     * asked for or the provider has no more: its cursors name the caller's objects only. A list
     * paged by an opaque token is filtered page by page, its token kept.
     */
    async function ownList (p: Pipe, first: Answer, collection: Extract<ObjectAccess, { kind: 'list' }>['collection'], principal: Principal, target: string, headers: Record<string, string | string[]>): Promise<string> {
      const listing = collection.list as NonNullable<typeof collection.list>
      const q = target.indexOf('?')
      const params = new URLSearchParams(q === -1 ? '' : target.slice(q + 1))
      // a page as long as the client asked for; with no limit, the provider's own page, read on while it holds fewer than DEFAULT_PAGE
      const asked = Number(params.get('limit') ?? NaN)
      const want = Number.isInteger(asked) && asked > 0 ? asked : null
      const paged = listing.cursor !== 'token' && !params.has('before') && !params.has('before_id')
      const kept: Json[] = []
      let answer = first
      let last: Json = {}
      let field = listing.items[0] as string
      let more = false
      for (let pages = 1; ; pages++) {
        const json = parseJson(await readWhole(p, answer))
        if (!isObj(json)) throw new UpstreamUnavailable({}, { cause: new Error(`upstream ${provider.id} answered a list that is not a JSON object`) })
        // Google leaves an empty list out
        const list = listItems(collection, json) ?? { field, items: [] }
        field = list.field
        last = json
        const ids = list.items.map((item) => itemId(collection, item))
        const owned = await objects.owned(provider.id, principal.org, ids.filter((id): id is string => id !== undefined))
        const mine = list.items.filter((_item, i) => owned.has(ids[i] ?? ''))
        const yielded = mine.flatMap((item) => yieldedBy(collection, item))
        if (yielded.length > 0) await objects.claim(provider.id, yielded, { org: principal.org, project: principal.project }, gateway.clock.now())
        kept.push(...mine)
        more = json.has_more === true
        const after = ids.at(-1)
        if (!paged || !more || kept.length >= (want ?? DEFAULT_PAGE) || pages >= MAX_LIST_PAGES || after === undefined) break
        answer = await send(p, { providers: [provider.id], model: null, plan: () => ({ method: 'GET', path: withParam(target, listing.cursor, after), protocol, headers, forwarded: true }) })
        if (answer.res.statusCode !== 200) {
          // the page read so far is the answer; the client reads on from its last object
          answer.res.body.resume()
          more = true
          break
        }
      }
      if (listing.cursor === 'token') return JSON.stringify({ ...last, [field]: kept })
      const page = want === null ? kept : kept.slice(0, want)
      const id = (item: Json | undefined): string | null => item === undefined ? null : itemId(collection, item) ?? null
      return JSON.stringify({ ...last, [field]: page, has_more: more || page.length < kept.length, first_id: id(page[0]), last_id: id(page.at(-1)) })
    }

    /** A URL at the provider's base, as the same URL through this gateway's pass-through. */
    function throughGateway (request: FastifyRequest, upload: string): string {
      let u: URL
      try { u = new URL(upload) } catch { return upload }
      if (u.origin !== base.origin || !u.pathname.startsWith(`${basePath}/`)) return upload
      return `${request.protocol}://${request.host}${prefix}${u.pathname.slice(basePath.length)}${u.search}`
    }

    // Azure's clients send their key as api-key: the gateway's key, there
    const routeConfig: FastifyContextConfig = { family: messages ? 'messages' : gemini ? 'gemini' : 'openai', apiKeyHeader: messages || (gemini ? 'x-goog-api-key' : provider.platform === 'azure' ? 'api-key' : false), metered: true, endpoint: 'passthrough', protocol }
    if (gemini) routeConfig.apiKeyQuery = 'key'
    scope.route({ method: METHODS, url: `/${provider.id}`, config: routeConfig, handler: handle })
    scope.route({ method: METHODS, url: `/${provider.id}/*`, config: routeConfig, handler: handle })
  }
}
