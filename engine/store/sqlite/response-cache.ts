import { CacheFills } from '../cache-fills.js'
import type { CachedAnswer, CacheLookup, CacheLookupOptions, PeerBus, ResponseCacheStore } from '../types.js'
import type { MaybePromise } from '../../kernel/maybe-promise.js'
import type { DB } from './db.js'
import type { GroupCommit } from './group-commit.js'

// The response cache in the shared file: a hit is one indexed read, outside any transaction; a
// miss that fills claims the key in the turn's group commit, after reading the answer again
// inside it, so that of identical misses on any worker one fills and the others wait.

export class ResponseCacheRepository implements ResponseCacheStore {
  readonly fills: CacheFills
  private readonly getStmt
  private readonly claimStmt
  private readonly deleteStmt
  private readonly putStmt
  private readonly sizeStmt
  private readonly evictStmt
  private readonly endFillStmt
  private readonly sweepStmt
  private readonly sweepFillsStmt
  private readonly countStmt

  constructor (db: DB, private readonly commit: GroupCommit, bus: PeerBus, onError: (err: unknown, what: string) => void) {
    this.fills = new CacheFills(bus, onError)
    this.getStmt = db.prepare<[string, number, number], CachedAnswer>('SELECT value, stored_at AS storedAt, expires_at AS expiresAt FROM response_cache WHERE key = ? AND expires_at > ? AND stored_at >= ?')
    // a fill past its time is taken over; a live one counts the newcomer among its waiters
    this.claimStmt = db.prepare<Record<string, unknown>, { owner: string }>(`INSERT INTO response_cache_fills (key, owner, expires_at, waiters) VALUES (@key, @owner, @expires, 0)
      ON CONFLICT(key) DO UPDATE SET
        owner = CASE WHEN expires_at <= @now THEN @owner ELSE owner END,
        waiters = CASE WHEN expires_at <= @now THEN 0 ELSE waiters + 1 END,
        expires_at = CASE WHEN expires_at <= @now THEN @expires ELSE expires_at END
      RETURNING owner`)
    this.deleteStmt = db.prepare('DELETE FROM response_cache WHERE key = ?')
    this.putStmt = db.prepare('INSERT INTO response_cache (key, value, stored_at, expires_at) VALUES (?, ?, ?, ?)')
    this.sizeStmt = db.prepare<[], { n: number }>('SELECT n FROM response_cache_size')
    this.evictStmt = db.prepare('DELETE FROM response_cache WHERE seq IN (SELECT seq FROM response_cache ORDER BY seq LIMIT ?)')
    this.endFillStmt = db.prepare<[string, string], { waiters: number }>('DELETE FROM response_cache_fills WHERE key = ? AND owner = ? RETURNING waiters')
    this.sweepStmt = db.prepare('DELETE FROM response_cache WHERE expires_at <= ?')
    this.sweepFillsStmt = db.prepare('DELETE FROM response_cache_fills WHERE expires_at <= ?')
    this.countStmt = db.prepare<[], { n: number }>('SELECT count(*) AS n FROM response_cache')
  }

  lookup (key: string, o: CacheLookupOptions): MaybePromise<CacheLookup> {
    const since = o.storedSince ?? Number.MIN_SAFE_INTEGER
    const entry = this.getStmt.get(key, o.now, since)
    if (entry !== undefined) return { kind: 'hit', entry }
    const fill = o.fill
    if (fill === undefined) return { kind: 'miss' }
    if (this.fills.filledHere(key, o.now)) return { kind: 'wait' }
    const until = o.now + fill.ttlMs
    return this.commit.run((): CacheLookup => {
      const again = this.getStmt.get(key, o.now, since)
      if (again !== undefined) return { kind: 'hit', entry: again }
      const held = this.claimStmt.get({ key, owner: fill.owner, now: o.now, expires: until })
      return held?.owner === fill.owner ? { kind: 'fill' } : { kind: 'wait' }
    }).then((r) => {
      if (r.kind === 'fill') this.fills.claimed(key, fill.owner, until)
      return r
    })
  }

  async waitFill (key: string, ms: number): Promise<void> {
    await this.fills.wait(key, ms)
  }

  put (key: string, answer: CachedAnswer, maxEntries: number, owner?: string): Promise<void> {
    return this.commit.run(() => {
      // deleted and inserted rather than replaced: the row counts stay right, and it is the newest
      this.deleteStmt.run(key)
      this.putStmt.run(key, answer.value, answer.storedAt, answer.expiresAt)
      const n = (this.sizeStmt.get() as { n: number }).n
      if (n > maxEntries) this.evictStmt.run(n - maxEntries)
      return owner === undefined ? 0 : this.endFillStmt.get(key, owner)?.waiters ?? 0
    }).then((others) => { this.fills.ended(key, owner, others) }, (err: unknown) => {
      // the waiters go on without the answer
      this.fills.ended(key, owner, 1)
      throw err
    })
  }

  abandon (key: string, owner: string): void {
    let others = 1
    try {
      others = this.endFillStmt.get(key, owner)?.waiters ?? 0
    } finally {
      this.fills.ended(key, owner, others)
    }
  }

  /** Deletes answers and fills past their time. */
  sweep (now: number): number {
    this.sweepFillsStmt.run(now)
    return this.sweepStmt.run(now).changes
  }

  /** Answers stored, live or not yet swept (tests). */
  size (): number { return (this.countStmt.get() as { n: number }).n }

  /** The number the store keeps of them (tests). */
  counted (): number { return (this.sizeStmt.get() as { n: number }).n }
}
