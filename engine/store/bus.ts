import { asChange } from './tenants.js'
import type { BusTopic, BusTopics, PeerBus } from './types.js'
import type { MaybePromise } from '../kernel/maybe-promise.js'
import { isObj } from '../kernel/json.js'

/** How long a broadcast waits for a peer that does not answer. */
export const BUS_WAIT_MS = 1000

type Handler<T extends BusTopic> = (message: BusTopics[T]) => MaybePromise<void>

/**
 * Each topic's message as it must arrive: a message comes from another process (through the
 * cluster's primary or Redis), maybe of another version, so it is read here, field by field,
 * before any handler sees it; one that does not fit is dropped.
 */
const READERS: { readonly [T in BusTopic]: (m: Record<string, unknown>) => BusTopics[T] | undefined } = {
  tenancy: asChange,
  quota: (m) => typeof m.scope === 'string' && typeof m.window === 'number' && typeof m.tokens === 'number' && typeof m.cost_nano === 'number'
    ? { scope: m.scope, window: m.window, tokens: m.tokens, cost_nano: m.cost_nano }
    : undefined,
  lease: (m) => typeof m.org === 'string' ? { org: m.org } : undefined,
  'cache.fill-ended': (m) => typeof m.key === 'string' ? { key: m.key } : undefined
}

const isTopic = (topic: string): topic is BusTopic => Object.hasOwn(READERS, topic)

/** The handlers of one bus member, by topic. */
export class Topics {
  private readonly handlers = new Map<BusTopic, Array<Handler<never>>>()

  on<T extends BusTopic> (topic: T, fn: Handler<T>): void {
    const list = this.handlers.get(topic)
    if (list === undefined) this.handlers.set(topic, [fn])
    else list.push(fn)
  }

  /**
   * Runs every handler of `topic` with `message` read by its topic's reader (an unknown topic or
   * a message that does not fit runs none); resolves once each is done (a failing one is reported, not thrown).
   */
  async deliver (topic: string, message: unknown, onError: (err: unknown) => void): Promise<void> {
    if (!isTopic(topic) || !isObj(message)) return
    const list = this.handlers.get(topic)
    if (list === undefined) return
    const read = READERS[topic](message)
    if (read === undefined) return
    await Promise.all(list.map(async (fn) => {
      try { await (fn as (m: unknown) => MaybePromise<void>)(read) } catch (err) { onError(err) }
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

  async broadcast<T extends BusTopic> (topic: T, message: BusTopics[T]): Promise<void> {
    const others = [...this.peers].filter((p) => p !== this)
    if (others.length === 0) return
    await bounded(Promise.all(others.map(async (p) => { await p.topics.deliver(topic, message, p.onError) })))
  }

  on<T extends BusTopic> (topic: T, fn: Handler<T>): void { this.topics.on(topic, fn) }
}
