import { hash } from 'node:crypto'
import { Type } from '@sinclair/typebox'
import type { FastifyRequest } from 'fastify'
import { LRUCache } from 'lru-cache'
import { Counter, Gauge, type Registry } from 'prom-client'
import {
  aggregateStream, definePlugin, isPromise, then,
  type AdmissionContext, type CachedAnswer, type CacheLookup, type CallOutcome, type Json, type MaybePromise, type Principal, type Usage
} from './api/index.js'

// Gateway hooks: onAdmission (look the call up: answer a hit; on a miss, keep the answer the
// client will get), onCallEnd (store a complete answer; count hits, misses and savings).
//
// A response cache, off unless listed. Opt-in by default: a call is looked up and stored only
// when its client sends `{prefix}Cache: on` or `Cache-Control: max-age=N` (which also bounds
// the answer's age and its time to live); `opt_in: false` caches every eligible call.
// `Cache-Control: no-cache` skips the lookup, `no-store` the storing; `{prefix}Cache: off` both.
//
// The key is the endpoint, the catalog model (or alias) the call named, the client body in a canonical form (keys sorted,
// `stream` and `stream_options` aside) and the scope's id (the key, the project or the
// organization), hashed: a hit never crosses a scope, and a streamed call and a whole one share
// their answer. An answer is stored in the client's protocol, whole (a stream is folded into its
// whole answer), with the usage it stands for; a hit is answered at admission (ctx.answer), so
// the admission hooks after this one (quota, balance) do not run, nothing goes upstream, and the
// gateway sends it whole or replays it as the protocol's stream, through the response hooks.
// Only an answer that completed with a 2xx is stored, up to max_entry_kb.
//
// The answers live in the store (SQLite for the workers of one machine, Redis for several
// instances), bounded by max_entries. Each process keeps the answers it stored or found in a
// bounded in-memory copy in front (memory_mb; at most max_entries), checked for expiry and
// max-age as the store's are, so that a hot answer is not read from the store on every hit. Of identical calls that miss together one goes upstream
// (it holds the key's fill) and the others wait for its answer, up to the server's
// request_timeout_s; when it fails, they go upstream themselves. A failing store never fails a
// call: it is then answered as if the cache were off, and the failure logged.

const options = Type.Object({
  ttl_s: Type.Number({ default: 300, exclusiveMinimum: 0 }),
  scope: Type.Union([Type.Literal('key'), Type.Literal('project'), Type.Literal('org')], { default: 'project' }),
  max_entries: Type.Integer({ default: 10_000, minimum: 1 }),
  max_entry_kb: Type.Integer({ default: 1024, minimum: 1 }),
  opt_in: Type.Boolean({ default: true }),
  memory_mb: Type.Number({ default: 32, minimum: 0 })
}, { additionalProperties: false })

type Scope = 'key' | 'project' | 'org'

/** What the cache decided for one call. */
interface CacheState {
  key: string
  /** The answer is stored once the call ends. */
  store: boolean
  ttlMs: number
  /** This call holds the key's fill: identical calls wait for its answer. */
  fills: boolean
  hit: boolean
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The cache's decision for this call (cache plugin). */
    responseCache: CacheState | null
  }
}

/** What is stored: the answer in the client's protocol and the usage it stands for. */
interface Stored { body: Json, usage: Usage }

interface Directives { on: boolean | null, noCache: boolean, noStore: boolean, maxAge: number | null }

function header (request: FastifyRequest, name: string): string | undefined {
  const v = request.headers[name]
  return Array.isArray(v) ? v.join(',') : v
}

/** The client's Cache-Control directives the cache honours (others are ignored, as HTTP caches do). */
function directives (cacheControl: string | undefined, on: boolean | null): Directives {
  const d: Directives = { on, noCache: false, noStore: false, maxAge: null }
  if (cacheControl === undefined) return d
  for (const part of cacheControl.split(',')) {
    const p = part.trim().toLowerCase()
    if (p === 'no-cache') d.noCache = true
    else if (p === 'no-store') d.noStore = true
    else {
      const m = /^max-age\s*=\s*"?(\d{1,10})"?$/.exec(p)
      if (m !== null) d.maxAge = Number(m[1])
    }
  }
  return d
}

/** JSON text with every object's keys sorted, and the top level's `stream` fields left out. */
function canonical (v: unknown, top = false): string {
  if (Array.isArray(v)) return '[' + v.map((x) => x === undefined ? 'null' : canonical(x)).join(',') + ']'
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>
    const parts: string[] = []
    for (const k of Object.keys(o).sort()) {
      if (o[k] === undefined || (top && (k === 'stream' || k === 'stream_options'))) continue
      parts.push(JSON.stringify(k) + ':' + canonical(o[k]))
    }
    return '{' + parts.join(',') + '}'
  }
  return JSON.stringify(v) ?? 'null'
}

function scopeOf (scope: Scope, p: Principal): string[] {
  if (scope === 'key') return ['key', p.keyId]
  if (scope === 'org') return ['org', p.org]
  return ['project', p.org, p.project]
}

/** The cache key of a call: a hash of what makes its answer, within its scope. */
function cacheKey (scope: Scope, p: Principal, endpoint: string, model: string, body: Json): string {
  return hash('sha256', `[${JSON.stringify(scopeOf(scope, p))},${JSON.stringify(endpoint)},${JSON.stringify(model)},${canonical(body, true)}]`, 'base64url')
}

/** The answer to store for an ended call, as text; null when it is not a complete answer. */
function storedOf (outcome: CallOutcome): string | null {
  const sent = outcome.content?.response
  if (sent === null || sent === undefined) return null
  let body: Json | null = null
  // an MCP tool call is never streamed (nor cached: it has no catalog model)
  if (outcome.stream && outcome.protocol !== 'mcp') body = aggregateStream(outcome.protocol, sent, { usage: outcome.usage })
  else {
    try {
      const v = JSON.parse(sent) as unknown
      if (v !== null && typeof v === 'object' && !Array.isArray(v)) body = v as Json
    } catch {}
  }
  // a Responses object may carry its own failure
  if (body === null || body.status === 'failed') return null
  const stored: Stored = { body, usage: { ...outcome.usage } }
  return JSON.stringify(stored)
}

function series (registry: Registry): { hits: Counter<'model'>, misses: Counter<'model'>, saved: Counter<'org'>, stores: Counter<'result'>, waiting: Gauge } {
  const counter = <L extends string>(name: string, help: string, labelNames: L[]): Counter<L> =>
    (registry.getSingleMetric(name) as Counter<L> | undefined) ?? new Counter({ name, help, labelNames, registers: [registry] })
  const waiting = 'modelgate_cache_waiting_calls'
  return {
    waiting: (registry.getSingleMetric(waiting) as Gauge | undefined) ?? new Gauge({ name: waiting, help: 'Calls waiting for the answer an identical call is fetching', registers: [registry] }),
    hits: counter('modelgate_cache_hits_total', 'Calls answered from the response cache, by model', ['model']),
    misses: counter('modelgate_cache_misses_total', 'Calls looked up in the response cache and not found, by model', ['model']),
    saved: counter('modelgate_cache_saved_usd_total', 'What the calls answered from the response cache would have cost, USD, by organization', ['org']),
    stores: counter('modelgate_cache_stores_total', 'Answers offered to the response cache, by result (stored, too_large)', ['result'])
  }
}

export default definePlugin({
  name: 'cache',
  description: 'a response cache: identical calls answered from the store, at no cost, never across scopes (opt-in by default)',
  options,
  dependencies: ['auth'],
  plugin: async (fastify, opts) => {
    const { store, clock, config } = fastify.gateway
    const name = `${config.server.header_prefix}Cache`
    const requestHeader = name.toLowerCase()
    const maxBytes = opts.max_entry_kb * 1024
    // how long identical calls wait for the one that fills their answer, and how long a fill holds
    const waitMs = config.server.request_timeout_s * 1000
    const m = series(fastify.gateway.metrics)
    fastify.decorateRequest('responseCache', null)
    // answers this process stored or found, in front of the store; text, parsed on each hit, so
    // that no call can change what the next one is answered
    const near = opts.memory_mb > 0
      ? new LRUCache<string, CachedAnswer>({ max: opts.max_entries, maxSize: Math.floor(opts.memory_mb * 1024 * 1024), sizeCalculation: (e) => 2 * e.value.length + 64 })
      : null
    /** The copy of `key` this process holds, when it is still fresh enough. */
    const nearby = (key: string, now: number, storedSince: number | undefined): CachedAnswer | undefined => {
      const e = near?.get(key)
      if (e === undefined) return undefined
      if (e.expiresAt <= now) {
        near?.delete(key)
        return undefined
      }
      return storedSince === undefined || e.storedAt >= storedSince ? e : undefined
    }

    /** A store operation whose failure is logged and answered with `fallback`, never thrown. */
    const guarded = <T>(request: FastifyRequest, what: string, fallback: T, op: () => MaybePromise<T>): MaybePromise<T> => {
      const failed = (err: unknown): T => {
        request.log.warn({ err }, `response cache: ${what} failed`)
        return fallback
      }
      try {
        const r = op()
        return isPromise(r) ? r.catch(failed) : r
      } catch (err) {
        return failed(err)
      }
    }

    const miss = (ctx: AdmissionContext, s: CacheState): void => {
      ctx.reply.header(name, 'miss')
      m.misses.inc({ model: ctx.model?.id ?? '' })
      if (s.store) ctx.keepContent()
    }

    const answer = (ctx: AdmissionContext, s: CacheState, entry: CachedAnswer): boolean => {
      let stored: Stored
      try {
        stored = JSON.parse(entry.value) as Stored
      } catch {
        return false
      }
      s.hit = true
      s.store = false
      const age = Math.max(0, Math.floor((clock.now() - entry.storedAt) / 1000))
      ctx.answer?.({ body: stored.body, usage: stored.usage, cacheHit: true, headers: { [name]: 'hit', age: String(age) } })
      return true
    }

    const found = (ctx: AdmissionContext, s: CacheState, r: CacheLookup | null, storedSince: number | undefined): MaybePromise<void> => {
      if (r === null) {
        ctx.reply.header(name, 'bypass')
        ctx.request.responseCache = null
        return
      }
      switch (r.kind) {
        case 'hit':
          if (answer(ctx, s, r.entry)) near?.set(s.key, r.entry)
          else miss(ctx, s)
          return
        case 'fill':
          s.fills = true
          miss(ctx, s)
          return
        case 'miss':
          miss(ctx, s)
          return
        case 'wait':
          // an identical call is fetching this answer: its answer, or upstream once it failed
          m.waiting.inc()
          return Promise.resolve(guarded(ctx.request, 'waiting for a fill', undefined, () => store.cache.waitFill(s.key, waitMs))).then(() => {
            m.waiting.dec()
            return then(guarded(ctx.request, 'lookup', null, () => store.cache.lookup(s.key, { now: clock.now(), storedSince })), (again) => {
              if (again?.kind === 'hit' && answer(ctx, s, again.entry)) return
              miss(ctx, s)
            })
          })
      }
    }

    fastify.gateway.addHook('onAdmission', (ctx) => {
      const { request, reply, principal, model, call } = ctx
      if (ctx.answer === undefined || !call.billable || principal === null || model === null) return
      const given = header(request, requestHeader)?.trim().toLowerCase()
      if (given !== undefined && given !== 'on' && given !== 'off') {
        throw fastify.gateway.refusal({ status: 400, code: 'invalid_header', type: 'invalid_request_error', message: `The ${name} header must be "on" or "off".`, retry: false })
      }
      const d = directives(header(request, 'cache-control'), given === undefined ? null : given === 'on')
      const optedIn = d.on === true || (d.on === null && (!opts.opt_in || d.maxAge !== null))
      const ttlMs = Math.min(opts.ttl_s, d.maxAge ?? Infinity) * 1000
      const look = optedIn && !d.noCache
      const keep = optedIn && !d.noStore && ttlMs > 0
      if (!look && !keep) {
        reply.header(name, 'bypass')
        return
      }
      const s: CacheState = { key: cacheKey(opts.scope, principal, call.endpoint, (call.requestedModel ?? model).id, ctx.body), store: keep, ttlMs, fills: false, hit: false }
      request.responseCache = s
      if (!look) {
        reply.header(name, 'bypass')
        ctx.keepContent()
        return
      }
      const now = clock.now()
      const storedSince = d.maxAge === null ? undefined : now - d.maxAge * 1000
      const copy = nearby(s.key, now, storedSince)
      if (copy !== undefined && answer(ctx, s, copy)) return
      const fill = keep ? { owner: request.id, ttlMs: waitMs } : undefined
      return then(guarded(request, 'lookup', null, () => store.cache.lookup(s.key, { now, storedSince, fill })), (r) => found(ctx, s, r, storedSince))
    })

    fastify.gateway.addHook('onCallEnd', (outcome, { request }) => {
      const s = request.responseCache
      if (s === null) return
      if (s.hit) {
        if (!outcome.cacheHit) return
        m.hits.inc({ model: outcome.model ?? '' })
        if (outcome.savedNano > 0) m.saved.inc({ org: outcome.principal?.org ?? '' }, outcome.savedNano / 1e9)
        return
      }
      if (!s.store) return
      const owner = s.fills ? request.id : undefined
      const complete = outcome.status === 'ok' && outcome.billed && outcome.httpStatus >= 200 && outcome.httpStatus < 300
      const value = complete ? storedOf(outcome) : null
      if (value !== null && Buffer.byteLength(value) > maxBytes) m.stores.inc({ result: 'too_large' })
      else if (value !== null) {
        m.stores.inc({ result: 'stored' })
        const now = clock.now()
        const entry: CachedAnswer = { value, storedAt: now, expiresAt: now + s.ttlMs }
        near?.set(s.key, entry)
        return guarded(request, 'storing an answer', undefined, () => store.cache.put(s.key, entry, opts.max_entries, owner))
      }
      if (owner !== undefined) return guarded(request, 'ending a fill', undefined, () => store.cache.abandon(s.key, owner))
    })
  }
})
