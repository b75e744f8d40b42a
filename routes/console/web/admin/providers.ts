// Providers: each one's protocol, address, whether it has credentials, its circuit breaker, its
// health and latency and its latest failures, as the worker that answered sees them.

import { get } from './api.js'
import { $, el, fill, int, problem, say, when } from './dom.js'
import type { Provider } from './types.js'

const BREAKER = { closed: ['closed', 'good'], open: ['open', 'bad'], half_open: ['half open', 'warn'] } as const

function row (p: Provider): HTMLElement {
  const [breaker, tone] = BREAKER[p.breaker] ?? [String(p.breaker), '']
  return el('tr', { 'data-provider': p.id },
    el('th', { scope: 'row' }, p.id),
    el('td', {}, p.protocol),
    el('td', { class: 'mono wrap' }, p.base_url ?? '(built in)'),
    el('td', {}, p.configured ? 'yes' : el('span', { class: 'badge warn' }, 'no credentials')),
    el('td', {}, el('span', { class: `badge ${tone}` }, breaker)),
    el('td', {}, el('span', { class: `badge ${p.healthy ? 'good' : 'bad'}` }, p.healthy ? 'healthy' : 'unhealthy')),
    el('td', { class: 'num' }, p.avg_latency_ms === null ? '—' : `${int(Math.round(p.avg_latency_ms))} ms`),
    el('td', {}, p.recent_failures.length === 0
      ? el('span', { class: 'muted' }, 'none')
      : el('ul', { class: 'plain failures' }, ...p.recent_failures.map((f) =>
        el('li', {}, el('span', { class: 'muted' }, when(f.at)), ' ', f.status === null ? '' : `${f.status} `, f.error ?? '')))))
}

export async function loadProviders (): Promise<void> {
  try {
    const list = await get<{ data: Provider[], pid?: number }>('/providers')
    say('pv-error', '')
    $('pv-worker').textContent = list.pid === undefined ? '' : `Answered by the worker with process id ${list.pid}.`
    fill('providers', list.data.map(row), 'No providers configured.')
  } catch (err) {
    say('pv-error', `Could not load the providers: ${problem(err)}`)
  }
}

export function initProviders (): void {
  $('pv-refresh').addEventListener('click', () => { void loadProviders() })
}

export function resetProviders (): void {
  fill('providers', [], '')
  $('pv-worker').textContent = ''
  say('pv-error', '')
}
