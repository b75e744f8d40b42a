import { isBusy, type DB } from './db.js'

export interface CommitOptions {
  /**
   * When another process holds the write lock past busy_timeout, keep the write and run it
   * again a little later (its promise settles then) instead of failing it. For writes that must
   * not be lost (a call's usage record, its charge); admission writes fail instead, so the
   * request they decide gets its error at once.
   */
  retry?: boolean
}

interface Pending {
  op: () => unknown
  resolve: (value: unknown) => void
  reject: (err: unknown) => void
  retry: boolean
}

const RETRY_MS = 100

/**
 * Group commit: every write asked for during one turn of the event loop runs in one IMMEDIATE
 * transaction when the turn ends (setImmediate), and each gets its own result once that
 * transaction has committed. A commit costs several times the statement it carries, so under
 * load many calls share one; a lone write waits only for the end of the current turn. Writes
 * keep their own atomicity: two writes to the same row in one group see each other in order.
 *
 * When the group's transaction fails, each write runs again in a transaction of its own, so a
 * write that fails alone rejects alone. When it failed because another worker held the lock
 * past busy_timeout, the group is not rerun write by write (each would block the event loop that
 * long again): writes marked `retry` are kept for a later group, the others reject at once.
 *
 * `later()` is for writes nobody waits for (a lease given back, a key's expiry moved): they join
 * a group within `laterMs`, so that a quiet process does not commit for each of them.
 */
export class GroupCommit {
  private queue: Pending[] = []
  private scheduled = false
  /** While held (the checkpoint thread restarting the WAL), writes wait in the queue; see hold(). */
  private holdTimer: NodeJS.Timeout | null = null
  private lazy: Array<() => void> = []
  private lazyTimer: NodeJS.Timeout | null = null
  private retryTimer: NodeJS.Timeout | null = null
  private readonly sums = new Map<string, { totals: number[], sealed: boolean, done: Promise<unknown> }>()
  /**
   * How many writes the transaction now running carries (its own among them), read by a write
   * that is cheaper done another way when it commits nearly alone (./usage.ts); 0 outside one.
   */
  groupSize = 0
  /** Told each group's commit time (s) and size; metrics set it, nobody else. */
  onBatch: ((seconds: number, writes: number) => void) | null = null
  private readonly runGroup: (items: Pending[]) => unknown[]
  private readonly runOne: (op: () => unknown) => unknown

  constructor (db: DB, private readonly onError: (err: unknown) => void, private readonly laterMs = 5) {
    this.runGroup = db.transaction((items: Pending[]) => items.map((p) => p.op())).immediate
    this.runOne = db.transaction((op: () => unknown) => op()).immediate
  }

  /** Runs `op` in this turn's transaction; resolves with its result once it is committed. */
  run<R> (op: () => R, opts: CommitOptions = {}): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.enqueue({ op, resolve: resolve as (v: unknown) => void, reject, retry: opts.retry === true })
    })
  }

  /**
   * Adds `amounts` to the write pending under `key` in this turn's group; the first call of a
   * group queues it, and `apply` then runs once with the sums (a balance debit or a quota count:
   * one statement per group instead of one per call). Every caller's promise settles with what
   * `apply` returned.
   */
  sum<R> (key: string, amounts: number[], apply: (totals: number[]) => R, opts: CommitOptions = {}): Promise<R> {
    let entry = this.sums.get(key) as { totals: number[], sealed: boolean, done: Promise<R> } | undefined
    if (entry === undefined) {
      const e = { totals: amounts.map(() => 0), sealed: false, done: Promise.resolve() as Promise<R> }
      e.done = this.run(() => {
        // sealed for good: a group that rolls back runs this again with the same totals
        if (!e.sealed) { e.sealed = true; this.sums.delete(key) }
        return apply(e.totals)
      }, opts)
      this.sums.set(key, e)
      entry = e
    }
    for (let i = 0; i < amounts.length; i++) entry.totals[i] = (entry.totals[i] ?? 0) + (amounts[i] ?? 0)
    return entry.done
  }

  /** Queues a write nobody waits for; it is committed within `laterMs`, with other writes. */
  later (op: () => void): void {
    this.lazy.push(op)
    if (this.lazyTimer === null) {
      this.lazyTimer = setTimeout(() => { this.lazyTimer = null; this.moveLazy() }, this.laterMs)
      this.lazyTimer.unref()
    }
  }

  /** Commits everything queued, now (held or not). */
  flush (): void {
    if (this.lazyTimer !== null) { clearTimeout(this.lazyTimer); this.lazyTimer = null }
    this.moveLazy()
    this.drain(true)
  }

  /**
   * Writes asked for from now on wait, uncommitted, until release() or `maxMs`, whichever comes
   * first; the event loop goes on meanwhile. The checkpoint thread holds them for its last copy
   * before the WAL can start over (./checkpointer.ts).
   */
  hold (maxMs: number): void {
    if (this.holdTimer !== null) clearTimeout(this.holdTimer)
    // not unref'd: writes are waiting
    this.holdTimer = setTimeout(() => { this.release() }, maxMs)
  }

  /** Writes that waited for a hold are committed now. */
  release (): void {
    if (this.holdTimer === null) return
    clearTimeout(this.holdTimer)
    this.holdTimer = null
    if (this.queue.length > 0) this.drain()
  }

  get held (): boolean { return this.holdTimer !== null }

  /** Writes queued and not committed yet. */
  get pending (): number { return this.queue.length + this.lazy.length }

  private moveLazy (): void {
    const ops = this.lazy
    this.lazy = []
    for (const op of ops) this.enqueue({ op, resolve: () => {}, reject: (err) => { this.onError(err) }, retry: true })
  }

  private enqueue (p: Pending): void {
    this.queue.push(p)
    if (!this.scheduled && this.holdTimer === null) {
      this.scheduled = true
      setImmediate(() => { this.drain() })
    }
  }

  private drain (force = false): void {
    this.scheduled = false
    if (this.holdTimer !== null && !force) return
    const items = this.queue
    if (items.length === 0) return
    this.queue = []
    let results: unknown[]
    const t0 = this.onBatch === null ? 0 : performance.now()
    this.groupSize = items.length
    try {
      results = this.runGroup(items)
      if (this.onBatch !== null) this.onBatch((performance.now() - t0) / 1000, items.length)
    } catch (err) {
      if (isBusy(err)) { this.busy(items, err); return }
      this.oneByOne(items)
      return
    } finally {
      this.groupSize = 0
    }
    for (let i = 0; i < items.length; i++) (items[i] as Pending).resolve(results[i])
  }

  private oneByOne (items: Pending[]): void {
    const busy: Pending[] = []
    let busyErr: unknown
    this.groupSize = 1
    for (const p of items) {
      try {
        p.resolve(this.runOne(p.op))
      } catch (err) {
        if (isBusy(err)) { busy.push(p); busyErr = err } else p.reject(err)
      }
    }
    this.groupSize = 0
    if (busy.length > 0) this.busy(busy, busyErr)
  }

  // another process held the lock: writes that must not be lost wait for a later group
  private busy (items: Pending[], err: unknown): void {
    const kept = items.filter((p) => p.retry)
    for (const p of items) if (!p.retry) p.reject(err)
    if (kept.length === 0) return
    this.onError(err)
    this.queue = kept.concat(this.queue)
    if (this.retryTimer === null) {
      this.retryTimer = setTimeout(() => { this.retryTimer = null; this.drain() }, Math.max(this.laterMs, RETRY_MS))
      this.retryTimer.unref()
    }
  }
}
