import type { DB } from './db.js'
import type { GroupCommit } from './group-commit.js'
import { QuotaLatch } from '../quota-latch.js'
import { hitsToTake, RateLimitLeases, type HitTake } from '../rate-limit-leases.js'
import type { IdempotencyStore, PeerBus, QuotaLimit, QuotaStore, QuotaUsage } from '../types.js'
import type { MaybePromise } from '../../kernel/maybe-promise.js'

// The admission policies' shared state. Each operation is one atomic statement or transaction on
// the shared file, so every worker of one machine agrees.

export class IdempotencyRepository implements IdempotencyStore {
  private readonly takeStmt
  private readonly keepStmt
  private readonly releaseStmt
  private readonly sweepStmt

  constructor (db: DB, private readonly commit: GroupCommit) {
    // a row that expired is taken over; a live one (in flight or answered) refuses the newcomer
    this.takeStmt = db.prepare(`INSERT INTO idempotency_keys (scope, idem_key, trace_id, created_at, expires_at)
      VALUES (@scope, @key, @trace, @now, @expires)
      ON CONFLICT(scope, idem_key) DO UPDATE SET trace_id = @trace, created_at = @now, expires_at = @expires
      WHERE idempotency_keys.expires_at <= @now`)
    this.keepStmt = db.prepare('UPDATE idempotency_keys SET expires_at = @expires WHERE scope = @scope AND idem_key = @key AND trace_id = @trace AND expires_at < @expires')
    this.releaseStmt = db.prepare('DELETE FROM idempotency_keys WHERE scope = @scope AND idem_key = @key AND trace_id = @trace')
    this.sweepStmt = db.prepare('DELETE FROM idempotency_keys WHERE expires_at <= ?')
  }

  /** Committed with the other writes of this event-loop turn before it answers. */
  take (scope: string, key: string, owner: string, now: number, ttlMs: number): Promise<boolean> {
    return this.commit.run(() => this.takeNow(scope, key, owner, now, ttlMs))
  }

  takeNow (scope: string, key: string, owner: string, now: number, ttlMs: number): boolean {
    return this.takeStmt.run({ scope, key, trace: owner, now, expires: now + ttlMs }).changes > 0
  }

  // moving an expiry later can wait for a batch: the key refuses repeats either way
  keep (scope: string, key: string, owner: string, until: number): void {
    this.commit.later(() => { this.keepStmt.run({ scope, key, trace: owner, expires: until }) })
  }

  // at once: the client may retry with the same key the moment it has its error
  release (scope: string, key: string, owner: string): void {
    this.releaseStmt.run({ scope, key, trace: owner })
  }

  sweep (now: number): number {
    return this.sweepStmt.run(now).changes
  }
}

/**
 * Fixed-window hit counters, one row per key; the window starts with its first hit. A take reads
 * the counter and adds hitsToTake() hits in one write of the turn's group (an IMMEDIATE
 * transaction, so every worker agrees); the worker hands them out itself (../rate-limit-leases.ts).
 */
export class RateLimitRepository extends RateLimitLeases {
  private readonly sweepStmt

  constructor (db: DB, commit: GroupCommit) {
    const incr = db.prepare<Record<string, unknown>, { count: number, reset_at: number }>(`INSERT INTO rate_limits (key, count, reset_at) VALUES (@key, @n, @reset)
      ON CONFLICT(key) DO UPDATE SET
        count = CASE WHEN rate_limits.reset_at <= @now THEN @n ELSE rate_limits.count + @n END,
        reset_at = CASE WHEN rate_limits.reset_at <= @now THEN @reset ELSE rate_limits.reset_at END
      RETURNING count, reset_at`)
    const peek = db.prepare<[string, number], { count: number }>('SELECT count FROM rate_limits WHERE key = ? AND reset_at > ?')
    super((key, now, windowMs, max) => commit.run((): HitTake => {
      const taken = hitsToTake(peek.get(key, now)?.count ?? 0, max)
      const r = incr.get({ key, now, reset: now + windowMs, n: taken }) as { count: number, reset_at: number }
      return { count: r.count, resetAt: r.reset_at, taken }
    }))
    this.sweepStmt = db.prepare('DELETE FROM rate_limits WHERE reset_at <= ?')
  }

  sweepRows (now: number): number {
    this.sweep(now)
    return this.sweepStmt.run(now).changes
  }
}

/** Usage per quota scope and UTC window; admission goes through the latch (../quota-latch.ts). */
export class QuotaRepository implements QuotaStore {
  private readonly addStmt
  private readonly getStmt
  private readonly sweepStmt
  readonly latch: QuotaLatch

  constructor (db: DB, private readonly commit: GroupCommit, bus: PeerBus | null, now: () => number, onError: (err: unknown, what: string) => void) {
    this.addStmt = db.prepare<Record<string, unknown>, QuotaUsage>(`INSERT INTO quota_usage (scope, window_start, tokens, cost_nano) VALUES (@scope, @window, @tokens, @cost)
      ON CONFLICT(scope, window_start) DO UPDATE SET tokens = tokens + @tokens, cost_nano = cost_nano + @cost
      RETURNING tokens, cost_nano`)
    this.getStmt = db.prepare<[string, number], QuotaUsage>('SELECT tokens, cost_nano FROM quota_usage WHERE scope = ? AND window_start = ?')
    this.sweepStmt = db.prepare('DELETE FROM quota_usage WHERE window_start < ?')
    this.latch = new QuotaLatch((scope, windowStart) => this.used(scope, windowStart), bus, now, onError)
  }

  admit (scope: string, windowStart: number, limit: QuotaLimit): MaybePromise<QuotaUsage | null> {
    return this.latch.admit(scope, windowStart, limit)
  }

  known (scope: string, windowStart: number): QuotaUsage | undefined {
    return this.latch.known(scope, windowStart)
  }

  used (scope: string, windowStart: number): QuotaUsage {
    return this.getStmt.get(scope, windowStart) ?? { tokens: 0, cost_nano: 0 }
  }

  /** Summed with the other counts of this scope and window in this turn's group; resolves with the window's totals once committed (and announced when it reached the limit). */
  count (scope: string, windowStart: number, tokens: number, costNano: number, limit: QuotaLimit): Promise<QuotaUsage> {
    return this.commit.sum(`quota:${scope}:${windowStart}`, [tokens, costNano], ([t, c]) => this.addStmt.get({ scope, window: windowStart, tokens: t, cost: c }) as QuotaUsage, { retry: true })
      .then((total) => {
        const announced = this.latch.counted(scope, windowStart, total, limit)
        return announced === undefined ? total : announced.then(() => total)
      })
  }

  sweep (before: number): number {
    this.latch.sweep()
    return this.sweepStmt.run(before).changes
  }
}
