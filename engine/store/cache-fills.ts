import type { PeerBus } from './types.js'
import type { MaybePromise } from '../kernel/maybe-promise.js'

// The response cache's fills as one process sees them: the fills it holds itself (a second
// identical call here waits for the first without asking the store) and the calls waiting for a
// fill, here or in another process. A fill that ends here wakes this process's waiters at once;
// when the store counted waiters in other processes, a message on the store's bus wakes theirs.
// A waiter also wakes when its time is up, so a fill whose process died delays it, never more.

const TOPIC = 'cache.fill-ended'

interface LocalFill { owner: string, until: number }

export class CacheFills {
  private readonly waiting = new Map<string, Set<() => void>>()
  private readonly local = new Map<string, LocalFill>()

  constructor (private readonly bus: PeerBus, private readonly onError: (err: unknown, what: string) => void) {
    bus.on(TOPIC, (m) => { this.wake(m.key) })
  }

  /** Whether a call of this process fills `key` now. */
  filledHere (key: string, now: number): boolean {
    const f = this.local.get(key)
    if (f === undefined) return false
    if (f.until > now) return true
    this.local.delete(key)
    return false
  }

  /** A call of this process fills `key` until `until` at most. */
  claimed (key: string, owner: string, until: number): void {
    this.local.set(key, { owner, until })
  }

  /**
   * Resolves once the fill of `key` ends, or after `ms`. `ended` tells whether it ended before
   * this waiter was counted (a message sent by then may have gone before it listened).
   */
  wait (key: string, ms: number, ended?: () => MaybePromise<boolean>): Promise<void> {
    return new Promise((resolve) => {
      let set = this.waiting.get(key)
      if (set === undefined) {
        set = new Set()
        this.waiting.set(key, set)
      }
      const waiters = set
      const done = (): void => {
        clearTimeout(timer)
        waiters.delete(done)
        if (waiters.size === 0 && this.waiting.get(key) === waiters) this.waiting.delete(key)
        resolve()
      }
      const timer = setTimeout(done, ms)
      waiters.add(done)
      if (ended !== undefined) {
        Promise.resolve().then(ended).then((yes) => { if (yes) done() }, () => {})
      }
    })
  }

  /**
   * `owner`'s fill of `key` ended: this process's waiters go on, and, when `others` waiters of
   * other processes were counted, theirs.
   */
  ended (key: string, owner: string | undefined, others: number): void {
    if (owner !== undefined && this.local.get(key)?.owner === owner) this.local.delete(key)
    this.wake(key)
    if (others > 0) this.bus.broadcast(TOPIC, { key }).catch((err: unknown) => { this.onError(err, 'the end of a cache fill was not announced') })
  }

  /** Calls waiting here (tests). */
  waiters (key?: string): number {
    if (key !== undefined) return this.waiting.get(key)?.size ?? 0
    let n = 0
    for (const s of this.waiting.values()) n += s.size
    return n
  }

  private wake (key: string): void {
    const set = this.waiting.get(key)
    if (set === undefined) return
    for (const fn of [...set]) fn()
  }
}
