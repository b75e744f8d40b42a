import { randomBytes } from 'node:crypto'
import type { DeferredWriter } from './deferred.js'
import type { LedgerRepository } from './ledger.js'

/** How many more calls like the one asking a worker reserves for at once, at most (see Leases). */
const LEASE_CALLS = 16

interface Lease { id: string, leased: number, inUse: number }

/**
 * The holds of one worker process, backed by a lease per organization in the store. A call's
 * hold comes out of the lease without touching the store; when the lease cannot cover it, one
 * transaction adds what is missing plus room for up to LEASE_CALLS more such calls (never more
 * than an eighth of what the org has free, so other workers are not starved). Charges shrink
 * the lease as they are settled (queued on the deferred writer), and the lease is given back as
 * soon as no call of the org is in flight here: at low load every call reserves exactly what it
 * holds, as a per-call hold would; under load most calls cost no store write at admission.
 */
export class Leases {
  private readonly byOrg = new Map<string, Lease>()
  private readonly prefix = `lease:${process.pid}:${randomBytes(4).toString('hex')}:`

  constructor (private readonly ledger: LedgerRepository, private readonly writer: DeferredWriter) {}

  hold (org: string, amount: number, now: number): boolean {
    let lease = this.byOrg.get(org)
    if (lease === undefined) {
      lease = { id: this.prefix + org, leased: 0, inUse: 0 }
      this.byOrg.set(org, lease)
    }
    const free = lease.leased - lease.inUse
    if (free < amount) {
      const need = amount - free
      const added = this.ledger.lease(lease.id, org, need, need + amount * LEASE_CALLS, now)
      if (added === 0) {
        if (lease.inUse === 0) this.byOrg.delete(org) // nothing held here: keep no entry for a refused org
        return false
      }
      lease.leased += added
    }
    lease.inUse += amount
    return true
  }

  /** The call holding `amount` ended: `charge` is what it costs (0 when nothing was billed). */
  end (org: string, amount: number, charge: number, now: number): void {
    const lease = this.byOrg.get(org)
    if (lease === undefined) return
    lease.inUse -= amount
    const { id } = lease
    if (charge > 0) {
      const fromLease = Math.min(charge, amount)
      lease.leased -= fromLease
      this.writer.sum(`consume:${id}`, [fromLease, charge], ([taken, charged]) => { this.ledger.consume(id, org, taken as number, charged as number, now) })
    }
    if (lease.inUse === 0) {
      const rest = lease.leased
      this.byOrg.delete(org)
      if (rest > 0) this.writer.add(() => { this.ledger.giveBack(id, org, rest) })
    }
  }
}
