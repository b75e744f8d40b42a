import { type RateLimitHit, type RateLimitStore } from './types.js'
import { isPromise, type MaybePromise } from '../kernel/maybe-promise.js'

/** What one take from a window's shared counter gave: the counter after it, its window's end, and how many hits it took. */
export interface HitTake { count: number, resetAt: number, taken: number }

/** Hits to take at once when the window's counter stands at `count`: a sixteenth of what remains, 1 to 64. */
export function hitsToTake (count: number, max: number): number {
  return Math.max(1, Math.min(64, Math.floor((max - count) / 16)))
}

interface Lease {
  resetAt: number
  /** The next hit's place in the window, and the last place this process took. */
  next: number
  last: number
  /** The shared counter at the last take. */
  counted: number
  /** Hits refused here since the counter was known to be past the limit. */
  over: number
  pending: Promise<void> | null
}

/**
 * Rate-limit hits handed out by this process from leases on the shared counters. A take adds
 * hitsToTake() hits to the window's counter in one store operation and this process hands them
 * out one by one; near the limit the take is a single hit. Hits taken and not used only make the
 * count higher: no window admits more than `max`, and a process holds at most about a sixteenth
 * of what remained. One take per key is in flight at a time; hits arriving meanwhile wait for it.
 * Once the counter is known past the limit, the window's later hits are refused here without the
 * store (a counter never goes down within its window).
 */
export class RateLimitLeases implements RateLimitStore {
  private readonly byKey = new Map<string, Lease>()

  /** `take` adds `hitsToTake(count, max)` to the counter of `key`'s window atomically. */
  constructor (private readonly take: (key: string, now: number, windowMs: number, max: number) => MaybePromise<HitTake>) {}

  hit (key: string, now: number, windowMs: number, max: number): MaybePromise<RateLimitHit> {
    let l = this.byKey.get(key)
    if (l !== undefined && l.pending !== null) return l.pending.then(() => this.hit(key, now, windowMs, max))
    if (l !== undefined && l.resetAt > now) {
      if (l.next <= l.last) return { count: l.next++, resetAt: l.resetAt }
      if (l.counted >= max) return { count: l.counted + ++l.over, resetAt: l.resetAt }
    } else {
      l = { resetAt: 0, next: 1, last: 0, counted: 0, over: 0, pending: null }
      this.byKey.set(key, l)
    }
    const lease = l
    const use = (t: HitTake): void => {
      lease.resetAt = t.resetAt
      lease.next = t.count - t.taken + 1
      lease.last = t.count
      lease.counted = t.count
      lease.over = 0
    }
    const taken = this.take(key, now, windowMs, max)
    if (!isPromise(taken)) {
      use(taken)
      return this.hit(key, now, windowMs, max)
    }
    lease.pending = taken.then(use).finally(() => { lease.pending = null })
    return lease.pending.then(() => this.hit(key, now, windowMs, max))
  }

  /** Forgets the leases of windows that ended. */
  sweep (now: number): void {
    for (const [key, l] of this.byKey) if (l.resetAt <= now && l.pending === null) this.byKey.delete(key)
  }
}
