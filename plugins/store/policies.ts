import type { DB } from './db.js'
import { grouped } from './grouped.js'

// Small repositories behind the admission policies. Each operation is one atomic statement or
// transaction on the shared SQLite file, so the workers of one machine agree; the same methods
// are what a Redis implementation would provide.

export class IdempotencyRepository {
  private readonly acquireStmt
  private readonly extendStmt
  private readonly releaseStmt
  private readonly sweepStmt
  /** acquire(), group-committed with the other acquires of the same event-loop turn. */
  readonly acquireGrouped: (scope: string, key: string, trace: string, now: number, ttlMs: number) => Promise<boolean>

  constructor (db: DB) {
    // a row that expired is taken over; a live one (in flight or answered) refuses the newcomer
    this.acquireStmt = db.prepare(`INSERT INTO idempotency_keys (scope, idem_key, trace_id, created_at, expires_at)
      VALUES (@scope, @key, @trace, @now, @expires)
      ON CONFLICT(scope, idem_key) DO UPDATE SET trace_id = @trace, created_at = @now, expires_at = @expires
      WHERE idempotency_keys.expires_at <= @now`)
    this.extendStmt = db.prepare('UPDATE idempotency_keys SET expires_at = @expires WHERE scope = @scope AND idem_key = @key AND trace_id = @trace AND expires_at < @expires')
    this.releaseStmt = db.prepare('DELETE FROM idempotency_keys WHERE scope = @scope AND idem_key = @key AND trace_id = @trace')
    this.sweepStmt = db.prepare('DELETE FROM idempotency_keys WHERE expires_at <= ?')
    this.acquireGrouped = grouped(db, (scope: string, key: string, trace: string, now: number, ttlMs: number) => this.acquire(scope, key, trace, now, ttlMs))
  }

  /** True when this request now owns the key, which then refuses repeats until now + ttlMs. */
  acquire (scope: string, key: string, trace: string, now: number, ttlMs: number): boolean {
    return this.acquireStmt.run({ scope, key, trace, now, expires: now + ttlMs }).changes > 0
  }

  /** Keeps the key of request `trace` until `expires` at least. */
  extend (scope: string, key: string, trace: string, expires: number): void {
    this.extendStmt.run({ scope, key, trace, expires })
  }

  release (scope: string, key: string, trace: string): void {
    this.releaseStmt.run({ scope, key, trace })
  }

  sweep (now: number): number {
    return this.sweepStmt.run(now).changes
  }
}

export class RateLimitRepository {
  private readonly incrStmt
  private readonly sweepStmt
  readonly take: (key: string, now: number, windowMs: number, max: number, most: number) => { count: number, reset_at: number, granted: number }
  /** incr(), group-committed with the other hits of the same event-loop turn. */
  readonly incrGrouped: (key: string, now: number, windowMs: number) => Promise<{ count: number, reset_at: number }>

  constructor (db: DB) {
    this.incrStmt = db.prepare<Record<string, unknown>, { count: number, reset_at: number }>(`INSERT INTO rate_limits (key, count, reset_at) VALUES (@key, @n, @reset)
      ON CONFLICT(key) DO UPDATE SET
        count = CASE WHEN rate_limits.reset_at <= @now THEN @n ELSE rate_limits.count + @n END,
        reset_at = CASE WHEN rate_limits.reset_at <= @now THEN @reset ELSE rate_limits.reset_at END
      RETURNING count, reset_at`)
    const peek = db.prepare<[string, number], { count: number }>('SELECT count FROM rate_limits WHERE key = ? AND reset_at > ?')
    this.sweepStmt = db.prepare('DELETE FROM rate_limits WHERE reset_at <= ?')
    this.take = db.transaction((key: string, now: number, windowMs: number, max: number, most: number) => {
      const remaining = max - (peek.get(key, now)?.count ?? 0)
      // hits handed out ahead only while the limit is far: near it every hit is counted alone
      const n = remaining >= most * 16 ? most : 1
      const { count, reset_at: resetAt } = this.incrStmt.get({ key, now, reset: now + windowMs, n }) as { count: number, reset_at: number }
      return { count, reset_at: resetAt, granted: n }
    }).immediate
    this.incrGrouped = grouped(db, (key: string, now: number, windowMs: number) => this.incr(key, now, windowMs))
  }

  /** Counts one hit in the key's fixed window; returns the count so far and when the window resets. */
  incr (key: string, now: number, windowMs: number): { count: number, reset_at: number } {
    return this.incrStmt.get({ key, now, reset: now + windowMs, n: 1 }) as { count: number, reset_at: number }
  }

  sweep (now: number): number { return this.sweepStmt.run(now).changes }
}

export class QuotaRepository {
  private readonly addStmt
  private readonly getStmt
  private readonly sweepStmt

  constructor (db: DB) {
    this.addStmt = db.prepare(`INSERT INTO quota_usage (scope, window_start, tokens, cost_nano) VALUES (@scope, @window, @tokens, @cost)
      ON CONFLICT(scope, window_start) DO UPDATE SET tokens = tokens + @tokens, cost_nano = cost_nano + @cost`)
    this.getStmt = db.prepare<[string, number], { tokens: number, cost_nano: number }>('SELECT tokens, cost_nano FROM quota_usage WHERE scope = ? AND window_start = ?')
    this.sweepStmt = db.prepare('DELETE FROM quota_usage WHERE window_start < ?')
  }

  add (scope: string, window: number, tokens: number, cost: number): void {
    this.addStmt.run({ scope, window, tokens, cost })
  }

  used (scope: string, window: number): { tokens: number, cost_nano: number } {
    return this.getStmt.get(scope, window) ?? { tokens: 0, cost_nano: 0 }
  }

  sweep (before: number): number { return this.sweepStmt.run(before).changes }
}
