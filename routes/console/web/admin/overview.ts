// Overview: calls, errors, tokens, spend and what the response cache saved over 24 hours (by
// hour) or 7 or 30 days (by day), from the store's own sums (GET /admin/v1/usage/summary), with
// the totals of the range, its top models and organizations, and its spend by tag (a call counts
// under each of its tags; untagged calls together).

import { get, query } from './api.js'
import { chart, clearCharts, color } from './charts.js'
import { $, el, fill, int, problem, say, select, usd } from './dom.js'
import type { AnswerOf, SummaryRow } from './types.js'

const HOUR = 3_600_000
const DAY = 86_400_000
const RANGES = { '24h': { bucket: 'hour', step: HOUR, n: 24 }, '7d': { bucket: 'day', step: DAY, n: 7 }, '30d': { bucket: 'day', step: DAY, n: 30 } } as const
type Range = keyof typeof RANGES

const ZERO: SummaryRow = { calls: 0, errors: 0, prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, cost_usd: '0', saved_usd: '0' }

const tokens = (r: SummaryRow): number => r.prompt_tokens + r.completion_tokens
const compact = (n: number): string => n >= 1e6 ? `${+(n / 1e6).toFixed(2)}M` : n >= 1e3 ? `${+(n / 1e3).toFixed(1)}k` : String(+n.toFixed(2))
const money = (n: number): string => n === 0 ? '$0' : n < 0.01 ? `$${+n.toPrecision(2)}` : `$${n.toFixed(2)}`

/** A figure and its label; the figure is never cut or broken: its size shrinks to fit its tile (its length in --chars). */
function stat (label: string, value: string, id: string): HTMLElement {
  const v = el('div', { class: 'v' }, value)
  v.style.setProperty('--chars', String(value.length))
  return el('div', { class: 'stat', 'data-stat': id }, v, el('div', { class: 'l' }, label))
}

/** The first bucket of the range, and each bucket's start (ms). */
function buckets (range: Range, now: number): number[] {
  const { step, n } = RANGES[range]
  const last = Math.floor(now / step) * step
  return Array.from({ length: n }, (_, i) => last - (n - 1 - i) * step)
}

function topRows (rows: SummaryRow[], field: 'model' | 'org' | 'tag'): HTMLElement[] {
  return [...rows]
    .sort((a, b) => b.calls - a.calls || Number(b.cost_usd) - Number(a.cost_usd))
    .slice(0, 10)
    .map((r) => el('tr', {},
      el('th', { scope: 'row' }, r[field] ?? (field === 'tag' ? 'untagged' : '—')),
      el('td', { class: 'num' }, int(r.calls)),
      el('td', { class: 'num' }, int(r.errors)),
      el('td', { class: 'num' }, int(tokens(r))),
      el('td', { class: 'num' }, usd(r.cost_usd)),
      el('td', { class: 'num' }, usd(r.saved_usd))))
}

export async function loadOverview (): Promise<void> {
  const range = select('ov-range').value as Range
  const { bucket, step } = RANGES[range]
  const starts = buckets(range, Date.now())
  const since = new Date(starts[0] as number).toISOString()
  try {
    const [series, totals, models, orgs, tags] = await Promise.all([
      get<AnswerOf<'summary'>>(`/usage/summary${query({ bucket, since })}`),
      get<AnswerOf<'summary'>>(`/usage/summary${query({ since })}`),
      get<AnswerOf<'summary'>>(`/usage/summary${query({ group_by: 'model', since })}`),
      get<AnswerOf<'summary'>>(`/usage/summary${query({ group_by: 'org', since })}`),
      get<AnswerOf<'summary'>>(`/usage/summary${query({ group_by: 'tag', since })}`)
    ])
    say('ov-error', '')
    const t = totals.data[0] ?? ZERO
    $('ov-totals').replaceChildren(
      stat('Calls', int(t.calls), 'calls'),
      stat('Errors', int(t.errors), 'errors'),
      stat('Input tokens', int(t.prompt_tokens), 'prompt_tokens'),
      stat('Cached input tokens', int(t.cached_input_tokens), 'cached_input_tokens'),
      stat('Output tokens', int(t.completion_tokens), 'completion_tokens'),
      stat('Spend', usd(t.cost_usd), 'cost'),
      stat('Saved by the cache', usd(t.saved_usd), 'saved'))

    const at = new Map(series.data.map((r) => [Date.parse(r.bucket_start ?? ''), r]))
    const rows = starts.map((s) => at.get(s) ?? ZERO)
    const xs = starts.map((s) => s / 1000)
    const per = step === HOUR ? 'hour' : 'day'
    const byDay = step === DAY
    chart($('chart-calls'), xs, [
      { label: 'Calls', values: rows.map((r) => r.calls), color: color('--in') },
      { label: 'Errors', values: rows.map((r) => r.errors), color: color('--err') }
    ], compact, `Calls and errors per ${per}: ${int(t.calls)} calls and ${int(t.errors)} errors in all`, byDay)
    chart($('chart-tokens'), xs, [
      { label: 'Input', values: rows.map((r) => r.prompt_tokens - r.cached_input_tokens), color: color('--in') },
      { label: 'Cached input', values: rows.map((r) => r.cached_input_tokens), color: color('--cached') },
      { label: 'Output', values: rows.map((r) => r.completion_tokens), color: color('--out') }
    ], compact, `Tokens per ${per}: ${int(t.prompt_tokens)} input, of which ${int(t.cached_input_tokens)} cached, and ${int(t.completion_tokens)} output`, byDay)
    chart($('chart-spend'), xs, [
      { label: 'Spend', values: rows.map((r) => Number(r.cost_usd)), color: color('--out') },
      { label: 'Saved', values: rows.map((r) => Number(r.saved_usd)), color: color('--cached') }
    ], money, `Spend per ${per}: ${usd(t.cost_usd)} in all; the response cache saved ${usd(t.saved_usd)}`, byDay)

    fill('ov-models', topRows(models.data, 'model'), 'No calls in this range.')
    fill('ov-orgs', topRows(orgs.data, 'org'), 'No calls in this range.')
    fill('ov-tags', topRows(tags.data, 'tag'), 'No calls in this range.')
  } catch (err) {
    say('ov-error', `Could not load the overview: ${problem(err)}`)
  }
}

export function initOverview (): void {
  select('ov-range').addEventListener('change', () => { void loadOverview() })
  $('ov-refresh').addEventListener('click', () => { void loadOverview() })
}

export function resetOverview (): void {
  clearCharts()
  $('ov-totals').replaceChildren()
  fill('ov-models', [], '')
  fill('ov-orgs', [], '')
  fill('ov-tags', [], '')
}
