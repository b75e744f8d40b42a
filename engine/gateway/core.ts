import { randomUUID } from 'node:crypto'
import { EventEmitter } from 'node:events'
import type { ErrorObject } from 'ajv'
import type { FastifyBaseLogger, FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify'
import type { Registry } from 'prom-client'
import type { Config } from '../../config/schema.js'
import type { CallProtocol, Endpoint, Gateway, HeaderNames, RefusalSpec } from '../../plugins/api/index.js'
import { systemClock, type Clock } from '../kernel/clock.js'
import { Catalog } from './catalog.js'
import { Call } from './call.js'
import {
  BodyTooDeep, errorBody, Internal, InvalidBody, InvalidField, InvalidJson, InvalidQuery, isGatewayError, MalformedRequest, MissingField, Refusal, refusalCode, RequestTooLarge, RouteNotFound,
  UnsupportedMediaType, UpstreamClientError, type ErrorBodyInput, type ErrorFamily, type GatewayError
} from '../kernel/errors.js'
import { HookRegistry } from './hooks.js'
import { localize, negotiateLocale } from '../kernel/i18n/index.js'
import { MAX_JSON_DEPTH, nestedDeeperThan } from './validation.js'
import { problemList } from '../kernel/schema-check.js'
import type { Store } from '../store/types.js'
import type { Protocol } from '../translation/types.js'
import type { HealthBook } from '../upstream/health.js'
import { Upstreams } from '../upstream/index.js'

// The gateway core that every app (and every plugin test) shares: the services plugins reach on
// `fastify.gateway`, and what runs around every request: the trace id, the call record of a
// metered route, body parsing and the one error handler that renders every error in its route
// family's shape.

export { systemClock } from '../kernel/clock.js'

export function headerNames (prefix: string): HeaderNames {
  return { trace: `${prefix}Trace-ID`, model: `${prefix}Model`, provider: `${prefix}Provider`, droppedParams: `${prefix}Dropped-Params`, fallback: `${prefix}Fallback`, overhead: `${prefix}Overhead-Ms`, tags: `${prefix}Tags` }
}

// traceId()'s time part, made once per millisecond
let prefixMs = -1
let prefix = ''

/**
 * A request's trace id: a UUID in the version 7 layout, 48 bits of Unix milliseconds then random
 * bits (taken from randomUUID's pooled entropy). Unique like any random UUID, and ordered by
 * time, so the usage table's primary key, which is made from it, grows at its end.
 */
export function traceId (now = Date.now()): string {
  if (now !== prefixMs) {
    const ms = now.toString(16).padStart(12, '0')
    prefixMs = now
    prefix = `${ms.slice(0, 8)}-${ms.slice(8, 12)}-7`
  }
  return prefix + randomUUID().slice(15) // randomUUID(): xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx
}

/** The gateway's services and hooks, and what the core keeps for itself. */
export interface GatewayCore {
  gateway: Gateway
  hooks: HookRegistry
}

export interface GatewayParts {
  config: Config
  store: Store
  clock?: Clock
  log: FastifyBaseLogger
  /** Provider health shared with other configurations of the process. */
  health?: HealthBook
  /** The process's metrics registry. */
  metrics: Registry
}

const hooksByGateway = new WeakMap<Gateway, HookRegistry>()

/** The hooks registered on a gateway, for the call pipeline (plugins add them with gateway.addHook). */
export function hooksOf (gateway: Gateway): HookRegistry {
  const hooks = hooksByGateway.get(gateway)
  if (hooks === undefined) throw new Error('not a gateway made by createGateway()')
  return hooks
}

export function createGateway (parts: GatewayParts): GatewayCore {
  const clock = parts.clock ?? systemClock
  const hooks = new HookRegistry()
  const upstreams = new Upstreams(parts.config, clock, { health: parts.health })
  const gateway: Gateway = {
    config: parts.config,
    store: parts.store,
    catalog: new Catalog(parts.config.models, (id) => upstreams.configured(id)),
    upstreams,
    clock,
    headers: headerNames(parts.config.server.header_prefix),
    log: parts.log,
    addHook: (name, fn) => { hooks.add(name, fn) },
    refusal: (spec: RefusalSpec) => new Refusal(spec),
    events: new EventEmitter(),
    metrics: parts.metrics
  }
  hooksByGateway.set(gateway, hooks)
  return { gateway, hooks }
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** A metered route's endpoint name in usage records, and its client protocol. */
    endpoint?: Endpoint
    protocol?: Protocol
  }
}

// A Gemini method call under /v1 (`/v1/models/{model}:generateContent`); /v1/models/{id} is OpenAI's.
const GEMINI_V1 = /^\/v1\/models\/[^?]*(?::|%3[Aa])[A-Za-z]+(?:\?|$)/

/**
 * The error family of a request whose route names none: one that matched no route, or a Gemini
 * method under /v1, whose path it shares with OpenAI's (the only place that looks at the URL).
 */
export function familyOfUrl (url: string): ErrorFamily {
  if (url.startsWith('/v1/messages')) return 'messages'
  if (/^\/mcp(?:[/?]|$)/.test(url)) return 'mcp'
  if (/^\/v1beta(?:[/?]|$)/.test(url) || GEMINI_V1.test(url)) return 'gemini'
  return 'openai'
}

/** A route schema's verdict (Fastify's FST_ERR_VALIDATION) as the gateway error of its part of the request, worded as every schema problem is. */
function validationError (err: FastifyError & { validation?: ErrorObject[], validationContext?: string }, request: FastifyRequest): GatewayError {
  const first = problemList(err.validation ?? [], '')[0]
  if (first === undefined) return new InvalidBody()
  const name = first.path === '(root)' ? '' : first.path
  switch (err.validationContext) {
    case 'querystring': {
      const given = new URLSearchParams(request.url.split('?')[1] ?? '').getAll(name).length
      if (first.missing) return new InvalidQuery({ param: name, reason: 'is required' })
      return new InvalidQuery({ param: name, reason: given > 1 ? 'must be given once' : first.what })
    }
    case 'body':
      if (name === '') return new InvalidBody()
      return first.missing ? new MissingField({ field: name }) : new InvalidField({ field: name, reason: first.what })
    default:
      return new InvalidField({ field: name === '' ? String(err.validationContext) : name, reason: first.what })
  }
}

/** Maps what Fastify itself throws (body parsing, limits, route schemas) onto gateway errors. */
function asGatewayError (err: FastifyError, config: Config, request: FastifyRequest): GatewayError | UpstreamClientError | undefined {
  if (isGatewayError(err) || err instanceof UpstreamClientError) return err
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE': return new RequestTooLarge({ limit_mb: config.server.body_limit_mb })
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE': return new UnsupportedMediaType()
    case 'FST_ERR_CTP_EMPTY_JSON_BODY': return new InvalidJson()
    case 'FST_ERR_CTP_INVALID_JSON_BODY': return new InvalidJson()
  }
  if (err instanceof SyntaxError && err.statusCode === 400) return new InvalidJson()
  if (err.code === 'FST_ERR_VALIDATION') return validationError(err, request)
  return undefined
}

/**
 * Sets up `app` around a gateway: decorators, the trace id on every response, the call record of
 * each metered request, JSON bodies, and the error and not-found handlers.
 */
export function installGateway (app: FastifyInstance, core: GatewayCore): void {
  const { gateway, hooks } = core
  const { config, headers } = gateway
  app.decorate('gateway', gateway)
  app.decorateRequest('principal', null)
  app.decorateRequest('call', null)
  app.decorateRequest('routeConfig', null as unknown as FastifyRequest['routeConfig'])

  app.addHook('onRequest', (request, reply, done) => {
    const rc = request.routeOptions.config
    request.routeConfig = rc
    reply.header(headers.trace, request.id)
    if (rc.metered === true) startCall(gateway, request, reply, rc.endpoint ?? 'chat.completions', rc.protocol ?? 'openai', hooks)
    done()
  })

  // Clients send JSON with or without the right Content-Type (curl -d sends a form type): every
  // body is parsed as JSON, within the body limit and MAX_JSON_DEPTH.
  app.removeAllContentTypeParsers()
  app.addContentTypeParser('*', { parseAs: 'string' }, (_request, body, done) => {
    if (body === '') { done(new InvalidJson()); return }
    let parsed: unknown
    try {
      parsed = JSON.parse(body as string)
    } catch {
      done(new InvalidJson())
      return
    }
    if (nestedDeeperThan(parsed, MAX_JSON_DEPTH)) done(new BodyTooDeep({ max: MAX_JSON_DEPTH }))
    else done(null, parsed)
  })

  app.setErrorHandler(async (err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const family = request.routeOptions.config?.family ?? familyOfUrl(request.url)
    const known = asGatewayError(err, config, request)
    // the client closed its connection, or client_timeout_s cut it off, while its body was read:
    // not the gateway's error, and no one is left to read the answer
    const gone = known === undefined && err.code === 'ECONNRESET' && request.raw.destroyed
    if (gone) request.log.info({ err }, 'connection closed before the request was read')
    else if (known === undefined) request.log.error({ err }, 'unhandled error')
    else if (known.statusCode >= 500) request.log.warn({ err: known, cause: known.cause }, known.message)
    const shown = known ?? (gone ? new MalformedRequest() : new Internal({ trace_id: request.id }))
    // a metered call ends before its error is sent: what it took (an idempotency key, a hold)
    // is given back by the time the client can retry
    const call = request.call === null ? null : callOf(request)
    if (call !== null) {
      call.answering()
      if (!call.done) {
        try {
          await call.endOnError(shown.statusCode, shown instanceof UpstreamClientError ? undefined : refusalCode(shown))
        } catch (endErr) {
          request.log.error({ err: endErr }, 'end-of-call work failed')
        }
      }
    }
    return sendError(request, reply, family, shown)
  })

  app.setNotFoundHandler(notFound)
}

/**
 * Starts the call of a request: in onRequest for a metered route, or by the route itself for a
 * request that is a call only sometimes (an MCP tools/call among MCP's other messages). It ends
 * as a client abort if the client leaves before its answer is written whole.
 */
export function startCall (gateway: Gateway, request: FastifyRequest, reply: FastifyReply, endpoint: Endpoint, protocol: CallProtocol, hooks = hooksOf(gateway)): Call {
  const call = new Call(gateway, hooks, request, reply, endpoint, protocol)
  request.call = call
  reply.raw.once('close', () => { call.closed() })
  return call
}

/** The call of a request to a metered route (which the core gave it in onRequest). */
export function callOf (request: FastifyRequest): Call {
  const call = request.call
  if (!(call instanceof Call)) throw new Error(`${request.method} ${request.url} is no metered route`)
  return call
}

/** The not-found handler: a 404 in the route family's shape. */
export async function notFound (request: FastifyRequest): Promise<never> {
  throw new RouteNotFound({ method: request.method, url: request.url.split('?')[0] ?? request.url })
}

/** A gateway error's message in the request's locale, and what every error shape is made from. */
export function errorInput (request: FastifyRequest, err: GatewayError): ErrorBodyInput {
  const locale = negotiateLocale(header(request, 'x-locale'), header(request, 'accept-language'))
  const message = locale === 'en' || err.localized === false ? err.message : localize(locale, err.key, err.params)
  const retryAfter = Number(err.headers?.['retry-after'])
  return {
    status: err.statusCode,
    message,
    code: err.spec.code,
    openaiType: err.spec.openaiType,
    messagesType: err.spec.messagesType,
    rpc: err.spec.rpc,
    ...(Number.isFinite(retryAfter) ? { retryAfter } : {})
  }
}

/** Renders an error in the family's shape, localized, with the retry hints the SDKs read. */
export function sendError (request: FastifyRequest, reply: FastifyReply, family: ErrorFamily, err: GatewayError | UpstreamClientError): FastifyReply {
  if (err instanceof UpstreamClientError) {
    return reply.status(err.statusCode).send(err.body)
  }
  if (err.spec.retry === false) reply.header('x-should-retry', 'false')
  if (err.headers !== undefined) reply.headers(err.headers)
  // what an MCP client reads to know the endpoint wants a bearer token
  if (family === 'mcp' && err.statusCode === 401) reply.header('www-authenticate', 'Bearer')
  return reply.status(err.statusCode).send(errorBody(family, errorInput(request, err)))
}

function header (request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name]
  return Array.isArray(v) ? v[0] : v
}
