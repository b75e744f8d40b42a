// The admin API from the browser, signed in one of two ways:
//   an admin token, kept for this tab only (sessionStorage, never a cookie, never in a URL) and
//   sent as a Bearer header on each request to /admin/v1;
//   single sign-on: the gateway's session cookie (HttpOnly: this script never sees it) goes with
//   each request, and every change carries the session's CSRF token, read from /whoami.

const TOKEN = 'modelgate.adminToken'
const BASE = '/admin/v1'

export const token = {
  get: (): string | null => sessionStorage.getItem(TOKEN),
  set: (value: string): void => { sessionStorage.setItem(TOKEN, value) },
  clear: (): void => { sessionStorage.removeItem(TOKEN) }
}

/** A console session's CSRF token while signed in through single sign-on; null otherwise. */
let csrf: string | null = null
export const session = {
  get: (): string | null => csrf,
  set: (value: string | null): void => { csrf = value }
}

/** An answer of the admin API that is not a success, with its message. */
export class ApiError extends Error {
  constructor (readonly status: number, message: string, readonly body: unknown) { super(message) }
}

let onUnauthorized: (() => void) | undefined
/** What happens when the API refuses the token or the session (changed, expired, signed out elsewhere). */
export function whenUnauthorized (fn: () => void): void { onUnauthorized = fn }

/** A request to `url` with the sign-in of this tab: the admin token when there is one, else the session's cookie. */
export async function call (method: string, url: string, body?: unknown): Promise<Response> {
  const sent = token.get()
  const headers: Record<string, string> = {}
  if (sent !== null) headers.authorization = `Bearer ${sent}`
  else if (csrf !== null && method !== 'GET') headers['x-csrf-token'] = csrf
  if (body !== undefined) headers['content-type'] = 'application/json'
  return await fetch(url, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
    credentials: sent !== null ? 'omit' : 'same-origin'
  })
}

export async function api<T> (method: string, path: string, body?: unknown): Promise<T> {
  const sent = token.get()
  const res = await call(method, `${BASE}${path}`, body)
  const text = await res.text()
  // signed out (or in again) meanwhile: what was asked with the old token is not shown
  if (token.get() !== sent) throw new ApiError(0, 'Signed out.', null)
  let parsed: unknown = null
  try { parsed = text === '' ? null : JSON.parse(text) } catch { parsed = text }
  if (!res.ok) {
    const message = (parsed as { error?: { message?: string } } | null)?.error?.message ?? `HTTP ${res.status}`
    const err = new ApiError(res.status, message, parsed)
    if (res.status === 401) onUnauthorized?.()
    throw err
  }
  return parsed as T
}

export const get = async <T>(path: string): Promise<T> => await api<T>('GET', path)

/** A query string of the values that are set. */
export function query (params: Record<string, string | number | undefined>): string {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== '') q.set(k, String(v))
  const s = q.toString()
  return s === '' ? '' : `?${s}`
}
