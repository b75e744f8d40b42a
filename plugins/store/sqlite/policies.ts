import type { DB } from './db.js'
import type { GroupCommit } from './group-commit.js'
import type { IdempotencyStore, QuotaStore, QuotaUsage, RateLimitHit, RateLimitStore } from '../types.js'

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

/** Hits a worker counts ahead in one store write while the limit is far (≥ 16× this away). */
const AHEAD = 64

/**
 * Fixed-window hit counters. Below a limit of 16 × AHEAD every hit is one atomic UPSERT,
 * group-committed with the other writes of its event-loop turn. Above it, while the key's window
 * is at least that far from the limit, the worker adds AHEAD hits at once and counts them down
 * itself, so only one hit in AHEAD writes; near the limit it counts hit by hit again. Hits
 * counted ahead but not used by the end of the window only make the count higher, never let a
 * request past the limit.
 */
export class RateLimitRepository implements RateLimitStore {
  private readonly incrStmt
  private readonly sweepStmt
  private readonly take: (key: string, now: number, windowMs: number, max: number, most: number) => { count: number, reset_at: number, granted: number }
  private readonly ahead = new Map<string, { resetAt: number, count: number, unused: number }>()

  constructor (db: DB, private readonly commit: GroupCommit) {
    this.incrStmt = db.prepare<Record<string, unknown>, { count: number, reset_at: number }>(`INSERT INTO rate_limits (key, count, reset_at) VALUES (@key, @n, @reset)
      ON CONFLICT(key) DO UPDATE SET
        count = CASE WHEN rate_limits.reset_at <= @now THEN @n ELSE rate_limits.count + @n END,
        reset_at = CASE WHEN rate_limits.reset_at <= @now THEN @reset ELSE rate_limits.reset_at END
      RETURNING count, reset_at`)
    const peek = db.prepare<[string, number], { count: number }>('SELECT count FROM rate_limits WHERE key = ? AND reset_at > ?')
    this.sweepStmt = db.prepare('DELETE FROM rate_limits WHERE reset_at <= ?')
    this.take = db.transaction((key: string, now: number, windowMs: number, max: number, most: number) => {
      const remaining = max - (peek.get(key, now)?.count ?? 0)
      const n = remaining >= most * 16 ? most : 1
      const { count, reset_at: resetAt } = this.incrStmt.get({ key, now, reset: now + windowMs, n }) as { count: number, reset_at: number }
      return { count, reset_at: resetAt, granted: n }
    }).immediate
  }

  hit (key: string, now: number, windowMs: number, max: number): RateLimitHit | Promise<RateLimitHit> {
    const a = this.ahead.get(key)
    if (a !== undefined && a.unused > 0 && a.resetAt > now) {
      a.unused--
      return { count: a.count - a.unused, resetAt: a.resetAt }
    }
    if (max < AHEAD * 16) {
      return this.commit.run(() => {
        const r = this.incrStmt.get({ key, now, reset: now + windowMs, n: 1 }) as { count: number, reset_at: number }
        return { count: r.count, resetAt: r.reset_at }
      })
    }
    const { count, reset_at: resetAt, granted } = this.take(key, now, windowMs, max, AHEAD)
    if (granted > 1) this.ahead.set(key, { resetAt, count, unused: granted - 1 })
    else this.ahead.delete(key)
    return { count: count - granted + 1, resetAt }
  }

  sweep (now: number): number {
    for (const [key, a] of this.ahead) if (a.resetAt <= now) this.ahead.delete(key)
    return this.sweepStmt.run(now).changes
  }
}

export class QuotaRepository implements QuotaStore {
  private readonly addStmt
  private readonly getStmt
  private readonly sweepStmt

  constructor (db: DB, private readonly commit: GroupCommit) {
    this.addStmt = db.prepare(`INSERT INTO quota_usage (scope, window_start, tokens, cost_nano) VALUES (@scope, @window, @tokens, @cost)
      ON CONFLICT(scope, window_start) DO UPDATE SET tokens = tokens + @tokens, cost_nano = cost_nano + @cost`)
    this.getStmt = db.prepare<[string, number], QuotaUsage>('SELECT tokens, cost_nano FROM quota_usage WHERE scope = ? AND window_start = ?')
    this.sweepStmt = db.prepare('DELETE FROM quota_usage WHERE window_start < ?')
  }

  used (scope: string, windowStart: number): QuotaUsage {
    return this.getStmt.get(scope, windowStart) ?? { tokens: 0, cost_nano: 0 }
  }

  /** Summed with the other counts of this scope and window in this turn's group; resolves once committed. */
  count (scope: string, windowStart: number, tokens: number, costNano: number): Promise<void> {
    return this.commit.sum(`quota:${scope}:${windowStart}`, [tokens, costNano], ([t, c]) => {
      this.addStmt.run({ scope, window: windowStart, tokens: t, cost: c })
    }, { retry: true })
  }

  sweep (before: number): number { return this.sweepStmt.run(before).changes }
}
