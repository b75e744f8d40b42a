import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify'
import type { Config } from './config/schema.js'
import type { Clock } from './plugins/api/index.js'
import { Internal, InvalidUrl, UrlTooLong } from './plugins/gateway/errors.js'
import { createGateway, familyOfUrl, installGateway, notFound, sendError, traceId } from './plugins/gateway/core.js'
import { lazyChildLogger } from './plugins/ops/lazy-logger.js'
import { redactingLogger } from './plugins/ops/log-redaction.js'
import { serveMetrics, standaloneRuntime, type Runtime } from './plugins/ops/operations.js'
import { chainOf, registerChain } from './plugins/gateway/registry.js'
import { clientErrorHandler, serverTimeouts } from './plugins/ops/server-limits.js'
import { openStore, staleHoldMs } from './plugins/store/index.js'
import type { Store } from './plugins/store/types.js'
import v1Routes from './routes/v1/index.js'
import geminiRoutes from './routes/v1/gemini.js'
import adminRoutes from './routes/admin/index.js'
import consoleRoutes from './routes/console/index.js'
import { finiteNumbers } from './routes/schemas.js'
import passthroughRoutes from './routes/passthrough.js'

export interface BuildOptions {
  logger?: FastifyServerOptions['logger']
  clock?: Clock
  /** An already open store (several apps may share one); otherwise opened from the config, and closed with the app. */
  store?: Store
  /** What outlives a configuration in a serving process (metrics, provider health, reload); made for this app alone otherwise. */
  runtime?: Runtime
  /** Fastify's serverFactory: a reloadable server hands requests to the handler it receives (server.ts). */
  serverFactory?: FastifyServerOptions['serverFactory']
  /** The configuration's generation in a serving process (server.ts), shown by the admin API. */
  generation?: number
}

export { headerNames } from './plugins/gateway/core.js'

declare module 'fastify' {
  interface FastifyInstance {
    /** The MCP servers behind /mcp; null when the config names none. */
    mcpServers: import('./plugins/mcp/servers.js').McpServers | null
  }
}

const MAX_PARAM_LENGTH = 1000

// The prefixes of the API scope's own route groups; routes in any other are the chain plugins'.
const isCoreScope = (prefix: string): boolean => prefix === '/v1' || prefix.startsWith('/v1/') || prefix === '/v1beta' || prefix === '/passthrough' || prefix === '/mcp'

export async function buildApp (config: Config, opts: BuildOptions = {}): Promise<FastifyInstance> {
  const traceHeader = `${config.server.header_prefix}Trace-ID`
  const app = Fastify({
    logger: redactingLogger(opts.logger),
    bodyLimit: Math.floor(config.server.body_limit_mb * 1024 * 1024),
    trustProxy: config.server.trust_proxy,
    genReqId: () => traceId(),
    logController: new LogController({ requestIdLogLabel: 'trace_id' }),
    childLoggerFactory: lazyChildLogger,
    // the trace id is always the gateway's own, never taken from the client
    requestIdHeader: false,
    return503OnClosing: true,
    forceCloseConnections: 'idle',
    routerOptions: { maxParamLength: MAX_PARAM_LENGTH },
    // route schemas refuse numbers that are not finite (`?limit=Infinity` is coerced to one)
    ajv: { plugins: [finiteNumbers] },
    // with a serverFactory the listening server is the caller's, which sets these limits itself (server.ts)
    ...(opts.serverFactory === undefined ? { ...serverTimeouts(config.server), clientErrorHandler: clientErrorHandler(config.server) } : { serverFactory: opts.serverFactory }),
    // what the router refuses before any hook runs: a malformed percent-escape, an overlong parameter
    frameworkErrors: (err, request, reply) => {
      reply.header(traceHeader, request.id)
      const known = err.code === 'FST_ERR_BAD_URL' ? new InvalidUrl() : err.code === 'FST_ERR_MAX_PARAM_LENGTH' ? new UrlTooLong({ max: MAX_PARAM_LENGTH }) : undefined
      if (known === undefined) request.log.error({ err }, 'unhandled framework error')
      sendError(request, reply, familyOfUrl(request.url), known ?? new Internal({ trace_id: request.id }))
    }
  })

  const clock = opts.clock
  const ownStore = opts.store === undefined
  const store = opts.store ?? openStore(config, { now: clock?.now, onError: (err, what) => { app.log.error({ err }, what) } })
  if (ownStore) store.startMaintenance({ staleHoldMs: staleHoldMs(config) })
  await store.syncTenants(config, (clock ?? { now: Date.now }).now())
  const runtime = opts.runtime ?? standaloneRuntime()
  const core = createGateway({ config, store, clock, log: app.log, health: runtime.health, metrics: runtime.metrics.registry })
  installGateway(app, core)
  if (opts.runtime === undefined) app.addHook('onClose', async () => { runtime.metrics.close() })
  serveMetrics(app, config, runtime)
  app.addHook('onClose', async () => { await core.gateway.upstreams.close() })
  // the MCP servers behind /mcp, connected from now on (the MCP SDK is loaded only for a config that names some)
  const mcp = config.mcp.servers.length === 0 ? null : new (await import('./plugins/mcp/servers.js')).McpServers(config, app.log)
  app.decorate('mcpServers', mcp)
  if (mcp !== null) {
    mcp.start()
    app.addHook('onClose', async () => { await mcp.close() })
  }
  // Registered first, so it runs last: end-of-call work still queued gets its turn, then the
  // store commits what it holds and closes.
  app.addHook('onClose', async () => {
    await new Promise((resolve) => setImmediate(resolve))
    await store.flush()
    if (ownStore) await store.close()
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

  app.get('/healthz', async () => ({ status: 'ok' }))
  app.get('/readyz', async (_request, reply) => {
    try {
      await store.ping()
      // the providers' breakers, for the operator: a provider outage does not make the gateway unready
      return { status: 'ready', providers: core.gateway.upstreams.status() }
    } catch {
      return reply.status(503).send({ status: 'unavailable' })
    }
  })
  // Claude Code sends HEAD / to the base URL before its first call.
  app.get('/', async () => ({ name: 'modelgate', api: '/v1', console: '/console' }))

  // plugins that cover every route (the IP rate limit) first, then the API's chain, once, in a
  // scope of its own that holds every metered route: /v1 and each provider's pass-through
  const chain = chainOf(config)
  await registerChain(app, app, chain, 'app')
  await app.register(async (api) => {
    // a plugin's own routes are API routes: under /v1, as if the chain were registered there
    api.addHook('onRoute', (route) => {
      if (!isCoreScope(route.prefix)) route.url = route.path = `/v1${route.url}`
    })
    await registerChain(app, api, chain, 'api')
    await api.register(async (v1) => {
      // unknown /v1 paths pass through the chain too (rate limit, auth) before their 404
      v1.setNotFoundHandler(notFound)
      await v1.register(v1Routes)
    }, { prefix: '/v1' })
    // Google's Gemini API lives under /v1beta (and its method calls under /v1 too)
    await api.register(async (v1beta) => {
      v1beta.setNotFoundHandler(notFound)
      await v1beta.register(geminiRoutes, { underOpenAI: false })
    }, { prefix: '/v1beta' })
    if (mcp !== null) {
      const { default: mcpRoutes } = await import('./routes/mcp.js')
      await api.register(async (scope) => {
        scope.setNotFoundHandler(notFound)
        await scope.register(mcpRoutes, { servers: mcp })
      }, { prefix: '/mcp' })
    }
    const passthrough = config.providers.filter((p) => p.passthrough && p.base_url !== undefined)
    if (passthrough.length > 0) {
      await api.register(async (scope) => {
        scope.setNotFoundHandler(notFound)
        await scope.register(passthroughRoutes, { providers: passthrough })
      }, { prefix: '/passthrough' })
    }
  })
  await app.register(adminRoutes, { prefix: '/admin/v1', reload: runtime.reload, generation: opts.generation, providerHealth: runtime.providerHealth })
  await app.register(consoleRoutes, { prefix: '/console' })

  return app
}
