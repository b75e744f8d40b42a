// Sessions (admins only): who is signed in to the consoles through single sign-on, with their
// role and when each session ends, and a way to cut someone off: end one session, or every one of
// a user (they must sign in again, and get the role their groups give then). The API shows no
// session's id or CSRF token: a session is named by its handle.

import { api, get } from './api.js'
import { $, el, fill, problem, say, when } from './dom.js'
import type { AnswerOf, OperatorSession } from './types.js'

let sessions: OperatorSession[] = []

const who = (s: OperatorSession): string => s.email ?? s.name ?? s.sub

export async function loadSessions (): Promise<void> {
  try {
    sessions = (await get<AnswerOf<'sessions'>>('/sessions')).data
    say('ss-error', '')
    const many = new Map<string, number>()
    for (const s of sessions) many.set(s.sub, (many.get(s.sub) ?? 0) + 1)
    fill('sessions', sessions.map((s) => el('tr', { 'data-session': s.id, 'data-sub': s.sub },
      el('th', { scope: 'row' }, who(s), s.current ? el('span', { class: 'badge good' }, 'this session') : null, el('div', { class: 'muted small mono' }, s.sub)),
      el('td', {}, s.role === 'org_admin' ? `org_admin of ${s.org ?? ''}` : s.role),
      el('td', { class: 'nowrap' }, when(s.created_at)),
      el('td', { class: 'nowrap' }, when(s.expires_at)),
      el('td', { class: 'mono small', title: s.id }, `${s.id.slice(0, 12)}…`),
      el('td', { class: 'actions' }, el('div', { class: 'row' },
        el('button', { type: 'button', class: 'danger small', 'data-action': 'end', 'aria-label': `End this session of ${who(s)}` }, 'End'),
        (many.get(s.sub) ?? 0) > 1 ? el('button', { type: 'button', class: 'danger small', 'data-action': 'end-user', 'aria-label': `End every session of ${who(s)}` }, 'End all of this user\'s') : null)))),
    'No one is signed in through single sign-on.')
  } catch (err) {
    say('ss-error', `Could not load the sessions: ${problem(err)}`)
  }
}

async function end (s: OperatorSession, all: boolean): Promise<void> {
  try {
    if (all) {
      const r = await api<AnswerOf<'subjectEnded'>>('DELETE', `/sessions?sub=${encodeURIComponent(s.sub)}`)
      say('ss-status', `Ended ${r.ended} session(s) of ${who(s)}.`)
    } else {
      await api('DELETE', `/sessions/${encodeURIComponent(s.id)}`)
      say('ss-status', `Ended a session of ${who(s)}.`)
    }
    // ending one's own session signs out: the next call says so
    await loadSessions()
  } catch (err) {
    say('ss-error', `Could not end the session: ${problem(err)}`)
  }
}

export function initSessions (): void {
  $('ss-refresh').addEventListener('click', () => { void loadSessions() })
  $('sessions').addEventListener('click', (e) => {
    const button = (e.target as HTMLElement).closest<HTMLButtonElement>('button[data-action]')
    const id = button?.closest('tr')?.dataset.session
    const s = sessions.find((x) => x.id === id)
    if (button === null || s === undefined) return
    void end(s, button.dataset.action === 'end-user')
  })
}

export function resetSessions (): void {
  sessions = []
  fill('sessions', [], '')
  say('ss-status', '')
  say('ss-error', '')
}
