import type { Config } from '../../config/schema.js'
import { openDatabase, type DB } from './db.js'
import { KeyRepository } from './keys.js'
import { OrgRepository } from './orgs.js'
import { LedgerRepository } from './ledger.js'
import { IdempotencyRepository, QuotaRepository, RateLimitRepository } from './policies.js'
import { UsageRepository } from './usage.js'
import { usdToNano } from '../money.js'

export type { DB } from './db.js'

/** The embedded store: one SQLite database and a repository per table. No Fastify in here. */
export class Store {
  readonly db: DB
  readonly orgs: OrgRepository
  readonly keys: KeyRepository
  readonly usage: UsageRepository
  readonly ledger: LedgerRepository
  readonly idempotency: IdempotencyRepository
  readonly rateLimits: RateLimitRepository
  readonly quota: QuotaRepository

  constructor (file: string) {
    this.db = openDatabase(file)
    this.orgs = new OrgRepository(this.db)
    this.keys = new KeyRepository(this.db)
    this.usage = new UsageRepository(this.db)
    this.ledger = new LedgerRepository(this.db)
    this.idempotency = new IdempotencyRepository(this.db)
    this.rateLimits = new RateLimitRepository(this.db)
    this.quota = new QuotaRepository(this.db)
  }

  /** Tenants from the config: orgs (with their initial balance), projects and literal keys. */
  syncTenants (config: Config, now: number): void {
    this.db.transaction(() => {
      const keys: Array<{ key: string, org: string, project: string, name: string, models: string[] }> = []
      for (const tenant of config.tenants) {
        this.orgs.ensure(tenant.org, usdToNano(tenant.balance_usd), now)
        for (const project of tenant.projects) {
          this.orgs.ensureProject(tenant.org, project.id, now)
          for (const k of project.keys) keys.push({ key: k.key, org: tenant.org, project: project.id, name: k.name, models: k.models })
        }
      }
      this.keys.syncConfigKeys(keys, now)
    }).immediate()
  }

  close (): void {
    if (this.db.open) this.db.close()
  }
}
