// Providers: each one's protocol, address, whether it has credentials, its circuit breaker, its
// health and latency and its latest failures, merged from every worker's view (a breaker open in
// some workers only says in how many); below them the MCP servers behind /mcp, when the config
// names some: each one's transport, status, tools and last error; and the catalog prices that
// differ from the price database the gateway ships.

import { get } from './api.js'
import { $, el, fill, int, problem, say, usd, when } from './dom.js'
import type { AnswerOf, McpServer, PriceCheck, PriceDifference, Provider } from './types.js'

const BREAKER = { closed: ['closed', 'good'], open: ['open', 'bad'], half_open: ['half open', 'warn'] } as const

function row (p: Provider): HTMLElement {
  const [breaker, tone] = BREAKER[p.breaker] ?? [String(p.breaker), '']
  return el('tr', { 'data-provider': p.id },
    el('th', { scope: 'row' }, p.id),
    el('td', {}, p.protocol, ...(p.platform === null || p.platform === undefined ? [] : [' ', el('span', { class: 'badge' }, `on ${p.platform}`)])),
    el('td', { class: 'mono wrap' }, p.base_url ?? '(built in)'),
    el('td', {}, p.configured ? 'yes' : el('span', { class: 'badge warn' }, 'no credentials')),
    el('td', {}, el('span', { class: `badge ${tone}` }, breaker), ...partly(p)),
    el('td', {}, el('span', { class: `badge ${p.healthy ? 'good' : 'bad'}` }, p.healthy ? 'healthy' : 'unhealthy')),
    el('td', { class: 'num' }, p.avg_latency_ms === null ? '—' : `${int(Math.round(p.avg_latency_ms))} ms`),
    el('td', {}, p.recent_failures.length === 0
      ? el('span', { class: 'muted' }, 'none')
      : el('ul', { class: 'plain failures' }, ...p.recent_failures.map((f) =>
        el('li', {}, el('span', { class: 'muted' }, when(f.at)), ' ', f.status === null ? '' : `${f.status} `, f.error ?? '')))))
}

/** "in 1 of 2 workers", when the workers do not agree on the breaker. */
function partly (p: Provider): Array<HTMLElement | string> {
  const workers = p.workers ?? []
  const worst = workers.filter((w) => w.breaker === p.breaker).length
  return workers.length > 1 && worst < workers.length ? [' ', el('span', { class: 'muted' }, `in ${worst} of ${workers.length} workers`)] : []
}

function priceRow (d: PriceDifference): HTMLElement {
  return el('tr', { 'data-model': d.model, 'data-field': d.field },
    el('th', { scope: 'row' }, d.model),
    el('td', { class: 'mono' }, d.field),
    el('td', { class: 'num' }, usd(d.catalog)),
    el('td', { class: 'num' }, usd(d.reference)),
    el('td', { class: 'muted wrap' }, d.source))
}

async function loadPrices (): Promise<void> {
  try {
    const check = await get<PriceCheck>('/prices/check')
    say('pc-error', '')
    const unknown = check.unknown.length === 0 ? '' : ` Not in the database: ${check.unknown.join(', ')}.`
    $('pc-summary').textContent = `${int(check.checked)} priced models checked; ${check.data.length === 0 ? 'no price differs' : `${int(check.data.length)} price(s) differ`}.${unknown}`
    fill('prices', check.data.map(priceRow), 'Every checked price matches the database.')
  } catch (err) {
    say('pc-error', `Could not check the prices: ${problem(err)}`)
  }
}

const STATUS = { ready: 'good', starting: 'warn', down: 'bad' } as const

function serverRow (s: McpServer): HTMLElement {
  const workers = s.workers ?? []
  const worst = workers.filter((w) => w.status === s.status).length
  return el('tr', { 'data-mcp-server': s.id },
    el('th', { scope: 'row' }, s.id),
    el('td', {}, s.transport),
    el('td', {}, el('span', { class: `badge ${STATUS[s.status] ?? ''}` }, s.status),
      workers.length > 1 && worst < workers.length ? el('span', { class: 'muted' }, ` in ${worst} of ${workers.length} workers`) : null),
    el('td', { class: 'mono wrap' }, s.tools.length === 0 ? el('span', { class: 'muted' }, 'none') : s.tools.join(', ')),
    el('td', { class: 'wrap' }, s.last_error ?? el('span', { class: 'muted' }, 'none')))
}

export async function loadProviders (): Promise<void> {
  void loadPrices()
  try {
    const [list, mcp] = await Promise.all([
      get<AnswerOf<'providers'>>('/providers'),
      get<AnswerOf<'mcpServers'>>('/mcp/servers')
    ])
    say('pv-error', '')
    $('pv-worker').textContent = list.workers === undefined || list.workers < 2 ? '' : `Merged from ${list.workers} workers.`
    fill('providers', list.data.map(row), 'No providers configured.')
    $('mcp-section').hidden = mcp.data.length === 0
    $('mcp-worker').textContent = mcp.workers === undefined || mcp.workers < 2 ? '' : `Merged from ${mcp.workers} workers.`
    fill('mcp-servers', mcp.data.map(serverRow), '')
  } catch (err) {
    say('pv-error', `Could not load the providers: ${problem(err)}`)
  }
}

export function initProviders (): void {
  $('pv-refresh').addEventListener('click', () => { void loadProviders() })
}

export function resetProviders (): void {
  fill('providers', [], '')
  fill('prices', [], '')
  $('pc-summary').textContent = ''
  say('pc-error', '')
  fill('mcp-servers', [], '')
  $('mcp-section').hidden = true
  $('pv-worker').textContent = ''
  say('pv-error', '')
}
