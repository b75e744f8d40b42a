import { readFileSync } from 'node:fs'
import { importPKCS8, SignJWT } from 'jose'
import { request } from 'undici'

// Access tokens for Google Vertex AI from a service account's JSON key file: a JWT assertion
// signed with the account's private key (RS256, by jose) exchanged at the file's own token_uri
// (the JWT bearer grant of RFC 7523). A token is reused until 5 minutes before it expires; one
// exchange at a time per provider, however many calls wait for it; an upstream's 401 throws the
// token away so that the next call gets a new one.

const SCOPE = 'https://www.googleapis.com/auth/cloud-platform'
const GRANT = 'urn:ietf:params:oauth:grant-type:jwt-bearer'
/** A token is renewed this long before it expires. */
export const RENEW_BEFORE_MS = 5 * 60_000
/** How long an assertion is valid (Google takes at most an hour). */
const ASSERTION_S = 3600
/** How long the token endpoint may take to answer. */
const TOKEN_TIMEOUT_MS = 10_000

export interface ServiceAccount {
  client_email: string
  private_key: string
  private_key_id?: string
  token_uri: string
}

/** A service-account key file read and checked; an Error whose message names what is wrong (never a key) otherwise. */
export function readServiceAccount (file: string): ServiceAccount {
  let parsed: unknown
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'))
  } catch (err) {
    const code = (err as { code?: unknown }).code
    throw new Error(`cannot read the service-account file ${file}: ${typeof code === 'string' ? code : 'not JSON'}`)
  }
  const sa = parsed as Partial<Record<keyof ServiceAccount | 'type', unknown>> | null
  if (sa === null || typeof sa !== 'object') throw new Error(`the service-account file ${file} is not a JSON object`)
  for (const field of ['client_email', 'private_key', 'token_uri'] as const) {
    if (typeof sa[field] !== 'string' || sa[field] === '') throw new Error(`the service-account file ${file} has no ${field}`)
  }
  if (!/^https?:\/\//.test(sa.token_uri as string)) throw new Error(`the service-account file ${file}: token_uri is not an http(s) URL`)
  return {
    client_email: sa.client_email as string,
    private_key: sa.private_key as string,
    private_key_id: typeof sa.private_key_id === 'string' ? sa.private_key_id : undefined,
    token_uri: sa.token_uri as string
  }
}

interface Token { value: string, expiresAt: number }

export class ServiceAccountTokens {
  private token: Token | null = null
  private pending: Promise<string> | null = null
  /** Tokens handed out so far (masked in whatever an upstream echoes), the newest last. */
  private readonly seen: string[] = []

  constructor (private readonly account: ServiceAccount, private readonly now: () => number, private readonly label: string) {}

  /** A token valid for 5 minutes at least: the one in hand, or a new one (one exchange at a time). */
  get (): Promise<string> | string {
    const t = this.token
    if (t !== null && this.now() < t.expiresAt - RENEW_BEFORE_MS) return t.value
    return this.renew()
  }

  /** The token in hand is refused: the next get() exchanges a new one (or joins the exchange under way). */
  invalidate (refused: string | undefined): void {
    if (this.token !== null && (refused === undefined || this.token.value === refused)) this.token = null
  }

  /** The tokens handed out recently. */
  secrets (): string[] { return this.seen }

  private renew (): Promise<string> {
    if (this.pending !== null) return this.pending
    const p = this.exchange().then((token) => {
      this.token = token
      this.seen.push(token.value)
      if (this.seen.length > 4) this.seen.shift()
      return token.value
    }).finally(() => { this.pending = null })
    this.pending = p
    return p
  }

  private async exchange (): Promise<Token> {
    const a = this.account
    const issuedAt = Math.floor(this.now() / 1000)
    const key = await importPKCS8(a.private_key, 'RS256').catch(() => {
      throw new Error(`${this.label}: the service account's private_key is not an RSA key in PKCS #8 PEM`)
    })
    const header: { alg: string, typ: string, kid?: string } = { alg: 'RS256', typ: 'JWT' }
    if (a.private_key_id !== undefined) header.kid = a.private_key_id
    const assertion = await new SignJWT({ scope: SCOPE })
      .setProtectedHeader(header)
      .setIssuer(a.client_email)
      .setSubject(a.client_email)
      .setAudience(a.token_uri)
      .setIssuedAt(issuedAt)
      .setExpirationTime(issuedAt + ASSERTION_S)
      .sign(key)
    const started = this.now()
    const res = await request(a.token_uri, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded', accept: 'application/json' },
      body: new URLSearchParams({ grant_type: GRANT, assertion }).toString(),
      headersTimeout: TOKEN_TIMEOUT_MS,
      bodyTimeout: TOKEN_TIMEOUT_MS
    })
    const text = await res.body.text()
    // the endpoint's error may echo the assertion: only its status and OAuth error code are told
    let json: { access_token?: unknown, expires_in?: unknown, error?: unknown } | null
    try { json = JSON.parse(text) as typeof json } catch { json = null }
    if (res.statusCode !== 200 || typeof json?.access_token !== 'string' || json.access_token === '') {
      const code = typeof json?.error === 'string' && /^[a-z_]{1,64}$/.test(json.error) ? ` (${json.error})` : ''
      throw new Error(`${this.label}: the token endpoint answered ${res.statusCode}${code} without an access token`)
    }
    const expiresIn = typeof json.expires_in === 'number' && json.expires_in > 0 ? json.expires_in : 3600
    return { value: json.access_token, expiresAt: started + expiresIn * 1000 }
  }
}
