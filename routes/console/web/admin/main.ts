// The operator's console: sign-in with an admin token or through single sign-on, then seven sections over the admin API
// (overview, tenants, keys, request log, providers, alerts, plugins, sessions) as ARIA tabs, one loaded at a time.

import { initAlerts, loadAlerts, resetAlerts } from './alerts.js'
import { ApiError, call, get, session, token, whenUnauthorized } from './api.js'
import { $, input, problem, say } from './dom.js'
import { initKeys, loadKeys, resetKeys } from './keys.js'
import { initLog, loadLog, resetLog } from './log.js'
import { initOverview, loadOverview, resetOverview } from './overview.js'
import { initPlugins, loadPlugins, resetPlugins } from './plugins.js'
import { initProviders, loadProviders, resetProviders } from './providers.js'
import { initSessions, loadSessions, resetSessions } from './sessions.js'
import { applyRole, describe } from './role.js'
import type { Whoami } from './types.js'
import { initTenants, loadTenants, resetTenants } from './tenants.js'

const SECTIONS = {
  overview: loadOverview,
  tenants: loadTenants,
  keys: loadKeys,
  log: loadLog,
  providers: loadProviders,
  alerts: loadAlerts,
  plugins: loadPlugins,
  sessions: loadSessions
} as const
type Section = keyof typeof SECTIONS
const NAMES = Object.keys(SECTIONS) as Section[]

const tabs = NAMES.map((n) => $(`tab-${n}`))
let active: Section = 'overview'

function show (name: Section, focus = false): void {
  active = name
  for (const [i, t] of tabs.entries()) {
    const on = NAMES[i] === name
    t.setAttribute('aria-selected', String(on))
    t.tabIndex = on ? 0 : -1
    $(t.getAttribute('aria-controls') as string).hidden = !on
    if (on && focus) t.focus()
  }
  history.replaceState(null, '', `#${name}`)
  void SECTIONS[name]()
}

tabs.forEach((t, i) => {
  t.addEventListener('click', () => { show(NAMES[i] as Section) })
  t.addEventListener('keydown', (e) => {
    // the keys move among the tabs the role is shown
    const shown = NAMES.filter((_n, j) => !(tabs[j] as HTMLElement).hidden)
    const at = shown.indexOf(NAMES[i] as Section)
    const last = shown.length - 1
    const to = e.key === 'ArrowRight'
      ? (at === last ? 0 : at + 1)
      : e.key === 'ArrowLeft'
        ? (at <= 0 ? last : at - 1)
        : e.key === 'Home'
          ? 0
          : e.key === 'End'
            ? last
            : undefined
    if (to === undefined) return
    e.preventDefault()
    show(shown[to] as Section, true)
  })
})

// ---- signing in and out ---------------------------------------------------------------------
function signedIn (who: Whoami | null): void {
  const on = who !== null
  $('signin-view').hidden = on
  $('nav').hidden = !on
  $('signout').hidden = !on
  $('whoami').textContent = who === null ? '' : `Signed in as ${describe(who)}`
  applyRole(who?.role ?? null)
  if (!on) for (const n of NAMES) $(`view-${n}`).hidden = true
}

/** Ends the console session at the gateway, then at the identity provider when it offers that: the browser goes there. */
async function endSession (): Promise<void> {
  const res = await call('POST', '/console/auth/logout')
  const to = res.ok ? (await res.json() as { end_session_url?: string | null }).end_session_url : null
  if (typeof to === 'string') location.assign(to)
}

function signOut (message = ''): void {
  // a console session ends at the gateway too (the cookie is the gateway's to clear)
  if (token.get() === null && session.get() !== null) void endSession().catch(() => {})
  token.clear()
  session.set(null)
  for (const reset of [resetOverview, resetTenants, resetKeys, resetLog, resetProviders, resetAlerts, resetPlugins, resetSessions]) reset()
  signedIn(null)
  history.replaceState(null, '', location.pathname)
  say('signin-error', message)
  input('token').focus()
}

/** Asks who is signed in (the admin token, else the session's cookie); on success shows the section asked for. */
async function enter (quiet = false): Promise<void> {
  try {
    const who = await get<Whoami>('/whoami')
    session.set(who.csrf_token)
    say('signin-error', '')
    signedIn(who)
    const asked = location.hash.slice(1) as Section
    const visible = (n: Section): boolean => !$(`tab-${n}`).hidden
    show(NAMES.includes(asked) && visible(asked) ? asked : visible(active) ? active : 'overview')
  } catch (err) {
    token.clear()
    session.set(null)
    signedIn(null)
    const status = err instanceof ApiError ? err.status : 0
    if (quiet && status === 401) return
    say('signin-error', status === 401
      ? 'That admin token was not accepted. Check it and try again.'
      : status === 404
        ? 'The admin API is off on this gateway: no admin token is configured.'
        : `Could not reach the admin API: ${problem(err)}`)
  }
}

whenUnauthorized(() => {
  // the token or the session stopped working while signed in (changed and reloaded, expired, signed out elsewhere)
  if (!$('nav').hidden) signOut(token.get() === null ? 'Your session has ended: sign in again.' : 'The admin token is no longer accepted: sign in again.')
})

$('signin').addEventListener('submit', (e) => {
  e.preventDefault()
  const value = input('token').value.trim()
  if (value === '') return
  token.set(value)
  input('token').value = ''
  void enter()
})
$('signout').addEventListener('click', () => { signOut() })

for (const init of [initOverview, initTenants, initKeys, initLog, initProviders, initAlerts, initPlugins, initSessions]) init()

/** Whether the gateway offers single sign-on: then its link is shown, and a session may already be open. */
async function ssoOffered (): Promise<boolean> {
  try {
    const res = await call('GET', '/console/auth/status')
    return res.ok && (await res.json() as { sso: boolean }).sso
  } catch {
    return false
  }
}

if (token.get() !== null) void enter()
else {
  input('token').focus()
  void ssoOffered().then(async (sso) => {
    $('sso').hidden = !sso
    if (sso) await enter(true)
  })
}
