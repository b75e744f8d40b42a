import { createPrivateKey, generateKeyPairSync, sign, type KeyObject } from 'node:crypto'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import Provider from 'oidc-provider'

// A real OpenID provider for the single sign-on tests: panva's oidc-provider (an OpenID
// Certified implementation) on a loopback port, with its development login page (any password)
// and accounts the test names. Consent is granted at once, so a sign-in is one login form.
//
// Its RP-initiated logout (end_session_endpoint) is on unless `endSession: false`; `Jar` is a
// browser's cookies at the provider, kept across sign-ins and sign-outs, so that a test can see
// whether the provider still remembers a user (a sign-in without the login form) or not.
//
// `tamper` rewrites the ID token the token endpoint answers before it leaves, re-signed with the
// provider's own key (or another key): the tests use it to hand the gateway a token with a wrong
// nonce, audience, issuer, expiry or signature, the rest of the exchange being the real one.

export interface Account { email: string, name?: string, groups: string[] }

export const CLIENT_ID = 'modelgate'
export const CLIENT_SECRET = 'a-test-client-secret-0123456789'

export interface Tampering {
  /** Changes the ID token's claims (returns the new ones). */
  claims?: (claims: Record<string, unknown>) => Record<string, unknown>
  /** Signs with a key the provider does not publish. */
  foreignKey?: boolean
}

export interface Idp {
  issuer: string
  /** Set to rewrite the next ID tokens; null: none rewritten. */
  tamper: Tampering | null
  /** How many tokens the token endpoint gave out. */
  tokens: number
  close: () => Promise<void>
}

const b64 = (v: unknown): string => Buffer.from(JSON.stringify(v)).toString('base64url')

function resign (jwt: string, key: KeyObject, t: Tampering): string {
  const [head, body] = jwt.split('.') as [string, string]
  const header = JSON.parse(Buffer.from(head, 'base64url').toString()) as Record<string, unknown>
  let claims = JSON.parse(Buffer.from(body, 'base64url').toString()) as Record<string, unknown>
  if (t.claims !== undefined) claims = t.claims(claims)
  const signingKey = t.foreignKey === true ? generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey : key
  const input = `${b64(header)}.${b64(claims)}`
  return `${input}.${sign('sha256', Buffer.from(input), signingKey).toString('base64url')}`
}

/** The provider on 127.0.0.1, for a gateway whose callback is `redirectUri`; closed when the test ends. */
export interface IdpOptions {
  idTokenTtlS?: number
  /** The client's registered post-logout redirect URIs. */
  postLogoutRedirectUris?: string[]
  /** false: no end_session_endpoint in the discovery document. */
  endSession?: boolean
}

/** The providers' signing key, one for every provider of a process: an RSA key costs more to make than the rest of a provider's start. */
let signingKey: KeyObject | null = null

export async function startIdp (t: { teardown: (fn: () => unknown) => void }, redirectUris: string[], accounts: Record<string, Account>, opts: IdpOptions = {}): Promise<Idp> {
  signingKey ??= generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey
  const privateKey = signingKey
  const jwk = { ...privateKey.export({ format: 'jwk' }), kid: 'test-key', alg: 'RS256', use: 'sig' }
  const key = createPrivateKey({ key: jwk, format: 'jwk' })
  let handler: (req: IncomingMessage, res: ServerResponse) => void = (_req, res) => { res.statusCode = 503; res.end() }
  const server = createServer((req, res) => { handler(req, res) })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  const provider = new Provider(issuer, {
    clients: [{ client_id: CLIENT_ID, client_secret: CLIENT_SECRET, redirect_uris: redirectUris, post_logout_redirect_uris: opts.postLogoutRedirectUris ?? [], grant_types: ['authorization_code'], response_types: ['code'], token_endpoint_auth_method: 'client_secret_basic' }],
    jwks: { keys: [jwk as never] },
    cookies: { keys: ['a-test-cookie-key'] },
    pkce: { methods: ['S256'], required: () => true },
    scopes: ['openid', 'email', 'profile', 'groups'],
    claims: { openid: ['sub'], email: ['email'], profile: ['name'], groups: ['groups'] },
    // the claims of the granted scopes go in the ID token itself
    conformIdTokenClaims: false,
    findAccount: (_ctx, id) => {
      const a = accounts[id]
      if (a === undefined) return undefined
      return { accountId: id, claims: () => ({ sub: id, email: a.email, name: a.name, groups: a.groups }) }
    },
    // consent is given at once: the sign-in is the login form alone
    loadExistingGrant: async (ctx) => {
      const grant = new ctx.oidc.provider.Grant({ clientId: ctx.oidc.client?.clientId, accountId: ctx.oidc.session?.accountId })
      grant.addOIDCScope('openid email profile groups')
      await grant.save()
      return grant
    },
    features: { devInteractions: { enabled: true }, rpInitiatedLogout: { enabled: opts.endSession ?? true } },
    ttl: { IdToken: opts.idTokenTtlS ?? 3600 }
  })
  const callback = provider.callback()
  const idp: Idp = { issuer, tamper: null, tokens: 0, close: async () => { await new Promise((resolve) => server.close(resolve)) } }
  handler = (req, res) => {
    if (req.method === 'POST' && req.url?.startsWith('/token') === true) {
      idp.tokens++
      const tamper = idp.tamper
      if (tamper !== null) {
        const end = res.end.bind(res) as (chunk?: unknown) => ServerResponse
        res.end = ((chunk?: unknown) => {
          const body = JSON.parse(String(chunk)) as Record<string, unknown>
          if (typeof body.id_token === 'string') body.id_token = resign(body.id_token, key, tamper)
          const text = JSON.stringify(body)
          res.setHeader('content-length', Buffer.byteLength(text))
          return end(text)
        }) as typeof res.end
      }
    }
    void callback(req, res)
  }
  t.teardown(async () => { server.closeAllConnections(); await idp.close() })
  return idp
}

/** A browser's cookies for the provider, enough for its login and logout: name → value. */
export class Jar {
  private readonly cookies = new Map<string, string>()
  /** How many times the provider's login form was filled in with this jar. */
  logins = 0

  take (res: Response): void {
    for (const line of res.headers.getSetCookie()) {
      const [pair = ''] = line.split(';')
      const eq = pair.indexOf('=')
      const name = pair.slice(0, eq).trim()
      const value = pair.slice(eq + 1).trim()
      if (value === '' || /expires=Thu, 01 Jan 1970/i.test(line)) this.cookies.delete(name)
      else this.cookies.set(name, value)
    }
  }

  header (): string { return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ') }
}

/**
 * What a browser does at the provider: follows `authorizeUrl` to the login form (none when the
 * provider remembers the user in `jar`), signs in as `login`, and follows the redirects until the
 * one back to the gateway, whose URL it returns.
 */
export async function signInAtIdp (authorizeUrl: string, login: string, jar = new Jar()): Promise<URL> {
  let url = new URL(authorizeUrl)
  const origin = url.origin
  for (let hops = 0; hops < 10; hops++) {
    if (url.origin !== origin) return url
    let res = await fetch(url, { redirect: 'manual', headers: { cookie: jar.header() } })
    jar.take(res)
    if (res.status === 200 && url.pathname.startsWith('/interaction/')) {
      await res.text()
      res = await fetch(url, { method: 'POST', redirect: 'manual', headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ prompt: 'login', login, password: 'any' }).toString() })
      jar.take(res)
      jar.logins++
    }
    const location = res.headers.get('location')
    if (location === null) throw new Error(`the provider answered ${res.status} at ${url.href}: ${await res.text()}`)
    await res.body?.cancel()
    url = new URL(location, url)
  }
  throw new Error('too many redirects at the provider')
}

/**
 * What a browser does with a gateway's `end_session_url`: opens the provider's logout page,
 * confirms it ("Yes, sign me out"), and returns where the provider sends it then (the
 * post-logout redirect URI, or the provider's own page).
 */
export async function signOutAtIdp (endSessionUrl: string, jar: Jar): Promise<URL> {
  const page = await fetch(endSessionUrl, { redirect: 'manual', headers: { cookie: jar.header() } })
  jar.take(page)
  const html = await page.text()
  const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1]
  const xsrf = /name="xsrf" value="([^"]+)"/.exec(html)?.[1]
  if (page.status !== 200 || action === undefined || xsrf === undefined) throw new Error(`the provider's logout page answered ${page.status}: ${html.slice(0, 300)}`)
  const confirmed = await fetch(new URL(action, endSessionUrl), { method: 'POST', redirect: 'manual', headers: { cookie: jar.header(), 'content-type': 'application/x-www-form-urlencoded' }, body: new URLSearchParams({ xsrf, logout: 'yes' }).toString() })
  jar.take(confirmed)
  const location = confirmed.headers.get('location')
  if (location === null) throw new Error(`the provider's logout answered ${confirmed.status}: ${await confirmed.text()}`)
  await confirmed.body?.cancel()
  return new URL(location, endSessionUrl)
}
