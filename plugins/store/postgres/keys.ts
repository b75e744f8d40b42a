import { EventEmitter } from 'node:events'
import { timingSafeEqual } from 'node:crypto'
import type pg from 'pg'
import { configKeyStep, generateKey, hashKey, newKeyRow, toApiKey, type ConfigKey, type KeyRow } from '../tenants.js'
import type { ApiKey, KeyStore, NewKey } from '../types.js'
import type { Connection } from './db.js'

const INSERT = 'INSERT INTO api_keys (id, hash, hint, org_id, project_id, name, models, passthrough, source, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)'
const insertParams = (r: KeyRow): unknown[] => [r.id, r.hash, r.hint, r.org_id, r.project_id, r.name, r.models, r.passthrough, r.source, r.created_at]

/** API keys in PostgreSQL; a revocation is published on Redis, so every instance drops the key from its cache at once. */
export class KeyRepository implements KeyStore {
  private readonly revocations = new EventEmitter()

  constructor (private readonly conn: Connection) {
    conn.listen(conn.key('revoked'), (id) => { this.revocations.emit('revoked', id) })
  }

  async verify (secret: string): Promise<ApiKey | undefined> {
    const hash = hashKey(secret)
    const row = (await this.conn.q<KeyRow>('SELECT * FROM api_keys WHERE hash = $1', [hash])).rows[0]
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
    await this.conn.q(INSERT, insertParams(row))
    return { ...toApiKey(row), key: secret }
  }

  async revoke (id: string, now: number): Promise<boolean> {
    const done = ((await this.conn.q('UPDATE api_keys SET revoked_at = $1 WHERE id = $2 AND revoked_at IS NULL', [now, id])).rowCount ?? 0) > 0
    // every instance, this one included, hears it through the channel
    if (done) await this.published(id)
    return done
  }

  onRevoked (listener: (id: string) => void): void { this.revocations.on('revoked', listener) }

  /** Makes the config's literal keys present and current, inside the caller's transaction; returns the config keys it revoked. */
  async syncConfigKeys (client: pg.PoolClient, keys: ConfigKey[], now: number): Promise<string[]> {
    const wanted: string[] = []
    for (const k of keys) {
      const existing = (await client.query<{ id: string, source: string }>('SELECT id, source FROM api_keys WHERE hash = $1', [k.hash])).rows[0]
      const step = configKeyStep(existing, k)
      wanted.push(step.id)
      if (step.action === 'insert') await client.query(INSERT, insertParams(newKeyRow({ ...k, source: 'config' }, k.key, now)))
      else if (step.action === 'update') {
        await client.query('UPDATE api_keys SET org_id = $2, project_id = $3, name = $4, models = $5, passthrough = $6, revoked_at = NULL WHERE id = $1',
          [step.id, k.org, k.project, k.name, JSON.stringify(k.models), JSON.stringify(k.passthrough)])
      }
    }
    return (await client.query<{ id: string }>("UPDATE api_keys SET revoked_at = $1 WHERE source = 'config' AND revoked_at IS NULL AND NOT (id = ANY($2::text[])) RETURNING id", [now, wanted])).rows.map((r) => r.id)
  }

  /** Tells every instance that `id` was revoked. */
  async published (id: string): Promise<void> {
    await this.conn.r(async (redis) => await redis.publish(this.conn.key('revoked'), id))
  }

  close (): void { this.revocations.removeAllListeners() }
}
