// What the signed-in operator's role may do, for the page: what it may not do is hidden (the
// admin API refuses it anyway, with 403 permission_denied). Elements name the roles that may use
// them in `data-roles`; rows drawn later ask `may`.

import type { Role, Whoami } from './types.js'

let current: Role | null = null

export const role = (): Role | null => current

/** Whether the role may change keys (create, edit, rotate, revoke) and projects. */
export const mayManage = (): boolean => current === 'admin' || current === 'org_admin'

/** Shows what the role may use and hides the rest; null: signed out. */
export function applyRole (r: Role | null): void {
  current = r
  for (const e of document.querySelectorAll<HTMLElement>('[data-roles]')) {
    e.hidden = r === null || !(e.dataset.roles ?? '').split(' ').includes(r)
  }
}

/** Who is signed in, as the header says it. */
export function describe (w: Whoami): string {
  const who = w.kind === 'token' ? `admin token ${w.name ?? ''}` : (w.email ?? w.name ?? w.sub ?? '')
  const what = w.role === 'org_admin' ? `org_admin of ${w.org ?? ''}` : w.role
  return `${who} · ${what}`
}
