import type { DB } from './db.js'

// Prepaid balances: a hold of the worst-case cost at admission, settled to the real charge (or
// released) when the call ends. Each step is one transaction, and a hold is taken only while
// balance − held covers it, so concurrent calls cannot drive a balance below zero.
//
// A worker process may instead hold a lease: one `holds` row (id `lease:…`) reserving an amount
// it hands out to its own calls without a transaction each (plugins/balance.ts). A lease is
// reserved under the same guard as a hold, shrinks by what its calls are charged, and is given
// back when the worker has no call in flight; a dead worker's lease is released as stale.

export class LedgerRepository {
  readonly hold: (id: string, org: string, amount: number, now: number) => boolean
  /** Releases the hold and debits the charge, capped at what the balance holds; returns the debit. */
  readonly settle: (id: string, charge: number) => number
  readonly release: (id: string) => boolean
  readonly releaseOlderThan: (t: number) => number
  /**
   * Adds to lease `id` at least `need` and up to `want`, but no more than an eighth of what the
   * organization has free beyond `need`; returns the amount added, 0 when `need` is not free.
   */
  readonly lease: (id: string, org: string, need: number, want: number, now: number) => number
  /**
   * A leased call ended with a charge: `fromLease` leaves the lease (and the held amount) and
   * the charge is debited, capped at the balance. Returns the debit.
   */
  readonly consume: (id: string, org: string, fromLease: number, charge: number, now: number) => number
  /** Gives `amount` of lease `id` back to the organization; the row goes when nothing is left. */
  readonly giveBack: (id: string, org: string, amount: number) => void

  constructor (db: DB) {
    const reserve = db.prepare('UPDATE organizations SET held_nano = held_nano + @amount WHERE id = @org AND balance_nano - held_nano >= @amount')
    const insertHold = db.prepare('INSERT INTO holds (id, org_id, amount_nano, created_at) VALUES (?, ?, ?, ?)')
    const getHold = db.prepare<[string], { org_id: string, amount_nano: number }>('SELECT org_id, amount_nano FROM holds WHERE id = ?')
    const deleteHold = db.prepare('DELETE FROM holds WHERE id = ?')
    const unreserve = db.prepare('UPDATE organizations SET held_nano = held_nano - ? WHERE id = ?')
    const balanceOf = db.prepare<[string], { balance_nano: number }>('SELECT balance_nano FROM organizations WHERE id = ?')
    const debit = db.prepare('UPDATE organizations SET balance_nano = balance_nano - ?, spent_nano = spent_nano + ? WHERE id = ?')
    const stale = db.prepare<[number], { id: string }>('SELECT id FROM holds WHERE created_at < ?')
    const freeOf = db.prepare<[string], { free: number }>('SELECT balance_nano - held_nano AS free FROM organizations WHERE id = ?')
    const growLease = db.prepare(`INSERT INTO holds (id, org_id, amount_nano, created_at) VALUES (@id, @org, @amount, @now)
      ON CONFLICT(id) DO UPDATE SET amount_nano = amount_nano + excluded.amount_nano, created_at = excluded.created_at`)
    const shrinkLease = db.prepare('UPDATE holds SET amount_nano = amount_nano - @amount, created_at = max(created_at, @now) WHERE id = @id')
    const dropEmptyLease = db.prepare('DELETE FROM holds WHERE id = ? AND amount_nano <= 0')
    const charge = db.prepare('UPDATE organizations SET balance_nano = balance_nano - @debit, spent_nano = spent_nano + @debit, held_nano = held_nano - @fromLease WHERE id = @org')

    const releaseTx = (id: string): { org_id: string, amount_nano: number } | undefined => {
      const h = getHold.get(id)
      if (h === undefined) return undefined
      deleteHold.run(id)
      unreserve.run(h.amount_nano, h.org_id)
      return h
    }

    this.hold = db.transaction((id: string, org: string, amount: number, now: number): boolean => {
      if (reserve.run({ amount, org }).changes === 0) return false
      insertHold.run(id, org, amount, now)
      return true
    }).immediate
    this.settle = db.transaction((id: string, charge: number): number => {
      const h = releaseTx(id)
      if (h === undefined || charge <= 0) return 0
      const balance = balanceOf.get(h.org_id)?.balance_nano ?? 0
      const amount = Math.max(0, Math.min(charge, balance))
      debit.run(amount, amount, h.org_id)
      return amount
    }).immediate
    this.release = db.transaction((id: string): boolean => releaseTx(id) !== undefined).immediate
    this.releaseOlderThan = db.transaction((t: number): number => {
      const ids = stale.all(t)
      for (const { id } of ids) releaseTx(id)
      return ids.length
    }).immediate
    this.lease = db.transaction((id: string, org: string, need: number, want: number, now: number): number => {
      const free = freeOf.get(org)?.free ?? 0
      if (need <= 0 || free < need) return 0
      const amount = Math.max(need, Math.min(want, need + Math.floor((free - need) / 8)))
      if (reserve.run({ amount, org }).changes === 0) return 0
      growLease.run({ id, org, amount, now })
      return amount
    }).immediate
    this.consume = db.transaction((id: string, org: string, fromLease: number, amount: number, now: number): number => {
      const balance = balanceOf.get(org)?.balance_nano ?? 0
      const debit = Math.max(0, Math.min(amount, balance))
      charge.run({ debit, fromLease, org })
      shrinkLease.run({ id, amount: fromLease, now })
      return debit
    }).immediate
    this.giveBack = db.transaction((id: string, org: string, amount: number): void => {
      unreserve.run(amount, org)
      shrinkLease.run({ id, amount, now: 0 })
      dropEmptyLease.run(id)
    }).immediate
  }
}
