import { Type } from '@sinclair/typebox'
import type { FastifyRequest } from 'fastify'
import type { QuotaConfig } from '../config/schema.js'
import { settle } from './billing.js'
import { afterResponse, syncHook } from './context.js'
import { QuotaExceeded } from './errors.js'
import { nanoToUsd, usdToNano } from './money.js'
import { definePlugin } from './registry.js'

// Phases: preHandler (admission), then when the response is over (count the settled usage).
// Quotas come from the tenants in the config: per organization and per project, in tokens or
// USD, per UTC minute, hour, day or month. A call is refused with 429 (numeric code 429;
// Messages: rate_limit_error) while the window's settled usage is at or over the limit, with
// Retry-After = seconds until the window resets. Usage counts when it is settled, so calls in
// flight when the limit is reached may take a window slightly past it. Each worker reads a
// scope's usage from the store at most every READ_EVERY_MS and adds its own counts to what it
// read at once, so other workers' usage is seen within that delay.

const options = Type.Object({}, { additionalProperties: false })

export type QuotaPer = QuotaConfig['per']

const READ_EVERY_MS = 20

/** Start of the UTC window containing t, and the start of the next one. */
export function quotaWindow (per: QuotaPer, t: number): { start: number, end: number } {
  const size = per === 'minute' ? 60_000 : per === 'hour' ? 3_600_000 : per === 'day' ? 86_400_000 : 0
  if (size > 0) {
    const start = Math.floor(t / size) * size
    return { start, end: start + size }
  }
  const d = new Date(t)
  return { start: Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), 1), end: Date.UTC(d.getUTCFullYear(), d.getUTCMonth() + 1, 1) }
}

export interface QuotaRule { scope: string, kind: 'organization' | 'project', id: string, quota: QuotaConfig }

export interface QuotaStatus { limit: string, used: string, unit: 'tokens' | 'usd', per: QuotaPer, resets_at: string }

/** Used and limit of a quota in its current window, as the admin API and console show them. */
export function quotaStatus (rule: QuotaRule, used: { tokens: number, cost_nano: number }, now: number): QuotaStatus {
  const w = quotaWindow(rule.quota.per, now)
  const tokens = 'tokens' in rule.quota
  return {
    limit: tokens ? String((rule.quota as { tokens: number }).tokens) : nanoToUsd(usdToNano((rule.quota as { usd: number }).usd)),
    used: tokens ? String(used.tokens) : nanoToUsd(used.cost_nano),
    unit: tokens ? 'tokens' : 'usd',
    per: rule.quota.per,
    resets_at: new Date(w.end).toISOString()
  }
}

export default definePlugin({
  name: 'quota',
  options,
  plugin: async (fastify) => {
    const { store, clock, catalog, config } = fastify.gw
    const byOrg = new Map<string, QuotaRule>()
    const byProject = new Map<string, QuotaRule>()
    for (const t of config.tenants) {
      if (t.quota !== undefined) byOrg.set(t.org, { scope: `org:${t.org}`, kind: 'organization', id: t.org, quota: t.quota })
      for (const p of t.projects) {
        if (p.quota !== undefined) byProject.set(`${t.org}/${p.id}`, { scope: `project:${t.org}/${p.id}`, kind: 'project', id: `${t.org}/${p.id}`, quota: p.quota })
      }
    }
    if (byOrg.size === 0 && byProject.size === 0) return

    const rulesFor = (org: string, project: string): QuotaRule[] => {
      const rules: QuotaRule[] = []
      const o = byOrg.get(org)
      if (o !== undefined) rules.push(o)
      const p = byProject.get(`${org}/${project}`)
      if (p !== undefined) rules.push(p)
      return rules
    }

    // scope → its usage in the current window, as last read plus this worker's counts since
    const seen = new Map<string, { start: number, readAt: number, tokens: number, cost_nano: number }>()
    const usedIn = (scope: string, start: number, now: number): { tokens: number, cost_nano: number } => {
      let u = seen.get(scope)
      if (u === undefined || u.start !== start || now - u.readAt >= READ_EVERY_MS || now < u.readAt) {
        u = { start, readAt: now, ...store.quota.used(scope, start) }
        seen.set(scope, u)
      }
      return u
    }

    const count = (request: FastifyRequest, rules: QuotaRule[]): void => {
      const call = request.call
      if (call === null) return
      const { usage, cost } = settle(call, catalog.get(call.model)?.price ?? null)
      const tokens = usage.prompt_tokens + usage.completion_tokens
      if (tokens === 0 && cost === 0) return
      const now = clock.now()
      for (const r of rules) {
        const start = quotaWindow(r.quota.per, now).start
        const u = seen.get(r.scope)
        if (u !== undefined && u.start === start) { u.tokens += tokens; u.cost_nano += cost }
        fastify.gw.writer.sum(`quota:${r.scope}:${start}`, [tokens, cost], ([t, c]) => { store.quota.add(r.scope, start, t as number, c as number) })
      }
    }

    fastify.addHook('preHandler', syncHook((request, reply) => {
      const principal = request.principal
      if (request.routeConfig.metered !== true || principal === null) return
      const rules = rulesFor(principal.org, principal.project)
      if (rules.length === 0) return
      const now = clock.now()
      for (const r of rules) {
        const w = quotaWindow(r.quota.per, now)
        const used = usedIn(r.scope, w.start, now)
        const over = 'tokens' in r.quota ? used.tokens >= r.quota.tokens : used.cost_nano >= usdToNano(r.quota.usd)
        if (over) {
          const retryAfter = Math.max(1, Math.ceil((w.end - now) / 1000))
          const status = quotaStatus(r, used, now)
          throw new QuotaExceeded(
            { scope: r.kind, id: r.id, used: status.used, limit: status.limit, unit: status.unit === 'usd' ? 'USD' : 'tokens', per: r.quota.per, retry_after: retryAfter },
            { headers: { 'retry-after': String(retryAfter) } }
          )
        }
      }
      afterResponse(reply, () => count(request, rules))
    }))
  }
})
