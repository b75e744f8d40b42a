import type { Config } from '../../config/schema.js'

// The store behind the gateway, as interfaces named by what the plugins and routes mean: verify
// a key, take an idempotency key, count a rate-limit hit, admit against a quota and count a call
// in it, hold and settle money, record a call. How an implementation gets there (leases and
// memory per process, group commits and batches, scripts and transactions, messages between the
// processes sharing it) stays inside it.
//
// Methods return MaybePromise: the embedded store answers most of them at once, without a
// promise or a microtask on the hot path; a network store returns promises. Callers handle both
// (see `then` below).

export type MaybePromise<T> = T | Promise<T>

export function isPromise<T> (v: MaybePromise<T>): v is Promise<T> {
  return typeof (v as { then?: unknown } | null)?.then === 'function'
}

/** Runs `next` on the value, at once when it is there, after it resolves otherwise. */
export function then<T, R> (v: MaybePromise<T>, next: (value: T) => MaybePromise<R>): MaybePromise<R> {
  return isPromise(v) ? v.then(next) : next(v)
}

export type KeySource = 'config' | 'cli' | 'admin'

export interface ApiKey {
  id: string
  org: string
  project: string
  name: string
  models: string[]
  /** Which provider ids' pass-through routes this key may use. */
  passthrough: string[]
  hint: string
  source: KeySource
  created_at: number
  revoked: boolean
}

export interface NewKey { org: string, project: string, models?: string[], passthrough?: string[], name?: string, source: KeySource }

export interface KeyStore {
  /** The active key with this secret, or undefined. */
  verify: (secret: string) => MaybePromise<ApiKey | undefined>
  get: (id: string) => MaybePromise<ApiKey | undefined>
  list: (org?: string, project?: string) => MaybePromise<ApiKey[]>
  /** Creates a key; its secret is returned here only (the store keeps a hash). */
  create: (spec: NewKey, now: number, secret?: string) => MaybePromise<ApiKey & { key: string }>
  /** False when there is no such active key. Every listener of onRevoked hears it, in every process. */
  revoke: (id: string, now: number) => MaybePromise<boolean>
  /** Called with the id of each key revoked from now on (to drop it from caches). */
  onRevoked: (listener: (id: string) => void) => void
}

export interface OrgRow {
  id: string
  balance_nano: number
  held_nano: number
  spent_nano: number
  created_at: number
}

export interface ProjectRow { org_id: string, id: string, created_at: number }

export interface OrgStore {
  get: (id: string) => MaybePromise<OrgRow | undefined>
  list: () => MaybePromise<OrgRow[]>
  projects: (org: string) => MaybePromise<ProjectRow[]>
  /** Adds credits; false when the org does not exist. */
  credit: (id: string, amountNano: number) => MaybePromise<boolean>
}

export interface IdempotencyStore {
  /**
   * Takes `key` in `scope` for request `owner` until `now + ttlMs`. False when another request
   * holds it (in flight, or answered within its time to live).
   */
  take: (scope: string, key: string, owner: string, now: number, ttlMs: number) => MaybePromise<boolean>
  /** The request `owner` succeeded: its key refuses repeats until `until` at least. */
  keep: (scope: string, key: string, owner: string, until: number) => MaybePromise<void>
  /** The request `owner` failed unbilled: the key is free again at once. */
  release: (scope: string, key: string, owner: string) => MaybePromise<void>
}

export interface RateLimitHit { count: number, resetAt: number }

export interface RateLimitStore {
  /**
   * Counts one hit of `key` in its fixed window of `windowMs`: `count` is this hit's place in the
   * window. A process takes hits from the shared counter ahead of use, fewer the nearer `max` is.
   */
  hit: (key: string, now: number, windowMs: number, max: number) => MaybePromise<RateLimitHit>
}

export interface QuotaUsage { tokens: number, cost_nano: number }

/** A quota's limit in its unit: exactly one of the two is set. */
export interface QuotaLimit { tokens?: number, costNano?: number }

export interface QuotaStore {
  /** null: the calls that ended in `scope`'s window have not reached `limit`; else what they used. From memory once the window is known. */
  admit: (scope: string, windowStart: number, limit: QuotaLimit) => MaybePromise<QuotaUsage | null>
  /** Counts an ended call; resolves once committed and, when this count takes the window to its limit, once every process sharing the store has closed it. */
  count: (scope: string, windowStart: number, tokens: number, costNano: number, limit: QuotaLimit) => MaybePromise<void>
  /** Usage of a window as stored (admin and console views). */
  used: (scope: string, windowStart: number) => MaybePromise<QuotaUsage>
}

export interface BalanceStore {
  /** Holds `amount` of the org's balance for a call; false when balance − held cannot cover it. */
  hold: (org: string, amount: number, now: number) => MaybePromise<boolean>
  /** The call holding `held` ended: `charge` (0 when nothing is billed) is debited, the rest released. */
  settle: (org: string, held: number, charge: number, now: number) => MaybePromise<void>
}

/** One metered call, with money in nano-dollars. */
export interface UsageRow {
  id: string
  created_at: number
  trace_id: string
  org_id: string | null
  project_id: string | null
  key_id: string | null
  endpoint: string
  model: string
  provider: string | null
  stream: number
  status: string
  prompt_tokens: number
  cached_input_tokens: number
  completion_tokens: number
  total_tokens: number
  cost_nano: number
  latency_ms: number
  ttft_ms: number | null
  /** 1: answered from a response cache (no provider, no cost). */
  cache_hit: number
  /** What a cache hit would have cost at the model's prices then; 0 otherwise. */
  saved_nano: number
}

export interface ContentRow { usage_id: string, created_at: number, request: string | null, response: string | null }

export interface UsageFilter {
  org?: string
  project?: string
  key_id?: string
  model?: string
  since?: number
  until?: number
}

export interface Cursor { created_at: number, id: string }

export interface UsageTotals { calls: number, prompt_tokens: number, cached_input_tokens: number, completion_tokens: number, total_tokens: number, cost_nano: number }

export interface UsageBucket {
  t: number
  calls: number
  prompt_tokens: number
  cached_input_tokens: number
  completion_tokens: number
  cost_nano: number
  /** What the calls answered from a response cache would have cost. */
  saved_nano: number
}

export interface UsageStore {
  /** Records a call; durable once the returned promise settles. */
  record: (row: UsageRow, content?: ContentRow) => MaybePromise<void>
  /** Newest first; pass the last row's cursor for the next page. */
  page: (filter: UsageFilter, limit: number, cursor?: Cursor) => MaybePromise<UsageRow[]>
  totals: (filter: UsageFilter) => MaybePromise<UsageTotals>
  /** A project's calls summed per bucket of `size` ms since `since` (the console's chart). */
  buckets: (org: string, project: string, since: number, size: number) => MaybePromise<UsageBucket[]>
  /** Deletes stored prompt and completion text older than `before`. */
  sweepContent: (before: number) => MaybePromise<number>
}

/** An answer kept by the response cache: the cache's own text, when it was stored and until when it serves (ms). */
export interface CachedAnswer { value: string, storedAt: number, expiresAt: number }

/**
 * What a lookup found: `hit`, a live answer; `miss`, none (nothing was claimed); `fill`, none,
 * and the caller now fills it: identical lookups wait for it until it stores the answer or
 * abandons; `wait`, none yet: another call, in this process or another, is filling it.
 */
export type CacheLookup = { kind: 'hit', entry: CachedAnswer } | { kind: 'miss' } | { kind: 'fill' } | { kind: 'wait' }

export interface CacheLookupOptions {
  now: number
  /** Only an answer stored at or after this time serves (the client's max-age). */
  storedSince?: number
  /** With no answer, claim its fill for `owner` (a request id), for `ttlMs` at most. */
  fill?: { owner: string, ttlMs: number }
}

/** The response cache's answers, shared by every process of the store; identical misses are filled once. */
export interface ResponseCacheStore {
  lookup: (key: string, opts: CacheLookupOptions) => MaybePromise<CacheLookup>
  /** Resolves once the fill of `key` that another call holds has ended (stored or abandoned), or after `ms`. */
  waitFill: (key: string, ms: number) => Promise<void>
  /**
   * Stores an answer under `key` (replacing one there), keeping at most `maxEntries` answers:
   * the oldest stored go first. Ends `owner`'s fill of the key; the calls waiting for it go on.
   */
  put: (key: string, answer: CachedAnswer, maxEntries: number, owner?: string) => MaybePromise<void>
  /** Ends `owner`'s fill of `key` with no answer: the calls waiting for it go on without one. */
  abandon: (key: string, owner: string) => MaybePromise<void>
}

/** Messages between the processes sharing one store. */
export interface PeerBus {
  /** Every other process handles `message` on `topic`; resolves once each has (or after a bounded wait, ~1 s, for one that does not answer). */
  broadcast: (topic: string, message: Record<string, unknown>) => Promise<void>
  /** `fn` may return a promise: the sender waits for it too. */
  on: (topic: string, fn: (message: Record<string, unknown>) => MaybePromise<void>) => void
}

export interface Store {
  readonly kind: 'sqlite' | 'postgres'
  readonly keys: KeyStore
  readonly orgs: OrgStore
  readonly usage: UsageStore
  readonly balance: BalanceStore
  readonly idempotency: IdempotencyStore
  readonly rateLimits: RateLimitStore
  readonly quota: QuotaStore
  /** The response cache plugin's answers. */
  readonly cache: ResponseCacheStore
  /** Tenants from the config: orgs (with their initial balance), projects and literal keys. */
  syncTenants: (config: Config, now: number) => MaybePromise<void>
  /**
   * Background work of a serving process: heartbeats, releasing the balance leases of processes
   * silent for `staleHoldMs` (default 30 s), sweeping expired rows and forgotten windows.
   */
  startMaintenance: (opts?: { staleHoldMs?: number }) => void
  /** Writes the store delays (lease give-backs, key expiry extensions) are committed now. */
  flush: () => MaybePromise<void>
  /** Optional: hears how long each batch of writes took to commit (s) and how many writes it held (metrics). */
  observeWrites?: (fn: (seconds: number, writes: number) => void) => void
  /** Throws when the store cannot serve (the readiness check). */
  ping: () => MaybePromise<void>
  close: () => Promise<void>
}
