import { hash, randomBytes } from 'node:crypto'
import type { Config } from '../../config/schema.js'
import { usdToNano } from '../gateway/money.js'
import type { ApiKey, KeySource } from './types.js'

// API keys and the config's tenants as both stores write them: keys stored as a SHA-256 hash with
// a short hint, config keys with an id derived from their hash (stable across restarts), and the
// plan a config's tenants make (organizations with their initial balance, projects, literal keys).

// one-shot hash(): half the cost of a Hash object, and auth hashes the key of every request
export const hashKey = (key: string): string => hash('sha256', key, 'hex')

/** A new secret key: `mg-` and 32 random bytes, base64url. Shown once, stored as a hash. */
export const generateKey = (): string => 'mg-' + randomBytes(32).toString('base64url')

export const newKeyId = (): string => 'key_' + randomBytes(8).toString('hex')

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
  source: KeySource
  created_at: number
  revoked_at: number | null
}

export function toApiKey (row: KeyRow): ApiKey {
  return {
    id: row.id,
    org: row.org_id,
    project: row.project_id,
    name: row.name,
    models: JSON.parse(row.models) as string[],
    passthrough: JSON.parse(row.passthrough) as string[],
    hint: row.hint,
    source: row.source,
    created_at: row.created_at,
    revoked: row.revoked_at !== null
  }
}

export interface ConfigKey { key: string, hash: string, org: string, project: string, name: string, models: string[], passthrough: string[] }

/** What the config's tenants ask of the store. */
export interface TenantPlan {
  /** Created with this balance when missing; an existing organization keeps its own. */
  orgs: Array<{ id: string, balanceNano: number }>
  projects: Array<{ org: string, id: string }>
  /** Present and current afterwards; config keys not listed here are revoked. */
  keys: ConfigKey[]
}

export function tenantPlan (config: Pick<Config, 'tenants'>): TenantPlan {
  const plan: TenantPlan = { orgs: [], projects: [], keys: [] }
  for (const tenant of config.tenants) {
    plan.orgs.push({ id: tenant.org, balanceNano: usdToNano(tenant.balance_usd) })
    for (const project of tenant.projects) {
      plan.projects.push({ org: tenant.org, id: project.id })
      for (const k of project.keys) {
        plan.keys.push({ key: k.key, hash: hashKey(k.key), org: tenant.org, project: project.id, name: k.name, models: k.models, passthrough: k.passthrough })
      }
    }
  }
  return plan
}

/**
 * What becomes of a config key given the row with its hash: inserted when there is none, brought
 * up to date (and unrevoked) when it is a config key, left alone when a key made otherwise has
 * the same secret. `id` is the key's id either way (kept from revocation).
 */
export function configKeyStep (existing: { id: string, source: string } | undefined, k: ConfigKey): { action: 'insert' | 'update' | 'keep', id: string } {
  if (existing === undefined) return { action: 'insert', id: configKeyId(k.hash) }
  return { action: existing.source === 'config' ? 'update' : 'keep', id: existing.id }
}

/** A key row for `secret` as `create` writes it. */
export function newKeyRow (spec: { org: string, project: string, models?: string[], passthrough?: string[], name?: string, source: KeySource }, secret: string, now: number): KeyRow {
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
    source: spec.source,
    created_at: now,
    revoked_at: null
  }
}
