import { timingSafeEqual } from 'node:crypto'
import type { Statement } from 'better-sqlite3'
import type { DB } from './db.js'
import type { AuditRepository } from './audit.js'
import type { ChangeLog } from './changes.js'
import type { GroupCommit } from './group-commit.js'
import {
  configKeyStep, generateKey, hashKey, KEY_COLUMNS, keyAuditDetail, newKeyRow, patchAuditDetail, patchColumns, rotatedKeySpec, toApiKey,
  type ConfigKey, type KeyRow
} from '../tenants.js'
import type { Actor, ApiKey, KeyPatch, KeyStore, NewKey, Rotation, SyncMode } from '../types.js'

export class KeyRepository implements KeyStore {
  private readonly byHash
  private readonly liveByHash
  private readonly byId
  private readonly insert
  private readonly revokeStmt
  private readonly listStmt
  private readonly configKeys
  private readonly expireStmt
  private readonly touchStmt
  /** UPDATE statements by the columns they set. */
  private readonly updates = new Map<string, Statement<Record<string, unknown>, unknown>>()

  constructor (private readonly db: DB, private readonly commit: GroupCommit, private readonly audit: AuditRepository, private readonly changes: ChangeLog) {
    this.byHash = db.prepare<[string], KeyRow>('SELECT * FROM api_keys WHERE hash = ?')
    // a key of a deleted organization or project is no key
    this.liveByHash = db.prepare<[string], KeyRow>(`SELECT k.* FROM api_keys k
      JOIN projects p ON p.org_id = k.org_id AND p.id = k.project_id JOIN organizations o ON o.id = k.org_id
      WHERE k.hash = ? AND p.deleted_at IS NULL AND o.deleted_at IS NULL`)
    this.byId = db.prepare<[string], KeyRow>('SELECT * FROM api_keys WHERE id = ?')
    this.insert = db.prepare<KeyRow>(`INSERT INTO api_keys (${KEY_COLUMNS.join(', ')}) VALUES (${KEY_COLUMNS.map((c) => `@${c}`).join(', ')})`)
    this.revokeStmt = db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL')
    this.listStmt = db.prepare<{ org: string | null, project: string | null }, KeyRow>('SELECT * FROM api_keys WHERE (@org IS NULL OR org_id = @org) AND (@project IS NULL OR project_id = @project) ORDER BY created_at, id')
    this.configKeys = db.prepare<[], KeyRow>("SELECT * FROM api_keys WHERE source = 'config' AND revoked_at IS NULL")
    this.expireStmt = db.prepare('UPDATE api_keys SET expires_at = ? WHERE id = ?')
    this.touchStmt = db.prepare('UPDATE api_keys SET last_used_at = @at WHERE id = @id AND (last_used_at IS NULL OR last_used_at < @at)')
  }

  /** The active key whose hash matches, compared in constant time; undefined otherwise. */
  verify (key: string): ApiKey | undefined {
    const hash = hashKey(key)
    const row = this.liveByHash.get(hash)
    if (row === undefined || row.revoked_at !== null) return undefined
    if (!timingSafeEqual(Buffer.from(row.hash, 'hex'), Buffer.from(hash, 'hex'))) return undefined
    return toApiKey(row)
  }

  get (id: string): ApiKey | undefined {
    const row = this.byId.get(id)
    return row === undefined ? undefined : toApiKey(row)
  }

  list (org?: string, project?: string): ApiKey[] {
    return this.listStmt.all({ org: org ?? null, project: project ?? null }).map(toApiKey)
  }

  create (spec: NewKey, now: number, secret = generateKey()): ApiKey & { key: string } {
    const row = newKeyRow(spec, secret, now)
    const key = toApiKey(row)
    this.db.transaction(() => {
      this.insert.run(row)
      if (spec.source !== 'config') this.audit.insert('key.create', row.id, row.org_id, keyAuditDetail(key), spec.by ?? spec.source, now)
    }).immediate()
    return { ...key, key: secret }
  }

  async update (id: string, patch: KeyPatch, now: number, by: Actor): Promise<ApiKey | undefined> {
    const set = patchColumns(patch)
    const updated = this.db.transaction(() => {
      const row = this.byId.get(id)
      if (row === undefined || row.revoked_at !== null) return undefined
      if (Object.keys(set).length > 0) this.setColumns(id, set)
      this.audit.insert('key.update', id, row.org_id, patchAuditDetail(patch), by, now)
      this.changes.write({ kind: 'key', id }, now)
      return this.get(id)
    }).immediate()
    if (updated !== undefined) await this.changes.publish({ kind: 'key', id })
    return updated
  }

  async rotate (id: string, oldValidUntil: number, now: number, by: Actor): Promise<Rotation | undefined> {
    const rotation = this.db.transaction((): Rotation | undefined => {
      const row = this.byId.get(id)
      if (row === undefined || row.revoked_at !== null) return undefined
      const old = toApiKey(row)
      const secret = generateKey()
      const fresh = newKeyRow(rotatedKeySpec(old, by), secret, now, { replaces: old.id, lineage: old.lineage })
      this.insert.run(fresh)
      const until = old.expires_at === null ? oldValidUntil : Math.min(old.expires_at, oldValidUntil)
      this.expireStmt.run(until, id)
      this.audit.insert('key.rotate', id, row.org_id, { key_id: fresh.id, old_valid_until: new Date(until).toISOString() }, by, now)
      this.changes.write({ kind: 'key', id }, now)
      return { key: { ...toApiKey(fresh), key: secret }, old: { ...old, expires_at: until } }
    }).immediate()
    if (rotation !== undefined) await this.changes.publish({ kind: 'key', id })
    return rotation
  }

  async revoke (id: string, now: number, by?: Actor): Promise<boolean> {
    const done = this.db.transaction(() => {
      const org = this.byId.get(id)?.org_id ?? null
      if (this.revokeStmt.run(now, id).changes === 0) return false
      if (by !== undefined) this.audit.insert('key.revoke', id, org, {}, by, now)
      this.changes.write({ kind: 'key', id }, now)
      return true
    }).immediate()
    if (done) await this.changes.publish({ kind: 'key', id })
    return done
  }

  touch (id: string, at: number): void {
    this.commit.later(() => { this.touchStmt.run({ id, at }) })
  }

  /**
   * Makes the config's literal keys present and (`apply`) current, inside the caller's
   * transaction; when applying, config keys no longer listed are revoked. A revoked key stays
   * revoked. Changes go to the audit log as the config's.
   */
  syncConfigKeys (keys: ConfigKey[], now: number, mode: SyncMode, warnings: string[]): void {
    const wanted = new Set<string>()
    for (const k of keys) {
      const step = configKeyStep(this.byHash.get(k.hash), k, mode)
      wanted.add(step.id)
      if (step.action === 'insert') {
        const row = newKeyRow({ ...k, source: 'config' }, k.key, now)
        this.insert.run(row)
        this.audit.insert('key.create', row.id, row.org_id, keyAuditDetail(toApiKey(row)), 'config', now)
      } else if (step.action === 'update') {
        this.setColumns(step.id, step.set)
        this.audit.insert('key.update', step.id, k.org, step.detail, 'config', now)
      } else if (step.warning !== undefined) warnings.push(step.warning)
    }
    if (mode !== 'apply') return
    for (const row of this.configKeys.all()) {
      if (wanted.has(row.id)) continue
      this.revokeStmt.run(now, row.id)
      this.audit.insert('key.revoke', row.id, row.org_id, { reason: 'no longer in the config' }, 'config', now)
    }
  }

  private setColumns (id: string, set: Partial<KeyRow>): void {
    const columns = Object.keys(set).sort()
    const shape = columns.join(',')
    let stmt = this.updates.get(shape)
    if (stmt === undefined) {
      stmt = this.db.prepare<Record<string, unknown>, unknown>(`UPDATE api_keys SET ${columns.map((c) => `${c} = @${c}`).join(', ')} WHERE id = @id`)
      this.updates.set(shape, stmt)
    }
    stmt.run({ ...set, id })
  }
}
