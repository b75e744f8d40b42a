import type { AlertAttempt, AlertDelivery, AlertStore, Cursor, NewAlert } from '../types.js'
import type { DB } from './db.js'

// The alerts' outbox on the shared file. Each operation is one statement or transaction, so that
// every worker agrees: a crossing is written once (its unique pair), a due delivery is claimed by
// one sender at a time.

export class AlertRepository implements AlertStore {
  private readonly raiseStmt
  private readonly claimStmt
  private readonly settleStmt
  private readonly pageStmt
  private readonly pageAfterStmt
  private readonly stateStmt
  private readonly raiseTx: (rows: readonly NewAlert[]) => number

  constructor (db: DB) {
    this.raiseStmt = db.prepare(`INSERT INTO alert_deliveries (id, crossing, webhook, type, payload, created_at, status, attempts, next_at)
      VALUES (@id, @crossing, @webhook, @type, @payload, @created_at, 'pending', 0, @created_at) ON CONFLICT(crossing, webhook) DO NOTHING`)
    this.claimStmt = db.prepare<Record<string, number>, AlertDelivery>(`UPDATE alert_deliveries SET claimed_until = @until, attempts = attempts + 1
      WHERE id IN (SELECT id FROM alert_deliveries WHERE status = 'pending' AND next_at <= @now AND claimed_until <= @now ORDER BY next_at LIMIT @limit)
      RETURNING *`)
    this.settleStmt = db.prepare(`UPDATE alert_deliveries SET status = @status, next_at = @next_at, last_status = @last_status, last_error = @last_error,
      delivered_at = @delivered_at, claimed_until = 0 WHERE id = @id`)
    this.pageStmt = db.prepare<[number], AlertDelivery>('SELECT * FROM alert_deliveries ORDER BY created_at DESC, id DESC LIMIT ?')
    this.pageAfterStmt = db.prepare<[number, string, number], AlertDelivery>('SELECT * FROM alert_deliveries WHERE (created_at, id) < (?, ?) ORDER BY created_at DESC, id DESC LIMIT ?')
    this.stateStmt = db.prepare<[string, string, number], { episode: number }>(`INSERT INTO alert_state (subject, state, episode) VALUES (?, ?, ?)
      ON CONFLICT(subject) DO UPDATE SET state = excluded.state, episode = alert_state.episode + 1 WHERE alert_state.state <> excluded.state
      RETURNING episode`)
    const tx = db.transaction((rows: readonly NewAlert[]) => {
      let n = 0
      for (const r of rows) n += this.raiseStmt.run(r).changes
      return n
    })
    this.raiseTx = (rows) => tx.immediate(rows)
  }

  raise (rows: readonly NewAlert[]): number {
    return rows.length === 0 ? 0 : this.raiseTx(rows)
  }

  claim (now: number, until: number, limit: number): AlertDelivery[] {
    return this.claimStmt.all({ until, now, limit }).map(clean)
  }

  settle (id: string, a: AlertAttempt): void {
    this.settleStmt.run({ id, ...a })
  }

  page (limit: number, cursor?: Cursor): AlertDelivery[] {
    const rows = cursor === undefined ? this.pageStmt.all(limit) : this.pageAfterStmt.all(cursor.created_at, cursor.id, limit)
    return rows.map(clean)
  }

  transition (subject: string, state: string, quiet: string): number | null {
    const r = this.stateStmt.get(subject, state, state === quiet ? 0 : 1)
    if (r === undefined || (r.episode === 0 && state === quiet)) return null
    return r.episode
  }
}

/** A row as the interface has it (without the sender's claim). */
function clean (r: AlertDelivery & { claimed_until?: number }): AlertDelivery {
  const { claimed_until: _claim, ...rest } = r
  return rest
}
