import Fastify, { LogController, type FastifyInstance, type FastifyServerOptions } from 'fastify'
import type { Config } from './config/schema.js'
import type { Clock } from './plugins/api/index.js'
import { Internal, InvalidUrl, UrlTooLong } from './engine/kernel/errors.js'
import { sharedValidators } from './engine/host/validators.js'
import { createGateway, familyOfUrl, installGateway, sendError, traceId } from './engine/gateway/core.js'
import { lazyChildLogger } from './engine/ops/lazy-logger.js'
import { Alerts, type AlertsOptions } from './engine/alerts/index.js'
import { systemClock } from './engine/kernel/clock.js'
import { redactingLogger } from './engine/ops/log-redaction.js'
import { serveMetrics, standaloneRuntime, type Runtime } from './engine/ops/operations.js'
import { PluginHost } from './engine/host/index.js'
import { clientErrorHandler, serverTimeouts } from './engine/ops/server-limits.js'
import { openStore } from './engine/store/index.js'
import type { Store } from './engine/store/types.js'
import { API_PREFIXES, apiRoutes } from './routes/api.js'
import adminRoutes from './routes/admin/index.js'
import consoleRoutes from './routes/console/index.js'
import { finiteNumbers } from './routes/schemas.js'
import { shippedFile } from './paths.js'

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
  /** The alerts' sender and scans: timers off (tests drive them), a host resolver. */
  alerts?: AlertsOptions & { timers?: boolean }
}

export { headerNames } from './engine/gateway/core.js'

/** A route of the API scope (/v1, /v1beta, /mcp, /passthrough and the plugins' own): what the gate must cover. */
export interface ApiRoute {
  methods: string[]
  url: string
  /** The route is metered, or starts calls of its own (`spends`): its calls go through the gate. */
  metered: boolean
}

declare module 'fastify' {
  interface FastifyInstance {
    /** The API scope's routes as registered, whether they spend (admitted by the one gate) or not. */
    apiRoutes: readonly ApiRoute[]
    /** The admin API's routes and the consoles' actions as registered, each with a row of the access table (routes/access.ts). */
    operatorRoutes: import('./routes/access.js').OperatorRoute[]
    /** The alerts (webhooks) of this configuration. */
    alerts: import('./engine/alerts/index.js').Alerts
    /** The MCP servers behind /mcp; null when the config names none. */
    mcpServers: import('./engine/mcp/servers.js').McpServers | null
  }
}

const MAX_PARAM_LENGTH = 1000

function consoleIcon (): Buffer | null {
  try {
    return shippedFile('dist', 'console', 'favicon.svg')
  } catch {
    return null
  }
}

export async function buildApp (config: Config, opts: BuildOptions = {}): Promise<FastifyInstance> {
  // the chain first: a plugin that cannot be loaded or configured stops the build before anything is opened
  const host = await PluginHost.of(config)
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
    // verbose: a problem is worded from the schema that found it (engine/kernel/schema-check.ts)
    ajv: { customOptions: { verbose: true }, plugins: [finiteNumbers] },
    // the route schemas compiled once a process, not once an app (engine/host/validators.ts)
    schemaController: { compilersFactory: { buildValidator: sharedValidators } },
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
  if (ownStore) store.startMaintenance({ staleHoldMs: config.store.stale_hold_s * 1000 })
  // serve and reload apply the config's tenants (other commands only create what is missing)
  const synced = await store.syncTenants(config, (clock ?? { now: Date.now }).now(), 'apply')
  for (const warning of synced.warnings) app.log.warn(warning)
  const runtime = opts.runtime ?? standaloneRuntime()
  const core = createGateway({ config, store, clock, log: app.log, health: runtime.health, metrics: runtime.metrics.registry })
  installGateway(app, core)
  // webhooks (alerts:): raised from the counts and scans, sent from the store's outbox
  const alerts = new Alerts(config.alerts, store, clock ?? systemClock, app.log, core.gateway.events, opts.alerts)
  app.decorate('alerts', alerts)
  if (opts.alerts?.timers !== false) alerts.start(runtime.health)
  app.addHook('onClose', async () => { await alerts.stop() })
  if (opts.runtime === undefined) app.addHook('onClose', async () => { runtime.metrics.close() })
  serveMetrics(app, config, runtime)
  app.addHook('onClose', async () => { await core.gateway.upstreams.close() })
  // the MCP servers behind /mcp, connected from now on (the MCP SDK is loaded only for a config that names some)
  const mcp = config.mcp.servers.length === 0 ? null : new (await import('./engine/mcp/servers.js')).McpServers(config, app.log, clock)
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
      // the providers' breakers and credentials, for the operator: a provider outage, or a provider
      // without credentials, does not make the gateway unready; the models it leaves unserved are named
      return { status: 'ready', providers: core.gateway.upstreams.status(), unavailable_models: core.gateway.catalog.unserved().map((m) => m.id) }
    } catch {
      return reply.status(503).send({ status: 'unavailable' })
    }
  })
  // Claude Code sends HEAD / to the base URL before its first call.
  app.get('/', async () => ({ name: 'modelgate', api: '/v1', console: '/console' }))
  // what a browser asks for beside any page: the consoles' icon
  const icon = consoleIcon()
  if (icon !== null) app.get('/favicon.ico', async (_request, reply) => await reply.type('image/svg+xml').header('cache-control', 'public, max-age=86400').send(icon))

  // the chain, through the plugin host: plugins that cover every route (the IP rate limit) on the
  // whole app, the others once, in a scope of their own with every metered route: /v1, /mcp and
  // each provider's pass-through; a plugin's own routes go under /v1
  const apiRoutesSeen: ApiRoute[] = []
  app.decorate('apiRoutes', apiRoutesSeen)
  await host.mount(app, async (api) => { await apiRoutes(api, config, mcp) }, {
    corePrefixes: API_PREFIXES,
    onRoute: (route) => { apiRoutesSeen.push({ methods: ([] as string[]).concat(route.method), url: route.url, metered: route.config?.metered === true || route.config?.spends === true }) }
  })
  app.decorate('operatorRoutes', [])
  await app.register(adminRoutes, { prefix: '/admin/v1', reload: runtime.reload, generation: opts.generation, providerHealth: runtime.providerHealth, plugins: host.links })
  await app.register(consoleRoutes, { prefix: '/console' })

  return app
}
