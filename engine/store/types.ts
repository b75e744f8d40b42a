import type { Config, QuotaConfig } from '../../config/schema.js'
import type { MaybePromise } from '../kernel/maybe-promise.js'

// The store behind the gateway, as interfaces named by what the plugins and routes mean: verify
// a key, take an idempotency key, count a rate-limit hit, admit against a quota and count a call
// in it, hold and settle money, record a call. How an implementation gets there (leases and
// memory per process, group commits and batches, scripts and transactions, messages between the
// processes sharing it) stays inside it.
//
// Methods return MaybePromise: the embedded store answers most of them at once, without a
// promise or a microtask on the hot path; a network store returns promises. Callers handle both
// (`then` of engine/kernel/maybe-promise.ts).

export type KeySource = 'config' | 'cli' | 'admin'

/**
 * How a config's tenants are applied: `apply` (serve, reload) makes the store hold what the file
 * names; `missing` (every other command) only creates what is not there, and never changes or
 * restores what is.
 */
export type SyncMode = 'apply' | 'missing'

/** What an application of the config's tenants had to say: what the file names that the store keeps otherwise. */
export interface SyncReport { warnings: string[] }

/** Who made a change through the admin API: a signed-in operator, or an admin token by its name. */
export type Identity = { kind: 'sso', sub: string, email: string | null } | { kind: 'token', name: string }

/**
 * Who made a change through the store: the admin API (by an identity, or 'admin' when none is
 * known), the CLI, or the config file applied at start or reload (written to the audit log).
 */
export type Actor = 'admin' | 'cli' | 'config' | Identity

/** The channel of a change, as the audit log's `actor` names it. */
export const actorKind = (by: Actor): 'admin' | 'cli' | 'config' => typeof by === 'string' ? by : 'admin'

export type QuotaPer = QuotaConfig['per']

/** A key's own limits per minute: calls (rpm) and billed tokens (tpm). */
export interface KeyLimits { rpm?: number, tpm?: number }

/** A key's own spending limit in nano-dollars per UTC window. */
export interface KeyBudget { nano: number, per: QuotaPer }

export interface ApiKey {
  id: string
  org: string
  project: string
  name: string
  models: string[]
  /** Which provider ids' pass-through routes this key may use. */
  passthrough: string[]
  /** Globs over "{server}/{tool}": the MCP tools this key may list and call. */
  mcp: string[]
  hint: string
  source: KeySource
  created_at: number
  revoked: boolean
  /** From then on the key answers 401 (a rotated key's grace ends here). */
  expires_at: number | null
  limits: KeyLimits | null
  budget: KeyBudget | null
  /** Written behind, at most once a minute per key and process. */
  last_used_at: number | null
  /** The key this one replaced by a rotation. */
  replaces: string | null
  /** The first key of its rotation line: limits and budget count under its id, so a rotation neither resets nor doubles them. */
  lineage: string
}

export interface NewKey {
  org: string
  project: string
  models?: string[]
  passthrough?: string[]
  mcp?: string[]
  name?: string
  source: KeySource
  expires_at?: number | null
  limits?: KeyLimits | null
  budget?: KeyBudget | null
  /** Who made it, for the audit log (default: its source). */
  by?: Actor
}

/** What a change of a key sets; an absent field is kept, null removes. */
export interface KeyPatch {
  models?: string[]
  passthrough?: string[]
  mcp?: string[]
  name?: string
  expires_at?: number | null
  limits?: KeyLimits | null
  budget?: KeyBudget | null
}

export interface Rotation {
  /** The new key, its secret shown here only. */
  key: ApiKey & { key: string }
  /** The old key, now expiring at `expires_at`. */
  old: ApiKey
}

export interface KeyStore {
  /** The unrevoked key with this secret whose organization and project exist, or undefined. An expired key is returned (the caller says it expired). */
  verify: (secret: string) => MaybePromise<ApiKey | undefined>
  get: (id: string) => MaybePromise<ApiKey | undefined>
  list: (org?: string, project?: string) => MaybePromise<ApiKey[]>
  /** Creates a key; its secret is returned here only (the store keeps a hash). */
  create: (spec: NewKey, now: number, secret?: string) => MaybePromise<ApiKey & { key: string }>
  /** Changes an unrevoked key; undefined when there is none. Heard by every process before it resolves. */
  update: (id: string, patch: KeyPatch, now: number, by: Actor) => MaybePromise<ApiKey | undefined>
  /**
   * A new key with the old one's grants, limits, budget and expiry, and the old one set to expire
   * at `oldValidUntil` at the latest; undefined when there is no unrevoked key `id`.
   */
  rotate: (id: string, oldValidUntil: number, now: number, by: Actor) => MaybePromise<Rotation | undefined>
  /** False when there is no such active key. Heard by every process before it resolves. */
  revoke: (id: string, now: number, by?: Actor) => MaybePromise<boolean>
  /** Notes that the key was used at `at` (written later, with other writes). */
  touch: (id: string, at: number) => void
}

export interface OrgRow {
  id: string
  balance_nano: number
  held_nano: number
  spent_nano: number
  /** Charged beyond what the balance held (the provider reported more than the hold foresaw); a top-up pays it first. */
  uncollected_nano: number
  created_at: number
  quota: QuotaConfig | null
}

export interface ProjectRow { org_id: string, id: string, created_at: number, quota: QuotaConfig | null }

/** A quota of the tenants: an organization's (project null) or a project's. */
export interface QuotaEntry { org: string, project: string | null, quota: QuotaConfig }

export interface NewOrg { id: string, balanceNano: number, quota: QuotaConfig | null }

/**
 * Organizations and projects. Reads see the live ones only: a deleted organization or project
 * keeps its row (its usage records name it) but is gone from every read, and its keys answer 401.
 */
export interface OrgStore {
  get: (id: string) => MaybePromise<OrgRow | undefined>
  list: () => MaybePromise<OrgRow[]>
  projects: (org: string) => MaybePromise<ProjectRow[]>
  /** Every quota of the live tenants. */
  quotas: () => MaybePromise<QuotaEntry[]>
  /** Adds credits; false when the org does not exist. With `by`, the audit log tells of it. */
  credit: (id: string, amountNano: number, now?: number, by?: Actor) => MaybePromise<boolean>
  /** False when the id is taken (by a live or a deleted organization). */
  create: (org: NewOrg, now: number, by: Actor) => MaybePromise<boolean>
  /** Sets the quota (null removes it); false when there is no such organization. */
  setQuota: (id: string, quota: QuotaConfig | null, now: number, by: Actor) => MaybePromise<boolean>
  remove: (id: string, now: number, by: Actor) => MaybePromise<boolean>
  /** 'exists': the id is taken in that organization (by a live or a deleted project). */
  createProject: (org: string, id: string, quota: QuotaConfig | null, now: number, by: Actor) => MaybePromise<'created' | 'exists' | 'no_org'>
  setProjectQuota: (org: string, id: string, quota: QuotaConfig | null, now: number, by: Actor) => MaybePromise<boolean>
  removeProject: (org: string, id: string, now: number, by: Actor) => MaybePromise<boolean>
}

/**
 * What changed in the tenancy, as every process sharing the store hears it: a key (its cached
 * verdicts go), an organization or a project (its keys and quotas), or the config's tenants
 * applied again (everything).
 */
export type TenancyChange =
  | { kind: 'key', id: string }
  | { kind: 'org', id: string }
  | { kind: 'project', org: string, id: string }
  | { kind: 'tenants' }

/** A listener may return a promise: the change is answered as heard once it settles. */
export type ChangeListener = (change: TenancyChange) => MaybePromise<void>

/**
 * One line of the audit log: a change made through the admin API or the CLI, and by whom (admin
 * API changes); `org` the organization it is about (null: the gateway's own, as a reload). `detail` holds no secret.
 */
export interface AuditRow { id: string, at: number, action: string, target: string, org: string | null, actor: 'admin' | 'cli' | 'config', identity: Identity | null, detail: Record<string, unknown> }

export interface AuditEntry { action: string, target: string, org?: string | null, detail?: Record<string, unknown> }

export interface AuditStore {
  /** Newest first; pass the last row's cursor (at, id) for the next page. With `org`, that organization's lines only (selected by the query, so pages and cursors hold). */
  page: (limit: number, cursor?: Cursor, org?: string) => MaybePromise<AuditRow[]>
  /** Writes a line for a change made outside the store's own methods (a reload). */
  record: (entry: AuditEntry, now: number, by: Actor) => MaybePromise<void>
}

export type Role = 'admin' | 'viewer' | 'org_admin'

/** A signed-in operator's session; its id and CSRF token are the browser's secrets (the store keeps the id's hash). */
export interface Session {
  sub: string
  email: string | null
  name: string | null
  role: Role
  /** org_admin's organization; null for the other roles. */
  org: string | null
  csrf: string
  created_at: number
  expires_at: number
  /** The ID token the sign-in got, for the identity provider's logout (id_token_hint); null when none was kept. */
  id_token: string | null
}

/** A live session as an admin sees it: its handle instead of its id, and never its CSRF token or ID token. */
export interface SessionInfo {
  /** The SHA-256 of the session's id (hex): it names the session, and no browser can present it as a cookie. */
  handle: string
  sub: string
  email: string | null
  name: string | null
  role: Role
  org: string | null
  created_at: number
  expires_at: number
}

/** A sign-in under way, between the redirect to the identity provider and its callback (ten minutes at most). */
export interface PendingLogin {
  state: string
  nonce: string
  verifier: string
  /** Where the browser goes once signed in: the operator's console or the developer console. */
  to: 'admin' | 'developer'
  expires_at: number
}

/**
 * Operators' sessions and sign-ins under way, shared by every process of the store. Ids are
 * hashed before they are stored or looked up: what the store holds cannot be replayed as a cookie.
 */
export interface SessionStore {
  create: (id: string, session: Session) => MaybePromise<void>
  /** The live session with this id; undefined when there is none or it has expired at `now`. */
  get: (id: string, now: number) => MaybePromise<Session | undefined>
  /** Ends a session; false when there was none. */
  end: (id: string) => MaybePromise<boolean>
  /** Ends every session of `sub` except those with `keep`'s role and organization; returns how many. */
  endSubject: (sub: string, keep?: { role: Role, org: string | null }) => MaybePromise<number>
  /** The sessions live at `now`, newest first. */
  list: (now: number) => MaybePromise<SessionInfo[]>
  /** Ends the session with this handle; what it was, or undefined when none with it is live at `now`. */
  endHandle: (handle: string, now: number) => MaybePromise<SessionInfo | undefined>
  /** Keeps a sign-in under way under `id` (the browser's cookie). */
  begin: (id: string, login: PendingLogin) => MaybePromise<void>
  /** Takes the sign-in under way with this id, once: a second take, or one after it expired, finds nothing. */
  take: (id: string, now: number) => MaybePromise<PendingLogin | undefined>
  /** Deletes what has expired at `now`. */
  sweep: (now: number) => MaybePromise<number>
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
  /** Counts an ended call; resolves with the window's totals once committed and, when this count takes the window to its limit, once every process sharing the store has closed it. */
  count: (scope: string, windowStart: number, tokens: number, costNano: number, limit: QuotaLimit) => MaybePromise<QuotaUsage>
  /** What this process knows a window used, from memory (as admission judges it); undefined when it has not read it. */
  known: (scope: string, windowStart: number) => QuotaUsage | undefined
  /** Usage of a window as stored (admin and console views). */
  used: (scope: string, windowStart: number) => MaybePromise<QuotaUsage>
}

export interface BalanceStore {
  /** Holds `amount` of the org's balance for a call; false when balance − held cannot cover it. */
  hold: (org: string, amount: number, now: number) => MaybePromise<boolean>
  /** The call holding `held` ended: `charge` (0 when nothing is billed) is debited, the rest released. */
  settle: (org: string, held: number, charge: number, now: number) => MaybePromise<void>
}

/** The id of the usage record of the call with this trace id (ordered by time, as the trace id is). */
export function usageId (traceId: string): string {
  return 'usage_' + traceId.replace(/-/g, '')
}

/** One attempt of a call at a provider, as its usage record keeps it. */
export interface UsageAttempt {
  provider: string
  /** The model name sent to the provider. */
  upstream_model: string | null
  /** How the attempt went: ok, client_error, server_error, network_error, timeout, aborted, request_error. */
  outcome: string
  /** The HTTP status, when the provider answered. */
  status: number | null
  /** A short error (a code such as ECONNREFUSED, or server_error); null when the attempt did not fail. */
  error: string | null
  /** From the attempt's start to the answer's headers (or the failure). */
  latency_ms: number
}

/** A charge by part in nano-dollars; `tier` is the above_input_tokens of the tier billed at (null: the base rates). */
export interface CostDetail {
  input: number
  cached_input: number
  cache_write: number
  output: number
  images: number
  per_request: number
  /** A tool call's own price (an MCP tool call); 0 for a model call. */
  tool_call: number
  tier: number | null
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
  /** Cache writes (counted in prompt_tokens). */
  cache_write_tokens: number
  /** Images generated. */
  images: number
  cost_nano: number
  /** cost_nano by part; null for records written before it was kept. */
  cost_detail: CostDetail | null
  latency_ms: number
  ttft_ms: number | null
  /** 1: answered from a response cache (no provider, no cost). */
  cache_hit: number
  /** What a cache hit would have cost at the model's prices then; 0 otherwise. */
  saved_nano: number
  /** Every attempt at a provider, in order (none for a cache hit); [] for records written before they were kept. */
  attempts: UsageAttempt[]
  /** The client parameters not sent on (the `{prefix}Dropped-Params` header's list). */
  dropped_params: string[]
  /** The tags the call carried (`{prefix}Tags`, `metadata.tags`); [] for none. */
  tags: string[]
  /** A refused call's error code (`status` "refused"); null for a call that was not refused. */
  error: string | null
  /** The model the call named when another answered it (an alias, a fallback; `model` answered); null otherwise. Optional for rows written before it was kept. */
  requested_model?: string | null
  /** The models tried that could not answer, and why, in order ([] when the first answered). Optional for rows written before it was kept. */
  fallbacks?: UsageFallback[]
}

/** A model of a call's chain that could not answer, and why (rate_limited, unavailable, timeout, context_length, content_filtered). */
export interface UsageFallback { model: string, why: string }

export interface ContentRow { usage_id: string, created_at: number, request: string | null, response: string | null }

/** The statuses a usage record can have. */
export const USAGE_STATUSES = ['ok', 'client_aborted', 'upstream_error', 'timeout', 'refused'] as const
export type UsageStatus = typeof USAGE_STATUSES[number]

export interface UsageFilter {
  org?: string
  project?: string
  key_id?: string
  model?: string
  /** Any of these statuses. */
  status?: UsageStatus[]
  endpoint?: string
  provider?: string
  /** Records carrying this tag. */
  tag?: string
  since?: number
  until?: number
}

/** A usage record with its stored content (null when none was stored, or it was swept). */
export interface UsageDetail { row: UsageRow, content: { request: string | null, response: string | null } | null }

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

/** `tag`: a record with several tags counts in each of their groups; one with none in the group of tag null. */
export type SummaryField = 'org' | 'project' | 'key_id' | 'model' | 'provider' | 'tag'

/**
 * One group of the usage summary: its fields (those grouped by), its bucket's start (ms) when
 * bucketed, and its sums. Money sums are bigint: exact however many records they add up.
 */
export interface SummaryRow {
  org?: string | null
  project?: string | null
  key_id?: string | null
  model?: string
  provider?: string | null
  tag?: string | null
  bucket_start?: number
  calls: number
  errors: number
  prompt_tokens: number
  cached_input_tokens: number
  completion_tokens: number
  cost_nano: bigint
  saved_nano: bigint
}

export interface UsageStore {
  /** Records a call; durable once the returned promise settles. */
  record: (row: UsageRow, content?: ContentRow) => MaybePromise<void>
  /** Newest first; pass the last row's cursor for the next page. */
  page: (filter: UsageFilter, limit: number, cursor?: Cursor) => MaybePromise<UsageRow[]>
  /** The record of the call with this trace id, and its content; undefined when there is none. */
  byTrace: (traceId: string) => MaybePromise<UsageDetail | undefined>
  totals: (filter: UsageFilter) => MaybePromise<UsageTotals>
  /** A project's calls summed per bucket of `size` ms since `since` (the console's chart). */
  buckets: (org: string, project: string, since: number, size: number) => MaybePromise<UsageBucket[]>
  /** Sums of the records `filter` selects, grouped by `groupBy` (and buckets of `bucketMs`, UTC-aligned, when given), in one SQL aggregate. */
  summary: (filter: UsageFilter, groupBy: SummaryField[], bucketMs?: number) => MaybePromise<SummaryRow[]>
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

/** An object made at a provider through pass-through (a file, a batch...): who made it. */
export interface ObjectOwner { org: string, project: string }

/**
 * The provider-side objects made through pass-through, by the organization (and project) that
 * made them: what decides which tenant may reach an object at a provider whose account they share.
 */
export interface ProviderObjectStore {
  /** Records objects made at `provider` as `owner`'s; an id recorded before keeps its first owner. */
  claim: (provider: string, objects: ReadonlyArray<{ kind: string, id: string }>, owner: ObjectOwner, now: number) => MaybePromise<void>
  /** Of `ids` at `provider`, those `org` made. */
  owned: (provider: string, org: string, ids: readonly string[]) => MaybePromise<Set<string>>
  /** Forgets an object deleted at the provider. */
  forget: (provider: string, id: string) => MaybePromise<void>
}

/** An alert event for one webhook, as written to the outbox before it is sent. */
export interface NewAlert {
  /** The event's id (its `webhook-id`), the same for every attempt. */
  id: string
  /** What raised it: one crossing is written once per webhook, by whichever process gets there first. */
  crossing: string
  /** The webhook's URL. */
  webhook: string
  type: string
  /** The body sent, as JSON text. */
  payload: string
  created_at: number
}

export type AlertStatus = 'pending' | 'delivered' | 'failed'

/** An event in the outbox and how its delivery stands. */
export interface AlertDelivery extends NewAlert {
  status: AlertStatus
  attempts: number
  /** When it is due (pending), in ms. */
  next_at: number
  /** The HTTP status of the last attempt; null when it got none. */
  last_status: number | null
  last_error: string | null
  delivered_at: number | null
}

/** How an attempt at a delivery went. */
export interface AlertAttempt {
  status: AlertStatus
  next_at: number
  last_status: number | null
  last_error: string | null
  delivered_at: number | null
}

/** The alerts' outbox, shared by every process of the store. */
export interface AlertStore {
  /** Writes these events, each unless its (crossing, webhook) is written already; returns how many were written. */
  raise: (rows: readonly NewAlert[]) => MaybePromise<number>
  /** Takes up to `limit` pending deliveries due at `now` that no sender holds, for this sender until `until`; each one's attempts counted. */
  claim: (now: number, until: number, limit: number) => MaybePromise<AlertDelivery[]>
  /** Records how an attempt went (and frees its claim). */
  settle: (id: string, attempt: AlertAttempt) => MaybePromise<void>
  /** Newest first; pass the last row's cursor (created_at, id) for the next page. */
  page: (limit: number, cursor?: Cursor) => MaybePromise<AlertDelivery[]>
  /**
   * Records that `subject` is now in `state`; returns the change's number when this write changed
   * it (each change is made by one process alone), null when it was so already, or it is first
   * heard of in the state `quiet` (a provider first seen up is no news).
   */
  transition: (subject: string, state: string, quiet: string) => MaybePromise<number | null>
}

/**
 * The topics of the store's bus and what each carries. A message from another process is checked
 * against its topic's shape where it arrives (./bus.ts), so a handler gets what its topic says.
 */
export interface BusTopics {
  /** Organizations, projects or keys changed: each process drops what it holds of them (./changes.ts). */
  tenancy: TenancyChange
  /** A quota window reached its limit at `tokens` and `cost_nano` (./quota-latch.ts). */
  quota: { scope: string, window: number, tokens: number, cost_nano: number }
  /** An organization's balance is short: each process gives back the spare of its lease (./leases.ts). */
  lease: { org: string }
  /** The response cache's fill of `key` ended: its waiters may read it (./cache-fills.ts). */
  'cache.fill-ended': { key: string }
}

export type BusTopic = keyof BusTopics

/** Messages between the processes sharing one store. */
export interface PeerBus {
  /** Every other process handles `message` on `topic`; resolves once each has (or after a bounded wait, ~1 s, for one that does not answer). */
  broadcast: <T extends BusTopic>(topic: T, message: BusTopics[T]) => Promise<void>
  /** `fn` may return a promise: the sender waits for it too. */
  on: <T extends BusTopic>(topic: T, fn: (message: BusTopics[T]) => MaybePromise<void>) => void
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
  readonly audit: AuditStore
  /** Operators' sessions (single sign-on). */
  readonly sessions: SessionStore
  /** The response cache plugin's answers. */
  readonly cache: ResponseCacheStore
  /** Who made each object at a provider through pass-through. */
  readonly objects: ProviderObjectStore
  /** The alerts' outbox (webhooks). */
  readonly alerts: AlertStore
  /**
   * Tenants from the config: organizations (with their initial balance), projects and literal
   * keys are created when missing (a deleted one comes back), and the fields the config names
   * are set to its values; then every process hears a `tenants` change.
   */
  /**
   * Applies the config's tenants (`apply`: serve and reload) or creates those that are missing
   * (`missing`: every other command); changes are in the audit log as the config's, and what the
   * file names that the store keeps otherwise (a revoked key, a deleted tenant) is reported.
   */
  syncTenants: (config: Config, now: number, mode?: SyncMode) => MaybePromise<SyncReport>
  /**
   * Hears every change of the tenancy made by any process sharing the store, this one included
   * (the processes serving it within a second, those on its bus before the change resolves).
   * Returns what stops it.
   */
  onChange: (listener: ChangeListener) => () => void
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
