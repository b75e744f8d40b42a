import type pg from 'pg'
import type { TenantPlan } from '../tenants.js'
import type { OrgRow, OrgStore, ProjectRow } from '../types.js'
import type { Connection } from './db.js'

export class OrgRepository implements OrgStore {
  constructor (private readonly conn: Connection) {}

  async get (id: string): Promise<OrgRow | undefined> {
    return (await this.conn.q<OrgRow>('SELECT id, balance_nano, held_nano, spent_nano, created_at FROM organizations WHERE id = $1', [id])).rows[0]
  }

  async list (): Promise<OrgRow[]> {
    return (await this.conn.q<OrgRow>('SELECT id, balance_nano, held_nano, spent_nano, created_at FROM organizations ORDER BY id')).rows
  }

  async projects (org: string): Promise<ProjectRow[]> {
    return (await this.conn.q<ProjectRow>('SELECT org_id, id, created_at FROM projects WHERE org_id = $1 ORDER BY id', [org])).rows
  }

  async credit (id: string, amountNano: number): Promise<boolean> {
    return ((await this.conn.q('UPDATE organizations SET balance_nano = balance_nano + $1 WHERE id = $2', [amountNano, id])).rowCount ?? 0) > 0
  }

  /** Creates the plan's organizations (with their initial balance; an existing one keeps its own) and projects, inside the caller's transaction. */
  async ensure (client: pg.PoolClient, plan: TenantPlan, now: number): Promise<void> {
    for (const org of plan.orgs) await client.query('INSERT INTO organizations (id, balance_nano, created_at) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING', [org.id, org.balanceNano, now])
    for (const p of plan.projects) await client.query('INSERT INTO projects (org_id, id, created_at) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [p.org, p.id, now])
  }
}
