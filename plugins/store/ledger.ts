import type { DB } from './db.js'

// Prepaid balances: a hold of the worst-case cost at admission, settled to the real charge (or
// released) when the call ends. Each step is one transaction, and a hold is taken only while
// balance − held covers it, so concurrent calls cannot drive a balance below zero.

export class LedgerRepository {
  readonly hold: (id: string, org: string, amount: number, now: number) => boolean
  /** Releases the hold and debits the charge, capped at what the balance holds; returns the debit. */
  readonly settle: (id: string, charge: number) => number
  readonly release: (id: string) => boolean
  readonly releaseOlderThan: (t: number) => number

  constructor (db: DB) {
    const reserve = db.prepare('UPDATE organizations SET held_nano = held_nano + @amount WHERE id = @org AND balance_nano - held_nano >= @amount')
    const insertHold = db.prepare('INSERT INTO holds (id, org_id, amount_nano, created_at) VALUES (?, ?, ?, ?)')
    const getHold = db.prepare<[string], { org_id: string, amount_nano: number }>('SELECT org_id, amount_nano FROM holds WHERE id = ?')
    const deleteHold = db.prepare('DELETE FROM holds WHERE id = ?')
    const unreserve = db.prepare('UPDATE organizations SET held_nano = held_nano - ? WHERE id = ?')
    const balanceOf = db.prepare<[string], { balance_nano: number }>('SELECT balance_nano FROM organizations WHERE id = ?')
    const debit = db.prepare('UPDATE organizations SET balance_nano = balance_nano - ?, spent_nano = spent_nano + ? WHERE id = ?')
    const stale = db.prepare<[number], { id: string }>('SELECT id FROM holds WHERE created_at < ?')

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
  }
}
