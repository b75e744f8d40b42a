// The admin API from the browser: the admin token is kept for this tab only (sessionStorage,
// never a cookie, never in a URL) and sent as a Bearer header on each request to /admin/v1.

const TOKEN = 'modelgate.adminToken'
const BASE = '/admin/v1'

export const token = {
  get: (): string | null => sessionStorage.getItem(TOKEN),
  set: (value: string): void => { sessionStorage.setItem(TOKEN, value) },
  clear: (): void => { sessionStorage.removeItem(TOKEN) }
}

/** An answer of the admin API that is not a success, with its message. */
export class ApiError extends Error {
  constructor (readonly status: number, message: string, readonly body: unknown) { super(message) }
}

let onUnauthorized: (() => void) | undefined
/** What happens when the API refuses the token (it was changed, or the gateway reloaded another). */
export function whenUnauthorized (fn: () => void): void { onUnauthorized = fn }

export async function api<T> (method: string, path: string, body?: unknown): Promise<T> {
  const sent = token.get()
  const headers: Record<string, string> = { authorization: `Bearer ${sent ?? ''}` }
  if (body !== undefined) headers['content-type'] = 'application/json'
  const res = await fetch(`${BASE}${path}`, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    cache: 'no-store',
    credentials: 'omit'
  })
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
