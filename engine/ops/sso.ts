import { randomBytes } from 'node:crypto'
import * as oidc from 'openid-client'
import type { SsoConfig } from '../../config/schema.js'
import { isLoopbackUrl } from '../../config/load.js'
import { SsoFailed, SsoUnavailable } from '../kernel/errors.js'
import type { PendingLogin, Role } from '../store/types.js'

// OpenID Connect sign-in with openid-client: the authorization code flow with PKCE (S256), a
// state and a nonce, against the issuer's discovery document. The ID token is verified in full:
// its signature against the issuer's published keys (non-repudiation checks on), its issuer,
// audience, authorized party, expiry, issue time and nonce (the library), and its expiry again on
// the gateway's own clock. The user's groups give the role (first match wins). Signing out ends
// the session at the provider too when its discovery document names an end_session_endpoint
// (RP-initiated logout: the browser is sent there with the ID token as id_token_hint).

/** How long a sign-in may take between the redirect to the identity provider and its callback. */
export const LOGIN_TTL_MS = 10 * 60_000

/** A verified user, as the ID token (and userinfo, for the groups) says; `idToken` the token itself, for the provider's logout. */
export interface SignedInUser { sub: string, email: string | null, name: string | null, groups: string[], idToken: string }

/** A new sign-in: where to send the browser, and what its callback needs (kept server-side). */
export interface LoginStart { url: URL, login: PendingLogin }

const text = (v: unknown): string | null => typeof v === 'string' && v !== '' ? v : null

/** A claim's groups: a list of strings, or one string. */
function groupsOf (v: unknown): string[] | undefined {
  if (typeof v === 'string') return [v]
  if (Array.isArray(v)) return v.filter((g): g is string => typeof g === 'string')
  return undefined
}

export class SsoClient {
  private configuration: Promise<oidc.Configuration> | null = null

  constructor (private readonly sso: SsoConfig, private readonly now: () => number) {}

  /** The role the first matching `roles` entry gives these groups, or undefined (refused). */
  roleOf (groups: readonly string[]): { role: Role, org: string | null } | undefined {
    const r = this.sso.roles.find((x) => groups.includes(x.group))
    return r === undefined ? undefined : { role: r.role, org: r.org ?? null }
  }

  /** The issuer's configuration, discovered once and kept; a failed discovery is tried again at the next sign-in. */
  private async discovered (): Promise<oidc.Configuration> {
    if (this.configuration === null) {
      const s = this.sso
      const auth = s.token_endpoint_auth_method === 'none' ? oidc.None() : s.token_endpoint_auth_method === 'client_secret_post' ? oidc.ClientSecretPost(s.client_secret) : oidc.ClientSecretBasic(s.client_secret)
      this.configuration = oidc.discovery(new URL(s.issuer), s.client_id, undefined, auth, {
        // plain http only towards this machine (the config refuses it elsewhere)
        execute: [...(isLoopbackUrl(s.issuer) ? [oidc.allowInsecureRequests] : []), oidc.enableNonRepudiationChecks],
        timeout: s.timeout_s
      })
      this.configuration.catch(() => { this.configuration = null })
    }
    try {
      return await this.configuration
    } catch (err) {
      throw new SsoUnavailable({ reason: reasonOf(err) }, { cause: err })
    }
  }

  /** A new sign-in for the console `to`. */
  async start (to: PendingLogin['to']): Promise<LoginStart> {
    const config = await this.discovered()
    const login: PendingLogin = { state: oidc.randomState(), nonce: oidc.randomNonce(), verifier: oidc.randomPKCECodeVerifier(), to, expires_at: this.now() + LOGIN_TTL_MS }
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: this.sso.redirect_url,
      scope: this.sso.scopes.join(' '),
      state: login.state,
      nonce: login.nonce,
      code_challenge: await oidc.calculatePKCECodeChallenge(login.verifier),
      code_challenge_method: 'S256'
    })
    return { url, login }
  }

  /**
   * Ends a sign-in: `query` is the callback's query string. The code is exchanged with the PKCE
   * verifier, and the ID token checked against the state and nonce the sign-in kept.
   */
  async finish (query: string, login: PendingLogin): Promise<SignedInUser> {
    const config = await this.discovered()
    // the callback as the identity provider was told it (behind a proxy the request's own URL differs)
    const current = new URL(this.sso.redirect_url)
    current.search = query
    let tokens: Awaited<ReturnType<typeof oidc.authorizationCodeGrant>>
    try {
      tokens = await oidc.authorizationCodeGrant(config, current, { pkceCodeVerifier: login.verifier, expectedState: login.state, expectedNonce: login.nonce, idTokenExpected: true })
    } catch (err) {
      throw new SsoFailed({ reason: reasonOf(err) }, { cause: err })
    }
    const claims = tokens.claims()
    if (claims === undefined) throw new SsoFailed({ reason: 'no ID token was returned' })
    // the library judged expiry on the system clock; the gateway's own clock judges too
    if (claims.exp * 1000 <= this.now()) throw new SsoFailed({ reason: 'the ID token has expired' })
    let groups = groupsOf(claims[this.sso.groups_claim])
    if (groups === undefined && config.serverMetadata().userinfo_endpoint !== undefined) {
      try {
        const info = await oidc.fetchUserInfo(config, tokens.access_token, claims.sub)
        groups = groupsOf(info[this.sso.groups_claim])
      } catch (err) {
        throw new SsoFailed({ reason: reasonOf(err) }, { cause: err })
      }
    }
    return { sub: claims.sub, email: text(claims.email), name: text(claims.name) ?? text(claims.preferred_username), groups: groups ?? [], idToken: tokens.id_token as string }
  }

  /**
   * Where to send a browser to sign out at the provider too, or null when the provider offers no
   * end_session_endpoint. The ID token the session was made with is the id_token_hint; without
   * one, the client id says who asks. The browser comes back to `sso.post_logout_redirect_url`
   * when set. A provider that cannot be reached throws SsoUnavailable.
   */
  async logoutUrl (idToken: string | null): Promise<string | null> {
    const config = await this.discovered()
    if (config.serverMetadata().end_session_endpoint === undefined) return null
    const params: Record<string, string> = {}
    if (idToken !== null) params.id_token_hint = idToken
    if (this.sso.post_logout_redirect_url !== undefined) params.post_logout_redirect_uri = this.sso.post_logout_redirect_url
    // the client id is added by the library
    return oidc.buildEndSessionUrl(config, params).href
  }
}

/** A short reason for a page and the log: the library's message (it names the claim that failed), never a token. */
function reasonOf (err: unknown): string {
  const e = err as { message?: unknown, error?: unknown, error_description?: unknown, cause?: { message?: unknown } }
  if (typeof e.error === 'string') return typeof e.error_description === 'string' ? `${e.error}: ${e.error_description}` : e.error
  const message = typeof e.message === 'string' ? e.message : 'unknown error'
  // the check that failed (the claim, the signature) is named by the cause openid-client wraps
  const cause = typeof e.cause?.message === 'string' ? e.cause.message : undefined
  return (cause === undefined || cause === message ? message : `${message}: ${cause}`).slice(0, 300)
}

/** A new opaque secret for a cookie or a CSRF token: 32 random bytes, base64url. */
export const newSecret = (): string => randomBytes(32).toString('base64url')
