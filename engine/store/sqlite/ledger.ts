import type { DB } from './db.js'
import type { GroupCommit } from './group-commit.js'
import type { LeaseLedger, Refill } from '../leases.js'

// Prepaid balances. Every amount held against an organization is a row of `holds`: a lease that
// one process reserved for the calls it runs (../leases.ts), tagged with that process's holder id.
// A lease is reserved only while balance − held covers it, so concurrent calls on any number of
// processes cannot drive a balance below zero; it shrinks by what its calls are charged and is
// given back when the process has no call of that org in flight. Each process beats a heartbeat
// in `holders`; the leases of a holder whose heartbeat stopped are released by the others.

export class LedgerRepository {
  /**
   * Adds to lease `id` at least `need` and up to `want`, but no more than an eighth of what the
   * organization has free beyond `need`; returns the amount added, 0 when `need` is not free.
   * Runs inside the caller's transaction.
   */
  readonly lease: (id: string, holder: string | null, org: string, need: number, want: number, now: number) => number
  /** lease(), and when nothing was added, what the org had free and what other holders' leases hold of it. */
  readonly refill: (id: string, holder: string, org: string, need: number, want: number, now: number) => Refill
  /**
   * Calls of lease `id` ended with charges: `fromLease` leaves the lease (and the held amount)
   * and `charge` is debited, capped at the balance; the row goes when nothing is left (the
   * lease was given back before these charges were written). Returns the debit.
   */
  readonly consume: (id: string, org: string, fromLease: number, charge: number, now: number) => number
  /** Gives `amount` of lease `id` back to the organization; the row goes when nothing is left. */
  readonly giveBack: (id: string, org: string, amount: number) => void
  /** Releases every lease not touched since `t` (left by a process from before holders existed, or by a dead one); returns how many. */
  readonly releaseOlderThan: (t: number) => number
  /** Records that `holder` is alive at `now`. */
  readonly heartbeat: (holder: string, now: number) => void
  /** Releases the leases of every holder other than `self` whose heartbeat is older than `before`; returns how many leases. */
  readonly releaseDeadHolders: (self: string, before: number) => number
  /** This holder's row and leases go (a graceful stop gives its leases back). */
  readonly retire: (holder: string) => void

  constructor (db: DB) {
    const freeOf = db.prepare<[string], { free: number }>('SELECT balance_nano - held_nano AS free FROM organizations WHERE id = ?')
    const balanceOf = db.prepare<[string], { balance_nano: number }>('SELECT balance_nano FROM organizations WHERE id = ?')
    const reserve = db.prepare('UPDATE organizations SET held_nano = held_nano + @amount WHERE id = @org AND balance_nano - held_nano >= @amount')
    const unreserve = db.prepare('UPDATE organizations SET held_nano = held_nano - ? WHERE id = ?')
    const charge = db.prepare(`UPDATE organizations SET balance_nano = balance_nano - @debit, spent_nano = spent_nano + @debit,
      uncollected_nano = uncollected_nano + @short, held_nano = held_nano - @fromLease WHERE id = @org`)
    const growLease = db.prepare(`INSERT INTO holds (id, org_id, amount_nano, created_at, holder) VALUES (@id, @org, @amount, @now, @holder)
      ON CONFLICT(id) DO UPDATE SET amount_nano = amount_nano + excluded.amount_nano, created_at = excluded.created_at`)
    const shrinkLease = db.prepare('UPDATE holds SET amount_nano = amount_nano - @amount, created_at = max(created_at, @now) WHERE id = @id')
    const dropEmptyLease = db.prepare('DELETE FROM holds WHERE id = ? AND amount_nano <= 0')
    const leaseAmount = db.prepare<[string], { amount_nano: number }>('SELECT amount_nano FROM holds WHERE id = ?')
    const stale = db.prepare<[number], { id: string, org_id: string, amount_nano: number }>('SELECT id, org_id, amount_nano FROM holds WHERE created_at < ? AND holder IS NULL')
    const deleteLease = db.prepare('DELETE FROM holds WHERE id = ?')
    const beat = db.prepare('INSERT INTO holders (id, heartbeat_at) VALUES (?, ?) ON CONFLICT(id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at')
    const dead = db.prepare<[string, number], { id: string }>('SELECT id FROM holders WHERE id <> ? AND heartbeat_at < ?')
    const leasesOf = db.prepare<[string], { id: string, org_id: string, amount_nano: number }>('SELECT id, org_id, amount_nano FROM holds WHERE holder = ?')
    const deleteHolder = db.prepare('DELETE FROM holders WHERE id = ?')
    const elsewhere = db.prepare<[string, string], { n: number }>('SELECT coalesce(sum(amount_nano), 0) AS n FROM holds WHERE org_id = ? AND holder IS NOT ?')

    const release = (leases: Array<{ id: string, org_id: string, amount_nano: number }>): number => {
      for (const l of leases) {
        deleteLease.run(l.id)
        unreserve.run(l.amount_nano, l.org_id)
      }
      return leases.length
    }

    this.lease = (id, holder, org, need, want, now) => {
      const free = freeOf.get(org)?.free ?? 0
      if (need <= 0 || free < need) return 0
      const amount = Math.max(need, Math.min(want, need + Math.floor((free - need) / 8)))
      if (reserve.run({ amount, org }).changes === 0) return 0
      growLease.run({ id, org, amount, now, holder })
      return amount
    }
    this.refill = (id, holder, org, need, want, now) => {
      const added = this.lease(id, holder, org, need, want, now)
      if (added > 0) return { added, free: 0, elsewhere: 0 }
      return { added, free: freeOf.get(org)?.free ?? 0, elsewhere: elsewhere.get(org, holder)?.n ?? 0 }
    }
    const consume = (id: string, org: string, fromLease: number, amount: number, now: number): number => {
      const balance = balanceOf.get(org)?.balance_nano ?? 0
      const debit = Math.max(0, Math.min(amount, balance))
      // only what the lease row still holds leaves `held`: a lease released meanwhile (its
      // process taken for dead) gave its amount back already, and its calls' charges still apply
      const held = leaseAmount.get(id)?.amount_nano ?? 0
      const still = Math.max(0, Math.min(fromLease, held))
      // what the balance cannot cover is not written off: it stays owed, and a top-up pays it first
      charge.run({ debit, short: amount - debit, fromLease: still, org })
      shrinkLease.run({ id, amount: still, now })
      if (held - still <= 0) dropEmptyLease.run(id)
      return debit
    }
    const giveBack = (id: string, org: string, amount: number): void => {
      const held = leaseAmount.get(id)?.amount_nano ?? 0
      const still = Math.max(0, Math.min(amount, held))
      unreserve.run(still, org)
      shrinkLease.run({ id, amount: still, now: 0 })
      if (held - still <= 0) dropEmptyLease.run(id)
    }
    // inside a transaction already (a group commit's, nearly always) they run as they are: a
    // nested transaction would add a SAVEPOINT and a RELEASE to the call's commit
    const consumeTx = db.transaction(consume)
    const giveBackTx = db.transaction(giveBack)
    this.consume = (...a) => db.inTransaction ? consume(...a) : consumeTx(...a)
    this.giveBack = (...a) => { if (db.inTransaction) giveBack(...a); else giveBackTx(...a) }
    this.releaseOlderThan = db.transaction((t: number): number => release(stale.all(t))).immediate
    this.heartbeat = (holder, now) => { beat.run(holder, now) }
    this.releaseDeadHolders = db.transaction((self: string, before: number): number => {
      let n = 0
      for (const h of dead.all(self, before)) {
        n += release(leasesOf.all(h.id))
        deleteHolder.run(h.id)
      }
      return n
    }).immediate
    this.retire = db.transaction((holder: string): void => {
      release(leasesOf.all(holder))
      deleteHolder.run(holder)
    }).immediate
  }
}

/** The ledger steps of the balance leases, over this store's group commit. */
export function sqliteLeaseLedger (ledger: LedgerRepository, commit: GroupCommit, holder: string): LeaseLedger {
  return {
    refill: (id, org, need, want, now) => commit.run(() => ledger.refill(id, holder, org, need, want, now)),
    consume: (id, org, fromLease, charge, now) => commit.sum(`consume:${id}`, [fromLease, charge], ([taken, charged]) => { ledger.consume(id, org, taken as number, charged as number, now) }, { retry: true }),
    giveBackLater: (id, org, decide) => {
      // a group that rolls back runs the write again with the amount decided
      let rest: number | undefined
      commit.later(() => {
        rest ??= decide()
        if (rest > 0) ledger.giveBack(id, org, rest)
      })
    },
    giveBackNow: (id, org, amount) => commit.run(() => { ledger.giveBack(id, org, amount) }, { retry: true })
  }
}
