import type { Static } from '@sinclair/typebox'
import type { QuotaConfig } from '../../config/schema.js'
import { InvalidField, OrgNotFound } from '../../engine/kernel/errors.js'
import { NANO_PER_USD, nanoToUsd, parseUsd } from '../../engine/kernel/money.js'
import { budgetScope, budgetStatus, orgRule, projectRule, quotaStatus, quotaWindow, type QuotaRule } from '../../engine/gateway/quota-windows.js'
import type { ApiKey, KeyBudget, KeyLimits, Store } from '../../engine/store/types.js'
import type { Key, Org, Project, QuotaView } from './answers.js'
import type { Budget, Limits, Quota } from './schemas.js'

// What the admin API shows of organizations, projects and keys, and what it takes in: USD
// amounts read exactly, quotas and budgets in the store's terms.

const iso = (t: number): string => new Date(t).toISOString()
const isoOrNull = (t: number | null): string | null => t === null ? null : iso(t)

/** A USD amount of a request, in nano-dollars; `field` is named when it is not one. */
export function usdField (value: string | number, field: string, opts: { zero?: boolean } = {}): number {
  const nano = parseUsd(String(value))
  if (nano === undefined || nano < 0 || (nano === 0 && opts.zero !== true) || !Number.isSafeInteger(nano)) {
    throw new InvalidField({ field, reason: `${opts.zero === true ? 'an amount' : 'a positive amount'} in USD, at most 9 decimals` })
  }
  return nano
}

export function quotaOf (q: Static<typeof Quota>, field: string): QuotaConfig {
  if (q.tokens !== undefined) return { tokens: q.tokens, per: q.per }
  return { usd: usdField(q.usd as string | number, `${field}.usd`) / NANO_PER_USD, per: q.per }
}

export function budgetOf (b: Static<typeof Budget>, field: string): KeyBudget {
  return { nano: usdField(b.usd, `${field}.usd`), per: b.per }
}

/** The limits after a change: fields given set (null removes one), absent ones kept. */
export function mergedLimits (current: KeyLimits | null, change: Static<typeof Limits>): KeyLimits | null {
  const next: KeyLimits = { ...current }
  for (const k of ['rpm', 'tpm'] as const) {
    const v = change[k]
    if (v === null) delete next[k]
    else if (v !== undefined) next[k] = v
  }
  return next.rpm === undefined && next.tpm === undefined ? null : next
}

/** The views the admin routes answer with, read from `store` at `now()`. */
export function views (store: Store, now: () => number) {
  const quotaView = async (rule: QuotaRule | null): Promise<QuotaView | null> => {
    if (rule === null) return null
    const t = now()
    return { ...quotaStatus(rule, await store.quota.used(rule.scope, quotaWindow(rule.quota.per, t).start), t) }
  }

  const project = async (org: string, id: string, quota: QuotaConfig | null): Promise<Project> =>
    ({ id, quota: await quotaView(quota === null ? null : projectRule(org, id, quota)) })

  const org = async (id: string): Promise<Org> => {
    const o = await store.orgs.get(id)
    if (o === undefined) throw new OrgNotFound({ org: id })
    const projects = await store.orgs.projects(id)
    return {
      id,
      balance_usd: nanoToUsd(o.balance_nano),
      held_usd: nanoToUsd(o.held_nano),
      spent_usd: nanoToUsd(o.spent_nano),
      uncollected_usd: nanoToUsd(o.uncollected_nano),
      quota: await quotaView(o.quota === null ? null : orgRule(id, o.quota)),
      projects: await Promise.all(projects.map(async (p) => await project(id, p.id, p.quota)))
    }
  }

  const key = async (k: ApiKey): Promise<Key> => {
    let budget: QuotaView | null = null
    if (k.budget !== null) {
      const t = now()
      budget = { ...budgetStatus(k.budget, await store.quota.used(budgetScope(k.lineage), quotaWindow(k.budget.per, t).start), t) }
    }
    return {
      id: k.id,
      org: k.org,
      project: k.project,
      name: k.name,
      models: k.models,
      passthrough: k.passthrough,
      mcp: k.mcp,
      created_at: iso(k.created_at),
      expires_at: isoOrNull(k.expires_at),
      limits: k.limits === null ? null : { rpm: k.limits.rpm ?? null, tpm: k.limits.tpm ?? null },
      budget,
      last_used_at: isoOrNull(k.last_used_at),
      revoked: k.revoked,
      replaces: k.replaces
    }
  }

  return { org, project, key }
}
