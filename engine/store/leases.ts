import { type BalanceStore, type PeerBus } from './types.js'
import { isPromise, then, type MaybePromise } from '../kernel/maybe-promise.js'

/** How many more calls like the one asking a new lease reserves for (see Leases). */
const LEASE_CALLS = 16
/** The most a lease that keeps running dry under load grows to reserve for at once. */
const MAX_LEASE_CALLS = 256
const RECLAIM_TOPIC = 'lease'
/** After other processes had nothing to give back for an org, how long its refills do not ask them again (ms, wall clock). */
const DRY_MS = 100
/** A lease no call took from for this long, with none in flight, is given back (ms). */
const IDLE_MS = 1_000
/** A lease that runs dry this soon after its last refill grows, as one that runs dry under load does (ms). */
const SOON_MS = 1_000

/** What a refill found: the amount added to the lease (0 when `need` was not free), and when 0, what could be had. */
export interface Refill {
  added: number
  /** The organization's balance − held, as the refill saw it. */
  free: number
  /** What the leases of other processes hold of the organization. */
  elsewhere: number
}

/** The ledger steps a store gives the leases (SQLite: statements in a group commit; PostgreSQL: a transaction and the end-of-call batch). */
export interface LeaseLedger {
  /** Adds to lease `id` at least `need` and up to `want`, never more than an eighth of what the org has free beyond `need`. */
  refill: (id: string, org: string, need: number, want: number, now: number) => MaybePromise<Refill>
  /** Calls of lease `id` ended: `fromLease` leaves the lease (and `held`), `charge` is debited (capped at the balance); resolves once committed. */
  consume: (id: string, org: string, fromLease: number, charge: number, now: number) => Promise<void>
  /**
   * Gives part of lease `id` back with a later write that nobody waits for; `decide` runs once,
   * when that write is made, and says how much (0: nothing).
   */
  giveBackLater: (id: string, org: string, decide: () => number) => void
  /** Gives `amount` of lease `id` back; resolves once committed. */
  giveBackNow: (id: string, org: string, amount: number) => Promise<void>
}

interface Lease {
  id: string
  leased: number
  inUse: number
  calls: number
  returning: boolean
  refill: Promise<void> | null
  /** Holds taken from it so far, and when it was last refilled (performance.now()). */
  takes: number
  refilledAt: number
  /** Runs IDLE_MS after the lease last had no call in flight, to give it back if none took from it since. */
  idleTimer: NodeJS.Timeout | null
}

/**
 * The holds of one process, backed by a lease per organization in the store. A call's hold comes
 * out of the lease in memory; when the lease cannot cover it, the store is asked to refill it with
 * what is missing plus room for more such calls (never more than an eighth of what the org has
 * free, so other processes are not starved): LEASE_CALLS more at first, twice as many each time
 * the lease runs dry again while calls are in flight or within SOON_MS of its last refill, up to
 * MAX_LEASE_CALLS. Charges shrink the lease as calls settle, committed before the settling call's
 * answer ends. A lease no call took from for IDLE_MS, and with none in flight, is given back with
 * a later write (and at once by flushIdle()); a lease given back is forgotten, size included.
 * Calls one after another keep their lease: between two of them none is in flight, but each
 * takes from it, so no give-back and refill is written for every call.
 *
 * A refill that cannot be met while other processes' leases hold enough asks them (over the
 * bus) to give back what their leases hold beyond their calls in flight, then tries once more:
 * a call is refused only when the org's balance cannot cover it beside the calls in flight. When
 * they had nothing to give, the org's refills do not ask again for DRY_MS (an org whose balance
 * is all in use elsewhere does not cost a round of messages per refused call).
 */
export class Leases implements BalanceStore {
  private readonly byOrg = new Map<string, Lease>()
  /** Orgs whose last request to the other processes brought nothing back, until when. */
  private readonly dryUntil = new Map<string, number>()

  private readonly idleMs: number

  /** `reachable` throws when the store cannot commit a call's end: no hold is taken from memory then. `idleMs`: IDLE_MS (tests shorten it). */
  constructor (private readonly ledger: LeaseLedger, private readonly holder: string, private readonly bus: PeerBus | null = null, private readonly reachable: () => void = () => {}, opts: { idleMs?: number } = {}) {
    this.idleMs = opts.idleMs ?? IDLE_MS
    bus?.on(RECLAIM_TOPIC, (m) => this.giveBackSpare(m.org))
  }

  hold (org: string, amount: number, now: number): MaybePromise<boolean> {
    this.reachable()
    let lease = this.byOrg.get(org)
    if (lease === undefined) {
      lease = { id: `lease:${this.holder}:${org}`, leased: 0, inUse: 0, calls: LEASE_CALLS, returning: false, refill: null, takes: 0, refilledAt: -Infinity, idleTimer: null }
      this.byOrg.set(org, lease)
    }
    const l = lease
    if (l.refill !== null) return l.refill.then(() => this.hold(org, amount, now))
    const free = l.leased - l.inUse
    if (free >= amount) {
      l.inUse += amount
      l.takes++
      return true
    }
    const need = amount - free
    // ran dry under load, or soon after the last refill (calls one after another)
    if (l.inUse > 0 || performance.now() - l.refilledAt < SOON_MS) l.calls = Math.min(MAX_LEASE_CALLS, l.calls * 2)
    const want = need + amount * l.calls
    let granted = false
    const added = then(this.ledger.refill(l.id, org, need, want, now), (r) => {
      if (r.added > 0 || this.bus === null || r.free + r.elsewhere < need || this.dry(org)) return r.added
      // asked of whoever hears; the second refill decides either way
      return this.bus.broadcast(RECLAIM_TOPIC, { org }).catch(() => {}).then(() => then(this.ledger.refill(l.id, org, need, want, now), (again) => {
        if (again.added === 0) this.dryUntil.set(org, performance.now() + DRY_MS)
        return again.added
      }))
    })
    const refill = (isPromise(added) ? added : Promise.resolve(added)).then((n) => {
      if (n === 0) return
      l.leased += n
      l.inUse += amount
      l.takes++
      l.refilledAt = performance.now()
      granted = true
    })
    l.refill = refill.finally(() => { l.refill = null })
    return l.refill.then(() => {
      if (!granted && l.inUse === 0 && !l.returning) {
        // refused with no call in flight here: an empty lease leaves no entry; one that still
        // holds something (its give-back found the refill under way and kept it) goes back now
        if (l.leased > 0) this.giveBackWhenIdle(org, l)
        else if (this.byOrg.get(org) === l) this.forget(org, l)
      }
      return granted
    })
  }

  settle (org: string, held: number, charge: number, now: number): Promise<void> | undefined {
    const lease = this.byOrg.get(org)
    if (lease === undefined) return undefined
    lease.inUse -= held
    let done: Promise<void> | undefined
    if (charge > 0) {
      const fromLease = Math.min(charge, held)
      lease.leased -= fromLease
      done = this.ledger.consume(lease.id, org, fromLease, charge, now)
    }
    if (lease.inUse === 0 && !lease.returning) this.whenIdle(org, lease)
    return done
  }

  /** Gives back now (with the next write) every lease with no call in flight, however recently used. */
  flushIdle (): void {
    for (const [org, lease] of this.byOrg) if (lease.inUse === 0 && !lease.returning && lease.refill === null) this.giveBackWhenIdle(org, lease)
  }

  /** Stops the idle timers (the store is closing). */
  stop (): void {
    for (const lease of this.byOrg.values()) if (lease.idleTimer !== null) { clearTimeout(lease.idleTimer); lease.idleTimer = null }
  }

  /** No call of the lease is in flight: it goes back once IDLE_MS have passed without a call taking from it. */
  private whenIdle (org: string, lease: Lease): void {
    if (lease.idleTimer !== null) return
    const seen = lease.takes
    lease.idleTimer = setTimeout(() => {
      lease.idleTimer = null
      // in use again: the settle that leaves it idle looks again
      if (lease.inUse > 0 || lease.returning || lease.refill !== null || this.byOrg.get(org) !== lease) return
      if (lease.takes !== seen) this.whenIdle(org, lease)
      else this.giveBackWhenIdle(org, lease)
    }, this.idleMs)
    lease.idleTimer.unref()
  }

  private giveBackWhenIdle (org: string, lease: Lease): void {
    if (lease.idleTimer !== null) { clearTimeout(lease.idleTimer); lease.idleTimer = null }
    lease.returning = true
    this.ledger.giveBackLater(lease.id, org, () => this.idleRest(org, lease))
  }

  /** When the lease is still idle, forgets it and says how much it held; 0 when a call took from it again. */
  private idleRest (org: string, lease: Lease): number {
    lease.returning = false
    if (lease.inUse > 0 || lease.refill !== null) return 0
    const rest = lease.leased
    lease.leased = 0
    if (this.byOrg.get(org) === lease) this.forget(org, lease)
    return rest
  }

  private forget (org: string, lease: Lease): void {
    if (lease.idleTimer !== null) { clearTimeout(lease.idleTimer); lease.idleTimer = null }
    this.byOrg.delete(org)
  }

  private dry (org: string): boolean {
    const until = this.dryUntil.get(org)
    if (until === undefined) return false
    if (until > performance.now()) return true
    this.dryUntil.delete(org)
    return false
  }

  /** Another process is short: what the lease holds beyond the calls in flight goes back now. */
  private giveBackSpare (org: string): Promise<void> | undefined {
    const lease = this.byOrg.get(org)
    if (lease === undefined || lease.refill !== null) return undefined
    const spare = lease.leased - lease.inUse
    if (spare <= 0) return undefined
    lease.leased -= spare
    if (lease.inUse === 0 && !lease.returning && this.byOrg.get(org) === lease) this.forget(org, lease)
    return this.ledger.giveBackNow(lease.id, org, spare)
  }
}
