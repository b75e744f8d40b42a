import { EventEmitter } from 'node:events'
import { createHash, hash, randomBytes, timingSafeEqual } from 'node:crypto'
import type { DB } from './db.js'
import type { ApiKey, KeySource, KeyStore, NewKey } from '../types.js'

interface KeyRow {
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

// one-shot hash(): half the cost of a Hash object, and auth hashes the key of every request
export const hashKey = (key: string): string => hash('sha256', key, 'hex')

/** A new secret key: `mg-` and 32 random bytes, base64url. Shown once, stored as a hash. */
export const generateKey = (): string => 'mg-' + randomBytes(32).toString('base64url')

const newKeyId = (): string => 'key_' + randomBytes(8).toString('hex')
// Keys listed in the config keep the same id across restarts.
const configKeyId = (keyHash: string): string => 'key_' + createHash('sha256').update('config-key-id:' + keyHash).digest('hex').slice(0, 16)
const hintOf = (key: string): string => key.slice(0, 7) + '…'

function toApiKey (row: KeyRow): ApiKey {
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

export interface ConfigKey { key: string, org: string, project: string, name: string, models: string[], passthrough: string[] }

// How often a process looks for keys revoked by another process sharing the file.
const REVOCATION_POLL_MS = 500

export class KeyRepository implements KeyStore {
  private readonly byHash
  private readonly byId
  private readonly insert
  private readonly revokeStmt
  private readonly listStmt
  private readonly updateConfigKey
  private readonly configKeys
  private readonly revokedSince
  private readonly revocations = new EventEmitter()
  private poller: NodeJS.Timeout | null = null
  private lastSeen = Date.now()

  constructor (db: DB) {
    this.byHash = db.prepare<[string], KeyRow>('SELECT * FROM api_keys WHERE hash = ?')
    this.byId = db.prepare<[string], KeyRow>('SELECT * FROM api_keys WHERE id = ?')
    this.insert = db.prepare('INSERT INTO api_keys (id, hash, hint, org_id, project_id, name, models, passthrough, source, created_at) VALUES (@id, @hash, @hint, @org, @project, @name, @models, @passthrough, @source, @created_at)')
    this.revokeStmt = db.prepare('UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL')
    this.listStmt = db.prepare<{ org: string | null, project: string | null }, KeyRow>('SELECT * FROM api_keys WHERE (@org IS NULL OR org_id = @org) AND (@project IS NULL OR project_id = @project) ORDER BY created_at, id')
    this.updateConfigKey = db.prepare('UPDATE api_keys SET org_id = @org, project_id = @project, name = @name, models = @models, passthrough = @passthrough, revoked_at = NULL WHERE id = @id')
    this.configKeys = db.prepare<[], KeyRow>("SELECT * FROM api_keys WHERE source = 'config' AND revoked_at IS NULL")
    this.revokedSince = db.prepare<[number], { id: string, revoked_at: number }>('SELECT id, revoked_at FROM api_keys WHERE revoked_at IS NOT NULL AND revoked_at >= ?')
  }

  /** The active key whose hash matches, compared in constant time; undefined otherwise. */
  verify (key: string): ApiKey | undefined {
    const hash = hashKey(key)
    const row = this.byHash.get(hash)
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
    const hash = hashKey(secret)
    const id = spec.source === 'config' ? configKeyId(hash) : newKeyId()
    const row = {
      id, hash, hint: hintOf(secret), org: spec.org, project: spec.project, name: spec.name ?? '',
      models: JSON.stringify(spec.models ?? ['*']), passthrough: JSON.stringify(spec.passthrough ?? []), source: spec.source, created_at: now
    }
    this.insert.run(row)
    return { ...toApiKey({ ...row, org_id: spec.org, project_id: spec.project, revoked_at: null }), key: secret }
  }

  revoke (id: string, now: number): boolean {
    const done = this.revokeStmt.run(now, id).changes > 0
    if (done) this.revocations.emit('revoked', id)
    return done
  }

  onRevoked (listener: (id: string) => void): void {
    this.revocations.on('revoked', listener)
    if (this.poller !== null) return
    // other processes on the same file revoke too: their revocations are read from the table
    const seen = new Set<string>()
    this.poller = setInterval(() => {
      for (const r of this.revokedSince.all(this.lastSeen)) {
        if (seen.has(r.id)) continue
        seen.add(r.id)
        this.revocations.emit('revoked', r.id)
      }
      this.lastSeen = Math.max(this.lastSeen, Date.now() - REVOCATION_POLL_MS * 4)
      if (seen.size > 10_000) seen.clear()
    }, REVOCATION_POLL_MS)
    this.poller.unref()
  }

  /** Makes the config's literal keys present and current; config keys no longer listed are revoked. */
  syncConfigKeys (keys: ConfigKey[], now: number): void {
    const wanted = new Set<string>()
    for (const k of keys) {
      const hash = hashKey(k.key)
      const existing = this.byHash.get(hash)
      if (existing === undefined) {
        wanted.add(this.create({ ...k, source: 'config' }, now, k.key).id)
      } else {
        wanted.add(existing.id)
        if (existing.source === 'config') {
          this.updateConfigKey.run({ id: existing.id, org: k.org, project: k.project, name: k.name, models: JSON.stringify(k.models), passthrough: JSON.stringify(k.passthrough) })
        }
      }
    }
    for (const row of this.configKeys.all()) if (!wanted.has(row.id)) this.revoke(row.id, now)
  }

  close (): void {
    if (this.poller !== null) clearInterval(this.poller)
    this.revocations.removeAllListeners()
  }
}
