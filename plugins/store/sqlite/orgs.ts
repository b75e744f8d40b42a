import type { DB } from './db.js'
import type { OrgRow, OrgStore, ProjectRow } from '../types.js'

export class OrgRepository implements OrgStore {
  private readonly getStmt
  private readonly insertStmt
  private readonly projectsStmt
  private readonly insertProjectStmt
  private readonly creditStmt
  private readonly listStmt

  constructor (db: DB) {
    this.getStmt = db.prepare<[string], OrgRow>('SELECT * FROM organizations WHERE id = ?')
    this.listStmt = db.prepare<[], OrgRow>('SELECT * FROM organizations ORDER BY id')
    this.insertStmt = db.prepare('INSERT INTO organizations (id, balance_nano, created_at) VALUES (?, ?, ?) ON CONFLICT(id) DO NOTHING')
    this.projectsStmt = db.prepare<[string], ProjectRow>('SELECT * FROM projects WHERE org_id = ? ORDER BY id')
    this.insertProjectStmt = db.prepare('INSERT INTO projects (org_id, id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING')
    this.creditStmt = db.prepare('UPDATE organizations SET balance_nano = balance_nano + ? WHERE id = ?')
  }

  get (id: string): OrgRow | undefined { return this.getStmt.get(id) }
  list (): OrgRow[] { return this.listStmt.all() }
  projects (orgId: string): ProjectRow[] { return this.projectsStmt.all(orgId) }

  /** Creates the org with its initial balance; an existing org keeps its balance. */
  ensure (id: string, initialBalanceNano: number, now: number): boolean {
    return this.insertStmt.run(id, initialBalanceNano, now).changes > 0
  }

  ensureProject (orgId: string, projectId: string, now: number): void {
    this.insertProjectStmt.run(orgId, projectId, now)
  }

  /** Adds credits; false when the org does not exist. */
  credit (id: string, amountNano: number): boolean {
    return this.creditStmt.run(amountNano, id).changes > 0
  }
}
