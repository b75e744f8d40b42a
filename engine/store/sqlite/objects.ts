import type { ObjectOwner, ProviderObjectStore } from '../types.js'
import type { DB } from './db.js'
import type { GroupCommit } from './group-commit.js'

// Who made each object at a provider through pass-through: written with the turn's other writes
// before the answer that names the object goes out, read at once.

export class ProviderObjectRepository implements ProviderObjectStore {
  private readonly claimStmt
  private readonly ownedStmt
  private readonly forgetStmt

  constructor (db: DB, private readonly commit: GroupCommit) {
    this.claimStmt = db.prepare(`INSERT INTO passthrough_objects (provider, id, kind, org_id, project_id, created_at)
      VALUES (@provider, @id, @kind, @org, @project, @now) ON CONFLICT(provider, id) DO NOTHING`)
    this.ownedStmt = db.prepare<[string, string, string], { id: string }>('SELECT id FROM passthrough_objects WHERE provider = ? AND org_id = ? AND id IN (SELECT value FROM json_each(?))')
    this.forgetStmt = db.prepare('DELETE FROM passthrough_objects WHERE provider = ? AND id = ?')
  }

  claim (provider: string, objects: ReadonlyArray<{ kind: string, id: string }>, owner: ObjectOwner, now: number): Promise<void> | undefined {
    if (objects.length === 0) return undefined
    return this.commit.run(() => {
      for (const o of objects) this.claimStmt.run({ provider, id: o.id, kind: o.kind, org: owner.org, project: owner.project, now })
    })
  }

  owned (provider: string, org: string, ids: readonly string[]): Set<string> {
    if (ids.length === 0) return new Set()
    return new Set(this.ownedStmt.all(provider, org, JSON.stringify(ids)).map((r) => r.id))
  }

  forget (provider: string, id: string): Promise<void> {
    return this.commit.run(() => { this.forgetStmt.run(provider, id) })
  }
}
