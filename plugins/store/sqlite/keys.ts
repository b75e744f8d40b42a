import { EventEmitter } from 'node:events'
import { timingSafeEqual } from 'node:crypto'
import type { DB } from './db.js'
import { configKeyStep, generateKey, hashKey, newKeyRow, toApiKey, type ConfigKey, type KeyRow } from '../tenants.js'
import type { ApiKey, KeyStore, NewKey } from '../types.js'

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
    this.insert = db.prepare<KeyRow>('INSERT INTO api_keys (id, hash, hint, org_id, project_id, name, models, passthrough, source, created_at) VALUES (@id, @hash, @hint, @org_id, @project_id, @name, @models, @passthrough, @source, @created_at)')
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
    const row = newKeyRow(spec, secret, now)
    this.insert.run(row)
    return { ...toApiKey(row), key: secret }
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
      const step = configKeyStep(this.byHash.get(k.hash), k)
      wanted.add(step.id)
      if (step.action === 'insert') this.create({ ...k, source: 'config' }, now, k.key)
      else if (step.action === 'update') this.updateConfigKey.run({ id: step.id, org: k.org, project: k.project, name: k.name, models: JSON.stringify(k.models), passthrough: JSON.stringify(k.passthrough) })
    }
    for (const row of this.configKeys.all()) if (!wanted.has(row.id)) this.revoke(row.id, now)
  }

  close (): void {
    if (this.poller !== null) clearInterval(this.poller)
    this.revocations.removeAllListeners()
  }
}
