import type { ObjectOwner, ProviderObjectStore } from '../types.js'
import type { Connection } from './db.js'

// Who made each object at a provider through pass-through, shared by every instance.

export class ProviderObjectRepository implements ProviderObjectStore {
  constructor (private readonly conn: Connection) {}

  async claim (provider: string, objects: ReadonlyArray<{ kind: string, id: string }>, owner: ObjectOwner, now: number): Promise<void> {
    if (objects.length === 0) return
    await this.conn.q(`INSERT INTO passthrough_objects (provider, id, kind, org_id, project_id, created_at)
      SELECT $1, o.id, o.kind, $4, $5, $6 FROM unnest($2::text[], $3::text[]) AS o(id, kind)
      ON CONFLICT (provider, id) DO NOTHING`, [provider, objects.map((o) => o.id), objects.map((o) => o.kind), owner.org, owner.project, now])
  }

  async owned (provider: string, org: string, ids: readonly string[]): Promise<Set<string>> {
    if (ids.length === 0) return new Set()
    const { rows } = await this.conn.q<{ id: string }>('SELECT id FROM passthrough_objects WHERE provider = $1 AND org_id = $2 AND id = ANY($3::text[])', [provider, org, ids])
    return new Set(rows.map((r) => r.id))
  }

  async forget (provider: string, id: string): Promise<void> {
    await this.conn.q('DELETE FROM passthrough_objects WHERE provider = $1 AND id = $2', [provider, id])
  }
}
