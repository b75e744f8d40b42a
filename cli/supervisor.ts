import cluster, { type Worker } from 'node:cluster'
import type { Config } from '../config/schema.js'
import { removePidFile } from './pid-file.js'

// The primary of `serve --workers N`. It validated the config before forking; the workers do not
// read the file at start: each asks the primary for the configuration to serve, so that they
// start side by side without reading and checking the file again, and so that a file made invalid
// after the start cannot make a replacement worker fail at start again and again. A replacement
// gets the file as it is now when it is valid, else the last valid reading. Every worker reads the
// file itself on a reload (SIGHUP, or the admin API).

const START = 'modelgate:start'

interface StartMessage { type: typeof START, file?: string, config?: Config }

const isStart = (m: unknown): m is StartMessage => (m as StartMessage | null)?.type === START

export interface SuperviseOptions {
  /** The config file, and its reading that the primary validated. */
  file: string
  config: Config
  workers: number
  /** Once as many workers as asked for listen, with the port they share. */
  onListening: (port: number) => void
}

export function supervise (opts: SuperviseOptions): void {
  let config = opts.config
  // the metrics aggregator and the reload relay, loaded while the workers start; a worker gets its
  // config only after they are in place, so that nothing it asks of the primary goes unheard
  const relay = import('../engine/ops/cluster.js').then((m) => { m.servePrimary() })
  const first = new Set<number>()
  for (let i = 0; i < opts.workers; i++) first.add(cluster.fork().id)

  const configFor = async (worker: Worker): Promise<Config> => {
    if (first.has(worker.id)) return config
    try {
      const { loadGatewayConfig } = await import('../engine/host/index.js')
      config = await loadGatewayConfig(opts.file)
    } catch (err) {
      process.stderr.write(`modelgate: ${(err as Error).message}\nmodelgate: worker ${worker.process.pid} starts with the last valid configuration\n`)
    }
    return config
  }
  cluster.on('message', (worker: Worker, msg: unknown) => {
    if (!isStart(msg)) return
    void Promise.all([relay, configFor(worker)]).then(([, served]) => {
      if (worker.isConnected()) worker.send({ type: START, file: opts.file, config: served } satisfies StartMessage)
    })
  })

  // announced once as many workers as asked for listen, so that the first connections reach all of them
  let listening = 0
  let announced = false
  cluster.on('listening', (_worker, address) => {
    if (++listening === opts.workers) {
      announced = true
      opts.onListening(address.port)
    }
  })

  let stopping = false
  let exitCode = 0
  const remaining = (): number => Object.keys(cluster.workers ?? {}).length
  const done = (): void => { removePidFile(opts.config); process.exit(exitCode) }
  // A worker that dies is replaced: at once when it had served a while, after a doubling pause
  // (up to 10 s) when workers keep dying young, so a broken store does not spin.
  const born = new Map<number, number>()
  cluster.on('fork', (worker) => { born.set(worker.id, Date.now()) })
  let pauseMs = 0
  cluster.on('exit', (worker, code, signal) => {
    const lived = Date.now() - (born.get(worker.id) ?? 0)
    born.delete(worker.id)
    if (stopping) {
      if (remaining() === 0) done()
      return
    }
    // The first start is all or nothing: what stops a worker before the gateway serves (a port in
    // use, a store that cannot be opened) would stop every replacement too, so the gateway stops,
    // with the worker's own message above, rather than retry forever.
    if (!announced) {
      process.stderr.write(`modelgate: worker ${worker.process.pid} could not start (exited with ${signal ?? code}): not serving\n`)
      exitCode = 1
      stop()
      if (remaining() === 0) done()
      return
    }
    pauseMs = lived > 10_000 ? 0 : Math.min(10_000, Math.max(100, pauseMs * 2))
    process.stderr.write(`modelgate: worker ${worker.process.pid} exited with ${signal ?? code}; starting another${pauseMs > 0 ? ` in ${pauseMs} ms` : ''}\n`)
    setTimeout(() => { if (!stopping) cluster.fork() }, pauseMs)
  })
  const stop = (): void => {
    stopping = true
    for (const w of Object.values(cluster.workers ?? {})) w?.kill('SIGTERM')
  }
  process.on('SIGTERM', stop)
  process.on('SIGINT', stop)
  // every worker reads the file again on its own
  process.on('SIGHUP', () => { for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGHUP') })
}

/** In a worker: the config file and the configuration the primary hands it to start with. */
export async function startConfig (): Promise<{ file: string, config: Config }> {
  return await new Promise((resolve) => {
    const take = (msg: unknown): void => {
      if (!isStart(msg) || msg.file === undefined || msg.config === undefined) return
      process.off('message', take)
      resolve({ file: msg.file, config: msg.config })
    }
    process.on('message', take)
    process.send?.({ type: START } satisfies StartMessage)
  })
}
