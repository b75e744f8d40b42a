import type pg from 'pg'
import type { LeaseLedger, Refill } from '../leases.js'
import type { EndOfCallBatch } from './batch.js'
import { inTransaction, unavailable, type Connection } from './db.js'

// Prepaid balances, as on SQLite: every amount held against an organization is a lease, a row of
// `holds` tagged with the instance that refills it (../leases.ts does the rest in memory). A
// refill is one transaction (migrations/002_leases.sql); what calls are charged and what leases
// give back join the end-of-call batch. Each instance beats a heartbeat in `holders`; the leases
// of one silent for too long are released by the others.

// the organizations first, in id order, as refills and the end-of-call batch lock them
const LOCK_ORGS = 'SELECT 1 FROM organizations WHERE id = ANY($1::text[]) ORDER BY id FOR UPDATE'

const RELEASE = `WITH gone AS (DELETE FROM holds WHERE id = ANY($1::text[]) RETURNING org_id, amount_nano),
  sums AS (SELECT org_id, sum(amount_nano) AS amount FROM gone GROUP BY org_id)
  UPDATE organizations o SET held_nano = o.held_nano - sums.amount FROM sums WHERE o.id = sums.org_id`

export class LedgerRepository {
  constructor (private readonly conn: Connection, private readonly holder: string, private readonly batch: EndOfCallBatch) {}

  /** The ledger steps of this instance's balance leases. */
  leaseLedger (): LeaseLedger {
    return {
      refill: async (id, org, need, want, now) => (await this.conn.q<Refill>('SELECT added, free, elsewhere FROM modelgate_refill_lease($1, $2, $3, $4, $5, $6)',
        [id, this.holder, org, need, want, now])).rows[0] ?? { added: 0, free: 0, elsewhere: 0 },
      consume: (id, org, fromLease, charge) => this.batch.consume(id, org, fromLease, charge),
      giveBackLater: (id, org, decide) => { this.batch.giveBackLater(id, org, decide) },
      giveBackNow: (id, org, amount) => this.batch.giveBackNow(id, org, amount)
    }
  }

  async heartbeat (now: number): Promise<void> {
    await this.conn.q('INSERT INTO holders (id, heartbeat_at) VALUES ($1, $2) ON CONFLICT (id) DO UPDATE SET heartbeat_at = EXCLUDED.heartbeat_at', [this.holder, now])
  }

  /** Releases the leases of every other instance whose heartbeat is older than `before`; returns how many. */
  async releaseDeadHolders (before: number): Promise<number> {
    return await this.release('holder <> $1 AND holder NOT IN (SELECT id FROM holders WHERE heartbeat_at >= $2)', [this.holder, before],
      async (client) => { await client.query('DELETE FROM holders WHERE heartbeat_at < $1 AND id <> $2', [before, this.holder]) })
  }

  /** This instance's leases and heartbeat go (a graceful stop gives its leases back). */
  async retire (): Promise<void> {
    await this.release('holder = $1', [this.holder], async (client) => { await client.query('DELETE FROM holders WHERE id = $1', [this.holder]) })
  }

  private async release (where: string, params: unknown[], then: (client: pg.PoolClient) => Promise<void>): Promise<number> {
    await this.conn.ready
    try {
      return await inTransaction(this.conn.pool, async (client) => {
        const found = (await client.query<{ id: string, org_id: string }>(`SELECT id, org_id FROM holds WHERE ${where}`, params)).rows
        if (found.length > 0) {
          await client.query(LOCK_ORGS, [[...new Set(found.map((h) => h.org_id))]])
          await client.query(RELEASE, [found.map((h) => h.id)])
        }
        await then(client)
        return found.length
      })
    } catch (err) {
      this.conn.observe(err)
      return unavailable(err)
    }
  }
}
