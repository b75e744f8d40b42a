import cluster from 'node:cluster'
import type { AddressInfo } from 'node:net'
import { availableParallelism } from 'node:os'
import type { Config } from '../config/schema.js'
import { inExecutable } from '../paths.js'
import type { GatewayServer, ServeOptions } from '../server.js'
import { CommandError, UsageError, type Args, type CommandInput } from './command.js'
import { claimPidFile, removePidFile, writePidFile } from './pid-file.js'

export const help = `modelgate serve [--config FILE] [--port N] [--host H] [--workers N] [--pretty]

Serves the config's gateway. PORT does what --port does. --workers defaults to one per core
(one for a :memory: store); the workers share the port and the store. --pretty: readable logs.`

export const flags = { '': ['config', 'port', 'host', 'workers', 'pretty'] } as const

// The key config/gateway.yaml ships for local trials. It is printed by the banner when it is the
// configured key; no other key is ever printed (they are secrets, and stdout often ends up in logs).
const SHIPPED_DEMO_KEY = 'mg-demo-local-only-0123456789abcdef'

function portOverride (args: Args): number | undefined {
  const port = args.port ?? process.env.PORT
  if (port === undefined) return undefined
  if (!/^\d+$/.test(port) || Number(port) > 65535) throw new UsageError(`--port: not a port number: ${port}`, 'serve')
  return Number(port)
}

// what serves: the file's config with the command line's address (the file's is kept for reloads)
const withAddress = (file: Config, args: Args, port: number | undefined): Config =>
  ({ ...file, server: { ...file.server, port: port ?? file.server.port, host: args.host ?? file.server.host } })

export async function run ({ args }: CommandInput): Promise<void> {
  const port = portOverride(args)
  if (cluster.isWorker) {
    // the server's modules load while the primary answers
    const [{ file, config }] = await Promise.all([(await import('./supervisor.js')).startConfig(), import('../server.js')])
    await serveHere(args, file, config, port)
    return
  }
  const { file, config: fromFile } = await (await import('./config-file.js')).readConfig(args, { gateway: true })
  const config = withAddress(fromFile, args, port)
  // one worker per core, except for an in-memory store, which a worker cannot share
  const workers = args.workers === undefined ? (config.store.sqlite === ':memory:' ? 1 : availableParallelism()) : Number(args.workers)
  if (!Number.isInteger(workers) || workers < 1) throw new UsageError(`--workers: a whole number >= 1, or omit it (cores here: ${availableParallelism()})`, 'serve')
  // before the store is opened: a SQLite store another gateway serves is refused, naming it
  claimPidFile(config)
  if (workers === 1) {
    try {
      await serveHere(args, file, fromFile, port)
    } catch (err) {
      removePidFile(config)
      throw err
    }
    return
  }
  // node:cluster: the workers share the port; every policy's state is in the shared store
  const [{ supervise }, notes] = await Promise.all([import('./supervisor.js'), uncredentialed(config, file)])
  supervise({
    file,
    config: fromFile,
    workers,
    onListening: (listening) => {
      banner(config, notes, workers, listening)
      writePidFile(config, listening)
    }
  })
}

/** Runs the gateway in this process: the only one, or a worker. */
async function serveHere (args: Args, file: string, fromFile: Config, port: number | undefined): Promise<void> {
  const { GatewayServer } = await import('../server.js')
  const server = await GatewayServer.start({ file, config: fromFile, host: args.host, port, logger: await loggerOptions(args.pretty === true), worker: cluster.isWorker })
  const config = withAddress(fromFile, args, port)
  let address: AddressInfo
  try {
    address = await server.listen()
  } catch (err) {
    await server.close().catch(() => {})
    throw listenError(err, config)
  }
  // the signals are handled before the banner tells anyone that the gateway is there
  process.on('SIGHUP', () => { void server.reload() })
  installShutdown(server, config)
  if (cluster.isPrimary) {
    banner(config, await uncredentialed(config, file), 1, address.port)
    writePidFile(config, address.port)
  }
}

async function loggerOptions (pretty: boolean): Promise<ServeOptions['logger']> {
  const level = process.env.LOG_LEVEL ?? 'info'
  if (!pretty) return { level }
  // a pino transport runs a file of pino's on a thread, and the executable file has no such file:
  // there the lines are made readable on the main thread
  if (inExecutable) return { level, stream: (await import('pino-pretty')).default() }
  return { level, transport: { target: 'pino-pretty' } }
}

/** What to do about an address the gateway cannot listen on; other errors as they are. */
function listenError (err: unknown, config: Config): unknown {
  const code = (err as { code?: unknown } | null)?.code
  const where = `${config.server.host}:${config.server.port}`
  if (code === 'EADDRINUSE') return new CommandError(`${where} is in use by another program (another gateway?): stop it, or serve on another port with --port N (or PORT=N)`)
  if (code === 'EACCES') return new CommandError(`${where}: not allowed to listen there (a port below 1024 needs privileges): serve on another port with --port N (or PORT=N)`)
  if (code === 'EADDRNOTAVAIL') return new CommandError(`${where}: no interface of this machine has that address: serve on another with --host H`)
  return err
}

function banner (config: Config, notes: string[], workers: number, port: number): void {
  const url = `http://${config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host}:${port}`
  const lines = [
    `modelgate listening on ${url} (${workers} worker${workers > 1 ? 's' : ''})`,
    `  API:      ${url}/v1   console: ${url}/console`
  ]
  if (config.admin.token !== '') lines.push(`  operator: ${url}/console/admin (sign in with the admin token)`)
  if (config.tenants.some((t) => t.projects.some((p) => p.keys.some((k) => k.key === SHIPPED_DEMO_KEY)))) {
    lines.push(`  demo key: ${SHIPPED_DEMO_KEY} (for local trials only)`, `  try:      curl ${url}/v1/chat/completions -H 'Authorization: Bearer ${SHIPPED_DEMO_KEY}' -H 'Content-Type: application/json' -d '{"model":"demo/echo-1","messages":[{"role":"user","content":"Hello"}]}'`)
  } else {
    lines.push('  API keys: the tenants\' keys in the config, or `modelgate keys create --org O --project P`')
  }
  lines.push(...notes)
  process.stdout.write(lines.join('\n') + '\n')
}

/** The providers that have no credentials, what to set for each, and the models they leave unserved. */
async function uncredentialed (config: Config, file: string): Promise<string[]> {
  const [{ Catalog }, { uncredentialedProviders }] = await Promise.all([import('../engine/gateway/catalog.js'), import('./credentials.js')])
  const missing = uncredentialedProviders(config, file)
  if (missing.length === 0) return []
  const what = missing.map((m) => `${m.provider.id} (${m.what})`)
  const models = new Catalog(config.models, (id) => !missing.some((m) => m.provider.id === id)).unserved().map((m) => m.id)
  return [
    `  no credentials: ${what.join(', ')}`,
    `                  ${models.length === 0 ? 'every model has another provider' : `not listed or served: ${models.length > 4 ? `${models.slice(0, 3).join(', ')} and ${models.length - 3} more` : models.join(', ')}`}; set the variables and restart (a reload does not read the environment again)`
  ]
}

// SIGTERM/SIGINT: stop accepting, let in-flight requests finish (bounded), close the store.
function installShutdown (server: GatewayServer, config: Config): void {
  let closing = false
  const shutdown = (signal: string): void => {
    if (closing) return
    closing = true
    server.app.log.info({ signal }, 'shutting down')
    const timer = setTimeout(() => {
      server.app.log.error('in-flight requests did not finish in time; exiting')
      process.exit(1)
    }, config.server.shutdown_timeout_s * 1000)
    timer.unref()
    server.close().then(() => {
      if (cluster.isPrimary) removePidFile(config)
      process.exit(0)
    }, (err: unknown) => {
      server.app.log.error({ err }, 'error while closing')
      process.exit(1)
    })
  }
  process.on('SIGTERM', () => shutdown('SIGTERM'))
  process.on('SIGINT', () => shutdown('SIGINT'))
}
