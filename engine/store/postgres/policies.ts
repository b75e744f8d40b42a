import type { Redis } from 'ioredis'
import { RateLimitLeases, type HitTake } from '../rate-limit-leases.js'
import type { IdempotencyStore } from '../types.js'
import type { Connection } from './db.js'

// The admission policies' shared state in Redis: each operation is one command or script, so any
// number of instances agree.

type Scripts = Redis & {
  mgKeep: (key: string, owner: string, ms: number) => Promise<number>
  mgRelease: (key: string, owner: string) => Promise<number>
  mgTake: (key: string, ttlMs: number, max: number) => Promise<[number, number]>
}

/** Defines the scripts below on `redis`. */
export function defineScripts (redis: Redis): void {
  redis.defineCommand('mgKeep', { numberOfKeys: 1, lua: "if redis.call('GET', KEYS[1]) == ARGV[1] then local t = redis.call('PTTL', KEYS[1]) if tonumber(ARGV[2]) > t then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end return 1 end return 0" })
  redis.defineCommand('mgRelease', { numberOfKeys: 1, lua: "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0" })
  // a rate-limit take: a sixteenth of what remains below the limit, 1 to 64 hits (hitsToTake)
  redis.defineCommand('mgTake', {
    numberOfKeys: 1,
    lua: `local c = tonumber(redis.call('GET', KEYS[1]) or '0')
      local n = math.floor((tonumber(ARGV[2]) - c) / 16)
      if n < 1 then n = 1 elseif n > 64 then n = 64 end
      local v = redis.call('INCRBY', KEYS[1], n)
      if v == n then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
      return {v, n}`
  })
}

/** Idempotency keys: SET NX PX to take one; keep and release only by the request that holds it. */
export class IdempotencyRepository implements IdempotencyStore {
  constructor (private readonly conn: Connection, private readonly now: () => number) {}

  async take (scope: string, key: string, owner: string, _now: number, ttlMs: number): Promise<boolean> {
    return await this.conn.r(async (redis) => (await redis.set(this.conn.key('idem', scope, key), owner, 'PX', Math.max(1, Math.round(ttlMs)), 'NX')) === 'OK')
  }

  async keep (scope: string, key: string, owner: string, until: number): Promise<void> {
    await this.conn.r(async (redis) => await (redis as Scripts).mgKeep(this.conn.key('idem', scope, key), owner, Math.max(1, Math.round(until - this.now()))))
  }

  async release (scope: string, key: string, owner: string): Promise<void> {
    await this.conn.r(async (redis) => await (redis as Scripts).mgRelease(this.conn.key('idem', scope, key), owner))
  }
}

/**
 * Rate-limit counters: a key per fixed window, whose start the gateway's clock decides; a take
 * is one script (read, INCRBY, PEXPIRE) and this instance hands the hits out (../rate-limit-leases.ts).
 */
export class RateLimitRepository extends RateLimitLeases {
  constructor (conn: Connection) {
    super(async (key, now, windowMs, max): Promise<HitTake> => {
      const start = Math.floor(now / windowMs) * windowMs
      const [count, taken] = await conn.r(async (redis) => await (redis as Scripts).mgTake(conn.key('rl', key, start), Math.ceil(windowMs) + 1000, max))
      return { count, resetAt: start + windowMs, taken }
    })
  }
}
