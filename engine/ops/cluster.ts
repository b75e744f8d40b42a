import cluster, { type Worker } from 'node:cluster'
import { AggregatorRegistry, type Registry } from 'prom-client'
import { bounded, BUS_WAIT_MS, Topics } from '../store/bus.js'
import type { PeerBus } from '../store/types.js'
import type { HealthReport } from '../upstream/health.js'

// What the workers of `serve --workers N` ask of each other, through the primary (node:cluster
// IPC): a scrape of /metrics that sums every worker's figures (prom-client's cluster aggregator:
// the primary asks each worker for its registry and merges them), a reload asked of one worker
// (the admin API) that every other worker does too, every worker's view of the providers' health
// (the admin API's /providers: each worker has its own breakers), and the store's bus: a message
// one worker broadcasts, handled by every other worker, the sender answered once all have (or
// after BUS_WAIT_MS for one that does not answer).

const METRICS = 'modelgate:metrics'
const RELOAD_ALL = 'modelgate:reload-all'
const RELOAD = 'modelgate:reload'
const RELOADED = 'modelgate:reloaded'
/** worker → primary: broadcast this; primary → worker: every other worker has handled it. */
const BUS = 'modelgate:bus'
/** primary → worker: handle this; worker → primary: handled. */
const BUS_DELIVER = 'modelgate:bus-deliver'
const BUS_HANDLED = 'modelgate:bus-handled'
/** worker → primary: every worker's health, please; primary → worker: here they are. */
const HEALTH = 'modelgate:health'
/** primary → worker: your health; worker → primary: here it is. */
const HEALTH_REPORT = 'modelgate:health-report'
/** How long the primary waits for one worker's health before answering without it. */
const HEALTH_WAIT_MS = 2_000

interface Message { type: string, id: number, text?: string, error?: string, ok?: boolean, workers?: number, topic?: string, message?: unknown, reports?: HealthReport[], report?: HealthReport }

const isMessage = (m: unknown): m is Message => typeof (m as Message | null)?.type === 'string' && (m as Message).type.startsWith('modelgate:')

const REPLY_TIMEOUT_MS = 30_000

/** In the primary: answers the workers' scrapes and reloads, and relays their bus. */
export function servePrimary (): void {
  const aggregator = new AggregatorRegistry()
  let next = 0
  const waiting = new Map<number, (ok: boolean) => void>()
  const handling = new Map<number, () => void>()
  const reports = new Map<number, (r: HealthReport) => void>()
  cluster.on('message', (worker: Worker, msg: unknown) => {
    if (!isMessage(msg)) return
    if (msg.type === BUS) {
      const others = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w !== worker && w.isConnected())
      const ids: number[] = []
      const all = Promise.all(others.map(async (w) => await new Promise<void>((resolve) => {
        const id = next++
        ids.push(id)
        handling.set(id, resolve)
        w.send({ type: BUS_DELIVER, id, topic: msg.topic, message: msg.message })
      })))
      void bounded(all, BUS_WAIT_MS).then(() => {
        for (const id of ids) handling.delete(id)
        if (worker.isConnected()) worker.send({ type: BUS, id: msg.id })
      })
    } else if (msg.type === BUS_HANDLED) {
      handling.get(msg.id)?.()
      handling.delete(msg.id)
    } else if (msg.type === HEALTH) {
      // the asking worker included: it answers this like the others
      const all = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w.isConnected())
      void Promise.all(all.map(async (w) => await new Promise<HealthReport | null>((resolve) => {
        const id = next++
        const timer = setTimeout(() => { reports.delete(id); resolve(null) }, HEALTH_WAIT_MS)
        reports.set(id, (r) => { clearTimeout(timer); reports.delete(id); resolve(r) })
        w.send({ type: HEALTH_REPORT, id })
      }))).then((got) => {
        if (worker.isConnected()) worker.send({ type: HEALTH, id: msg.id, reports: got.filter((r): r is HealthReport => r !== null) })
      })
    } else if (msg.type === HEALTH_REPORT) {
      if (msg.report !== undefined) reports.get(msg.id)?.(msg.report)
    } else if (msg.type === METRICS) {
      aggregator.clusterMetrics().then(
        (text) => { worker.send({ type: METRICS, id: msg.id, text }) },
        (err: Error) => { worker.send({ type: METRICS, id: msg.id, error: err.message }) }
      )
    } else if (msg.type === RELOADED) {
      waiting.get(msg.id)?.(msg.ok === true)
    } else if (msg.type === RELOAD_ALL) {
      const others = Object.values(cluster.workers ?? {}).filter((w): w is Worker => w !== undefined && w !== worker && w.isConnected())
      void Promise.all(others.map(async (w) => await new Promise<boolean>((resolve) => {
        const id = next++
        const timer = setTimeout(() => { waiting.delete(id); resolve(false) }, REPLY_TIMEOUT_MS)
        waiting.set(id, (ok) => { clearTimeout(timer); waiting.delete(id); resolve(ok) })
        w.send({ type: RELOAD, id })
      }))).then((oks) => { worker.send({ type: RELOAD_ALL, id: msg.id, workers: 1 + oks.filter(Boolean).length }) })
    }
  })
}

let asked = 0
const pending = new Map<number, (m: Message) => void>()

function askPrimary (type: string): Promise<Message> {
  return new Promise((resolve, reject) => {
    const id = asked++
    const timer = setTimeout(() => { pending.delete(id); reject(new Error(`the primary did not answer ${type}`)) }, REPLY_TIMEOUT_MS)
    pending.set(id, (m) => { clearTimeout(timer); pending.delete(id); resolve(m) })
    process.send?.({ type, id })
  })
}

export interface WorkerLink {
  /** Every worker's metrics, summed by the primary. */
  scrape: () => Promise<string>
  /** Every worker's view of the providers (a worker that does not answer within 2 s is left out). */
  health: () => Promise<HealthReport[]>
  /** Has every other worker reload; resolves with how many workers reloaded, this one included. */
  reloadOthers: () => Promise<number>
}

/**
 * In a worker: answers the primary's requests (its registry's figures; a reload asked by another
 * worker, done with `reload`; its view of the providers, from `health`) and asks the primary for
 * scrapes, reloads and every worker's health.
 */
export function linkWorker (registry: Registry, reload: () => Promise<{ ok: boolean }>, health: () => HealthReport): WorkerLink {
  AggregatorRegistry.setRegistries([registry])
  // constructed for its side effect: in a worker it answers the primary's requests for figures
  // eslint-disable-next-line no-new
  new AggregatorRegistry()
  process.on('message', (msg: unknown) => {
    if (!isMessage(msg)) return
    if (msg.type === RELOAD) {
      void reload().then((r) => process.send?.({ type: RELOADED, id: msg.id, ok: r.ok }), () => process.send?.({ type: RELOADED, id: msg.id, ok: false }))
      return
    }
    if (msg.type === HEALTH_REPORT) {
      process.send?.({ type: HEALTH_REPORT, id: msg.id, report: health() })
      return
    }
    if (msg.type === METRICS || msg.type === RELOAD_ALL || msg.type === HEALTH) pending.get(msg.id)?.(msg)
  })
  return {
    scrape: async () => {
      const m = await askPrimary(METRICS)
      if (m.error !== undefined) throw new Error(`collecting the workers' metrics failed: ${m.error}`)
      return m.text ?? ''
    },
    reloadOthers: async () => (await askPrimary(RELOAD_ALL)).workers ?? 1,
    health: async () => (await askPrimary(HEALTH)).reports ?? []
  }
}

/**
 * In a worker: the store's bus between the workers sharing its SQLite file, through the primary.
 * Listening starts here, before the store opens, so no message is missed by a store that reads.
 */
export function workerBus (): PeerBus {
  const topics = new Topics()
  let sent = 0
  const answered = new Map<number, () => void>()
  process.on('message', (msg: unknown) => {
    if (!isMessage(msg)) return
    if (msg.type === BUS_DELIVER) {
      void topics.deliver(msg.topic ?? '', msg.message, () => {}).then(() => { process.send?.({ type: BUS_HANDLED, id: msg.id }) })
    } else if (msg.type === BUS) {
      answered.get(msg.id)?.()
    }
  })
  return {
    broadcast: async (topic, message) => {
      const id = sent++
      // the primary answers within BUS_WAIT_MS; a little more covers a primary that is gone
      await bounded(new Promise<void>((resolve) => {
        answered.set(id, resolve)
        process.send?.({ type: BUS, id, topic, message })
      }), BUS_WAIT_MS * 1.5)
      answered.delete(id)
    },
    on: (topic, fn) => { topics.on(topic, fn) }
  }
}
