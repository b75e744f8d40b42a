import type { Config, QuotaConfig } from '../../config/schema.js'
import { nanoToUsd, usdToNano } from './money.js'
import type { QuotaUsage } from '../store/types.js'

// Quotas as the tenants in the config set them: per organization and per project, in tokens or
// USD, per UTC minute, hour, day or month. Shared by the quota plugin (admission and counting)
// and the admin API and console (showing them).

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

/** Used and limit of a quota in its current window, as the admin API and console show them. */
export function quotaStatus (rule: QuotaRule, used: QuotaUsage, now: number): QuotaStatus {
  const w = quotaWindow(rule.quota.per, now)
  const tokens = 'tokens' in rule.quota
  return {
    limit: tokens ? String(limitOf(rule.quota)) : nanoToUsd(limitOf(rule.quota)),
    used: tokens ? String(used.tokens) : nanoToUsd(used.cost_nano),
    unit: tokens ? 'tokens' : 'usd',
    per: rule.quota.per,
    resets_at: new Date(w.end).toISOString()
  }
}

/** Every quota of the config, by organization and by `org/project`. */
export class QuotaRules {
  private readonly byOrg = new Map<string, QuotaRule>()
  private readonly byProject = new Map<string, QuotaRule>()

  constructor (config: Pick<Config, 'tenants'>) {
    for (const t of config.tenants) {
      if (t.quota !== undefined) this.byOrg.set(t.org, { scope: `org:${t.org}`, kind: 'organization', id: t.org, quota: t.quota })
      for (const p of t.projects) {
        if (p.quota !== undefined) this.byProject.set(`${t.org}/${p.id}`, { scope: `project:${t.org}/${p.id}`, kind: 'project', id: `${t.org}/${p.id}`, quota: p.quota })
      }
    }
  }

  get empty (): boolean { return this.byOrg.size === 0 && this.byProject.size === 0 }

  org (org: string): QuotaRule | undefined { return this.byOrg.get(org) }
  project (org: string, project: string): QuotaRule | undefined { return this.byProject.get(`${org}/${project}`) }

  /** The org's quota, then the project's, where set. */
  for (org: string, project: string): QuotaRule[] {
    const rules: QuotaRule[] = []
    const o = this.byOrg.get(org)
    if (o !== undefined) rules.push(o)
    const p = this.byProject.get(`${org}/${project}`)
    if (p !== undefined) rules.push(p)
    return rules
  }
}
