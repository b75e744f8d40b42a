import type { AlertAttempt, AlertDelivery, AlertStore, Cursor, NewAlert } from '../types.js'
import type { Connection } from './db.js'

// The alerts' outbox in PostgreSQL, shared by every instance: a crossing is written once (its
// unique pair), a due delivery is claimed by one sender at a time (SKIP LOCKED).

export class AlertRepository implements AlertStore {
  constructor (private readonly conn: Connection) {}

  async raise (rows: readonly NewAlert[]): Promise<number> {
    if (rows.length === 0) return 0
    const r = await this.conn.q(`INSERT INTO alert_deliveries (id, crossing, webhook, type, payload, created_at, status, attempts, next_at)
      SELECT x->>'id', x->>'crossing', x->>'webhook', x->>'type', x->>'payload', (x->>'created_at')::bigint, 'pending', 0, (x->>'created_at')::bigint
      FROM jsonb_array_elements($1::jsonb) x ON CONFLICT (crossing, webhook) DO NOTHING`, [JSON.stringify(rows)])
    return r.rowCount ?? 0
  }

  async claim (now: number, until: number, limit: number): Promise<AlertDelivery[]> {
    const r = await this.conn.q<AlertDelivery & { claimed_until?: number }>(`UPDATE alert_deliveries SET claimed_until = $1, attempts = attempts + 1
      WHERE id IN (SELECT id FROM alert_deliveries WHERE status = 'pending' AND next_at <= $2 AND claimed_until <= $2 ORDER BY next_at LIMIT $3 FOR UPDATE SKIP LOCKED)
      RETURNING *`, [until, now, limit])
    return r.rows.map(clean)
  }

  async settle (id: string, a: AlertAttempt): Promise<void> {
    await this.conn.q('UPDATE alert_deliveries SET status = $2, next_at = $3, last_status = $4, last_error = $5, delivered_at = $6, claimed_until = 0 WHERE id = $1',
      [id, a.status, a.next_at, a.last_status, a.last_error, a.delivered_at])
  }

  async page (limit: number, cursor?: Cursor): Promise<AlertDelivery[]> {
    const r = cursor === undefined
      ? await this.conn.q<AlertDelivery>('SELECT * FROM alert_deliveries ORDER BY created_at DESC, id DESC LIMIT $1', [limit])
      : await this.conn.q<AlertDelivery>('SELECT * FROM alert_deliveries WHERE (created_at, id) < ($1, $2) ORDER BY created_at DESC, id DESC LIMIT $3', [cursor.created_at, cursor.id, limit])
    return r.rows.map(clean)
  }

  async transition (subject: string, state: string, quiet: string): Promise<number | null> {
    const r = await this.conn.q<{ episode: number }>(`INSERT INTO alert_state AS s (subject, state, episode) VALUES ($1, $2, $3)
      ON CONFLICT (subject) DO UPDATE SET state = EXCLUDED.state, episode = s.episode + 1 WHERE s.state <> EXCLUDED.state
      RETURNING episode`, [subject, state, state === quiet ? 0 : 1])
    const row = r.rows[0]
    if (row === undefined || (row.episode === 0 && state === quiet)) return null
    return row.episode
  }
}

/** A row as the interface has it (without the sender's claim). */
function clean (r: AlertDelivery & { claimed_until?: number }): AlertDelivery {
  const { claimed_until: _claim, ...rest } = r
  return rest
}
