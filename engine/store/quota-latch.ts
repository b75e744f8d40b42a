import { type PeerBus, type QuotaLimit, type QuotaUsage } from './types.js'
import { isPromise, type MaybePromise } from '../kernel/maybe-promise.js'

const TOPIC = 'quota'
/** A window not asked about for this long is forgotten (read again from the store if asked). */
const IDLE_MS = 10 * 60_000

interface Window {
  /** The most this process knows the window used: its store read, its own counts' totals, what peers announced. */
  usage: QuotaUsage
  /** The limit the window was last read for; null when it was never read here. */
  limit: QuotaLimit | null
  loading: Promise<QuotaUsage | null> | null
  /** The announcement under way, and the usage it carries. */
  closing: { usage: QuotaUsage, done: Promise<void> } | null
  touched: number
}

export const reached = (usage: QuotaUsage, limit: QuotaLimit): boolean =>
  limit.tokens !== undefined ? usage.tokens >= limit.tokens : usage.cost_nano >= (limit.costNano ?? Number.POSITIVE_INFINITY)

const sameLimit = (a: QuotaLimit | null, b: QuotaLimit): boolean => a !== null && a.tokens === b.tokens && a.costNano === b.costNano

const most = (a: QuotaUsage, b: QuotaUsage): QuotaUsage =>
  a.tokens >= b.tokens && a.cost_nano >= b.cost_nano ? a : { tokens: Math.max(a.tokens, b.tokens), cost_nano: Math.max(a.cost_nano, b.cost_nano) }

const atMost = (a: QuotaUsage, b: QuotaUsage): boolean => a.tokens <= b.tokens && a.cost_nano <= b.cost_nano

/**
 * Quota admission from memory. A (scope, window) is read from the store the first time this
 * process is asked about it, and again when the limit it is asked against changes; after that it
 * stays open here until it is known to have reached its limit. The store's count of an ended call
 * returns the window's new totals; when they reach the limit, the window is closed here and
 * announced on the bus, and the count resolves once every other process sharing the store has
 * closed it too. So once the calls that ended have reached a quota, the next call is refused by
 * every process. A process subscribes before its first read, so it cannot miss an announcement
 * about a window it has read: whatever it read before a count was committed, it hears of after.
 */
export class QuotaLatch {
  private readonly windows = new Map<string, Window>()

  /**
   * `read`: the window's usage as stored. `live`: false while the bus may be missing messages
   * (every admission then reads the store).
   */
  constructor (
    private readonly read: (scope: string, windowStart: number) => MaybePromise<QuotaUsage>,
    private readonly bus: PeerBus | null,
    private readonly now: () => number,
    private readonly onError: (err: unknown, what: string) => void,
    private readonly live: () => boolean = () => true
  ) {
    bus?.on(TOPIC, (m) => { this.learn(m.scope, m.window, { tokens: m.tokens, cost_nano: m.cost_nano }) })
  }

  admit (scope: string, windowStart: number, limit: QuotaLimit): MaybePromise<QuotaUsage | null> {
    const w = this.window(scope, windowStart)
    if (w.loading !== null) return w.loading.then(() => this.admit(scope, windowStart, limit))
    // usage only grows within a window: a limit reached stays reached, whatever was read when
    if (reached(w.usage, limit)) return w.usage
    if (sameLimit(w.limit, limit) && this.live()) return null
    const stored = this.read(scope, windowStart)
    const judge = (u: QuotaUsage): QuotaUsage | null => {
      w.usage = most(w.usage, u)
      w.limit = limit
      return reached(w.usage, limit) ? w.usage : null
    }
    if (!isPromise(stored)) return judge(stored)
    const loading = stored.then(judge).finally(() => { if (w.loading === loading) w.loading = null })
    w.loading = loading
    return loading
  }

  /**
   * A count was committed and `total` is the window's usage after it. When that reaches `limit`,
   * the window closes here and the returned promise settles once every peer has closed it.
   */
  counted (scope: string, windowStart: number, total: QuotaUsage, limit: QuotaLimit): Promise<void> | undefined {
    const w = this.window(scope, windowStart)
    w.usage = most(w.usage, total)
    if (!reached(total, limit) || this.bus === null) return undefined
    // counts of one batch share an announcement that covers them
    if (w.closing !== null && atMost(total, w.closing.usage)) return w.closing.done
    const message = { scope, window: windowStart, tokens: total.tokens, cost_nano: total.cost_nano }
    const closing = {
      usage: total,
      done: this.bus.broadcast(TOPIC, message).catch((err: unknown) => { this.onError(err, 'a quota window reached its limit and could not be announced to the other processes') })
    }
    w.closing = closing
    void closing.done.then(() => { if (w.closing === closing) w.closing = null })
    return closing.done
  }

  /** What this process knows `scope`'s window used (its reads, its counts' totals, what others announced); undefined when it has not read it. */
  known (scope: string, windowStart: number): QuotaUsage | undefined {
    const w = this.windows.get(`${windowStart}\n${scope}`)
    return w === undefined || w.limit === null || w.loading !== null ? undefined : w.usage
  }

  /** Forgets every window: the next admission of each reads the store (after the bus was away). */
  forget (): void {
    for (const w of this.windows.values()) w.limit = null
  }

  /** Forgets windows nobody asked about for a while. */
  sweep (): void {
    const before = this.now() - IDLE_MS
    for (const [k, w] of this.windows) if (w.touched < before && w.loading === null && w.closing === null) this.windows.delete(k)
  }

  private learn (scope: string, windowStart: number, usage: QuotaUsage): void {
    const w = this.window(scope, windowStart)
    w.usage = most(w.usage, usage)
  }

  private window (scope: string, windowStart: number): Window {
    const k = `${windowStart}\n${scope}`
    let w = this.windows.get(k)
    if (w === undefined) {
      w = { usage: { tokens: 0, cost_nano: 0 }, limit: null, loading: null, closing: null, touched: 0 }
      this.windows.set(k, w)
    }
    w.touched = this.now()
    return w
  }
}
