import { EventEmitter } from 'node:events'
import Fastify, { LogController, type FastifyContextConfig, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest, type FastifyServerOptions } from 'fastify'
import type { Config } from './config/schema.js'
import { Catalog } from './plugins/catalog.js'
import { systemClock, traceId, type Clock, type Gateway, type HeaderNames } from './plugins/context.js'
import {
  BodyTooDeep, errorBody, Internal, InvalidBody, InvalidJson, InvalidUrl, isGatewayError, MalformedRequest, RequestTooLarge, RouteNotFound,
  UnsupportedMediaType, UpstreamClientError, UrlTooLong, type ErrorFamily, type GatewayError
} from './plugins/errors.js'
import { localize, negotiateLocale } from './plugins/i18n/index.js'
import { lazyChildLogger } from './plugins/lazy-logger.js'
import { redactingLogger } from './plugins/log-redaction.js'
import { registerChain } from './plugins/registry.js'
import { clientErrorHandler, serverTimeouts } from './plugins/server-limits.js'
import { Store } from './plugins/store/index.js'
import { DeferredWriter } from './plugins/store/deferred.js'
import { startCheckpointer } from './plugins/store/checkpointer.js'
import { Upstreams } from './plugins/upstream/index.js'
import { MAX_JSON_DEPTH, nestedDeeperThan } from './plugins/validation.js'
import v1Routes from './routes/v1/index.js'
import adminRoutes from './routes/admin/index.js'
import consoleRoutes from './routes/console/index.js'

export interface BuildOptions {
  logger?: FastifyServerOptions['logger']
  clock?: Clock
  /** An already open store (the CLI shares one); otherwise opened from config.store.sqlite. */
  store?: Store
}

export function headerNames (prefix: string): HeaderNames {
  return { trace: `${prefix}Trace-ID`, model: `${prefix}Model`, provider: `${prefix}Provider`, droppedParams: `${prefix}Dropped-Params` }
}

const MAX_PARAM_LENGTH = 1000

// The error family of a request that matched no route (the only place that looks at the URL).
const familyOfUrl = (url: string): ErrorFamily => url.startsWith('/v1/messages') ? 'messages' : 'openai'

/** Maps what Fastify itself throws (body parsing, limits) onto gateway errors. */
function asGatewayError (err: FastifyError, config: Config): GatewayError | UpstreamClientError | undefined {
  if (isGatewayError(err) || err instanceof UpstreamClientError) return err
  switch (err.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE': return new RequestTooLarge({ limit_mb: config.server.body_limit_mb })
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE': return new UnsupportedMediaType()
    case 'FST_ERR_CTP_EMPTY_JSON_BODY': return new InvalidJson()
    case 'FST_ERR_CTP_INVALID_JSON_BODY': return new InvalidJson()
  }
  if (err instanceof SyntaxError && err.statusCode === 400) return new InvalidJson()
  if (err.statusCode === 400 && err.code === 'FST_ERR_VALIDATION') return new InvalidBody()
  return undefined
}

export async function buildApp (config: Config, opts: BuildOptions = {}): Promise<FastifyInstance> {
  const clock = opts.clock ?? systemClock
  const headers = headerNames(config.server.header_prefix)
  const app = Fastify({
    logger: redactingLogger(opts.logger),
    bodyLimit: Math.floor(config.server.body_limit_mb * 1024 * 1024),
    trustProxy: config.server.trust_proxy,
    genReqId: () => traceId(),
    logController: new LogController({ requestIdLogLabel: 'trace_id' }),
    childLoggerFactory: lazyChildLogger,
    // the trace id is always the gateway's own (PRODUCT.md §6.4), never taken from the client
    requestIdHeader: false,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    ...serverTimeouts(config.server),
    clientErrorHandler: clientErrorHandler(config.server),
    // what the router refuses before any hook runs: a malformed percent-escape, an overlong parameter
    frameworkErrors: (err, request, reply) => {
      reply.header(headers.trace, request.id)
      const known = err.code === 'FST_ERR_BAD_URL' ? new InvalidUrl() : err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? new UrlTooLong({ max: MAX_PARAM_LENGTH }) : undefined
      if (known === undefined) request.log.error({ err }, 'unhandled framework error')
      sendError(request, reply, familyOfUrl(request.url), known ?? new Internal({ trace_id: request.id }))
    }
  })

  const store = opts.store ?? new Store(config.store.sqlite)
  store.syncTenants(config, clock.now())
  const upstreams = new Upstreams(config, clock)
  const gw: Gateway = { config, store, catalog: new Catalog(config.models), upstreams, clock, headers, events: new EventEmitter(), writer: new DeferredWriter(store.db, 5, 1000, (err) => { app.log.error({ err }, 'queued writes not committed yet; retrying') }) }
  app.decorate('gw', gw)
  const checkpointer = store.db.memory ? null : startCheckpointer(store.db, (message) => { app.log.error({ message }, 'WAL checkpoint failed') })
  app.addHook('onClose', async () => { await upstreams.close() })
  app.decorateRequest('principal', null)
  app.decorateRequest('call', null)
  app.decorateRequest('routeConfig', null as unknown as FastifyContextConfig)
  app.decorateReply('afterResponseFns', null)
  // Registered first, so it runs last: end-of-response work (metering, ledger, idempotency) that
  // is still queued gets its turn, queued usage records are committed, then the store closes.
  app.addHook('onClose', async () => {
    await new Promise((resolve) => setImmediate(resolve))
    gw.writer.flush()
    await checkpointer?.stop()
    if (opts.store === undefined) store.close()
  })

  // While draining, keep-alive connections whose request was in flight when close() began go
  // idle afterwards; Node reaps idle sockets only at the moment close() is called, so keep
  // reaping until the server is closed, or a client that holds its connection open delays exit.
  let reaper: NodeJS.Timeout | null = null
  app.addHook('preClose', (done) => {
    reaper = setInterval(() => app.server.closeIdleConnections(), 50)
    reaper.unref()
    done()
  })
  app.addHook('onClose', (_instance, done) => {
    if (reaper !== null) clearInterval(reaper)
    done()
  })

  app.addHook('onRequest', (request, reply, done) => {
    request.routeConfig = request.routeOptions.config
    reply.header(headers.trace, request.id)
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

  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    const family = request.routeOptions.config?.family ?? familyOfUrl(request.url)
    const known = asGatewayError(err, config)
    // the client closed its connection, or client_timeout_s cut it off, while its body was read:
    // not the gateway's error, and no one is left to read the answer
    if (known === undefined && err.code === 'ECONNRESET' && request.raw.destroyed) {
      request.log.info({ err }, 'connection closed before the request was read')
      return sendError(request, reply, family, new MalformedRequest())
    }
    if (known === undefined) {
      request.log.error({ err }, 'unhandled error')
      return sendError(request, reply, family, new Internal({ trace_id: request.id }))
    }
    if (known.statusCode >= 500) request.log.warn({ err: known, cause: known.cause }, known.message)
    return sendError(request, reply, family, known)
  })

  const notFound = async (request: FastifyRequest): Promise<never> => {
    throw new RouteNotFound({ method: request.method, url: request.url.split('?')[0] ?? request.url })
  }
  app.setNotFoundHandler(notFound)

  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_request, reply) => {
    try {
      store.db.prepare('SELECT 1').get()
      return { status: 'ready' }
    } catch {
      return reply.status(503).send({ status: 'unavailable' })
    }
  })
  // Claude Code sends HEAD / to the base URL before its first call.
  app.get('/', async () => ({ name: 'modelgate', api: '/v1', console: '/console' }))

  await app.register(async (v1) => {
    // unknown /v1 paths pass through the chain too (rate limit, auth) before their 404
    v1.setNotFoundHandler(notFound)
    await registerChain(v1, config.plugins)
    await v1.register(v1Routes)
  }, { prefix: '/v1' })
  await app.register(adminRoutes, { prefix: '/admin/v1' })
  await app.register(consoleRoutes, { prefix: '/console' })

  return app
}

/** Renders an error in the family's shape, localized, with the retry hints the SDKs read. */
export function sendError (request: FastifyRequest, reply: FastifyReply, family: ErrorFamily, err: GatewayError | UpstreamClientError): FastifyReply {
  if (err instanceof UpstreamClientError) {
    return reply.status(err.statusCode).send(err.body)
  }
  const locale = negotiateLocale(header(request, 'x-locale'), header(request, 'accept-language'))
  const message = locale === 'en' ? err.message : localize(locale, err.key, err.params)
  if (err.spec.retry === false) reply.header('x-should-retry', 'false')
  if (err.headers !== undefined) reply.headers(err.headers)
  return reply.status(err.statusCode).send(errorBody(family, {
    status: err.statusCode, message, code: err.spec.code, openaiType: err.spec.openaiType, messagesType: err.spec.messagesType
  }))
}

function header (request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name]
  return Array.isArray(v) ? v[0] : v
}
