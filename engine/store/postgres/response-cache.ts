import type { Redis } from 'ioredis'
import { CacheFills } from '../cache-fills.js'
import type { CachedAnswer, CacheLookup, CacheLookupOptions, PeerBus, ResponseCacheStore } from '../types.js'
import type { Connection } from './db.js'

// The response cache of several instances, in Redis alone (answers are hot, shared and
// short-lived; nothing of them must outlast Redis): an answer is a key `cache:a:<key>` holding
// `<stored_at>:<expires_at>:<value>` with Redis's own expiry, listed in the sorted set
// `cache:index` by when it was stored, so that the oldest go first when the cache is full. A
// lookup is one script: the answer if it is live, else the key's fill claimed (SET NX PX), else
// the caller counted among the fill's waiters; storing is one script too.

type Scripts = Redis & {
  mgCacheLookup: (answer: string, fill: string, waiters: string, now: number, since: number, owner: string, ttlMs: number, until: number) => Promise<[number, string | null]>
  mgCachePut: (answer: string, index: string, fill: string, waiters: string, value: string, pxMs: number, storedAt: number, max: number, owner: string) => Promise<number>
  mgCacheEnd: (fill: string, waiters: string, owner: string) => Promise<number>
}

// A fill holds `<until>:<owner>`, its end by the gateway's clock; Redis's own expiry only clears
// it away. ARGV[3] '' looks up without claiming the fill. Returns {1, text} on a hit, {2} when the
// caller fills, {3} when it waits for another, {0} on a miss.
const LOOKUP = `local v = redis.call('GET', KEYS[1])
if v then
  local s, e = string.match(v, '^(%d+):(%d+):')
  if tonumber(e) > tonumber(ARGV[1]) and tonumber(s) >= tonumber(ARGV[2]) then return {1, v} end
end
if ARGV[3] == '' then return {0} end
local f = redis.call('GET', KEYS[2])
if f and tonumber(string.match(f, '^(%d+):')) > tonumber(ARGV[1]) then
  redis.call('INCR', KEYS[3])
  redis.call('PEXPIRE', KEYS[3], ARGV[4])
  return {3}
end
redis.call('SET', KEYS[2], ARGV[5] .. ':' .. ARGV[3], 'PX', ARGV[4])
redis.call('DEL', KEYS[3])
return {2}`

// the fill ends only for its owner: one taken over after its time belongs to another call
const END_FILL = `local w = 0
local f = redis.call('GET', KEYS[1])
if ARGV[1] ~= '' and f and string.match(f, '^%d+:(.*)$') == ARGV[1] then
  w = tonumber(redis.call('GET', KEYS[2]) or '0')
  redis.call('DEL', KEYS[1], KEYS[2])
end
return w`

const PUT = `redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], ARGV[3], KEYS[1])
local excess = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if excess > 0 then
  local old = redis.call('ZRANGE', KEYS[2], 0, excess - 1)
  for _, k in ipairs(old) do
    if k ~= KEYS[1] then
      redis.call('DEL', k)
      redis.call('ZREM', KEYS[2], k)
    end
  end
end
local w = 0
local f = redis.call('GET', KEYS[3])
if ARGV[5] ~= '' and f and string.match(f, '^%d+:(.*)$') == ARGV[5] then
  w = tonumber(redis.call('GET', KEYS[4]) or '0')
  redis.call('DEL', KEYS[3], KEYS[4])
end
return w`

/** Defines the scripts above on `redis`. */
export function defineCacheScripts (redis: Redis): void {
  redis.defineCommand('mgCacheLookup', { numberOfKeys: 3, lua: LOOKUP })
  redis.defineCommand('mgCachePut', { numberOfKeys: 4, lua: PUT })
  redis.defineCommand('mgCacheEnd', { numberOfKeys: 2, lua: END_FILL })
}

function answerOf (text: string): CachedAnswer {
  const a = text.indexOf(':')
  const b = text.indexOf(':', a + 1)
  return { storedAt: Number(text.slice(0, a)), expiresAt: Number(text.slice(a + 1, b)), value: text.slice(b + 1) }
}

export class ResponseCacheRepository implements ResponseCacheStore {
  readonly fills: CacheFills

  constructor (private readonly conn: Connection, bus: PeerBus, onError: (err: unknown, what: string) => void) {
    this.fills = new CacheFills(bus, onError)
  }

  private keys (key: string): { answer: string, fill: string, waiters: string } {
    return { answer: this.conn.key('cache', 'a', key), fill: this.conn.key('cache', 'f', key), waiters: this.conn.key('cache', 'w', key) }
  }

  async lookup (key: string, o: CacheLookupOptions): Promise<CacheLookup> {
    const k = this.keys(key)
    const fill = o.fill !== undefined && this.fills.filledHere(key, o.now) ? undefined : o.fill
    const ttlMs = Math.max(1, Math.round(fill?.ttlMs ?? 1))
    const [code, text] = await this.conn.r(async (redis) => await (redis as Scripts).mgCacheLookup(k.answer, k.fill, k.waiters,
      o.now, Math.max(0, o.storedSince ?? 0), fill?.owner ?? '', ttlMs, o.now + ttlMs))
    switch (code) {
      case 1: return { kind: 'hit', entry: answerOf(text as string) }
      case 2:
        this.fills.claimed(key, fill?.owner ?? '', o.now + ttlMs)
        return { kind: 'fill' }
      case 3: return { kind: 'wait' }
      // a fill held in this process: waited for here, without counting in Redis
      default: return o.fill !== undefined ? { kind: 'wait' } : { kind: 'miss' }
    }
  }

  async waitFill (key: string, ms: number): Promise<void> {
    const fill = this.keys(key).fill
    // the message that the fill ended may have come before this waiter listened
    await this.fills.wait(key, ms, async () => await this.conn.r(async (redis) => await redis.exists(fill)) === 0)
  }

  async put (key: string, answer: CachedAnswer, maxEntries: number, owner?: string): Promise<void> {
    const k = this.keys(key)
    let others = 1
    try {
      others = await this.conn.r(async (redis) => await (redis as Scripts).mgCachePut(k.answer, this.conn.key('cache', 'index'), k.fill, k.waiters,
        `${answer.storedAt}:${answer.expiresAt}:${answer.value}`, Math.max(1, answer.expiresAt - answer.storedAt), answer.storedAt, maxEntries, owner ?? ''))
    } finally {
      this.fills.ended(key, owner, others)
    }
  }

  async abandon (key: string, owner: string): Promise<void> {
    const k = this.keys(key)
    let others = 1
    try {
      others = await this.conn.r(async (redis) => await (redis as Scripts).mgCacheEnd(k.fill, k.waiters, owner))
    } finally {
      this.fills.ended(key, owner, others)
    }
  }
}
