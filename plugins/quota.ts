import { Type } from '@sinclair/typebox'
import { definePlugin, isPromise, limitOf, QuotaExceeded, quotaStatus, quotaWindow, QuotaRules, type QuotaLimit, type QuotaRule, type QuotaUsage } from './api/index.js'

// Gateway hooks: onAdmission (refuse a scope over its quota), onCallEnd (count the call).
// Quotas come from the tenants in the config: per organization and per project, in tokens or
// USD, per UTC minute, hour, day or month. A call is refused with 429 (numeric code 429;
// Messages: rate_limit_error), with Retry-After = seconds until the window resets, when the
// window's usage is at or over the limit. The store admits from what it knows of the window and
// counts an ended call before its answer's last byte is sent; a count that reaches the limit
// closes the window in every process first: once the calls that ended have reached a quota, the
// next call is refused whichever worker or instance serves it. Calls admitted while others are
// still running may take the window past the limit by at most what those use.

const options = Type.Object({}, { additionalProperties: false })

const limits = new WeakMap<QuotaRule, QuotaLimit>()
const limitOfRule = (r: QuotaRule): QuotaLimit => {
  let l = limits.get(r)
  if (l === undefined) {
    l = 'tokens' in r.quota ? { tokens: r.quota.tokens } : { costNano: limitOf(r.quota) }
    limits.set(r, l)
  }
  return l
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The quotas this call counts against (quota plugin). */
    quotaRules: QuotaRule[] | null
  }
}

export default definePlugin({
  name: 'quota',
  description: 'token or USD quotas per org and project per UTC window (set in tenants): 429',
  options,
  dependencies: ['auth'],
  plugin: async (fastify) => {
    const { store, clock, config } = fastify.gateway
    const rules = new QuotaRules(config)
    if (rules.empty) return
    fastify.decorateRequest('quotaRules', null)

    const refuse = (r: QuotaRule, used: QuotaUsage, now: number): never => {
      const retryAfter = Math.max(1, Math.ceil((quotaWindow(r.quota.per, now).end - now) / 1000))
      const status = quotaStatus(r, used, now)
      throw new QuotaExceeded(
        { scope: r.kind, id: r.id, used: status.used, limit: status.limit, unit: status.unit === 'usd' ? 'USD' : 'tokens', per: r.quota.per, retry_after: retryAfter },
        { headers: { 'retry-after': String(retryAfter) } }
      )
    }

    fastify.gateway.addHook('onAdmission', ({ request, call, principal }) => {
      if (principal === null || !call.billable) return
      const mine = rules.for(principal.org, principal.project)
      if (mine.length === 0) return
      const now = clock.now()
      let pending: Array<Promise<void>> | null = null
      for (const r of mine) {
        const used = store.quota.admit(r.scope, quotaWindow(r.quota.per, now).start, limitOfRule(r))
        const check = (u: QuotaUsage | null): void => { if (u !== null) refuse(r, u, now) }
        if (isPromise(used)) (pending ??= []).push(used.then(check))
        else check(used)
      }
      request.quotaRules = mine
      if (pending !== null) return Promise.all(pending)
    })

    fastify.gateway.addHook('onCallEnd', (outcome, { request }) => {
      const mine = request.quotaRules
      if (mine === null || !outcome.billed) return
      const tokens = outcome.usage.prompt_tokens + outcome.usage.completion_tokens
      if (tokens === 0 && outcome.costNano === 0) return
      const now = clock.now()
      const counts = mine.map((r) => store.quota.count(r.scope, quotaWindow(r.quota.per, now).start, tokens, outcome.costNano, limitOfRule(r)))
      if (counts.some(isPromise)) return Promise.all(counts)
    })
  }
})
