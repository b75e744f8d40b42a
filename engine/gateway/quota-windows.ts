import type { Config, QuotaConfig } from '../../config/schema.js'
import { nanoToUsd, usdToNano } from '../kernel/money.js'
import type { KeyBudget, QuotaEntry, QuotaLimit, QuotaUsage } from '../store/types.js'

// Quotas of the tenants: per organization and per project, in tokens or USD, per UTC minute,
// hour, day or month, as the store holds them (from the config and the admin API); and a key's
// own budget, in USD per UTC window. Shared by the quota plugin (admission and counting) and the
// admin API and console (showing them).

export type QuotaPer = QuotaConfig['per']

export interface QuotaRule { scope: string, kind: 'organization' | 'project', id: string, quota: QuotaConfig }

export interface QuotaStatus { limit: string, used: string, unit: 'tokens' | 'usd', per: QuotaPer, resets_at: string }

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

/** The limit in its own unit: tokens, or nano-dollars. */
export function limitOf (quota: QuotaConfig): number {
  return 'tokens' in quota ? quota.tokens : usdToNano(quota.usd)
}

/** What a call or a window used, in the quota's unit. */
export function amountOf (quota: QuotaConfig, used: QuotaUsage): number {
  return 'tokens' in quota ? used.tokens : used.cost_nano
}

/** Used and limit of a limit in its current window (tokens, or nano-dollars shown as USD). */
export function limitStatus (limit: QuotaLimit, per: QuotaPer, used: QuotaUsage, now: number): QuotaStatus {
  const w = quotaWindow(per, now)
  const tokens = limit.tokens !== undefined
  return {
    limit: tokens ? String(limit.tokens) : nanoToUsd(limit.costNano ?? 0),
    used: tokens ? String(used.tokens) : nanoToUsd(used.cost_nano),
    unit: tokens ? 'tokens' : 'usd',
    per,
    resets_at: new Date(w.end).toISOString()
  }
}

/** The limit of a quota in the store's terms. */
export const quotaLimit = (quota: QuotaConfig): QuotaLimit => 'tokens' in quota ? { tokens: quota.tokens } : { costNano: limitOf(quota) }

/** Used and limit of a quota in its current window, as the admin API and console show them. */
export function quotaStatus (rule: QuotaRule, used: QuotaUsage, now: number): QuotaStatus {
  return limitStatus(quotaLimit(rule.quota), rule.quota.per, used, now)
}

/** The quota scope of a key's budget: its rotation line's, so that a rotation neither resets nor doubles it. */
export const budgetScope = (lineage: string): string => `key:${lineage}`

/** A key's budget as the admin API shows it: limit and used in USD in the current window. */
export function budgetStatus (budget: KeyBudget, used: QuotaUsage, now: number): QuotaStatus {
  return limitStatus({ costNano: budget.nano }, budget.per, used, now)
}

export const orgRule = (org: string, quota: QuotaConfig): QuotaRule => ({ scope: `org:${org}`, kind: 'organization', id: org, quota })
export const projectRule = (org: string, project: string, quota: QuotaConfig): QuotaRule => ({ scope: `project:${org}/${project}`, kind: 'project', id: `${org}/${project}`, quota })

/** Every quota of the tenants, by organization and by `org/project`: from the store's entries, or a config's tenants. */
export class QuotaRules {
  private readonly byOrg = new Map<string, QuotaRule>()
  private readonly byProject = new Map<string, QuotaRule>()
  private readonly lists = new Map<string, QuotaRule[]>()

  constructor (source: Pick<Config, 'tenants'> | readonly QuotaEntry[]) {
    const entries: QuotaEntry[] = []
    if (Array.isArray(source)) entries.push(...(source as readonly QuotaEntry[]))
    else {
      for (const t of (source as Pick<Config, 'tenants'>).tenants) {
        if (t.quota !== undefined) entries.push({ org: t.org, project: null, quota: t.quota })
        for (const p of t.projects) if (p.quota !== undefined) entries.push({ org: t.org, project: p.id, quota: p.quota })
      }
    }
    for (const e of entries) {
      if (e.project === null) this.byOrg.set(e.org, orgRule(e.org, e.quota))
      else this.byProject.set(`${e.org}/${e.project}`, projectRule(e.org, e.project, e.quota))
    }
  }

  get empty (): boolean { return this.byOrg.size === 0 && this.byProject.size === 0 }

  org (org: string): QuotaRule | undefined { return this.byOrg.get(org) }
  project (org: string, project: string): QuotaRule | undefined { return this.byProject.get(`${org}/${project}`) }

  /** The org's quota, then the project's, where set (the same array for the same pair). */
  for (org: string, project: string): QuotaRule[] {
    const k = `${org}/${project}`
    let rules = this.lists.get(k)
    if (rules === undefined) {
      rules = []
      const o = this.byOrg.get(org)
      if (o !== undefined) rules.push(o)
      const p = this.byProject.get(k)
      if (p !== undefined) rules.push(p)
      if (this.lists.size < 100_000) this.lists.set(k, rules)
    }
    return rules
  }
}
