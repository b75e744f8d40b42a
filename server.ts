import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import { buildApp } from './app.js'
import { configChanges } from './config/diff.js'
import type { Config } from './config/schema.js'
import type { Clock } from './plugins/api/index.js'
import { linkWorker, workerBus, type WorkerLink } from './engine/ops/cluster.js'
import { systemClock } from './engine/gateway/core.js'
import { Metrics } from './engine/ops/metrics/index.js'
import type { ReloadResult, Runtime } from './engine/ops/operations.js'
import { clientErrorHandler, serverTimeouts } from './engine/ops/server-limits.js'
import { openStore } from './engine/store/index.js'
import type { Store } from './engine/store/types.js'
import { HealthBook } from './engine/upstream/health.js'

// The serving process: one listening HTTP server, and behind it a "generation" per configuration:
// a Fastify app built by buildApp() from one reading of the config file, ready but not listening
// itself (Fastify's serverFactory hands us its request handler). Every request goes to the
// current generation and stays with it to the end, so a reload (SIGHUP, the admin API) lets the
// calls in flight finish on the configuration they started with while new calls get the new one.
// An old generation is closed once its last request is done. The generations share the store,
// the metrics registry and the providers' health; the listening address and the store are the
// process's and change only with a restart.

type Handler = (req: IncomingMessage, res: ServerResponse) => void

interface Generation {
  n: number
  app: FastifyInstance
  handle: Handler
  /** The config as the file says it (before command-line overrides): what the next reload compares with. */
  file: Config
  inflight: number
  /** No new request comes to it: it closes once `inflight` is 0. */
  retired: boolean
  closing: boolean
  /** Settles once its app is closed. */
  closed: Promise<void>
  markClosed: () => void
}

export interface ServeOptions {
  /** The config file, read again on each reload. */
  file: string
  /** Its first reading. */
  config: Config
  /** Command-line overrides of the listening address, kept across reloads. */
  host?: string
  port?: number
  logger?: FastifyServerOptions['logger']
  clock?: Clock
  /** A worker of `serve --workers N`: a scrape sums every worker's metrics, and a reload asked here reaches every worker. */
  worker?: boolean
}

const effective = (file: Config, opts: ServeOptions): Config => ({
  ...file,
  server: { ...file.server, host: opts.host ?? file.server.host, port: opts.port ?? file.server.port }
})

export class GatewayServer {
  readonly server: Server
  readonly runtime: Runtime
  private current: Generation | undefined = undefined
  private readonly generations = new Set<Generation>()
  private readonly store: Store
  private reloading: Promise<ReloadResult> = Promise.resolve({ ok: true, changes: [], generation: 1 })
  private closing = false
  private count = 0
  private readonly link: WorkerLink | null

  private constructor (private readonly opts: ServeOptions) {
    const clock = opts.clock ?? systemClock
    // (the store may speak before the first app, and its logger, exist)
    this.store = openStore(opts.config, {
      now: clock.now,
      onError: (err, what) => { if (this.current === undefined) process.stderr.write(`modelgate: ${what}: ${String(err)}\n`); else this.app.log.error({ err }, what) },
      // the workers on one SQLite file tell each other through the primary
      bus: opts.worker === true ? workerBus() : undefined
    })
    const metrics = new Metrics()
    const health = new HealthBook(clock)
    this.link = opts.worker === true
      ? linkWorker(metrics.registry, async () => await this.reload(), () => ({ pid: process.pid, providers: health.snapshot(), mcp: this.current?.app.mcpServers?.views() }))
      : null
    this.runtime = {
      metrics,
      health,
      scrape: this.link?.scrape ?? (async () => await metrics.text()),
      reload: async () => await this.reloadEverywhere(),
      ...(this.link === null ? {} : { providerHealth: this.link.health })
    }
    // the config's limits on slow and broken clients (engine/ops/server-limits.ts), which a restart changes
    const limits = serverTimeouts(opts.config.server)
    this.server = createServer({ ...limits.http, requestTimeout: limits.requestTimeout, keepAliveTimeout: limits.keepAliveTimeout }, (req, res) => { this.dispatch(req, res) })
    this.server.setTimeout(limits.connectionTimeout)
    this.server.on('clientError', clientErrorHandler(opts.config.server))
  }

  /** Opens the store and builds the first generation; call listen() next. */
  static async start (opts: ServeOptions): Promise<GatewayServer> {
    const s = new GatewayServer(opts)
    try {
      s.current = await s.build(opts.config)
    } catch (err) {
      await s.store.close()
      s.runtime.metrics.close()
      throw err
    }
    s.store.startMaintenance({ staleHoldMs: opts.config.store.stale_hold_s * 1000 })
    return s
  }

  /** The current generation's app. */
  get app (): FastifyInstance { return (this.current as Generation).app }

  /** Generations not closed yet: the current one, and older ones with requests in flight. */
  get open (): number { return this.generations.size }

  async listen (): Promise<AddressInfo> {
    const config = effective(this.opts.config, this.opts)
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject)
      this.server.listen(config.server.port, config.server.host, () => { this.server.off('error', reject); resolve() })
    })
    return this.server.address() as AddressInfo
  }

  private dispatch (req: IncomingMessage, res: ServerResponse): void {
    if (this.closing) {
      res.writeHead(503, { 'content-type': 'application/json; charset=utf-8', connection: 'close' })
      res.end(JSON.stringify({ error: { code: 503, message: 'The gateway is shutting down.', type: 'overloaded_error' } }))
      return
    }
    const g = this.current as Generation
    g.inflight++
    res.once('close', () => {
      if (--g.inflight === 0 && g.retired) void this.closeGeneration(g)
    })
    g.handle(req, res)
  }

  private async build (file: Config): Promise<Generation> {
    let handle: Handler | undefined
    const app = await buildApp(effective(file, this.opts), {
      logger: this.opts.logger,
      clock: this.opts.clock,
      store: this.store,
      runtime: this.runtime,
      // the number it gets once built (reloads run one after the other)
      generation: this.count + 1,
      // a server of its own that never listens: Fastify wants one; requests come from ours
      serverFactory: (handler) => { handle = handler as Handler; return createServer() }
    })
    try {
      await app.ready()
    } catch (err) {
      await app.close().catch(() => {})
      throw err
    }
    let markClosed = (): void => {}
    const closed = new Promise<void>((resolve) => { markClosed = resolve })
    const g: Generation = { n: ++this.count, app, handle: handle as Handler, file, inflight: 0, retired: false, closing: false, closed, markClosed }
    this.generations.add(g)
    return g
  }

  private async closeGeneration (g: Generation): Promise<void> {
    if (!g.closing) {
      g.closing = true
      try {
        await g.app.close()
      } catch (err) {
        this.app.log.error({ err, generation: g.n }, 'closing a previous configuration failed')
      }
      this.generations.delete(g)
      g.markClosed()
    }
    await g.closed
  }

  /**
   * Reads the config file again and, when it is valid and its app builds, makes it the current
   * generation. Reloads run one after the other. An invalid file changes nothing.
   */
  async reload (): Promise<ReloadResult> {
    const next = this.reloading.then(async () => await this.reloadNow(), async () => await this.reloadNow())
    this.reloading = next
    return await next
  }

  private async reloadNow (): Promise<ReloadResult> {
    const log = this.app.log
    let g: Generation
    let file: Config
    // the config loader is needed only now: a worker starts with the configuration its primary read
    const [{ ConfigError }, { loadGatewayConfig }] = await Promise.all([import('./config/load.js'), import('./engine/host/index.js')])
    try {
      if (this.closing) throw new Error('the gateway is shutting down')
      file = await loadGatewayConfig(this.opts.file)
      g = await this.build(file)
    } catch (err) {
      const problems = err instanceof ConfigError ? err.problems : [(err as Error).message]
      log.error({ problems, file: this.opts.file }, 'configuration not reloaded: the running one is kept')
      this.runtime.metrics.reloaded(false)
      return { ok: false, problems }
    }
    const old = this.current as Generation
    const changes = configChanges(old.file, file)
    this.current = g
    old.retired = true
    if (old.inflight === 0) void this.closeGeneration(old)
    this.runtime.metrics.reloaded(true, g.n)
    g.app.log.info({ changes, generation: g.n, in_flight_on_previous: old.inflight }, 'configuration reloaded')
    return { ok: true, changes, generation: g.n }
  }

  /** This process reloads, then (with workers) the others do. */
  private async reloadEverywhere (): Promise<ReloadResult> {
    const r = await this.reload()
    if (!r.ok || this.link === null) return r
    return { ...r, workers: await this.link.reloadOthers() }
  }

  /**
   * Stops accepting connections, answers 503 to new requests on open ones, lets requests in
   * flight finish, closes every generation, then the store.
   */
  async close (): Promise<void> {
    if (this.closing) return
    this.closing = true
    const closed = new Promise<void>((resolve) => { this.server.close(() => { resolve() }) })
    // keep-alive connections whose request ends now go idle later: reap them until the server is closed
    this.server.closeIdleConnections()
    const reaper = setInterval(() => { this.server.closeIdleConnections() }, 50)
    reaper.unref()
    await Promise.all([...this.generations].map(async (g) => {
      g.retired = true
      if (g.inflight === 0) void this.closeGeneration(g)
      await g.closed
    }))
    if (this.server.listening) await closed
    clearInterval(reaper)
    await this.store.flush()
    await this.store.close()
    this.runtime.metrics.close()
  }
}
