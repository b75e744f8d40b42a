import { randomBytes } from 'node:crypto'
import type { DeferredWriter } from './deferred.js'
import type { LedgerRepository } from './ledger.js'

/** How many more calls like the one asking a new lease reserves for (see Leases). */
const LEASE_CALLS = 16
/** The most a lease that keeps running dry under load grows to reserve for at once. */
const MAX_LEASE_CALLS = 256

interface Lease { id: string, leased: number, inUse: number, calls: number, returning: boolean }

/**
 * The holds of one worker process, backed by a lease per organization in the store. A call's
 * hold comes out of the lease without touching the store; when the lease cannot cover it, one
 * transaction adds what is missing plus room for more such calls (never more than an eighth of
 * what the org has free, so other workers are not starved): LEASE_CALLS more at first, twice as
 * many each time the lease runs dry again while calls are in flight, up to MAX_LEASE_CALLS, so a
 * steady load reserves about once every MAX_LEASE_CALLS calls rather than every LEASE_CALLS (each
 * reservation is a commit on the event loop). Charges shrink the lease as they are settled
 * (queued on the deferred writer). When no call of the org is in flight here the lease is given
 * back with the writer's next batch, unless a call took from it again by then (under load the
 * count of calls in flight touches zero often, and each give-back would cost the next call a
 * reservation); a lease given back is forgotten, size included. At low load every call reserves
 * what it holds and gives it back a few milliseconds later, as a per-call hold would; under load
 * most calls cost no store write at admission.
 */
export class Leases {
  private readonly byOrg = new Map<string, Lease>()
  private readonly prefix = `lease:${process.pid}:${randomBytes(4).toString('hex')}:`

  constructor (private readonly ledger: LedgerRepository, private readonly writer: DeferredWriter) {}

  hold (org: string, amount: number, now: number): boolean {
    let lease = this.byOrg.get(org)
    if (lease === undefined) {
      lease = { id: this.prefix + org, leased: 0, inUse: 0, calls: LEASE_CALLS, returning: false }
      this.byOrg.set(org, lease)
    }
    const free = lease.leased - lease.inUse
    if (free < amount) {
      const need = amount - free
      if (lease.inUse > 0) lease.calls = Math.min(MAX_LEASE_CALLS, lease.calls * 2) // ran dry under load
      const added = this.ledger.lease(lease.id, org, need, need + amount * lease.calls, now)
      if (added === 0) {
        // nothing held or leased here: keep no entry for a refused org (a lease still leased is
        // idle with its give-back queued, which removes the entry)
        if (lease.inUse === 0 && lease.leased === 0) this.byOrg.delete(org)
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
    if (lease.inUse === 0 && !lease.returning) {
      lease.returning = true
      this.writer.add(this.giveBackIfIdle(org, lease))
    }
  }

  /**
   * The write that gives an idle lease back. It decides once, on its first run, whether the
   * lease is still idle (and then forgets it); a batch that rolls back runs it again with the
   * amount decided, as the writer's sums do.
   */
  private giveBackIfIdle (org: string, lease: Lease): () => void {
    let rest: number | undefined
    return () => {
      if (rest === undefined) {
        lease.returning = false
        if (lease.inUse > 0) return // taken from again: kept
        rest = lease.leased
        lease.leased = 0
        if (this.byOrg.get(org) === lease) this.byOrg.delete(org)
      }
      if (rest > 0) this.ledger.giveBack(lease.id, org, rest)
    }
  }
}
