// The request log: usage records newest first (model calls, MCP tool calls, and calls refused
// once their key was known, with the refusal's code), filtered by
// organization, project, key, model or tool, kind of call, status and time, fifty at a time ("Older" reads the next page by its cursor). A row opens the
// call: its tokens, cost, timings, provider attempts, dropped parameters and, when the usage
// plugin stores them, its request and response.

import { get, query } from './api.js'
import { $, closers, el, fill, input, int, isoOf, label, onSubmit, problem, say, select, usd, when } from './dom.js'
import type { AnswerOf, CallDetail, UsageRecord } from './types.js'

const PAGE = 50
let filters: Record<string, string | undefined> = {}
let cursor: string | null = null
let shown = 0

const isTool = (r: UsageRecord): boolean => r.endpoint === 'mcp.tools_call'

/** A refused call's error code, beside its status. */
const refusal = (r: UsageRecord): HTMLElement | null => typeof r.error === 'string' ? el('span', { class: 'mono refusal' }, ` ${r.error}`) : null

function row (r: UsageRecord): HTMLElement {
  const ok = r.status === 'ok'
  return el('tr', { 'data-trace': r.trace_id, class: 'clickable' },
    el('td', { class: 'nowrap' }, el('button', { type: 'button', class: 'link', 'data-open': r.trace_id, 'aria-label': `Open the call of ${when(r.created_at)} to ${r.model}` }, when(r.created_at))),
    el('td', {}, `${r.org}/${r.project}`),
    el('td', { class: 'mono' }, r.key_id ?? '—'),
    el('td', {}, isTool(r) ? el('span', { class: 'badge' }, 'tool') : null, isTool(r) ? ' ' : null, r.model),
    el('td', {}, r.provider ?? '—'),
    el('td', {}, el('span', { class: `badge ${ok ? 'good' : r.status === 'refused' ? 'warn' : 'bad'}` }, r.status), refusal(r), r.cache_hit ? el('span', { class: 'badge' }, 'cache hit') : null),
    el('td', { class: 'num' }, isTool(r) ? '—' : `${int(r.prompt_tokens)} / ${int(r.completion_tokens)}`),
    el('td', { class: 'num' }, usd(r.cost_usd)),
    el('td', { class: 'num' }, `${int(r.latency_ms)} ms`))
}

async function page (append: boolean): Promise<void> {
  try {
    const list = await get<AnswerOf<'usage'>>(`/usage${query({ ...filters, limit: PAGE, cursor: append ? cursor ?? undefined : undefined })}`)
    say('log-error', '')
    cursor = list.next_cursor ?? null
    const rows = list.data.map(row)
    if (append) {
      ($('log').querySelector('tbody') as HTMLElement).append(...label('log', rows))
      shown += rows.length
    } else {
      fill('log', rows, 'No calls match.')
      shown = rows.length
    }
    $('log-older').hidden = cursor === null
    say('log-count', shown === 0 ? '' : `${int(shown)} call${shown === 1 ? '' : 's'} shown${cursor === null ? ', the oldest included' : ''}.`)
  } catch (err) {
    say('log-error', `Could not load the calls: ${problem(err)}`)
  }
}

export async function loadLog (): Promise<void> {
  filters = {
    org: input('lf-org').value.trim(),
    project: input('lf-project').value.trim(),
    key_id: input('lf-key').value.trim(),
    model: input('lf-model').value.trim(),
    endpoint: select('lf-endpoint').value,
    status: select('lf-status').value,
    since: isoOf(input('lf-since').value),
    until: isoOf(input('lf-until').value)
  }
  await page(false)
}

const dl = (pairs: Array<[string, string | Node]>): HTMLElement =>
  el('dl', { class: 'facts' }, ...pairs.map(([k, v]) => el('div', {}, el('dt', {}, k), el('dd', {}, v))))

const ms = (n: number | null | undefined): string => n === null || n === undefined ? '—' : `${int(n)} ms`
/** Stored text as shown: JSON indented, anything else as it is. */
function text (v: string | null): string {
  if (v === null) return '(none)'
  try { return JSON.stringify(JSON.parse(v), null, 2) } catch { return v }
}

const PARTS = { input: 'input', cached_input: 'cache reads', cache_write: 'cache writes', output: 'output', images: 'images', per_request: 'per request', tool_call: 'tool call' } as const

/** The cost by part, the parts that cost something, and the long-context tier billed at. */
function costParts (c: CallDetail): Array<[string, string]> {
  const d = c.cost_detail
  if (d === null || d === undefined) return []
  const parts = Object.entries(PARTS).filter(([k]) => d[k as keyof typeof PARTS] !== '0').map(([k, name]) => `${name} ${usd(d[k as keyof typeof PARTS])}`)
  const out: Array<[string, string]> = [['Cost by part', parts.length === 0 ? '—' : parts.join(', ')]]
  if (d.tier !== null) out.push(['Price tier', `prompts over ${int(d.tier)} tokens`])
  return out
}

function detail (c: CallDetail): HTMLElement[] {
  const attempts = c.attempts ?? []
  const dropped = c.dropped_params ?? []
  return [
    dl([
      ['Time', when(c.created_at)], ['Trace id', el('span', { class: 'mono' }, c.trace_id)],
      ['Project', `${c.org}/${c.project}`], ['Key', el('span', { class: 'mono' }, c.key_id ?? '—')],
      ['Endpoint', `${c.endpoint}${c.stream ? ' (stream)' : ''}`], [isTool(c) ? 'Tool' : 'Model', c.model],
      ...(c.requested_model !== null ? [['Requested', el('span', { class: 'mono' }, c.requested_model)] as [string, Node]] : []),
      ...(c.fallbacks.length > 0 ? [['Fallbacks', el('span', { class: 'mono', id: 'call-chain' }, [...c.fallbacks.map((f) => `${f.model} (${f.why})`), c.status === 'ok' ? c.model : 'none answered'].join(' → '))] as [string, Node]] : []),
      [isTool(c) ? 'MCP server' : 'Provider', c.provider ?? '—'], ['Status', c.status],
      ...(typeof c.error === 'string' ? [['Refused with', el('span', { class: 'mono' }, c.error)] as [string, Node]] : [])
    ]),
    el('h3', {}, 'Tokens, cost and timing'),
    dl([
      ['Input tokens', int(c.prompt_tokens)], ['Cached input tokens', int(c.cached_input_tokens)],
      ...(c.cache_write_tokens > 0 ? [['Cache write tokens', int(c.cache_write_tokens)] as [string, string]] : []),
      ['Output tokens', int(c.completion_tokens)], ['Total tokens', int(c.total_tokens)],
      ...(c.images > 0 ? [['Images', int(c.images)] as [string, string]] : []),
      ['Cost', usd(c.cost_usd)], ...costParts(c), ['Cache', c.cache_hit ? `hit, saved ${usd(c.saved_usd)}` : 'miss'],
      ['Latency', ms(c.latency_ms)], ['Time to first token', ms(c.ttft_ms)]
    ]),
    el('h3', {}, 'Provider attempts'),
    attempts.length === 0
      ? el('p', { class: 'muted' }, c.cache_hit ? 'None: answered from the cache.' : c.status === 'refused' ? 'None: the gateway refused the call before any provider.' : 'None recorded.')
      : el('div', { class: 'table-wrap' }, el('table', { id: 'call-attempts', class: 'cards' },
        el('thead', {}, el('tr', {}, ...['#', 'Provider', 'Upstream model', 'Outcome', 'HTTP status', 'Error', 'Latency'].map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, ...attempts.map((a, i) => el('tr', {},
          el('td', { 'data-label': '#' }, String(i + 1)),
          el('td', { 'data-label': 'Provider' }, a.provider),
          el('td', { 'data-label': 'Upstream model', class: 'mono' }, a.upstream_model ?? '—'),
          el('td', { 'data-label': 'Outcome' }, el('span', { class: `badge ${a.outcome === 'ok' ? 'good' : 'bad'}` }, a.outcome ?? '—')),
          el('td', { 'data-label': 'HTTP status' }, a.status === null ? '—' : String(a.status)),
          el('td', { 'data-label': 'Error' }, a.error ?? '—'),
          el('td', { 'data-label': 'Latency', class: 'num' }, ms(a.latency_ms))))))),
    el('h3', {}, 'Dropped parameters'),
    dropped.length === 0 ? el('p', { class: 'muted' }, 'None.') : el('p', { class: 'mono', id: 'call-dropped' }, dropped.join(', ')),
    el('h3', {}, 'Content'),
    c.content === null || c.content === undefined
      ? el('p', { class: 'muted', id: 'call-content' }, 'Not stored (the usage plugin keeps request and response text only with store_content: true).')
      : el('div', { id: 'call-content' },
        el('details', { open: true }, el('summary', {}, 'Request'), el('pre', {}, text(c.content.request))),
        el('details', {}, el('summary', {}, 'Response'), el('pre', {}, text(c.content.response))))
  ]
}

async function open (trace: string): Promise<void> {
  const dialog = $<HTMLDialogElement>('call-dialog')
  $('call-title').textContent = 'Call'
  $('call-body').replaceChildren(el('p', { class: 'muted' }, 'Loading…'))
  say('call-error', '')
  if (!dialog.open) dialog.showModal()
  try {
    const c = await get<CallDetail>(`/usage/${encodeURIComponent(trace)}`)
    $('call-title').textContent = `${isTool(c) ? 'Tool call' : 'Call'} to ${c.model}`
    $('call-body').replaceChildren(...detail(c))
  } catch (err) {
    $('call-body').replaceChildren()
    say('call-error', `Could not load the call: ${problem(err)}`)
  }
}

export function initLog (): void {
  onSubmit('log-filter', loadLog)
  $('log-filter').addEventListener('reset', () => { setTimeout(() => { void loadLog() }) })
  $('log-older').addEventListener('click', () => { void page(true) })
  $('log').addEventListener('click', (e) => {
    const target = e.target as HTMLElement
    const trace = target.closest('button[data-open]')?.getAttribute('data-open') ??
      (target.closest('a, button') === null ? target.closest('tr')?.dataset.trace : undefined)
    if (trace !== undefined && trace !== null) void open(trace)
  })
  closers($<HTMLDialogElement>('call-dialog'))
}

export function resetLog (): void {
  cursor = null
  shown = 0
  fill('log', [], '')
  $('log-older').hidden = true
  say('log-count', '')
  $<HTMLDialogElement>('call-dialog').close()
}
