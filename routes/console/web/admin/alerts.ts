// Alerts: the webhook deliveries of the alerts (budget and quota thresholds, low balances, keys
// about to expire, providers down and up), newest first: each event, the webhook it goes to, how
// its delivery stands (pending with its next attempt, delivered, failed after 24 hours of
// retries), its attempts and the last answer.

import { get, query } from './api.js'
import { $, el, fill, int, problem, say, when } from './dom.js'
import type { AnswerOf, Delivery } from './types.js'

const TONE = { delivered: 'good', pending: 'warn', failed: 'bad' } as const

/** What the event says, in a few words. */
function summary (d: Delivery): string {
  const data = d.event.data
  const pct = (x: unknown): string => `${Math.round(Number(x) * 100)} %`
  switch (d.type) {
    case 'budget.threshold': return `key ${String(data.id)}: ${pct(data.threshold)} of $${String(data.limit_usd)}`
    case 'quota.threshold': return `${String(data.scope)} ${String(data.id)}: ${pct(data.threshold)} of ${String(data.limit)} ${String(data.unit)}`
    case 'balance.low': return `${String(data.org)}: $${String(data.balance_usd)} left`
    case 'key.expiring': return `key ${String(data.key_id)} expires ${when(String(data.expires_at))}`
    default: return `${String(data.provider)}: ${String(data.reason)}`
  }
}

function row (d: Delivery): HTMLElement {
  return el('tr', { 'data-delivery': d.id },
    el('td', {}, when(d.created_at)),
    el('th', { scope: 'row', class: 'mono' }, d.type),
    el('td', { class: 'wrap' }, summary(d)),
    el('td', { class: 'mono wrap' }, d.webhook),
    el('td', {}, el('span', { class: `badge ${TONE[d.status] ?? ''}` }, d.status),
      d.next_attempt_at === null ? null : el('span', { class: 'muted' }, ` next ${when(d.next_attempt_at)}`)),
    el('td', { class: 'num' }, int(d.attempts)),
    el('td', { class: 'wrap' }, d.last_status === null && d.last_error === null
      ? el('span', { class: 'muted' }, '—')
      : [d.last_status === null ? '' : `HTTP ${d.last_status}`, d.last_error ?? ''].filter((s) => s !== '').join(': ')))
}

export async function loadAlerts (): Promise<void> {
  try {
    const list = await get<AnswerOf<'deliveries'>>(`/alerts/deliveries${query({ limit: '200' })}`)
    say('al-error', '')
    fill('deliveries', list.data.map(row), 'No alert has been raised.')
  } catch (err) {
    say('al-error', `Could not load the deliveries: ${problem(err)}`)
  }
}

export function initAlerts (): void {
  $('al-refresh').addEventListener('click', () => { void loadAlerts() })
}

export function resetAlerts (): void {
  fill('deliveries', [], '')
}
