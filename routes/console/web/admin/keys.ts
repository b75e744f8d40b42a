// Keys: listed by organization and project; created with their grants (models, pass-through
// providers, MCP tools), expiry, limits and budget
// (the secret shown once, with a copy button, kept until the operator is done with it); edited; rotated with a grace period (the new
// secret shown once); revoked after a confirmation.

import { mayManage } from './role.js'
import { api, get, query } from './api.js'
import { $, closers, el, fill, input, isoOf, localOf, onSubmit, problem, say, select, usd, when, words } from './dom.js'
import { projectPicker, refreshOrgs } from './tenants.js'
import type { AnswerOf, Key, NewKey, Rotation } from './types.js'

let keys: Key[] = []

/** The key's budget is spent for its window: its calls are refused until the window resets. */
const overBudget = (k: Key): boolean => k.budget !== null && Number(k.budget.used) >= Number(k.budget.limit)

function status (k: Key): HTMLElement {
  if (k.revoked) return el('span', { class: 'badge bad' }, 'revoked')
  if (k.expires_at !== null && Date.parse(k.expires_at) <= Date.now()) return el('span', { class: 'badge bad' }, 'expired')
  if (overBudget(k)) return el('span', { class: 'badge bad', title: `Calls are refused until the budget resets (${when(k.budget?.resets_at ?? null)})` }, 'over budget')
  if (k.expires_at !== null) return el('span', { class: 'badge warn' }, 'expires')
  return el('span', { class: 'badge good' }, 'active')
}

function limits (k: Key): string {
  if (k.limits === null) return '—'
  return [k.limits.rpm === null ? '' : `${k.limits.rpm} rpm`, k.limits.tpm === null ? '' : `${k.limits.tpm} tpm`].filter((s) => s !== '').join(', ')
}

function row (k: Key): HTMLElement {
  const live = !k.revoked
  const label = k.name === '' ? k.id : k.name
  return el('tr', { 'data-key-id': k.id, class: k.revoked ? 'dim' : undefined },
    el('th', { scope: 'row' }, el('div', {},
      el('div', {}, k.name === '' ? el('span', { class: 'muted' }, '(no name)') : k.name), el('div', { class: 'mono muted' }, k.id),
      k.replaces === null || k.replaces === undefined ? null : el('div', { class: 'muted small' }, `replaces ${k.replaces}`))),
    el('td', {}, `${k.org}/${k.project}`),
    el('td', { class: 'mono' }, k.models.join(', '),
      k.passthrough.length === 0 ? null : el('div', { class: 'muted small' }, `pass-through: ${k.passthrough.join(', ')}`),
      k.mcp.length === 0 ? null : el('div', { class: 'muted small' }, `MCP: ${k.mcp.join(', ')}`)),
    el('td', {}, limits(k)),
    el('td', {}, k.budget === null ? '—' : `${usd(k.budget.used)} of ${usd(k.budget.limit)} per ${k.budget.per}`),
    el('td', { class: 'nowrap' }, k.expires_at === null ? 'never' : when(k.expires_at)),
    el('td', { class: 'nowrap' }, when(k.last_used_at)),
    el('td', {}, status(k)),
    el('td', { class: 'actions' }, live && mayManage()
      ? el('div', { class: 'row' },
        el('button', { type: 'button', class: 'secondary small', 'data-action': 'edit', 'aria-label': `Edit key ${label}` }, 'Edit'),
        el('button', { type: 'button', class: 'secondary small', 'data-action': 'rotate', 'aria-label': `Rotate key ${label}` }, 'Rotate'),
        el('button', { type: 'button', class: 'danger small', 'data-action': 'revoke', 'aria-label': `Revoke key ${label}` }, 'Revoke'))
      : ''))
}

export async function loadKeys (): Promise<void> {
  try {
    await refreshOrgs()
    const list = await get<AnswerOf<'keys'>>(`/keys${query({ org: select('kf-org').value, project: select('kf-project').value })}`)
    keys = list.data.sort((a, b) => Number(a.revoked) - Number(b.revoked) || b.created_at.localeCompare(a.created_at))
    say('keys-error', '')
    fill('keys', keys.map(row), 'No keys.')
  } catch (err) {
    say('keys-error', `Could not load the keys: ${problem(err)}`)
  }
}

// A secret shown is kept (other sections visited meanwhile) until the operator is done with it:
// at once once it was copied; when it was not, only on a second "Done", after a warning.
let copied = false
let warned = false

/** Shows a secret once; `note` says whose it is. Focus goes to it, so it can be copied at once. */
function showSecret (secret: string, note: string): void {
  $('secret').hidden = false
  input('secret-value').value = secret
  $('secret-note').textContent = note
  say('secret-copied', '')
  copied = false
  warned = false
  $('secret-done').textContent = 'Done'
  $('tab-keys').dataset.secret = 'waiting'
  input('secret-value').focus()
  input('secret-value').select()
}

/** Forgets a secret shown (dismissed, or signing out). */
export function hideSecret (): void {
  input('secret-value').value = ''
  $('secret-note').textContent = ''
  say('secret-copied', '')
  $('secret').hidden = true
  delete $('tab-keys').dataset.secret
}

/** "Done": the secret goes if it was copied; if not, the operator is told it cannot be shown again, and a second "Done" discards it. */
function doneWithSecret (): void {
  if (copied || warned) { hideSecret(); return }
  warned = true
  $('secret-done').textContent = 'Discard it'
  say('secret-copied', 'This secret was not copied, and it cannot be shown again: copy it, or choose "Discard it" to let it go.')
}

function secretCopied (): void {
  copied = true
  $('secret-done').textContent = 'Done'
}

async function copySecret (): Promise<void> {
  const field = input('secret-value')
  try {
    await navigator.clipboard.writeText(field.value)
    secretCopied()
    say('secret-copied', 'Copied to the clipboard.')
  } catch {
    field.focus()
    field.select()
    say('secret-copied', 'The browser did not allow copying: the secret is selected, copy it with the keyboard.')
  }
}

const num = (id: string): number | null => input(id).value.trim() === '' ? null : Number(input(id).value)

async function create (form: HTMLFormElement): Promise<void> {
  const models = words(input('key-models').value)
  const passthrough = words(input('key-passthrough').value)
  const mcp = words(input('key-mcp').value)
  const expires = isoOf(input('key-expires').value)
  const rpm = num('key-rpm')
  const tpm = num('key-tpm')
  const budget = input('key-budget').value.trim()
  const body = {
    org: select('key-org').value,
    project: select('key-project').value,
    name: input('key-name').value.trim(),
    ...(models.length === 0 ? {} : { models }),
    ...(passthrough.length === 0 ? {} : { passthrough }),
    ...(mcp.length === 0 ? {} : { mcp }),
    ...(expires === undefined ? {} : { expires_at: expires }),
    ...(rpm === null && tpm === null ? {} : { limits: { ...(rpm === null ? {} : { rpm }), ...(tpm === null ? {} : { tpm }) } }),
    ...(budget === '' ? {} : { budget: { usd: budget, per: select('key-budget-per').value } })
  }
  try {
    const k = await api<NewKey>('POST', '/keys', body)
    say('keys-error', '')
    say('keys-status', `Key ${k.name === '' ? k.id : k.name} created for ${k.org}/${k.project}.`)
    form.reset()
    $<HTMLDetailsElement>('key-create').open = false
    await loadKeys()
    showSecret(k.key, `The secret of key ${k.id} (${k.org}/${k.project}). Only its hash is stored: copy it now, it cannot be shown again.`)
  } catch (err) {
    say('keys-error', `The key was not created: ${problem(err)}`)
  }
}

// ---- the dialogs of a row ----------------------------------------------------------------------
let current: Key | undefined

function openEdit (k: Key): void {
  current = k
  $('edit-title').textContent = `Edit key ${k.name === '' ? k.id : k.name}`
  input('edit-name').value = k.name
  input('edit-models').value = k.models.join(', ')
  input('edit-passthrough').value = k.passthrough.join(', ')
  input('edit-mcp').value = k.mcp.join(', ')
  input('edit-expires').value = localOf(k.expires_at)
  input('edit-rpm').value = k.limits?.rpm == null ? '' : String(k.limits.rpm)
  input('edit-tpm').value = k.limits?.tpm == null ? '' : String(k.limits.tpm)
  input('edit-budget').value = k.budget?.limit ?? ''
  select('edit-budget-per').value = k.budget?.per ?? 'day'
  say('edit-error', '')
  $<HTMLDialogElement>('edit-dialog').showModal()
}

async function saveEdit (): Promise<void> {
  const k = current as Key
  const budget = input('edit-budget').value.trim()
  const expires = input('edit-expires').value
  const patch = {
    name: input('edit-name').value.trim(),
    models: words(input('edit-models').value),
    passthrough: words(input('edit-passthrough').value),
    mcp: words(input('edit-mcp').value),
    // kept as it was when the field still shows it (datetime-local has no seconds)
    expires_at: expires === localOf(k.expires_at) ? k.expires_at : (isoOf(expires) ?? null),
    limits: { rpm: num('edit-rpm'), tpm: num('edit-tpm') },
    budget: budget === '' ? null : { usd: budget, per: select('edit-budget-per').value }
  }
  try {
    await api<Key>('PATCH', `/keys/${encodeURIComponent(k.id)}`, patch)
    $<HTMLDialogElement>('edit-dialog').close()
    say('keys-status', `Key ${k.name === '' ? k.id : k.name} updated.`)
    await loadKeys()
  } catch (err) {
    say('edit-error', problem(err))
  }
}

function openRotate (k: Key): void {
  current = k
  $('rotate-title').textContent = `Rotate key ${k.name === '' ? k.id : k.name}`
  $('rotate-text').textContent = `A new secret with the same grants, limits and budget replaces the key ${k.id}. The old secret keeps working for the grace period, then answers 401.`
  input('rotate-grace').value = '0'
  say('rotate-error', '')
  $<HTMLDialogElement>('rotate-dialog').showModal()
}

async function rotate (): Promise<void> {
  const k = current as Key
  try {
    const r = await api<Rotation>('POST', `/keys/${encodeURIComponent(k.id)}/rotate`, { grace_s: Number(input('rotate-grace').value) })
    $<HTMLDialogElement>('rotate-dialog').close()
    say('keys-status', `Key ${k.id} rotated: the new key is ${r.id}.`)
    await loadKeys()
    showSecret(r.key, `The new secret (key ${r.id}, replacing ${r.replaces}). The old secret works until ${when(r.old_valid_until)}. Copy it now: it cannot be shown again.`)
  } catch (err) {
    say('rotate-error', problem(err))
  }
}

function openRevoke (k: Key): void {
  current = k
  $('revoke-title').textContent = `Revoke key ${k.name === '' ? k.id : k.name}?`
  $('revoke-text').textContent = `Calls with the key ${k.id} (${k.org}/${k.project}) will answer 401 from now on. This cannot be undone.`
  say('revoke-error', '')
  $<HTMLDialogElement>('revoke-dialog').showModal()
}

async function revoke (): Promise<void> {
  const k = current as Key
  try {
    await api('DELETE', `/keys/${encodeURIComponent(k.id)}`)
    $<HTMLDialogElement>('revoke-dialog').close()
    say('keys-status', `Key ${k.name === '' ? k.id : k.name} revoked.`)
    await loadKeys()
  } catch (err) {
    say('revoke-error', problem(err))
  }
}

export function initKeys (): void {
  projectPicker(select('key-org'), select('key-project'))
  projectPicker(select('kf-org'), select('kf-project'), 'All projects')
  onSubmit('keys-filter', loadKeys)
  select('kf-org').addEventListener('change', () => { void loadKeys() })
  select('kf-project').addEventListener('change', () => { void loadKeys() })
  onSubmit('key-form', create)
  $('secret-copy').addEventListener('click', () => { void copySecret() })
  $('secret-done').addEventListener('click', doneWithSecret)
  // copied with the keyboard or the context menu
  input('secret-value').addEventListener('copy', secretCopied)
  $('keys').addEventListener('click', (e) => {
    const button = (e.target as HTMLElement).closest<HTMLButtonElement>('button[data-action]')
    const id = button?.closest('tr')?.dataset.keyId
    const k = keys.find((x) => x.id === id)
    if (button === null || k === undefined) return
    if (button.dataset.action === 'edit') openEdit(k)
    else if (button.dataset.action === 'rotate') openRotate(k)
    else openRevoke(k)
  })
  onSubmit('edit-form', saveEdit)
  onSubmit('rotate-form', rotate)
  onSubmit('revoke-form', revoke)
  for (const id of ['edit-dialog', 'rotate-dialog', 'revoke-dialog']) closers($<HTMLDialogElement>(id))
}

export function resetKeys (): void {
  keys = []
  current = undefined
  hideSecret()
  fill('keys', [], '')
  say('keys-status', '')
  say('keys-error', '')
  for (const id of ['edit-dialog', 'rotate-dialog', 'revoke-dialog']) $<HTMLDialogElement>(id).close()
}
