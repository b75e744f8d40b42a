import type pg from 'pg'
import type { QuotaConfig } from '../../../config/schema.js'
import { nanoToUsd } from '../../kernel/money.js'
import type { ChangeFeed } from '../changes.js'
import { quotaOf, quotaText, tenantStep, type TenantPlan, type TenantRow } from '../tenants.js'
import type { Actor, NewOrg, OrgRow, OrgStore, ProjectRow, QuotaEntry, SyncMode, TenancyChange } from '../types.js'
import type { AuditRepository } from './audit.js'
import type { Connection } from './db.js'

type Stored<T> = Omit<T, 'quota'> & { quota: string | null }

const COLUMNS = 'id, balance_nano, held_nano, spent_nano, uncollected_nano, created_at, quota'
const org = (r: Stored<OrgRow>): OrgRow => ({ ...r, quota: quotaOf(r.quota) })
const project = (r: Stored<ProjectRow>): ProjectRow => ({ ...r, quota: quotaOf(r.quota) })
const LIVE_ORG = 'EXISTS (SELECT 1 FROM organizations o WHERE o.id = projects.org_id AND o.deleted_at IS NULL)'

export class OrgRepository implements OrgStore {
  constructor (private readonly conn: Connection, private readonly audit: AuditRepository, private readonly feed: ChangeFeed) {}

  async get (id: string): Promise<OrgRow | undefined> {
    const r = (await this.conn.q<Stored<OrgRow>>(`SELECT ${COLUMNS} FROM organizations WHERE id = $1 AND deleted_at IS NULL`, [id])).rows[0]
    return r === undefined ? undefined : org(r)
  }

  async list (): Promise<OrgRow[]> {
    return (await this.conn.q<Stored<OrgRow>>(`SELECT ${COLUMNS} FROM organizations WHERE deleted_at IS NULL ORDER BY id`)).rows.map(org)
  }

  async projects (orgId: string): Promise<ProjectRow[]> {
    return (await this.conn.q<Stored<ProjectRow>>('SELECT org_id, id, created_at, quota FROM projects WHERE org_id = $1 AND deleted_at IS NULL ORDER BY id', [orgId])).rows.map(project)
  }

  async quotas (): Promise<QuotaEntry[]> {
    const rows = (await this.conn.q<{ org: string, project: string | null, quota: string }>(`
      SELECT id AS org, NULL::text AS project, quota FROM organizations WHERE quota IS NOT NULL AND deleted_at IS NULL
      UNION ALL
      SELECT p.org_id, p.id, p.quota FROM projects p JOIN organizations o ON o.id = p.org_id
        WHERE p.quota IS NOT NULL AND p.deleted_at IS NULL AND o.deleted_at IS NULL`)).rows
    return rows.map((r) => ({ org: r.org, project: r.project, quota: JSON.parse(r.quota) as QuotaConfig }))
  }

  async credit (id: string, amountNano: number, now?: number, by?: Actor): Promise<boolean> {
    return await this.conn.tx(async (client) => {
      // a top-up pays what is uncollected first (every SET reads the row as it was)
      const paid = await client.query(`UPDATE organizations SET balance_nano = balance_nano + GREATEST($1 - uncollected_nano, 0),
        spent_nano = spent_nano + LEAST($1, uncollected_nano), uncollected_nano = GREATEST(uncollected_nano - $1, 0) WHERE id = $2 AND deleted_at IS NULL`, [amountNano, id])
      if ((paid.rowCount ?? 0) === 0) return false
      if (by !== undefined) await this.audit.insert(client, 'credits.add', id, id, { amount_usd: nanoToUsd(amountNano) }, by, now ?? Date.now())
      return true
    })
  }

  async create (o: NewOrg, now: number, by: Actor): Promise<boolean> {
    return await this.change({ kind: 'org', id: o.id }, async (client) => {
      const inserted = await client.query('INSERT INTO organizations (id, balance_nano, created_at, quota) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING', [o.id, o.balanceNano, now, quotaText(o.quota)])
      if ((inserted.rowCount ?? 0) === 0) return false
      await this.audit.insert(client, 'org.create', o.id, o.id, { balance_usd: nanoToUsd(o.balanceNano), quota: o.quota }, by, now)
      return true
    })
  }

  async setQuota (id: string, quota: QuotaConfig | null, now: number, by: Actor): Promise<boolean> {
    return await this.change({ kind: 'org', id }, async (client) => {
      if (((await client.query('UPDATE organizations SET quota = $1 WHERE id = $2 AND deleted_at IS NULL', [quotaText(quota), id])).rowCount ?? 0) === 0) return false
      await this.audit.insert(client, 'org.update', id, id, { quota }, by, now)
      return true
    })
  }

  async remove (id: string, now: number, by: Actor): Promise<boolean> {
    return await this.change({ kind: 'org', id }, async (client) => {
      if (((await client.query('UPDATE organizations SET deleted_at = $1 WHERE id = $2 AND deleted_at IS NULL', [now, id])).rowCount ?? 0) === 0) return false
      await this.audit.insert(client, 'org.delete', id, id, {}, by, now)
      return true
    })
  }

  async createProject (orgId: string, id: string, quota: QuotaConfig | null, now: number, by: Actor): Promise<'created' | 'exists' | 'no_org'> {
    let outcome: 'created' | 'exists' | 'no_org' = 'created'
    await this.change({ kind: 'project', org: orgId, id }, async (client) => {
      // the organization's row locked: it cannot be deleted under the new project
      if ((await client.query('SELECT 1 FROM organizations WHERE id = $1 AND deleted_at IS NULL FOR UPDATE', [orgId])).rowCount === 0) { outcome = 'no_org'; return false }
      const inserted = await client.query('INSERT INTO projects (org_id, id, created_at, quota) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING', [orgId, id, now, quotaText(quota)])
      if ((inserted.rowCount ?? 0) === 0) { outcome = 'exists'; return false }
      await this.audit.insert(client, 'project.create', `${orgId}/${id}`, orgId, { quota }, by, now)
      return true
    })
    return outcome
  }

  async setProjectQuota (orgId: string, id: string, quota: QuotaConfig | null, now: number, by: Actor): Promise<boolean> {
    return await this.change({ kind: 'project', org: orgId, id }, async (client) => {
      if (((await client.query(`UPDATE projects SET quota = $1 WHERE org_id = $2 AND id = $3 AND deleted_at IS NULL AND ${LIVE_ORG}`, [quotaText(quota), orgId, id])).rowCount ?? 0) === 0) return false
      await this.audit.insert(client, 'project.update', `${orgId}/${id}`, orgId, { quota }, by, now)
      return true
    })
  }

  async removeProject (orgId: string, id: string, now: number, by: Actor): Promise<boolean> {
    return await this.change({ kind: 'project', org: orgId, id }, async (client) => {
      if (((await client.query(`UPDATE projects SET deleted_at = $1 WHERE org_id = $2 AND id = $3 AND deleted_at IS NULL AND ${LIVE_ORG}`, [now, orgId, id])).rowCount ?? 0) === 0) return false
      await this.audit.insert(client, 'project.delete', `${orgId}/${id}`, orgId, {}, by, now)
      return true
    })
  }

  /** The plan's organizations (with their initial balance; an existing one keeps its own) and projects, present (a deleted one comes back) with the quotas it names, inside the caller's transaction. */
  /**
   * The plan's organizations and projects present, and (`apply`) with the quotas it names, inside
   * the caller's transaction; a deleted one stays deleted (warned of). Changes go to the audit log
   * as the config's.
   */
  async ensure (client: pg.PoolClient, plan: TenantPlan, now: number, mode: SyncMode, warnings: string[]): Promise<void> {
    for (const o of plan.orgs) {
      const row = (await client.query<TenantRow>('SELECT deleted_at, quota FROM organizations WHERE id = $1', [o.id])).rows[0]
      const step = tenantStep(row, o.quota, mode, `organization ${o.id}`)
      if (step.action === 'insert') {
        await client.query('INSERT INTO organizations (id, balance_nano, created_at, quota) VALUES ($1, $2, $3, $4) ON CONFLICT (id) DO NOTHING', [o.id, o.balanceNano, now, quotaText(o.quota)])
        await this.audit.insert(client, 'org.create', o.id, o.id, { balance_usd: nanoToUsd(o.balanceNano), quota: o.quota ?? null }, 'config', now)
      } else if (step.action === 'set-quota') {
        await client.query('UPDATE organizations SET quota = $1 WHERE id = $2', [step.quota, o.id])
        await this.audit.insert(client, 'org.update', o.id, o.id, { quota: o.quota }, 'config', now)
      } else if (step.warning !== undefined) warnings.push(step.warning)
    }
    for (const p of plan.projects) {
      const row = (await client.query<TenantRow>('SELECT deleted_at, quota FROM projects WHERE org_id = $1 AND id = $2', [p.org, p.id])).rows[0]
      const step = tenantStep(row, p.quota, mode, `project ${p.org}/${p.id}`)
      if (step.action === 'insert') {
        await client.query('INSERT INTO projects (org_id, id, created_at, quota) VALUES ($1, $2, $3, $4) ON CONFLICT (org_id, id) DO NOTHING', [p.org, p.id, now, quotaText(p.quota)])
        await this.audit.insert(client, 'project.create', `${p.org}/${p.id}`, p.org, { quota: p.quota ?? null }, 'config', now)
      } else if (step.action === 'set-quota') {
        await client.query('UPDATE projects SET quota = $1 WHERE org_id = $2 AND id = $3', [step.quota, p.org, p.id])
        await this.audit.insert(client, 'project.update', `${p.org}/${p.id}`, p.org, { quota: p.quota }, 'config', now)
      } else if (step.warning !== undefined) warnings.push(step.warning)
    }
  }

  /** Runs `write` in a transaction; when it returns true, every process hears `change` after the commit. */
  private async change (change: TenancyChange, write: (client: pg.PoolClient) => Promise<boolean>): Promise<boolean> {
    const done = await this.conn.tx(write)
    if (done) await this.feed.publish(change)
    return done
  }
}
