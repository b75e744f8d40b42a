import { isBusy, type DB } from './db.js'

/**
 * Writes that follow a response (usage records, ledger settles, lease give-backs, quota counts,
 * the idempotency expiry of a long call) are queued and committed together in one transaction
 * every `intervalMs` (or at `maxOps`), off the response path: one commit for many calls instead
 * of several per call.
 * Admission writes (lease reservations, rate-limit counts, idempotency keys) never come here:
 * they decide whether a request runs, so each is committed before its request goes on (the
 * rate-limit hits and idempotency keys of one event-loop turn together, store/grouped.ts).
 * Readers that must see everything call flush(); closing the app flushes, so a graceful stop
 * loses nothing.
 */
export class DeferredWriter {
  private ops: Array<() => void> = []
  private readonly sums = new Map<string, { totals: number[], sealed: boolean }>()
  private timer: NodeJS.Timeout | null = null
  private readonly run: (ops: Array<() => void>) => void

  constructor (db: DB, private intervalMs: number, private maxOps: number, private readonly onError: (err: unknown) => void) {
    this.run = db.transaction((ops: Array<() => void>) => { for (const op of ops) op() })
  }

  configure (intervalMs: number, maxOps: number): void {
    this.intervalMs = intervalMs
    this.maxOps = maxOps
  }

  add (op: () => void): void {
    this.ops.push(op)
    if (this.ops.length >= this.maxOps) this.flush()
    else if (this.timer === null) {
      this.timer = setTimeout(() => this.flush(), this.intervalMs)
      this.timer.unref()
    }
  }

  /**
   * Adds `amounts` to the write pending under `key` in this batch; the first call of a batch
   * queues it, and `apply` then runs once with the sums (a balance debit or a quota count: one
   * statement per batch instead of one per call). Calls made after the batch started running
   * go to the next one.
   */
  sum (key: string, amounts: number[], apply: (totals: number[]) => void): void {
    let entry = this.sums.get(key)
    if (entry === undefined) {
      const e = { totals: amounts.map(() => 0), sealed: false }
      this.sums.set(key, e)
      this.add(() => {
        // sealed for good: a batch that rolls back runs this again with the same totals
        if (!e.sealed) { e.sealed = true; this.sums.delete(key) }
        apply(e.totals)
      })
      entry = e
    }
    for (let i = 0; i < amounts.length; i++) entry.totals[i] = (entry.totals[i] ?? 0) + (amounts[i] ?? 0)
  }

  flush (): void {
    if (this.timer !== null) { clearTimeout(this.timer); this.timer = null }
    if (this.ops.length === 0) return
    const ops = this.ops
    this.ops = []
    try {
      this.run(ops)
      return
    } catch (err) {
      if (isBusy(err)) return this.retryLater(ops, err)
    }
    // the batch rolled back whole: run each alone, so one bad write cannot hold back the rest
    const busy: Array<() => void> = []
    let busyErr: unknown
    for (const op of ops) {
      try {
        this.run([op])
      } catch (err) {
        if (isBusy(err)) { busy.push(op); busyErr = err } else this.onError(err)
      }
    }
    if (busy.length > 0) this.retryLater(busy, busyErr)
  }

  // another process holds the write lock: keep them for the next flush rather than lose them
  private retryLater (ops: Array<() => void>, err: unknown): void {
    this.ops = ops.concat(this.ops)
    this.onError(err)
    if (this.timer === null) {
      this.timer = setTimeout(() => this.flush(), Math.max(this.intervalMs, 100))
      this.timer.unref()
    }
  }

  get pending (): number { return this.ops.length }
}
