import { Type } from '@sinclair/typebox'
import {
  budgetScope, definePlugin, headerStyle, isPromise, KeyRateLimited, limitStatus, putLimitHeaders, QuotaExceeded, quotaLimit, quotaWindow, QuotaRules, retryAfterHeaders, unmeteredRefusal,
  type HeaderSink, type MaybePromise, type Principal, type QuotaLimit, type QuotaPer, type QuotaUsage, type RateLimitHit
} from './api/index.js'

// Gateway hooks: onAdmission (refuse a call over a limit), onCallEnd (count the call).
//
// What this plugin enforces, on every metered route (chat, Messages, Responses, count_tokens,
// Gemini's, pass-through), in UTC windows:
//   - the tenants' quotas: per organization and per project, in tokens or USD, per minute, hour,
//     day or month, as the store holds them (set from the config and the admin API), kept in
//     memory here and read again when the store says the tenancy changed;
//   - a key's budget (USD per window) and its tpm (billed tokens per minute), counted like
//     quotas, under the key's rotation line (`key:<id>`, `key-tpm:<id>`);
//   - a key's rpm: every call it makes (count_tokens and free calls included), through the
//     store's rate-limit counters (`key-rpm:<id>`, a window of one minute).
// Budgets, tpm and quotas count what is billed: a free call or a cache hit spends none. A call
// that may spend without reporting what (`call.unmetered`: a pass-through batch job) is refused
// (403) when any of them applies to its key, since it could not be counted.
// A call is refused with 429 and Retry-After (seconds until its window resets; past a minute also
// `x-should-retry: false`, so that the SDKs do not wait hours to retry), in the route's error
// shape (numeric code 429; Messages: rate_limit_error): quota_exceeded for a quota or a
// budget, a rate-limit error naming the key for rpm and tpm. The store admits from what it knows
// of a window and counts an ended call before its answer's last byte is sent; a count that
// reaches a limit closes the window in every process first: once the calls that ended have
// reached it, the next call is refused whichever worker or instance serves it. Calls admitted
// while others are still running may take a window past its limit by at most what those use;
// rpm is exact (no window admits more than rpm calls).
//
// A key with `limits` gets the rate-limit headers clients read on the OpenAI-shaped routes and
// /v1/messages (../gateway/rate-limit-headers.ts), from the same counters: the call's place in
// the rpm counter (remaining = rpm − place, 0 exactly when the next call is refused), and the
// tpm window's tokens as admission judges them (from memory once the window is read: the counts'
// committed totals and what other processes announced). A 429 carries them too.
// `rate_limit_headers: false` leaves them off (the limits still hold): an operator who would not
// show clients their limits, or whose own proxy in front writes its own.

const options = Type.Object({
  rate_limit_headers: Type.Boolean({ default: true })
}, { additionalProperties: false })

const MINUTE_MS = 60_000

/** What the plugin tells `gateway.events` after counting an ended call in a budget's or a quota's window. */
const COUNTED = 'quota.counted'
export interface QuotaCounted {
  /** A quota's organization or project, or a key's budget. */
  kind: 'organization' | 'project' | 'key'
  id: string
  scope: string
  per: QuotaPer
  limit: QuotaLimit
  window: { start: number, end: number }
  /** The window's totals after the count. */
  total: QuotaUsage
}

/** One limit a call counts against, in the store's terms. */
interface Rule {
  scope: string
  /** How the refusal names it: a quota's organization or project, or a key. */
  kind: 'organization' | 'project' | 'key'
  id: string
  per: QuotaPer
  limit: QuotaLimit
  /** A key's tpm: refused as a rate limit. */
  rate: boolean
}

/** What a principal's calls count against, made once per principal and set of tenant rules. */
interface Plan {
  of: TenantRules
  rules: Rule[]
  /** The key's rpm counter and tpm window (under its rotation line), and its rpm and tpm as header values. */
  rpmKey: string
  tpmScope: string
  rpmText: string
  tpmText: string
}

/**
 * What one call's rate-limit headers show, as its counters answer: its place in the key's rpm
 * window, and the tokens its tpm window had counted. Written on the answer (or the refusal) once
 * every reading is in.
 */
class Shown {
  hit: RateLimitHit | null = null
  tokens: QuotaUsage | null = null
  constructor (readonly style: 'openai' | 'anthropic', readonly now: number, readonly plan: Plan, readonly rpm: number | undefined, readonly tpm: number | undefined, readonly tpmEnd: number) {}

  put (sink: HeaderSink): void {
    const { hit, tokens, rpm, tpm } = this
    if (hit !== null && rpm !== undefined) putLimitHeaders(sink, this.style, 'requests', this.now, rpm, rpm - hit.count, hit.resetAt, this.plan.rpmText)
    if (tokens !== null && tpm !== undefined) putLimitHeaders(sink, this.style, 'tokens', this.now, tpm, tpm - tokens.tokens, this.tpmEnd, this.plan.tpmText)
  }

  /** The headers with a refusal's Retry-After. */
  refusal (retryAfter: number): Record<string, string> {
    const out: Record<string, string> = {}
    this.put({ header: (name, value) => { out[name] = value } })
    return Object.assign(out, retryAfterHeaders(retryAfter))
  }
}

const refusalHeaders = (shown: Shown | null, retryAfter: number): Record<string, string> => shown === null ? retryAfterHeaders(retryAfter) : shown.refusal(retryAfter)

/** The tenants' quotas as rules, made once per project. */
class TenantRules {
  private readonly byProject = new Map<string, Rule[]>()
  constructor (private readonly rules: QuotaRules) {}

  for (org: string, project: string): Rule[] {
    const k = `${org}/${project}`
    let rules = this.byProject.get(k)
    if (rules === undefined) {
      rules = this.rules.for(org, project).map((r) => ({ scope: r.scope, kind: r.kind, id: r.id, per: r.quota.per, limit: quotaLimit(r.quota), rate: false }))
      this.byProject.set(k, rules)
    }
    return rules
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The limits this call counts against (quota plugin). */
    quotaLimits: Rule[] | null
  }
}

export default definePlugin({
  name: 'quota',
  description: 'quotas per org and project, a key\'s budget, rpm and tpm, in UTC windows: 429',
  options,
  dependencies: ['auth'],
  plugin: async (fastify, opts) => {
    const { store, clock, events } = fastify.gateway
    const headersOn = opts.rate_limit_headers
    fastify.decorateRequest('quotaLimits', null)

    // the tenants' quotas, as the store holds them; read again when a tenant changes
    let tenants = new TenantRules(new QuotaRules(await store.orgs.quotas()))
    let reading = 0
    const reread = async (): Promise<void> => {
      const n = ++reading
      const rules = new QuotaRules(await store.orgs.quotas())
      if (n === reading) tenants = new TenantRules(rules)
    }
    const stop = store.onChange((change) => {
      if (change.kind !== 'key') return reread()
    })
    fastify.addHook('onClose', (_instance, done) => { stop(); done() })

    // a principal's rules and limits, made once per principal (auth caches it) and set of tenant rules
    const byPrincipal = new WeakMap<Principal, Plan>()
    const planOf = (p: Principal): Plan => {
      const known = byPrincipal.get(p)
      if (known !== undefined && known.of === tenants) return known
      const rules = [...tenants.for(p.org, p.project)]
      const line = p.lineage ?? p.keyId
      const tpmScope = `key-tpm:${line}`
      if (p.budget !== undefined && p.budget !== null) rules.push({ scope: budgetScope(line), kind: 'key', id: p.keyId, per: p.budget.per, limit: { costNano: p.budget.nano }, rate: false })
      if (p.limits?.tpm !== undefined) rules.push({ scope: tpmScope, kind: 'key', id: p.keyId, per: 'minute', limit: { tokens: p.limits.tpm }, rate: true })
      const plan: Plan = { of: tenants, rules, rpmKey: `key-rpm:${line}`, tpmScope, rpmText: String(p.limits?.rpm ?? ''), tpmText: String(p.limits?.tpm ?? '') }
      byPrincipal.set(p, plan)
      return plan
    }

    const secondsTo = (end: number, now: number): number => Math.max(1, Math.ceil((end - now) / 1000))

    const refuse = (r: Rule, used: QuotaUsage, now: number, shown: Shown | null): never => {
      const retryAfter = secondsTo(quotaWindow(r.per, now).end, now)
      const headers = refusalHeaders(shown, retryAfter)
      if (r.rate) throw new KeyRateLimited({ id: r.id, limit: r.limit.tokens ?? 0, unit: 'tokens', retry_after: retryAfter }, { headers })
      const status = limitStatus(r.limit, r.per, used, now)
      throw new QuotaExceeded({ scope: r.kind, id: r.id, used: status.used, limit: status.limit, unit: status.unit === 'usd' ? 'USD' : 'tokens', per: r.per, retry_after: retryAfter }, { headers })
    }

    const checkRpm = (h: RateLimitHit, rpm: number, principal: Principal, now: number, shown: Shown | null): void => {
      if (shown !== null) shown.hit = h
      if (h.count <= rpm) return
      const retryAfter = secondsTo(h.resetAt, now)
      throw new KeyRateLimited({ id: principal.keyId, limit: rpm, unit: 'requests', retry_after: retryAfter }, { headers: refusalHeaders(shown, retryAfter) })
    }

    // Every store answer below is synchronous on SQLite once its window is read: the common call
    // makes no promise and no closure here, only its readings (a call's CPU is what this costs).
    fastify.gateway.addHook('onAdmission', ({ request, reply, call, principal }) => {
      if (principal === null) return
      const now = clock.now()
      const plan = planOf(principal)
      const limits = principal.limits
      const style = limits === null || limits === undefined || !headersOn ? null : headerStyle(call.endpoint, call.protocol)
      const rpm = limits?.rpm
      const tpm = limits?.tpm
      const tpmWindow = tpm !== undefined && style !== null ? quotaWindow('minute', now) : null
      // the readings the headers show, as they come in; set on the answer before any refusal
      const shown = style === null ? null : new Shown(style, now, plan, rpm, tpm, tpmWindow?.end ?? 0)
      let pending: Array<Promise<void>> | null = null
      if (tpmWindow !== null && shown !== null) {
        // as admission judges the window (from memory once read), else as stored
        const used = store.quota.known(plan.tpmScope, tpmWindow.start) ?? store.quota.used(plan.tpmScope, tpmWindow.start)
        if (isPromise(used)) (pending ??= []).push(used.then((u) => { shown.tokens = u }))
        else shown.tokens = used
      }
      if (rpm !== undefined) {
        const hit = store.rateLimits.hit(plan.rpmKey, now, MINUTE_MS, rpm)
        if (isPromise(hit)) (pending ??= []).push(hit.then((h) => { checkRpm(h, rpm, principal, now, shown) }))
        else checkRpm(hit, rpm, principal, now, shown)
      }
      if (call.billable) {
        const mine = plan.rules
        // what it spends cannot be counted: never a way past a quota or a budget
        if (call.unmetered && mine.length > 0) throw unmeteredRefusal(request, call)
        for (const r of mine) {
          const used: MaybePromise<QuotaUsage | null> = store.quota.admit(r.scope, quotaWindow(r.per, now).start, r.limit)
          if (isPromise(used)) (pending ??= []).push(used.then((u) => { if (u !== null) refuse(r, u, now, shown) }))
          else if (used !== null) refuse(r, used, now, shown)
        }
        if (mine.length > 0) request.quotaLimits = mine
      }
      if (shown === null) return pending === null ? undefined : Promise.all(pending)
      if (pending === null) { shown.put(reply); return }
      // the headers go on the answer whether the call is admitted or refused
      return Promise.allSettled(pending).then((settled) => {
        shown.put(reply)
        for (const r of settled) if (r.status === 'rejected') throw r.reason
      })
    })

    fastify.gateway.addHook('onCallEnd', (outcome, { request }) => {
      const mine = request.quotaLimits
      if (mine === null || !outcome.billed || outcome.cacheHit) return
      const tokens = outcome.usage.prompt_tokens + outcome.usage.completion_tokens
      if (tokens === 0 && outcome.costNano === 0) return
      const now = clock.now()
      // the alerts hear each window's totals after a count (budget and quota thresholds)
      const heard = events.listenerCount(COUNTED) > 0
      const pending: Array<Promise<unknown>> = []
      for (const r of mine) {
        const window = quotaWindow(r.per, now)
        const total = store.quota.count(r.scope, window.start, tokens, outcome.costNano, r.limit)
        const tell = (t: QuotaUsage): void => { events.emit(COUNTED, { kind: r.kind, id: r.id, scope: r.scope, per: r.per, limit: r.limit, window, total: t } satisfies QuotaCounted) }
        if (isPromise(total)) pending.push(heard && !r.rate ? total.then(tell) : total)
        else if (heard && !r.rate) tell(total)
      }
      if (pending.length > 0) return Promise.all(pending)
    })
  }
})
