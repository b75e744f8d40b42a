// Plugins: the chain of the running configuration, in order, with each plugin's options (secrets
// masked by the server), and a button that has the gateway re-read its config file: what changed,
// or every problem of the file (the running configuration is then kept).

import { api, ApiError, get } from './api.js'
import { $, el, fill, problem, say } from './dom.js'
import type { Plugins, Reloaded } from './types.js'

const options = (o: unknown): HTMLElement =>
  o === null || o === undefined || (typeof o === 'object' && Object.keys(o).length === 0)
    ? el('span', { class: 'muted' }, 'defaults')
    : el('pre', { class: 'options' }, JSON.stringify(o, null, 2))

export async function loadPlugins (): Promise<void> {
  try {
    const p = await get<Plugins>('/plugins')
    say('pl-error', '')
    $('pl-generation').textContent = p.generation === null
      ? 'The chain runs in this order.'
      : `Configuration generation ${p.generation} (one more at each reload): the chain runs in this order.`
    fill('plugins', p.data.map((x) => el('tr', { 'data-plugin': x.name, class: x.enabled ? undefined : 'dim' },
      el('th', { scope: 'row' }, x.name),
      el('td', { class: 'mono' }, x.module ?? el('span', { class: 'muted' }, 'built in')),
      el('td', {}, el('span', { class: `badge ${x.enabled ? 'good' : ''}` }, x.enabled ? 'enabled' : 'disabled')),
      el('td', {}, options(x.options)))), 'No plugins.')
  } catch (err) {
    say('pl-error', `Could not load the plugins: ${problem(err)}`)
  }
}

function result (title: string, items: string[], empty: string, tone: 'ok' | 'error'): void {
  const box = $('pl-result')
  box.hidden = false
  box.className = `card result ${tone}`
  box.replaceChildren(el('h2', {}, title), items.length === 0 ? el('p', {}, empty) : el('ul', {}, ...items.map((i) => el('li', {}, i))))
}

async function reload (): Promise<void> {
  const button = $<HTMLButtonElement>('pl-reload')
  button.disabled = true
  say('pl-error', '')
  try {
    const r = await api<Reloaded>('POST', '/reload')
    result(`Reloaded${r.generation === undefined ? '' : `: generation ${r.generation}`}`, r.changes, 'Nothing changed.', 'ok')
    await loadPlugins()
  } catch (err) {
    const problems = err instanceof ApiError ? (err.body as { problems?: string[] } | null)?.problems : undefined
    if (problems !== undefined) result('Not reloaded: the running configuration is kept', problems, err instanceof Error ? err.message : '', 'error')
    else if (err instanceof ApiError && err.status === 404) say('pl-error', 'This gateway cannot reload from here (it was not started by `modelgate serve`).')
    else say('pl-error', `The reload failed: ${problem(err)}`)
  } finally {
    button.disabled = false
  }
}

export function initPlugins (): void {
  $('pl-reload').addEventListener('click', () => { void reload() })
  $('pl-refresh').addEventListener('click', () => { void loadPlugins() })
}

export function resetPlugins (): void {
  fill('plugins', [], '')
  $('pl-generation').textContent = ''
  $('pl-result').hidden = true
  $('pl-result').replaceChildren()
  say('pl-error', '')
}
