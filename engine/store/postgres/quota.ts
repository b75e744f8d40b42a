import { QuotaLatch } from '../quota-latch.js'
import type { PeerBus, QuotaLimit, QuotaStore, QuotaUsage } from '../types.js'
import type { MaybePromise } from '../../kernel/maybe-promise.js'
import type { EndOfCallBatch } from './batch.js'
import type { Connection } from './db.js'

/**
 * Usage per quota scope and UTC window in PostgreSQL. Admission goes through the latch
 * (../quota-latch.ts): a window is read once per instance, then judged from memory until a count
 * that reaches its limit closes it everywhere. Counts join the end-of-call batch, whose upsert
 * returns the window's new totals.
 */
export class QuotaRepository implements QuotaStore {
  readonly latch: QuotaLatch

  constructor (private readonly conn: Connection, private readonly batch: EndOfCallBatch, bus: PeerBus, now: () => number, onError: (err: unknown, what: string) => void) {
    // while the bus's connection is down, announcements may be missed, and while PostgreSQL is,
    // counts cannot be committed: admissions read the store (and fail closed with it)
    this.latch = new QuotaLatch(async (scope, windowStart) => await this.used(scope, windowStart), bus, now, onError, () => conn.sub.status === 'ready' && !conn.lost)
    let wasReady = false
    conn.sub.on('ready', () => {
      if (wasReady) this.latch.forget()
      wasReady = true
    })
  }

  admit (scope: string, windowStart: number, limit: QuotaLimit): MaybePromise<QuotaUsage | null> {
    return this.latch.admit(scope, windowStart, limit)
  }

  known (scope: string, windowStart: number): QuotaUsage | undefined {
    return this.latch.known(scope, windowStart)
  }

  async used (scope: string, windowStart: number): Promise<QuotaUsage> {
    return (await this.conn.q<QuotaUsage>('SELECT tokens, cost_nano FROM quota_usage WHERE scope = $1 AND window_start = $2', [scope, windowStart])).rows[0] ?? { tokens: 0, cost_nano: 0 }
  }

  async count (scope: string, windowStart: number, tokens: number, costNano: number, limit: QuotaLimit): Promise<QuotaUsage> {
    const total = await this.batch.count(scope, windowStart, tokens, costNano)
    await this.latch.counted(scope, windowStart, total, limit)
    return total
  }

  async sweep (before: number): Promise<void> {
    this.latch.sweep()
    await this.conn.q('DELETE FROM quota_usage WHERE window_start < $1', [before])
  }
}
