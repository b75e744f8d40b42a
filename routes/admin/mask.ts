import { SECRET_PARAM } from '../../engine/ops/log-redaction.js'

// What the admin API shows of configured values that may hold a secret (plugin options, a
// provider's base URL): the value of any key that names a secret, every header value, and any
// URL with credentials in it (`https://user:pass@host/`) become MASK. The input is not changed.

export const MASK = '••••••'

/**
 * Keys whose values are secrets: tokens, secrets, passwords, API keys, authorization headers,
 * credentials, cookies, private keys. Judged by the key's words (split at `_`, `-`, `.`, spaces
 * and camelCase), so that `max_tokens` (a count) is shown while `accessToken` is not: a word that
 * is one of these, or the words run together ending in one or naming an API or private key.
 */
const SECRET_WORD = /^(?:token|secrets?|passw(?:or)?d|authorization|credentials?|cookies?|bearer)$/
const SECRET_RUN = /(?:token|secret|passw(?:or)?d|credentials?)$|apikey|privatekey/

/** A URL with userinfo: a scheme, `//`, then `something@` before the host. */
const URL_WITH_USERINFO = /^[a-z][a-z0-9+.-]*:\/\/[^/?#\s]*@/i

/** Whether a key names a secret. */
export function isSecretKey (key: string): boolean {
  const words = key.split(/[_\-.\s]+|(?<=[a-z0-9])(?=[A-Z])/).map((w) => w.toLowerCase())
  return words.some((w) => SECRET_WORD.test(w)) || SECRET_RUN.test(words.join(''))
}

/** A URL: a scheme and `//`. */
const URL_LIKE = /^[a-z][a-z0-9+.-]*:\/\//i

/**
 * A string value as shown: masked whole when it is a URL with credentials; a URL's query
 * parameters named like a credential (`?api_key=`, `?token=`, `&sig=`) masked.
 */
export function maskUrl (value: string): string {
  if (URL_WITH_USERINFO.test(value)) return MASK
  if (!URL_LIKE.test(value)) return value
  const q = value.indexOf('?')
  if (q < 0) return value
  const hash = value.indexOf('#', q)
  const query = value.slice(q + 1, hash < 0 ? undefined : hash)
  const masked = query.split('&').map((pair) => {
    const eq = pair.indexOf('=')
    if (eq < 0) return pair
    let name = pair.slice(0, eq)
    try { name = decodeURIComponent(name.replace(/\+/g, ' ')) } catch {}
    return SECRET_PARAM.test(name) ? `${pair.slice(0, eq + 1)}${MASK}` : pair
  }).join('&')
  return value.slice(0, q + 1) + masked + (hash < 0 ? '' : value.slice(hash))
}

/**
 * A copy of `value` with its secrets masked: under a key that names a secret, the whole value
 * (whatever its type, but null, which hides nothing, and a boolean, which is a switch such as
 * CORS's `credentials: false`, never a secret); under a `headers` object,
 * every value (a header may carry a credential under any name); and any string that is a URL
 * with credentials. Arrays and objects are copied all the way down.
 */
export function maskSecrets (value: unknown): unknown {
  return mask(value, false)
}

function mask (value: unknown, secret: boolean): unknown {
  if (value === null || value === undefined || typeof value === 'boolean') return value
  if (secret) return MASK
  if (typeof value === 'string') return maskUrl(value)
  if (Array.isArray(value)) return value.map((v) => mask(v, false))
  if (typeof value === 'object') {
    // (built from entries: a key named __proto__ stays a key)
    return Object.fromEntries(Object.entries(value as Record<string, unknown>).map(([k, v]) => {
      const headers = k.toLowerCase() === 'headers' && v !== null && typeof v === 'object' && !Array.isArray(v)
      return [k, headers ? Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([h, hv]) => [h, mask(hv, true)])) : mask(v, isSecretKey(k))]
    }))
  }
  return value
}
