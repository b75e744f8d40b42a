import { hash, randomBytes } from 'node:crypto'
import type { Config, QuotaConfig } from '../../config/schema.js'
import { nanoToUsd, usdToNano } from '../kernel/money.js'
import { actorKind, type Actor, type ApiKey, type AuditRow, type Identity, type KeyBudget, type KeyLimits, type KeyPatch, type KeySource, type NewKey, type QuotaPer, type SyncMode, type TenancyChange } from './types.js'

// API keys and tenants as both stores write them: keys stored as a SHA-256 hash with a short hint,
// config keys with an id derived from their hash (stable across restarts), the plan a config's
// tenants make (organizations with their initial balance, projects, quotas, literal keys), and
// what the audit log says of a change.

// one-shot hash(): half the cost of a Hash object, and auth hashes the key of every request
export const hashKey = (key: string): string => hash('sha256', key, 'hex')

/** A new secret key: `mg-` and 32 random bytes, base64url. Shown once, stored as a hash. */
export const generateKey = (): string => 'mg-' + randomBytes(32).toString('base64url')

export const newKeyId = (): string => 'key_' + randomBytes(8).toString('hex')

let auditSeq = 0

/** Ordered by time, then by this process's sequence: the log reads in the order its lines were written. */
export const newAuditId = (now: number): string =>
  'aud_' + Math.max(0, Math.floor(now)).toString(16).padStart(12, '0') + (auditSeq++ % 0x100000000).toString(16).padStart(8, '0') + randomBytes(3).toString('hex')

/** Keys listed in the config keep the same id across restarts. */
export const configKeyId = (keyHash: string): string => 'key_' + hashKey('config-key-id:' + keyHash).slice(0, 16)

export const hintOf = (key: string): string => key.slice(0, 7) + '…'

/** An `api_keys` row as both stores hold it (models and passthrough as JSON arrays). */
export interface KeyRow {
  id: string
  hash: string
  hint: string
  org_id: string
  project_id: string
  name: string
  models: string
  passthrough: string
  mcp: string
  source: KeySource
  created_at: number
  revoked_at: number | null
  expires_at: number | null
  rpm: number | null
  tpm: number | null
  budget_nano: number | null
  budget_per: string | null
  last_used_at: number | null
  replaces: string | null
  lineage: string | null
}

/** The columns a new key row is inserted with, in order. */
export const KEY_COLUMNS = ['id', 'hash', 'hint', 'org_id', 'project_id', 'name', 'models', 'passthrough', 'mcp', 'source', 'created_at',
  'expires_at', 'rpm', 'tpm', 'budget_nano', 'budget_per', 'replaces', 'lineage'] as const satisfies ReadonlyArray<keyof KeyRow>

export function toApiKey (row: KeyRow): ApiKey {
  return {
    id: row.id,
    org: row.org_id,
    project: row.project_id,
    name: row.name,
    models: JSON.parse(row.models) as string[],
    passthrough: JSON.parse(row.passthrough) as string[],
    mcp: JSON.parse(row.mcp) as string[],
    hint: row.hint,
    source: row.source,
    created_at: row.created_at,
    revoked: row.revoked_at !== null,
    expires_at: row.expires_at,
    limits: row.rpm === null && row.tpm === null ? null : { ...(row.rpm === null ? {} : { rpm: row.rpm }), ...(row.tpm === null ? {} : { tpm: row.tpm }) },
    budget: row.budget_nano === null || row.budget_per === null ? null : { nano: row.budget_nano, per: row.budget_per as QuotaPer },
    last_used_at: row.last_used_at,
    replaces: row.replaces,
    lineage: row.lineage ?? row.id
  }
}

/** The columns a key's limits and budget are stored in. */
export function limitColumns (limits: KeyLimits | null | undefined, budget: KeyBudget | null | undefined): Pick<KeyRow, 'rpm' | 'tpm' | 'budget_nano' | 'budget_per'> {
  return { rpm: limits?.rpm ?? null, tpm: limits?.tpm ?? null, budget_nano: budget?.nano ?? null, budget_per: budget?.per ?? null }
}

/** A key row for `secret` as `create` writes it. */
export function newKeyRow (spec: NewKey, secret: string, now: number, line: { replaces: string, lineage: string } | null = null): KeyRow {
  const keyHash = hashKey(secret)
  return {
    id: spec.source === 'config' ? configKeyId(keyHash) : newKeyId(),
    hash: keyHash,
    hint: hintOf(secret),
    org_id: spec.org,
    project_id: spec.project,
    name: spec.name ?? '',
    models: JSON.stringify(spec.models ?? ['*']),
    passthrough: JSON.stringify(spec.passthrough ?? []),
    mcp: JSON.stringify(spec.mcp ?? []),
    source: spec.source,
    created_at: now,
    revoked_at: null,
    expires_at: spec.expires_at ?? null,
    ...limitColumns(spec.limits, spec.budget),
    last_used_at: null,
    replaces: line?.replaces ?? null,
    lineage: line?.lineage ?? null
  }
}

/** The key a rotation makes: the old one's grants, limits, budget and expiry, counted in its line. */
export function rotatedKeySpec (old: ApiKey, by: Actor): NewKey {
  return { org: old.org, project: old.project, name: old.name, models: old.models, passthrough: old.passthrough, mcp: old.mcp, source: actorKind(by), expires_at: old.expires_at, limits: old.limits, budget: old.budget }
}

/** The columns a patch sets, with their new values (absent: kept). */
export function patchColumns (patch: KeyPatch): Partial<KeyRow> {
  const set: Partial<KeyRow> = {}
  if (patch.models !== undefined) set.models = JSON.stringify(patch.models)
  if (patch.passthrough !== undefined) set.passthrough = JSON.stringify(patch.passthrough)
  if (patch.mcp !== undefined) set.mcp = JSON.stringify(patch.mcp)
  if (patch.name !== undefined) set.name = patch.name
  if (patch.expires_at !== undefined) set.expires_at = patch.expires_at
  if (patch.limits !== undefined) { set.rpm = patch.limits?.rpm ?? null; set.tpm = patch.limits?.tpm ?? null }
  if (patch.budget !== undefined) { set.budget_nano = patch.budget?.nano ?? null; set.budget_per = patch.budget?.per ?? null }
  return set
}

export interface ConfigKey {
  key: string
  hash: string
  org: string
  project: string
  name: string
  models: string[]
  passthrough: string[]
  mcp: string[]
  /** undefined: the config does not name it (the stored value is kept). */
  expires_at?: number | null
  limits?: KeyLimits | null
  budget?: KeyBudget | null
}

/** What the config's tenants ask of the store; an undefined quota is one the config does not name. */
export interface TenantPlan {
  /** Created with this balance when missing; an existing organization keeps its own. */
  orgs: Array<{ id: string, balanceNano: number, quota?: QuotaConfig }>
  projects: Array<{ org: string, id: string, quota?: QuotaConfig }>
  /** Present and current afterwards; config keys not listed here are revoked. */
  keys: ConfigKey[]
}

export function tenantPlan (config: Pick<Config, 'tenants'>): TenantPlan {
  const plan: TenantPlan = { orgs: [], projects: [], keys: [] }
  for (const tenant of config.tenants) {
    plan.orgs.push({ id: tenant.org, balanceNano: usdToNano(tenant.balance_usd), quota: tenant.quota })
    for (const project of tenant.projects) {
      plan.projects.push({ org: tenant.org, id: project.id, quota: project.quota })
      for (const k of project.keys) {
        plan.keys.push({
          key: k.key,
          hash: hashKey(k.key),
          org: tenant.org,
          project: project.id,
          name: k.name,
          models: k.models,
          passthrough: k.passthrough,
          mcp: k.mcp,
          ...(k.expires_at === undefined ? {} : { expires_at: Date.parse(k.expires_at) }),
          ...(k.limits === undefined ? {} : { limits: k.limits }),
          ...(k.budget === undefined ? {} : { budget: { nano: usdToNano(k.budget.usd), per: k.budget.per } })
        })
      }
    }
  }
  return plan
}

/** What a config key sets on its row: the fields it always has, and those it names. */
export function configKeyColumns (k: ConfigKey): Partial<KeyRow> {
  return { org_id: k.org, project_id: k.project, ...patchColumns({ name: k.name, models: k.models, passthrough: k.passthrough, mcp: k.mcp, expires_at: k.expires_at, limits: k.limits, budget: k.budget }) }
}

export type KeyStep =
  | { action: 'insert', id: string }
  | { action: 'update', id: string, set: Partial<KeyRow>, detail: Record<string, unknown> }
  | { action: 'keep', id: string, warning?: string }

/**
 * What becomes of a config key given the row with its hash: inserted when there is none; left
 * alone when a key made otherwise has the same secret, or when it was revoked (a revocation is
 * final: the file cannot bring a key back); otherwise, when applying, brought to what the file
 * says (`set`: the columns that differ, `detail`: for the audit log).
 */
export function configKeyStep (existing: KeyRow | undefined, k: ConfigKey, mode: SyncMode): KeyStep {
  if (existing === undefined) return { action: 'insert', id: configKeyId(k.hash) }
  if (existing.source !== 'config') return { action: 'keep', id: existing.id }
  if (existing.revoked_at !== null) {
    return { action: 'keep', id: existing.id, warning: `the config lists key ${existing.id} (${existing.hint}) of ${k.org}/${k.project}, which was revoked: it stays revoked; remove it from the file` }
  }
  if (mode === 'missing') return { action: 'keep', id: existing.id }
  const wanted = configKeyColumns(k)
  const set: Partial<KeyRow> = {}
  for (const [column, value] of Object.entries(wanted) as Array<[keyof KeyRow, unknown]>) {
    if (existing[column] !== value) (set as Record<string, unknown>)[column] = value
  }
  if (Object.keys(set).length === 0) return { action: 'keep', id: existing.id }
  return { action: 'update', id: existing.id, set, detail: Object.fromEntries(Object.keys(set).map((c) => [c, c === 'models' || c === 'passthrough' ? JSON.parse(set[c as 'models'] as string) : set[c as keyof KeyRow]])) }
}

/** A tenant (organization or project) as the store holds it, for a sync. */
export interface TenantRow { deleted_at: number | null, quota: string | null }

export type TenantStep = { action: 'insert' } | { action: 'set-quota', quota: string | null } | { action: 'keep', warning?: string }

/**
 * What becomes of a tenant the config names: created when missing; a deleted one stays deleted
 * (a deletion is final, as a revocation is); otherwise, when applying, given the quota the file
 * names (a quota it does not name is the store's).
 */
export function tenantStep (existing: TenantRow | undefined, quota: QuotaConfig | undefined, mode: SyncMode, what: string): TenantStep {
  if (existing === undefined) return { action: 'insert' }
  if (existing.deleted_at !== null) return { action: 'keep', warning: `the config lists ${what}, which was deleted: it stays deleted; remove it from the file` }
  if (mode === 'missing' || quota === undefined) return { action: 'keep' }
  const text = quotaText(quota)
  return text === existing.quota ? { action: 'keep' } : { action: 'set-quota', quota: text }
}

/** A quota as stored (JSON text) and back. */
export const quotaText = (q: QuotaConfig | null | undefined): string | null => q === null || q === undefined ? null : JSON.stringify(q)
export const quotaOf = (text: string | null): QuotaConfig | null => text === null ? null : JSON.parse(text) as QuotaConfig

// What the audit log says of a change: ids, names and settings, never a secret.

const iso = (t: number | null): string | null => t === null ? null : new Date(t).toISOString()
const budgetView = (b: KeyBudget | null): Record<string, unknown> | null => b === null ? null : { usd: nanoToUsd(b.nano), per: b.per }

export function keyAuditDetail (k: ApiKey): Record<string, unknown> {
  return { org: k.org, project: k.project, name: k.name, models: k.models, passthrough: k.passthrough, mcp: k.mcp, expires_at: iso(k.expires_at), limits: k.limits, budget: budgetView(k.budget) }
}

export function patchAuditDetail (patch: KeyPatch): Record<string, unknown> {
  const d: Record<string, unknown> = {}
  if (patch.models !== undefined) d.models = patch.models
  if (patch.passthrough !== undefined) d.passthrough = patch.passthrough
  if (patch.mcp !== undefined) d.mcp = patch.mcp
  if (patch.name !== undefined) d.name = patch.name
  if (patch.expires_at !== undefined) d.expires_at = iso(patch.expires_at)
  if (patch.limits !== undefined) d.limits = patch.limits
  if (patch.budget !== undefined) d.budget = budgetView(patch.budget)
  return d
}

/**
 * An audit_log row as both stores hold it (detail and identity as JSON text; identity null for a
 * change without one; org_id the organization the line is about, null for the gateway's own).
 */
export interface AuditRecord { id: string, at: number, action: string, target: string, org_id: string | null, actor: string, identity: string | null, detail: string }

export const toAuditRow = (r: AuditRecord): AuditRow => ({
  id: r.id,
  at: r.at,
  action: r.action,
  target: r.target,
  org: r.org_id,
  actor: r.actor as AuditRow['actor'],
  identity: r.identity === null ? null : JSON.parse(r.identity) as Identity,
  detail: JSON.parse(r.detail) as Record<string, unknown>
})

/** Only the fields of an identity, in a fixed order: nothing a caller added to it is written. */
function identityText (by: Actor): string | null {
  if (typeof by === 'string') return null
  return JSON.stringify(by.kind === 'sso' ? { kind: 'sso', sub: by.sub, email: by.email } : { kind: 'token', name: by.name })
}

export function auditRecord (action: string, target: string, org: string | null, detail: Record<string, unknown>, by: Actor, now: number): AuditRecord {
  return { id: newAuditId(now), at: now, action, target, org_id: org, actor: actorKind(by), identity: identityText(by), detail: JSON.stringify(detail) }
}

/** A change heard from another process, checked. */
export function asChange (m: Record<string, unknown>): TenancyChange | undefined {
  if (m.kind === 'tenants') return { kind: 'tenants' }
  if ((m.kind === 'key' || m.kind === 'org') && typeof m.id === 'string') return { kind: m.kind, id: m.id }
  if (m.kind === 'project' && typeof m.org === 'string' && typeof m.id === 'string') return { kind: 'project', org: m.org, id: m.id }
  return undefined
}
