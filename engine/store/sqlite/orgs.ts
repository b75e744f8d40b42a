import type { QuotaConfig } from '../../../config/schema.js'
import type { DB } from './db.js'
import type { AuditRepository } from './audit.js'
import type { ChangeLog } from './changes.js'
import { quotaOf, quotaText, tenantStep, type TenantPlan, type TenantRow } from '../tenants.js'
import { nanoToUsd } from '../../kernel/money.js'
import type { Actor, NewOrg, OrgRow, OrgStore, ProjectRow, QuotaEntry, SyncMode, TenancyChange } from '../types.js'

type Stored<T> = Omit<T, 'quota'> & { quota: string | null }

const org = (r: Stored<OrgRow>): OrgRow => ({ ...r, quota: quotaOf(r.quota) })
const project = (r: Stored<ProjectRow>): ProjectRow => ({ ...r, quota: quotaOf(r.quota) })

export class OrgRepository implements OrgStore {
  private readonly getStmt
  private readonly existsStmt
  private readonly insertStmt
  private readonly projectsStmt
  private readonly projectExistsStmt
  private readonly insertProjectStmt
  private readonly creditStmt
  private readonly listStmt
  private readonly quotasStmt
  private readonly setQuotaStmt
  private readonly removeStmt
  private readonly setProjectQuotaStmt
  private readonly removeProjectStmt
  private readonly rowStmt
  private readonly projectRowStmt

  constructor (private readonly db: DB, private readonly audit: AuditRepository, private readonly changes: ChangeLog) {
    const columns = 'id, balance_nano, held_nano, spent_nano, uncollected_nano, created_at, quota'
    this.getStmt = db.prepare<[string], Stored<OrgRow>>(`SELECT ${columns} FROM organizations WHERE id = ? AND deleted_at IS NULL`)
    this.existsStmt = db.prepare<[string], { id: string }>('SELECT id FROM organizations WHERE id = ?')
    this.listStmt = db.prepare<[], Stored<OrgRow>>(`SELECT ${columns} FROM organizations WHERE deleted_at IS NULL ORDER BY id`)
    this.insertStmt = db.prepare('INSERT INTO organizations (id, balance_nano, created_at, quota) VALUES (?, ?, ?, ?) ON CONFLICT(id) DO NOTHING')
    this.projectsStmt = db.prepare<[string], Stored<ProjectRow>>('SELECT org_id, id, created_at, quota FROM projects WHERE org_id = ? AND deleted_at IS NULL ORDER BY id')
    this.projectExistsStmt = db.prepare<[string, string], { id: string }>('SELECT id FROM projects WHERE org_id = ? AND id = ?')
    this.insertProjectStmt = db.prepare('INSERT INTO projects (org_id, id, created_at, quota) VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING')
    // a top-up pays what is uncollected first (every SET reads the row as it was)
    this.creditStmt = db.prepare(`UPDATE organizations SET balance_nano = balance_nano + max(@amount - uncollected_nano, 0),
      spent_nano = spent_nano + min(@amount, uncollected_nano), uncollected_nano = max(uncollected_nano - @amount, 0) WHERE id = @id AND deleted_at IS NULL`)
    this.quotasStmt = db.prepare<[], { org: string, project: string | null, quota: string }>(`
      SELECT id AS org, NULL AS project, quota FROM organizations WHERE quota IS NOT NULL AND deleted_at IS NULL
      UNION ALL
      SELECT p.org_id, p.id, p.quota FROM projects p JOIN organizations o ON o.id = p.org_id
        WHERE p.quota IS NOT NULL AND p.deleted_at IS NULL AND o.deleted_at IS NULL`)
    this.setQuotaStmt = db.prepare('UPDATE organizations SET quota = ? WHERE id = ? AND deleted_at IS NULL')
    this.removeStmt = db.prepare('UPDATE organizations SET deleted_at = ? WHERE id = ? AND deleted_at IS NULL')
    this.setProjectQuotaStmt = db.prepare(`UPDATE projects SET quota = ? WHERE org_id = ? AND id = ? AND deleted_at IS NULL
      AND EXISTS (SELECT 1 FROM organizations WHERE id = projects.org_id AND deleted_at IS NULL)`)
    this.removeProjectStmt = db.prepare(`UPDATE projects SET deleted_at = ? WHERE org_id = ? AND id = ? AND deleted_at IS NULL
      AND EXISTS (SELECT 1 FROM organizations WHERE id = projects.org_id AND deleted_at IS NULL)`)
    // the config's tenants, as they stand, for a sync
    this.rowStmt = db.prepare<[string], TenantRow>('SELECT deleted_at, quota FROM organizations WHERE id = ?')
    this.projectRowStmt = db.prepare<[string, string], TenantRow>('SELECT deleted_at, quota FROM projects WHERE org_id = ? AND id = ?')
  }

  get (id: string): OrgRow | undefined {
    const r = this.getStmt.get(id)
    return r === undefined ? undefined : org(r)
  }

  list (): OrgRow[] { return this.listStmt.all().map(org) }
  projects (orgId: string): ProjectRow[] { return this.projectsStmt.all(orgId).map(project) }
  quotas (): QuotaEntry[] { return this.quotasStmt.all().map((r) => ({ org: r.org, project: r.project, quota: JSON.parse(r.quota) as QuotaConfig })) }

  /** Adds credits; false when the org does not exist. */
  credit (id: string, amountNano: number, now?: number, by?: Actor): boolean {
    return this.db.transaction(() => {
      if (this.creditStmt.run({ amount: amountNano, id }).changes === 0) return false
      if (by !== undefined) this.audit.insert('credits.add', id, id, { amount_usd: nanoToUsd(amountNano) }, by, now ?? Date.now())
      return true
    }).immediate()
  }

  async create (o: NewOrg, now: number, by: Actor): Promise<boolean> {
    return await this.change({ kind: 'org', id: o.id }, now, () => {
      if (this.existsStmt.get(o.id) !== undefined) return false
      this.insertStmt.run(o.id, o.balanceNano, now, quotaText(o.quota))
      this.audit.insert('org.create', o.id, o.id, { balance_usd: nanoToUsd(o.balanceNano), quota: o.quota }, by, now)
      return true
    })
  }

  async setQuota (id: string, quota: QuotaConfig | null, now: number, by: Actor): Promise<boolean> {
    return await this.change({ kind: 'org', id }, now, () => {
      if (this.setQuotaStmt.run(quotaText(quota), id).changes === 0) return false
      this.audit.insert('org.update', id, id, { quota }, by, now)
      return true
    })
  }

  async remove (id: string, now: number, by: Actor): Promise<boolean> {
    return await this.change({ kind: 'org', id }, now, () => {
      if (this.removeStmt.run(now, id).changes === 0) return false
      this.audit.insert('org.delete', id, id, {}, by, now)
      return true
    })
  }

  async createProject (orgId: string, id: string, quota: QuotaConfig | null, now: number, by: Actor): Promise<'created' | 'exists' | 'no_org'> {
    let outcome: 'created' | 'exists' | 'no_org' = 'created'
    await this.change({ kind: 'project', org: orgId, id }, now, () => {
      if (this.getStmt.get(orgId) === undefined) { outcome = 'no_org'; return false }
      if (this.projectExistsStmt.get(orgId, id) !== undefined) { outcome = 'exists'; return false }
      this.insertProjectStmt.run(orgId, id, now, quotaText(quota))
      this.audit.insert('project.create', `${orgId}/${id}`, orgId, { quota }, by, now)
      return true
    })
    return outcome
  }

  async setProjectQuota (orgId: string, id: string, quota: QuotaConfig | null, now: number, by: Actor): Promise<boolean> {
    return await this.change({ kind: 'project', org: orgId, id }, now, () => {
      if (this.setProjectQuotaStmt.run(quotaText(quota), orgId, id).changes === 0) return false
      this.audit.insert('project.update', `${orgId}/${id}`, orgId, { quota }, by, now)
      return true
    })
  }

  async removeProject (orgId: string, id: string, now: number, by: Actor): Promise<boolean> {
    return await this.change({ kind: 'project', org: orgId, id }, now, () => {
      if (this.removeProjectStmt.run(now, orgId, id).changes === 0) return false
      this.audit.insert('project.delete', `${orgId}/${id}`, orgId, {}, by, now)
      return true
    })
  }

  /**
   * The plan's organizations and projects present, and (`apply`) with the quotas it names, inside
   * the caller's transaction; a deleted one stays deleted (warned of). Changes go to the audit log
   * as the config's.
   */
  ensure (plan: TenantPlan, now: number, mode: SyncMode, warnings: string[]): void {
    for (const o of plan.orgs) {
      const step = tenantStep(this.rowStmt.get(o.id), o.quota, mode, `organization ${o.id}`)
      if (step.action === 'insert') {
        this.insertStmt.run(o.id, o.balanceNano, now, quotaText(o.quota))
        this.audit.insert('org.create', o.id, o.id, { balance_usd: nanoToUsd(o.balanceNano), quota: o.quota ?? null }, 'config', now)
      } else if (step.action === 'set-quota') {
        this.setQuotaStmt.run(step.quota, o.id)
        this.audit.insert('org.update', o.id, o.id, { quota: o.quota }, 'config', now)
      } else if (step.warning !== undefined) warnings.push(step.warning)
    }
    for (const p of plan.projects) {
      const step = tenantStep(this.projectRowStmt.get(p.org, p.id), p.quota, mode, `project ${p.org}/${p.id}`)
      if (step.action === 'insert') {
        this.insertProjectStmt.run(p.org, p.id, now, quotaText(p.quota))
        this.audit.insert('project.create', `${p.org}/${p.id}`, p.org, { quota: p.quota ?? null }, 'config', now)
      } else if (step.action === 'set-quota') {
        this.setProjectQuotaStmt.run(step.quota, p.org, p.id)
        this.audit.insert('project.update', `${p.org}/${p.id}`, p.org, { quota: p.quota }, 'config', now)
      } else if (step.warning !== undefined) warnings.push(step.warning)
    }
  }

  /** Runs `write` in a transaction with the change logged when it returns true; published after the commit. */
  private async change (change: TenancyChange, now: number, write: () => boolean): Promise<boolean> {
    const done = this.db.transaction(() => {
      if (!write()) return false
      this.changes.write(change, now)
      return true
    }).immediate()
    if (done) await this.changes.publish(change)
    return done
  }
}
