import type { GroupCommit } from './group-commit.js'
import type { LedgerRepository } from './ledger.js'
import type { BalanceStore } from '../types.js'

/** How many more calls like the one asking a new lease reserves for (see Leases). */
const LEASE_CALLS = 16
/** The most a lease that keeps running dry under load grows to reserve for at once. */
const MAX_LEASE_CALLS = 256

interface Lease { id: string, leased: number, inUse: number, calls: number, returning: boolean, refill: Promise<void> | null }

/**
 * The holds of one process, backed by a lease per organization in the store. A call's hold comes
 * out of the lease without touching the store; when the lease cannot cover it, one write
 * (group-committed with the turn's other writes) adds what is missing plus room for more such
 * calls (never more than an eighth of what the org has free, so other processes are not
 * starved): LEASE_CALLS more at first, twice as many each time the lease runs dry again while
 * calls are in flight, up to MAX_LEASE_CALLS. Charges shrink the lease as calls settle, committed
 * before the settling call's answer ends. When no call of the org is in flight here the lease is
 * given back with a later group, unless a call took from it again by then; a lease given back is
 * forgotten, size included.
 */
export class Leases implements BalanceStore {
  private readonly byOrg = new Map<string, Lease>()

  constructor (private readonly ledger: LedgerRepository, private readonly commit: GroupCommit, private readonly holder: string) {}

  hold (org: string, amount: number, now: number): boolean | Promise<boolean> {
    let lease = this.byOrg.get(org)
    if (lease === undefined) {
      lease = { id: `lease:${this.holder}:${org}`, leased: 0, inUse: 0, calls: LEASE_CALLS, returning: false, refill: null }
      this.byOrg.set(org, lease)
    }
    const l = lease
    if (l.refill !== null) return l.refill.then(() => this.hold(org, amount, now))
    const free = l.leased - l.inUse
    if (free >= amount) {
      l.inUse += amount
      return true
    }
    const need = amount - free
    if (l.inUse > 0) l.calls = Math.min(MAX_LEASE_CALLS, l.calls * 2) // ran dry under load
    let granted = false
    const refill = this.commit.run(() => this.ledger.lease(l.id, this.holder, org, need, need + amount * l.calls, now)).then((added) => {
      if (added === 0) return
      l.leased += added
      l.inUse += amount
      granted = true
    })
    l.refill = refill.finally(() => { l.refill = null })
    return l.refill.then(() => {
      // nothing held or leased here: keep no entry for a refused org (a lease still leased is
      // idle with its give-back queued, which removes the entry)
      if (!granted && l.inUse === 0 && l.leased === 0 && !l.returning && this.byOrg.get(org) === l) this.byOrg.delete(org)
      return granted
    })
  }

  settle (org: string, held: number, charge: number, now: number): Promise<void> | undefined {
    const lease = this.byOrg.get(org)
    if (lease === undefined) return undefined
    lease.inUse -= held
    const { id } = lease
    let done: Promise<void> | undefined
    if (charge > 0) {
      const fromLease = Math.min(charge, held)
      lease.leased -= fromLease
      done = this.commit.sum(`consume:${id}`, [fromLease, charge], ([taken, charged]) => { this.ledger.consume(id, org, taken as number, charged as number, now) }, { retry: true })
    }
    if (lease.inUse === 0 && !lease.returning) {
      lease.returning = true
      this.commit.later(this.giveBackIfIdle(org, lease))
    }
    return done
  }

  /**
   * The write that gives an idle lease back. It decides once, on its first run, whether the
   * lease is still idle (and then forgets it); a group that rolls back runs it again with the
   * amount decided.
   */
  private giveBackIfIdle (org: string, lease: Lease): () => void {
    let rest: number | undefined
    return () => {
      if (rest === undefined) {
        lease.returning = false
        if (lease.inUse > 0 || lease.refill !== null) return // taken from again: kept
        rest = lease.leased
        lease.leased = 0
        if (this.byOrg.get(org) === lease) this.byOrg.delete(org)
      }
      if (rest > 0) this.ledger.giveBack(lease.id, org, rest)
    }
  }
}
