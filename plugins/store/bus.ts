import type { PeerBus } from './types.js'
import type { MaybePromise } from '../kernel/maybe-promise.js'

/** How long a broadcast waits for a peer that does not answer. */
export const BUS_WAIT_MS = 1000

type Handler = (message: Record<string, unknown>) => MaybePromise<void>

/** The handlers of one bus member, by topic. */
export class Topics {
  private readonly handlers = new Map<string, Handler[]>()

  on (topic: string, fn: Handler): void {
    const list = this.handlers.get(topic)
    if (list === undefined) this.handlers.set(topic, [fn])
    else list.push(fn)
  }

  /** Runs every handler of `topic`; resolves once each is done (a failing one is reported, not thrown). */
  async deliver (topic: string, message: Record<string, unknown>, onError: (err: unknown) => void): Promise<void> {
    const list = this.handlers.get(topic)
    if (list === undefined) return
    await Promise.all(list.map(async (fn) => {
      try { await fn(message) } catch (err) { onError(err) }
    }))
  }
}

/** Settles once `p` does, or after `ms`, whichever comes first. */
export async function bounded (p: Promise<unknown>, ms = BUS_WAIT_MS): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  await Promise.race([p.then(() => {}, () => {}), new Promise<void>((resolve) => { timer = setTimeout(resolve, ms) })])
  clearTimeout(timer)
}

const members = new Map<string, Set<LocalBus>>()

/**
 * The bus of the stores one process opens on one database file (several SQLite stores on one
 * file in one process, as tests open them): a broadcast runs the other members' handlers
 * directly. Between processes the cluster's bus is used instead.
 */
export class LocalBus implements PeerBus {
  private readonly topics = new Topics()
  private readonly peers: Set<LocalBus>

  constructor (name: string, private readonly onError: (err: unknown) => void = () => {}) {
    let set = members.get(name)
    if (set === undefined) {
      set = new Set()
      members.set(name, set)
    }
    set.add(this)
    this.peers = set
    this.leave = () => {
      set.delete(this)
      if (set.size === 0 && members.get(name) === set) members.delete(name)
    }
  }

  /** Stops hearing the other members. */
  readonly leave: () => void

  async broadcast (topic: string, message: Record<string, unknown>): Promise<void> {
    const others = [...this.peers].filter((p) => p !== this)
    if (others.length === 0) return
    await bounded(Promise.all(others.map(async (p) => { await p.topics.deliver(topic, message, p.onError) })))
  }

  on (topic: string, fn: Handler): void { this.topics.on(topic, fn) }
}
