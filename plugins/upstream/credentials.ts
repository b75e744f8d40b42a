import type { ProviderConfig } from '../../config/schema.js'

// A provider's credentials never leave the gateway: its key and the values of its configured
// headers are sent to it, and masked wherever a provider's answer would carry them on (an error
// message that echoes the key, a header) to a client or into the log.

export const MASKED = '[REDACTED]'

// shorter values are no secret worth the name, and masking them would mangle ordinary text
const MIN_SECRET = 8

/** The secret strings of a provider's configuration: its key, and its headers' values (a bearer token also on its own). */
export function credentialsOf (provider: Pick<ProviderConfig, 'api_key' | 'headers'>): string[] {
  const out = new Set<string>()
  const add = (v: string): void => { if (v.length >= MIN_SECRET) out.add(v) }
  add(provider.api_key)
  for (const value of Object.values(provider.headers ?? {})) {
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
