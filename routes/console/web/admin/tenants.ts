// Tenants: every organization with its balance, what is held for calls in flight, what it spent,
// its quota and its usage over 30 days; forms to create an organization or a project and to add
// credits. The organization pickers of the other sections are filled from the same list.

import { role } from './role.js'
import { api, get, query } from './api.js'
import { $, el, fill, input, int, problem, say, select, usd } from './dom.js'
import type { AnswerOf, Org, Plugins, QuotaView } from './types.js'

let orgs: Org[] = []

/** The organizations last read (for the pickers of other sections). */
export const knownOrgs = (): Org[] => orgs

function quotaCell (q: QuotaView | null): HTMLElement {
  if (q === null) return el('span', { class: 'muted' }, 'none')
  const unit = q.unit === 'usd' ? 'USD' : 'tokens'
  const limit = Number(q.limit)
  const used = Number(q.used)
  return el('div', { class: 'quota' },
    el('span', {}, `${q.used} of ${q.limit} ${unit} per ${q.per}`),
    el('meter', { min: '0', max: String(limit), value: String(Math.min(used, limit)), high: String(limit * 0.8), optimum: '0', 'aria-label': `Quota used: ${q.used} of ${q.limit} ${unit} this ${q.per}` }))
}

/** Fills every organization picker (`select.org-select`), keeping what was chosen. */
export function fillOrgPickers (): void {
  for (const s of document.querySelectorAll<HTMLSelectElement>('select.org-select')) {
    const chosen = s.value
    const all = s.dataset.all
    s.replaceChildren(
      ...(all === undefined ? [] : [el('option', { value: '' }, all)]),
      ...orgs.map((o) => el('option', { value: o.id }, o.id)))
    if ([...s.options].some((o) => o.value === chosen)) s.value = chosen
    s.dispatchEvent(new Event('orgs'))
  }
}

/** The project picker `target` filled with the projects of the organization chosen in `org`. */
export function projectPicker (org: HTMLSelectElement, target: HTMLSelectElement, all?: string): void {
  const fillProjects = (): void => {
    const chosen = target.value
    const projects = orgs.find((o) => o.id === org.value)?.projects ?? []
    target.replaceChildren(
      ...(all === undefined ? [] : [el('option', { value: '' }, all)]),
      ...projects.map((p) => el('option', { value: p.id }, p.id)))
    if ([...target.options].some((o) => o.value === chosen)) target.value = chosen
  }
  org.addEventListener('change', fillProjects)
  org.addEventListener('orgs', fillProjects)
}

/** Reads the organizations again and fills the pickers (the table too, with `usage`). */
export async function refreshOrgs (): Promise<void> {
  orgs = (await get<AnswerOf<'orgs'>>('/orgs')).data
  fillOrgPickers()
}

export async function loadTenants (): Promise<void> {
  try {
    const since = new Date(Date.now() - 30 * 86_400_000).toISOString()
    // an org_admin may not read the plugin chain: its balance is shown as the store keeps it
    const [, usage, plugins] = await Promise.all([refreshOrgs(), get<AnswerOf<'summary'>>(`/usage/summary${query({ group_by: 'org', since })}`), role() === 'org_admin' ? null : get<Plugins>('/plugins')])
    const byOrg = new Map(usage.data.map((r) => [r.org, r]))
    // without the balance plugin nothing is charged to a balance: Spent stays at 0 whatever the calls cost
    const charged = plugins === null || plugins.data.some((p) => p.name === 'balance' && (p.module ?? null) === null && p.enabled)
    $('tn-balance-off').hidden = charged
    say('tn-error', '')
    fill('orgs', orgs.map((o) => {
      const u = byOrg.get(o.id)
      return el('tr', { 'data-org': o.id },
        el('th', { scope: 'row' }, o.id),
        el('td', { class: 'num' }, usd(o.balance_usd)),
        el('td', { class: 'num' }, usd(o.held_usd)),
        charged
          ? el('td', { class: 'num' }, usd(o.spent_usd), o.uncollected_usd === '0'
            ? ''
            : el('div', { class: 'warn', 'data-uncollected': o.uncollected_usd, title: 'Charged beyond what the balance held; the next top-up pays it first' }, `${usd(o.uncollected_usd)} uncollected`))
          : el('td', { class: 'num muted', title: 'The balance plugin is off: balances are not charged' }, 'not charged'),
        el('td', {}, quotaCell(o.quota)),
        el('td', { class: 'num' }, int(u?.calls ?? 0)),
        el('td', { class: 'num' }, usd(u?.cost_usd ?? '0')),
        el('td', {}, o.projects.length === 0
          ? el('span', { class: 'muted' }, 'none')
          : el('ul', { class: 'plain' }, ...o.projects.map((p) => el('li', { 'data-project': p.id }, p.id, p.quota === null ? '' : el('span', { class: 'muted' }, ` (quota ${p.quota.used} of ${p.quota.limit} ${p.quota.unit === 'usd' ? 'USD' : 'tokens'} per ${p.quota.per})`))))))
    }), 'No organizations yet.')
  } catch (err) {
    say('tn-error', `Could not load the organizations: ${problem(err)}`)
  }
}

/** A quota of a form: undefined when its limit is left empty. */
function quotaOf (prefix: string): Record<string, string | number> | undefined {
  const limit = input(`${prefix}-quota`).value.trim()
  if (limit === '') return undefined
  const per = select(`${prefix}-quota-per`).value
  return select(`${prefix}-quota-unit`).value === 'usd' ? { usd: limit, per } : { tokens: Number(limit), per }
}

/** Runs a change; says how it went, and shows the organizations as they are after it. */
async function change (form: HTMLFormElement, done: string, run: () => Promise<unknown>): Promise<void> {
  say('tn-status', '')
  try {
    await run()
    say('tn-error', '')
    say('tn-status', done)
    form.reset()
    await loadTenants()
  } catch (err) {
    say('tn-error', problem(err))
  }
}

export function initTenants (): void {
  $('tn-refresh').addEventListener('click', () => { void loadTenants() })
  $('org-form').addEventListener('submit', (e) => {
    e.preventDefault()
    const id = input('org-id').value.trim()
    const balance = input('org-balance').value.trim()
    const quota = quotaOf('org')
    void change(e.target as HTMLFormElement, `Organization ${id} created.`, async () =>
      await api('POST', '/orgs', { id, ...(balance === '' ? {} : { balance_usd: balance }), ...(quota === undefined ? {} : { quota }) }))
  })
  $('project-form').addEventListener('submit', (e) => {
    e.preventDefault()
    const org = select('project-org').value
    const id = input('project-id').value.trim()
    const quota = quotaOf('project')
    void change(e.target as HTMLFormElement, `Project ${org}/${id} created.`, async () =>
      await api('POST', `/orgs/${encodeURIComponent(org)}/projects`, { id, ...(quota === undefined ? {} : { quota }) }))
  })
  $('credits-form').addEventListener('submit', (e) => {
    e.preventDefault()
    const org = select('credits-org').value
    const amount = input('credits-amount').value.trim()
    void change(e.target as HTMLFormElement, `Added $${amount} to ${org}.`, async () =>
      await api('POST', `/orgs/${encodeURIComponent(org)}/credits`, { amount_usd: amount }))
  })
}

export function resetTenants (): void {
  orgs = []
  fillOrgPickers()
  fill('orgs', [], '')
  say('tn-status', '')
  say('tn-error', '')
}
