import type { ProviderConfig } from '../../config/schema.js'

// A provider's credentials never leave the gateway: its key and the values of its configured
// headers are sent to it, and masked wherever a provider's answer would carry them on (an error
// message that echoes the key, a header) to a client or into the log.

export const MASKED = '[REDACTED]'

// shorter values are no secret worth the name, and masking them would mangle ordinary text
const MIN_SECRET = 8

/** The secret strings of a provider's configuration: its key, and its headers' values (a bearer token also on its own). */
export function credentialsOf (provider: Pick<ProviderConfig, 'api_key' | 'headers'>): string[] {
  return secretsOf([provider.api_key, ...Object.values(provider.headers ?? {})])
}

/**
 * Configured values as the secrets to mask: each one long enough to be a secret, and the token of
 * an `Authorization`-style value (`Bearer xyz`) also on its own; the longest first.
 */
export function secretsOf (values: Iterable<string>): string[] {
  const out = new Set<string>()
  const add = (v: string): void => { if (v.length >= MIN_SECRET) out.add(v) }
  for (const value of values) {
    add(value)
    const token = /^\s*(?:Bearer|Basic|Token)\s+(\S+)\s*$/i.exec(value)?.[1]
    if (token !== undefined) add(token)
  }
  // longest first: a key inside a header value is masked with the value
  return [...out].sort((a, b) => b.length - a.length)
}

/** `text` with every occurrence of these secrets masked; the same string when there is none. */
export function maskCredentials (text: string, secrets: readonly string[]): string {
  let out = text
  for (const s of secrets) if (out.includes(s)) out = out.split(s).join(MASKED)
  return out
}

/** Headers with the secrets masked in their values. */
export function maskHeaders (headers: Record<string, string | string[]>, secrets: readonly string[]): Record<string, string | string[]> {
  if (secrets.length === 0) return headers
  const out: Record<string, string | string[]> = {}
  for (const [name, value] of Object.entries(headers)) out[name] = Array.isArray(value) ? value.map((v) => maskCredentials(v, secrets)) : maskCredentials(value, secrets)
  return out
}

/**
 * A JSON value with the secrets masked in every string of it, object keys included; the same
 * value when there is none to mask. Walked without recursion: a deep value cannot overflow the stack.
 */
export function maskJson<T> (value: T, secrets: readonly string[]): T {
  if (secrets.length === 0) return value
  const root = { v: value as unknown }
  const stack: Array<[Record<string | number, unknown>, string | number]> = [[root, 'v']]
  while (stack.length > 0) {
    const [holder, key] = stack.pop() as [Record<string | number, unknown>, string | number]
    const v = holder[key]
    if (typeof v === 'string') {
      const masked = maskCredentials(v, secrets)
      if (masked !== v) holder[key] = masked
    } else if (Array.isArray(v)) {
      for (let i = 0; i < v.length; i++) stack.push([v as unknown as Record<number, unknown>, i])
    } else if (typeof v === 'object' && v !== null) {
      const obj = v as Record<string, unknown>
      for (const k of Object.keys(obj)) {
        const mk = maskCredentials(k, secrets)
        if (mk !== k) {
          obj[mk] = obj[k]
          delete obj[k]
        }
        stack.push([obj, mk])
      }
    }
  }
  return root.v as T
}
