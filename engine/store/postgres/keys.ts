import { timingSafeEqual } from 'node:crypto'
import type pg from 'pg'
import type { ChangeFeed } from '../changes.js'
import {
  configKeyStep, generateKey, hashKey, KEY_COLUMNS, keyAuditDetail, newKeyRow, patchAuditDetail, patchColumns, rotatedKeySpec, toApiKey,
  type ConfigKey, type KeyRow
} from '../tenants.js'
import type { Actor, ApiKey, KeyPatch, KeyStore, NewKey, Rotation, SyncMode } from '../types.js'
import type { AuditRepository } from './audit.js'
import type { EndOfCallBatch } from './batch.js'
import type { Connection } from './db.js'

const INSERT = `INSERT INTO api_keys (${KEY_COLUMNS.join(', ')}) VALUES (${KEY_COLUMNS.map((_, i) => `$${i + 1}`).join(', ')})`
const insertParams = (r: KeyRow): unknown[] => KEY_COLUMNS.map((c) => r[c])

// a key of a deleted organization or project is no key
const VERIFY = `SELECT k.* FROM api_keys k
  JOIN projects p ON p.org_id = k.org_id AND p.id = k.project_id JOIN organizations o ON o.id = k.org_id
  WHERE k.hash = $1 AND p.deleted_at IS NULL AND o.deleted_at IS NULL`

/** `UPDATE api_keys SET ...` of the given columns, and its parameters (the id first). */
function updateOf (id: string, set: Partial<KeyRow>): [string, unknown[]] {
  const columns = Object.keys(set) as Array<keyof KeyRow>
  return [`UPDATE api_keys SET ${columns.map((c, i) => `${c} = $${i + 2}`).join(', ')} WHERE id = $1`, [id, ...columns.map((c) => set[c])]]
}

/** API keys in PostgreSQL; every change is told to every instance on the bus before it resolves. */
export class KeyRepository implements KeyStore {
  constructor (private readonly conn: Connection, private readonly batch: EndOfCallBatch, private readonly audit: AuditRepository, private readonly feed: ChangeFeed) {}

  async verify (secret: string): Promise<ApiKey | undefined> {
    const hash = hashKey(secret)
    const row = (await this.conn.q<KeyRow>(VERIFY, [hash])).rows[0]
    if (row === undefined || row.revoked_at !== null) return undefined
    if (!timingSafeEqual(Buffer.from(row.hash, 'hex'), Buffer.from(hash, 'hex'))) return undefined
    return toApiKey(row)
  }

  async get (id: string): Promise<ApiKey | undefined> {
    const row = (await this.conn.q<KeyRow>('SELECT * FROM api_keys WHERE id = $1', [id])).rows[0]
    return row === undefined ? undefined : toApiKey(row)
  }

  async list (org?: string, project?: string): Promise<ApiKey[]> {
    return (await this.conn.q<KeyRow>('SELECT * FROM api_keys WHERE ($1::text IS NULL OR org_id = $1) AND ($2::text IS NULL OR project_id = $2) ORDER BY created_at, id', [org ?? null, project ?? null])).rows.map(toApiKey)
  }

  async create (spec: NewKey, now: number, secret = generateKey()): Promise<ApiKey & { key: string }> {
    const row = newKeyRow(spec, secret, now)
    const key = toApiKey(row)
    await this.conn.tx(async (client) => {
      await client.query(INSERT, insertParams(row))
      if (spec.source !== 'config') await this.audit.insert(client, 'key.create', row.id, row.org_id, keyAuditDetail(key), spec.by ?? spec.source, now)
    })
    return { ...key, key: secret }
  }

  async update (id: string, patch: KeyPatch, now: number, by: Actor): Promise<ApiKey | undefined> {
    const set = patchColumns(patch)
    const updated = await this.conn.tx(async (client) => {
      const row = (await client.query<KeyRow>('SELECT * FROM api_keys WHERE id = $1 FOR UPDATE', [id])).rows[0]
      if (row === undefined || row.revoked_at !== null) return undefined
      if (Object.keys(set).length > 0) await client.query(...updateOf(id, set))
      await this.audit.insert(client, 'key.update', id, row.org_id, patchAuditDetail(patch), by, now)
      return toApiKey({ ...row, ...set })
    })
    if (updated !== undefined) await this.feed.publish({ kind: 'key', id })
    return updated
  }

  async rotate (id: string, oldValidUntil: number, now: number, by: Actor): Promise<Rotation | undefined> {
    const rotation = await this.conn.tx(async (client): Promise<Rotation | undefined> => {
      const row = (await client.query<KeyRow>('SELECT * FROM api_keys WHERE id = $1 FOR UPDATE', [id])).rows[0]
      if (row === undefined || row.revoked_at !== null) return undefined
      const old = toApiKey(row)
      const secret = generateKey()
      const fresh = newKeyRow(rotatedKeySpec(old, by), secret, now, { replaces: old.id, lineage: old.lineage })
      await client.query(INSERT, insertParams(fresh))
      const until = old.expires_at === null ? oldValidUntil : Math.min(old.expires_at, oldValidUntil)
      await client.query('UPDATE api_keys SET expires_at = $2 WHERE id = $1', [id, until])
      await this.audit.insert(client, 'key.rotate', id, row.org_id, { key_id: fresh.id, old_valid_until: new Date(until).toISOString() }, by, now)
      return { key: { ...toApiKey(fresh), key: secret }, old: { ...old, expires_at: until } }
    })
    if (rotation !== undefined) await this.feed.publish({ kind: 'key', id })
    return rotation
  }

  async revoke (id: string, now: number, by?: Actor): Promise<boolean> {
    const done = await this.conn.tx(async (client) => {
      const revoked = (await client.query<{ org_id: string }>('UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL RETURNING org_id', [now, id])).rows[0]
      if (revoked === undefined) return false
      if (by !== undefined) await this.audit.insert(client, 'key.revoke', id, revoked.org_id, {}, by, now)
      return true
    })
    if (done) await this.feed.publish({ kind: 'key', id })
    return done
  }

  touch (id: string, at: number): void {
    this.batch.touchLater(id, at)
  }

  /**
   * Makes the config's literal keys present and (`apply`) current, inside the caller's
   * transaction; when applying, config keys no longer listed are revoked. A revoked key stays
   * revoked. Changes go to the audit log as the config's.
   */
  async syncConfigKeys (client: pg.PoolClient, keys: ConfigKey[], now: number, mode: SyncMode, warnings: string[]): Promise<void> {
    const wanted: string[] = []
    for (const k of keys) {
      const existing = (await client.query<KeyRow>('SELECT * FROM api_keys WHERE hash = $1', [k.hash])).rows[0]
      const step = configKeyStep(existing, k, mode)
      wanted.push(step.id)
      if (step.action === 'insert') {
        const row = newKeyRow({ ...k, source: 'config' }, k.key, now)
        await client.query(INSERT, insertParams(row))
        await this.audit.insert(client, 'key.create', row.id, row.org_id, keyAuditDetail(toApiKey(row)), 'config', now)
      } else if (step.action === 'update') {
        await client.query(...updateOf(step.id, step.set))
        await this.audit.insert(client, 'key.update', step.id, k.org, step.detail, 'config', now)
      } else if (step.warning !== undefined) warnings.push(step.warning)
    }
    if (mode !== 'apply') return
    const gone = await client.query<{ id: string, org_id: string }>("UPDATE api_keys SET revoked_at = $1 WHERE source = 'config' AND revoked_at IS NULL AND NOT (id = ANY($2::text[])) RETURNING id, org_id", [now, wanted])
    for (const r of gone.rows) await this.audit.insert(client, 'key.revoke', r.id, r.org_id, { reason: 'no longer in the config' }, 'config', now)
  }
}
