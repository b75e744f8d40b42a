import httpProxy from '@fastify/http-proxy'
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import { StringDecoder } from 'node:string_decoder'
import { Readable, Transform, type TransformCallback } from 'node:stream'
import type { ProviderConfig } from '../config/schema.js'
import type { AdmissionContext } from '../plugins/api/index.js'
import type { CallRecord } from '../plugins/gateway/call.js'
import { NoOrgContext, PassthroughForbidden, PassthroughPath, RequestTimeout, RequestTooLarge, UpstreamUnavailable } from '../plugins/gateway/errors.js'
import { hooksOf } from '../plugins/gateway/core.js'
import { runSeries } from '../plugins/gateway/hooks.js'
import { usageFromResponses } from '../plugins/translation/responses-output.js'
import type { Json, Usage } from '../plugins/translation/types.js'
import { usageFromMessages, usageFromOpenAI } from '../plugins/translation/usage.js'

// /passthrough/{provider}/*: a provider's own API (batches, files, audio, moderation, its model
// list...) behind the gateway's keys, proxied with @fastify/http-proxy to the provider's base_url,
// any method, request and answer streamed as they are.
//
// The chain applies as on /v1: the IP rate limit and auth in onRequest, then here, before
// anything is sent: the key's grant (its `passthrough` list names the provider, else 403), the
// path check (it must stay under the provider's base path, else 400) and the admission hooks
// (idempotency, quota, balance where the call names a priced model, guardrails). The client's
// credentials and the gateway's own headers never reach the provider; its own key is sent.
//
// Metering: the chat completions, Messages, Responses and embeddings endpoints (POST) have their
// JSON body read (within the body limit) for the model and the stream flag; their answers, JSON or
// SSE, are scanned for the provider's usage as they pass, without holding them back. The model
// is priced from the catalog when a model of this provider has that upstream name (or id), else
// recorded at cost 0. Every other call streams through untouched and is recorded with zero
// tokens. Each call is one usage record (endpoint `passthrough`), committed before the answer's
// last byte, like every metered call.

/** Endpoints whose answers carry usage, by the end of the path. */
const METERED = /(?:^|\/)(chat\/completions|messages|responses|embeddings)$/

/** How much of a whole (non-SSE) answer is kept to read its usage; a larger one is not metered. */
const MAX_JSON_ANSWER = 8 * 1024 * 1024
/** A whole answer up to this size (by its content-length) is read before it is sent, in one write. */
const SMALL_ANSWER = 256 * 1024

/** Headers that never go to the provider: the client's credentials and the gateway's own. */
const CLIENT_ONLY = new Set(['authorization', 'x-api-key', 'cookie', 'idempotency-key', 'x-locale', 'proxy-authorization', 'forwarded', 'x-forwarded-for', 'x-forwarded-host', 'x-forwarded-proto', 'x-real-ip'])

/** Why the path after the provider's prefix could leave its base path, or null when it cannot. */
export function pathEscape (rawPath: string): string | null {
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

const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v)

/** The usage an answer object (or SSE event) reports, whichever of the providers' shapes it has. */
function usageIn (o: Json, messagesSoFar: Json | null): { usage: Usage | null, messages: Json | null } {
  if (o.type === 'message_start' && isObj(o.message) && isObj(o.message.usage)) return { usage: usageFromMessages(o.message.usage), messages: { ...o.message.usage } }
  // Messages stream counts in message_delta are cumulative: they replace what message_start said
  if (o.type === 'message_delta' && isObj(o.usage)) {
    const merged = { ...(messagesSoFar ?? {}), ...o.usage }
    return { usage: usageFromMessages(merged), messages: merged }
  }
  if (o.type === 'message' && isObj(o.usage)) return { usage: usageFromMessages(o.usage), messages: null }
  if (typeof o.type === 'string' && o.type.startsWith('response.') && isObj(o.response) && isObj(o.response.usage)) return { usage: usageFromResponses(o.response.usage), messages: null }
  if (o.object === 'response' && isObj(o.usage)) return { usage: usageFromResponses(o.usage), messages: null }
  if (isObj(o.usage)) return { usage: usageFromOpenAI(o.usage), messages: null }
  return { usage: null, messages: messagesSoFar }
}

/** An SSE chunk holding the end of a stream: held back until the call's record is committed. */
const STREAM_END = /data: \[DONE\]|"type":\s*"(?:message_stop|response\.completed|response\.incomplete|response\.failed)"/

/**
 * Passes the provider's answer through unchanged while reading its usage: SSE lines as they come
 * (only the `data:` lines that mention usage are parsed), or a whole JSON body up to
 * MAX_JSON_ANSWER. When the answer ends, `onEnd` runs, and the last chunk waits for it, so a
 * client that has the whole answer can count on its usage record and charge: a body's last chunk,
 * or the chunk of a stream's end marker (every chunk before it goes out at once).
 */
class UsageTap extends Transform {
  usage: Usage | null = null
  private messages: Json | null = null
  private readonly decoder = new StringDecoder('utf8')
  private partial = ''
  private readonly json: Buffer[] = []
  private jsonSize = 0
  private held: Buffer[] = []

  /** `sse`: scan events; `json`: keep the body to read it at the end; `none`: only pass it on. */
  constructor (private readonly kind: 'sse' | 'json' | 'none', private readonly onEnd: (usage: Usage | null) => Promise<void> | undefined) { super() }

  private scan (text: string): void {
    const lines = (this.partial + text).split('\n')
    this.partial = lines.pop() ?? ''
    for (const line of lines) this.line(line)
  }

  private line (line: string): void {
    if (!line.startsWith('data:') || !line.includes('usage')) return
    let o: unknown
    try { o = JSON.parse(line.slice(5)) } catch { return }
    if (!isObj(o)) return
    const found = usageIn(o, this.messages)
    this.messages = found.messages
    if (found.usage !== null) this.usage = found.usage
  }

  override _transform (chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    if (this.kind === 'sse') {
      const text = this.decoder.write(chunk)
      this.scan(text)
      if (this.held.length > 0 || STREAM_END.test(text)) this.held.push(chunk)
      else this.push(chunk)
      cb()
      return
    }
    if (this.kind === 'json' && this.jsonSize <= MAX_JSON_ANSWER) {
      this.jsonSize += chunk.length
      this.json.push(chunk)
    }
    // a whole body: one chunk behind, so that its last one is still here when it ends
    const previous = this.held.pop()
    this.held.push(chunk)
    cb(null, previous)
  }

  override _flush (cb: TransformCallback): void {
    if (this.kind === 'sse') {
      this.scan(this.decoder.end())
      if (this.partial !== '') this.line(this.partial)
    } else if (this.kind === 'json' && this.jsonSize <= MAX_JSON_ANSWER) {
      try {
        const o = JSON.parse(Buffer.concat(this.json).toString('utf8')) as unknown
        if (isObj(o)) this.usage = usageIn(o, null).usage
      } catch {}
    }
    let ended: Promise<void> | undefined
    try {
      ended = this.onEnd(this.usage)
    } catch (err) {
      cb(err as Error)
      return
    }
    const release = (): void => {
      for (const c of this.held) this.push(c)
      this.held = []
      cb()
    }
    if (ended === undefined) release()
    else ended.then(release, (err: Error) => { cb(err) })
  }
}

export interface PassthroughOptions { provider: ProviderConfig }

/** The length of a body the gateway re-serialized, for the request's content-length. */
const sentLength = new WeakMap<FastifyRequest, number>()
/** The calls to a metered endpoint. */
const meteredRequests = new WeakSet<FastifyRequest>()

/** The pass-through routes of one provider; registered under /passthrough/{id}. */
export default async function passthroughRoutes (scope: FastifyInstance, opts: PassthroughOptions): Promise<void> {
  const { provider } = opts
  const gateway = scope.gateway
  const hooks = hooksOf(gateway)
  const { config, catalog } = gateway
  const base = new URL(provider.base_url as string)
  const prefix = `/passthrough/${provider.id}`
  const limitMb = config.server.body_limit_mb
  const limit = Math.floor(limitMb * 1024 * 1024)
  const timeoutMs = Math.round(config.server.request_timeout_s * 1000)
  const messages = provider.protocol === 'messages'

  // the provider's credentials and fixed headers, sent with every call
  const fixed: Record<string, string> = { ...(provider.headers ?? {}) }
  if (provider.api_key !== '') {
    if (messages) fixed['x-api-key'] = provider.api_key
    else fixed.authorization = `Bearer ${provider.api_key}`
  }
  // the gateway's own headers ({prefix}*), not sent on; with an empty prefix there are none to tell apart
  const gatewayHeader = gateway.headers.trace.slice(0, gateway.headers.trace.length - 'Trace-ID'.length).toLowerCase()

  /** Sends `text` up instead of the body stream that was read (null: nothing to replace). */
  function replaceBody (request: FastifyRequest, text: string | null): void {
    if (text === null) return
    const bytes = Buffer.from(text, 'utf8')
    sentLength.set(request, bytes.length)
    request.body = Readable.from([bytes])
  }

  /** The call's admission: grant, path, body, hooks. */
  async function admit (request: FastifyRequest, reply: FastifyReply): Promise<void> {
    const call = request.call as CallRecord
    call.provider = provider.id
    const principal = request.principal
    // pass-through spends the provider's own key: never without a gateway key that was granted it
    if (principal === null) throw new NoOrgContext()
    if (!principal.passthrough.includes(provider.id)) throw new PassthroughForbidden({ provider: provider.id })
    const declared = Number(request.headers['content-length'] ?? 0)
    if (declared > limit) throw new RequestTooLarge({ limit_mb: limitMb })

    const path = (request.raw.url ?? '').slice(prefix.length).split('?', 1)[0] ?? ''
    let body: Json = {}
    let parsedBody = false
    const stream = request.body as Readable | undefined
    if (request.method === 'POST' && METERED.test(path) && stream !== undefined && typeof stream.pipe === 'function') {
      meteredRequests.add(request)
      const text = await readBody(stream, limit, limitMb)
      let parsed: unknown
      try { parsed = JSON.parse(text) } catch {}
      if (isObj(parsed)) {
        body = parsed
        parsedBody = true
        const name = typeof body.model === 'string' ? body.model : ''
        call.model = catalog.forUpstream(provider.id, name) ?? null
        call.modelName = name
        call.stream = body.stream === true
        // a chat stream reports its usage only when asked: always asked, so every stream is metered
        if (call.stream && !messages && path.endsWith('chat/completions')) {
          body.stream_options = { ...(isObj(body.stream_options) ? body.stream_options : {}), include_usage: true }
        }
      }
      if (!parsedBody) replaceBody(request, text)
      call.modelName ??= ''
    } else {
      call.modelName = ''
      if (stream !== undefined && typeof stream.pipe === 'function') request.body = stream.pipe(new UploadLimit(limit, limitMb))
    }
    call.requestBody = body
    const ctx: AdmissionContext = { request, reply, call, principal, model: call.model, body, keepContent: () => { call.keepContent = true } }
    await runSeries(hooks.onAdmission, ctx)
    // what goes up: the body as the hooks left it (they may have changed or replaced it)
    if (parsedBody) {
      // a JSON body is handed over as the object: the proxy serializes it once, with its length
      if (/^application\/json\s*(;|$)/i.test(String(request.headers['content-type'] ?? ''))) request.body = ctx.body
      else replaceBody(request, JSON.stringify(ctx.body))
    }
    call.attempted = true
    call.answering()
  }

  // a path that could leave the provider's base path is refused before anything else reads it
  scope.addHook('onRequest', (request, _reply, done) => {
    const path = (request.raw.url ?? '').slice(prefix.length).split('?', 1)[0] ?? ''
    const why = pathEscape(path)
    if (why !== null) { done(new PassthroughPath({ reason: why })); return }
    done()
  })

  await scope.register(httpProxy, {
    upstream: base.origin,
    rewritePrefix: base.pathname.replace(/\/$/, ''),
    httpMethods: ['DELETE', 'GET', 'HEAD', 'PATCH', 'POST', 'PUT', 'OPTIONS'],
    config: { family: messages ? 'messages' : 'openai', apiKeyHeader: messages, metered: true, endpoint: 'passthrough', protocol: provider.protocol },
    disableRequestLogging: true,
    undici: { connections: provider.connections, headersTimeout: timeoutMs, bodyTimeout: timeoutMs, keepAliveTimeout: 30_000 },
    preHandler: admit,
    replyOptions: {
      rewriteRequestHeaders: (_request, headers) => {
        const out: Record<string, string | string[] | undefined> = {}
        for (const [name, value] of Object.entries(headers)) {
          const lower = name.toLowerCase()
          if (CLIENT_ONLY.has(lower) || (gatewayHeader !== '' && lower.startsWith(gatewayHeader))) continue
          out[lower] = value as string | string[] | undefined
        }
        Object.assign(out, fixed)
        const length = sentLength.get(_request as unknown as FastifyRequest)
        if (length !== undefined) {
          out['content-length'] = String(length)
          delete out['transfer-encoding']
        }
        if (messages && out['anthropic-version'] === undefined) out['anthropic-version'] = '2023-06-01'
        return out as Record<string, string>
      },
      onResponse: (request, reply, res) => {
        const call = request.call as CallRecord
        call.firstByte()
        const status = reply.statusCode
        const sse = String((res as unknown as { headers: Record<string, unknown> }).headers['content-type'] ?? '').includes('text/event-stream')
        // only the answers of the metered endpoints are read; every other one only passes
        const metered = meteredRequests.has(request as unknown as FastifyRequest) && status < 400
        const headers = (res as unknown as { headers: Record<string, unknown> }).headers
        const length = Number(headers['content-length'] ?? NaN)
        if (metered && !sse && length <= SMALL_ANSWER) {
          // a small whole answer (most JSON calls) is read, metered, then sent in one write
          const chunks: Buffer[] = []
          res.stream.on('data', (c: Buffer) => { chunks.push(c) })
          res.stream.on('error', (err: Error) => { void reply.send(err) })
          res.stream.on('end', () => {
            const body = Buffer.concat(chunks)
            let usage: Usage | null = null
            try {
              const o = JSON.parse(body.toString('utf8')) as unknown
              if (isObj(o)) usage = usageIn(o, null).usage
            } catch {}
            const sent = (): void => { void reply.send(body) }
            const ended = call.end({ status: 'ok', usage, complete: true })
            if (ended === undefined) sent()
            else ended.then(sent, (err: Error) => { void reply.send(err) })
          })
          return
        }
        const tap = new UsageTap(!metered ? 'none' : sse ? 'sse' : 'json', (usage) => call.end({ status: status < 400 ? 'ok' : 'upstream_error', usage: metered ? usage : null, complete: true }))
        call.progress = { usage: () => tap.usage, relayedText: () => '' }
        res.stream.on('error', (err: Error) => { tap.destroy(err) })
        void reply.send(res.stream.pipe(tap))
      },
      onError: (reply, { error }) => {
        const call = reply.request.call as CallRecord | null
        const timedOut = /timeout/i.test(String((error as { code?: string }).code ?? error.name))
        if (call !== null) call.failure = timedOut ? 'timeout' : 'upstream_error'
        const cause = (error as { cause?: unknown }).cause
        if (cause instanceof Error && (cause as { code?: string }).code === 'FST_ERR_CTP_BODY_TOO_LARGE') { void reply.send(new RequestTooLarge({ limit_mb: limitMb })); return }
        if (isRequestTooLarge(error) || isRequestTooLarge(cause)) { void reply.send(new RequestTooLarge({ limit_mb: limitMb })); return }
        void reply.send(timedOut ? new RequestTimeout({ seconds: config.server.request_timeout_s }) : new UpstreamUnavailable())
      }
    }
  })

}

const isRequestTooLarge = (e: unknown): boolean => (e as { code?: string } | null)?.code === 'FST_ERR_REQUEST_TOO_LARGE' || (e as { key?: string } | null)?.key === 'request_too_large'
