import { timingSafeEqual } from 'node:crypto'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { AdminUnauthorized, CsrfFailed, Internal, KeyNotFound, OrgNotFound, PermissionDenied, RouteNotFound, SessionEnded, Unauthorized, UsageNotFound } from '../engine/kernel/errors.js'
import { adminOpen, adminTokens, bearerOf } from '../engine/ops/admin-token.js'
import type { Actor, Identity, Role } from '../engine/store/types.js'
import type { Whoami } from './admin/answers.js'

// Who may do what on the admin API and the consoles: one table with a row for every route, and
// one gate that applies it. A route registered under /admin/v1, /console/api or /console/auth
// without a row stops the app from being built. The gate, in every scope that has such routes:
//   onRequest: who is calling (an admin token, else the console session's cookie); a session's
//     state-changing call needs its CSRF token; a role outside the row's is refused with 403
//     permission_denied;
//   preHandler (the body is read by then): an org_admin reaches its own organization only, and
//     another organization's ids answer 404 as if they did not exist (the row's `reach`).
// Handlers never run for a refused call, so nothing is changed.

/** The cookie that carries a console session's id. */
export const SESSION_COOKIE = 'mg_session'

/** An operator: who holds an admin token, or a console session. */
export interface Operator {
  role: Role
  /** org_admin's organization; null for the roles that reach every organization. */
  org: string | null
  identity: Identity
  /** The console session (its id, CSRF token, expiry, the user's name and the sign-in's ID token); null for an admin token. */
  session: { id: string, csrf: string, expires_at: number, name: string | null, idToken: string | null } | null
}

/**
 * How far an org_admin's call reaches (the other roles reach every organization):
 * `org-param` the :org of the path, `org-query` the org of a list's filter (set to its own when
 * absent), `org-body` the org of the body, `key-param` the organization of the key :id,
 * `trace-param` that of the call :trace_id, `org-list` the handler lists its organization only,
 * `operator-project` the org and project a developer console's view names.
 */
export type Reach = 'org-param' | 'org-query' | 'org-body' | 'key-param' | 'trace-param' | 'org-list' | 'operator-project'

export interface AccessRule {
  /** The roles that may call it; `public`: anyone; `key-or-operator`: an API key (checked by the route) or an operator of any role. */
  who: 'public' | 'key-or-operator' | readonly Role[]
  reach?: Reach
  /** What a refused role may not do (the 403's message). */
  does: string
}

const ALL: readonly Role[] = ['admin', 'viewer', 'org_admin']
const READERS: readonly Role[] = ['admin', 'viewer']
const MANAGERS: readonly Role[] = ['admin', 'org_admin']
const ADMIN: readonly Role[] = ['admin']

/** Every admin API route and console action: `METHOD /path` as registered (HEAD follows GET). */
export const ACCESS: Readonly<Record<string, AccessRule>> = {
  'GET /admin/v1/whoami': { who: ALL, does: 'say who is calling' },
  'GET /admin/v1/orgs': { who: ALL, reach: 'org-list', does: 'list organizations' },
  'POST /admin/v1/orgs': { who: ADMIN, does: 'create organizations' },
  'GET /admin/v1/orgs/:org': { who: ALL, reach: 'org-param', does: 'read an organization' },
  'PATCH /admin/v1/orgs/:org': { who: ADMIN, does: 'change an organization\'s quota' },
  'DELETE /admin/v1/orgs/:org': { who: ADMIN, does: 'delete organizations' },
  'POST /admin/v1/orgs/:org/credits': { who: ADMIN, does: 'add credits' },
  'POST /admin/v1/orgs/:org/projects': { who: MANAGERS, reach: 'org-param', does: 'create projects' },
  'PATCH /admin/v1/orgs/:org/projects/:project': { who: MANAGERS, reach: 'org-param', does: 'change projects' },
  'DELETE /admin/v1/orgs/:org/projects/:project': { who: MANAGERS, reach: 'org-param', does: 'delete projects' },
  'POST /admin/v1/keys': { who: MANAGERS, reach: 'org-body', does: 'create API keys' },
  'GET /admin/v1/keys': { who: ALL, reach: 'org-query', does: 'list API keys' },
  'GET /admin/v1/keys/:id': { who: ALL, reach: 'key-param', does: 'read API keys' },
  'PATCH /admin/v1/keys/:id': { who: MANAGERS, reach: 'key-param', does: 'change API keys' },
  'POST /admin/v1/keys/:id/rotate': { who: MANAGERS, reach: 'key-param', does: 'rotate API keys' },
  'DELETE /admin/v1/keys/:id': { who: MANAGERS, reach: 'key-param', does: 'revoke API keys' },
  'GET /admin/v1/usage': { who: ALL, reach: 'org-query', does: 'read usage records' },
  'GET /admin/v1/usage/summary': { who: ALL, reach: 'org-query', does: 'read the usage summary' },
  'GET /admin/v1/usage/:trace_id': { who: ALL, reach: 'trace-param', does: 'read a call' },
  'GET /admin/v1/audit': { who: ALL, reach: 'org-query', does: 'read the audit log' },
  'POST /admin/v1/reload': { who: ADMIN, does: 'reload the configuration' },
  'GET /admin/v1/providers': { who: READERS, does: 'read the providers' },
  'GET /admin/v1/mcp/servers': { who: READERS, does: 'read the MCP servers' },
  'GET /admin/v1/plugins': { who: READERS, does: 'read the plugin chain' },
  'GET /admin/v1/prices/check': { who: READERS, does: 'check the catalog\'s prices' },
  'GET /admin/v1/alerts/deliveries': { who: READERS, does: 'read the alerts\' webhook deliveries' },
  'GET /admin/v1/sessions': { who: ADMIN, does: 'list the operators\' console sessions' },
  'DELETE /admin/v1/sessions/:id': { who: ADMIN, does: 'end an operator\'s console session' },
  'DELETE /admin/v1/sessions': { who: ADMIN, does: 'end a user\'s console sessions' },
  'GET /console/api/models': { who: 'public', does: 'read the marketplace' },
  'GET /console/api/endpoints': { who: 'public', does: 'read where the APIs are' },
  'GET /console/api/projects': { who: 'key-or-operator', does: 'list the projects it may show' },
  'GET /console/api/me': { who: 'key-or-operator', reach: 'operator-project', does: 'read a project\'s balance and quota' },
  'GET /console/api/usage': { who: 'key-or-operator', reach: 'operator-project', does: 'read a project\'s usage' },
  'GET /console/api/calls': { who: 'key-or-operator', reach: 'operator-project', does: 'read a project\'s calls' },
  'GET /console/auth/status': { who: 'public', does: 'read how to sign in' },
  'GET /console/auth/login': { who: 'public', does: 'sign in' },
  'GET /console/auth/callback': { who: 'public', does: 'sign in' },
  'POST /console/auth/logout': { who: ALL, does: 'sign out' }
}

/** The prefixes whose every route needs a row of ACCESS; the rest of /console is the pages, which hold no data. */
export const GUARDED_PREFIXES = ['/admin/v1/', '/console/api/', '/console/auth/'] as const

const SAFE_METHODS = new Set(['GET', 'HEAD', 'OPTIONS'])

const ruleKey = (method: string, url: string): string => `${method === 'HEAD' ? 'GET' : method} ${url}`

/** The row of a route; undefined when it has none. */
export function accessRule (method: string, url: string): AccessRule | undefined {
  return Object.hasOwn(ACCESS, ruleKey(method, url)) ? ACCESS[ruleKey(method, url)] : undefined
}

/** One cookie's value from a Cookie header, or undefined. */
export function cookieOf (request: FastifyRequest, name: string): string | undefined {
  for (const part of (request.headers.cookie ?? '').split(';')) {
    const eq = part.indexOf('=')
    if (eq > 0 && part.slice(0, eq).trim() === name) return part.slice(eq + 1).trim()
  }
  return undefined
}

/** Who made a change, for the audit log. */
export const actorOf = (request: FastifyRequest): Actor => request.operator?.identity ?? 'admin'

declare module 'fastify' {
  interface FastifyRequest {
    /** The operator calling an admin or console route (set by the access gate); null for a public route or an API key. */
    operator: Operator | null
  }
}

/** A route of the admin API or a console action, as registered (the route × role test reads them). */
export interface OperatorRoute { method: string, url: string }

/**
 * The gate of one scope (the admin API's, the consoles'): every route it registers under a
 * guarded prefix must have a row in ACCESS; each call is let through only as its row says.
 */
export function accessGate (scope: FastifyInstance, seen: OperatorRoute[]): void {
  const { config, store, clock } = scope.gateway
  const tokenHolder = adminTokens(config.admin)
  const open = adminOpen(config)
  const sessions = config.sso !== undefined

  scope.decorateRequest('operator', null)

  scope.addHook('onRoute', (route) => {
    if (!GUARDED_PREFIXES.some((p) => route.url.startsWith(p))) return
    for (const method of ([] as string[]).concat(route.method)) {
      if (accessRule(method, route.url) === undefined) throw new Error(`${method} ${route.url} has no row in the access table (routes/access.ts): say which roles may call it`)
      seen.push({ method, url: route.url })
    }
  })

  /** The operator calling: an admin token (a wrong one is refused), else the session's cookie. */
  const operatorOf = async (request: FastifyRequest, admin: boolean): Promise<Operator> => {
    const bearer = bearerOf(request)
    if (bearer !== undefined) {
      const holder = tokenHolder(bearer)
      if (holder === undefined) throw admin ? new AdminUnauthorized() : new Unauthorized()
      return { role: holder.role, org: holder.org, identity: { kind: 'token', name: holder.name }, session: null }
    }
    const id = sessions ? cookieOf(request, SESSION_COOKIE) : undefined
    if (id === undefined || id === '') throw admin ? new AdminUnauthorized() : new Unauthorized()
    const s = await store.sessions.get(id, clock.now())
    if (s === undefined) throw new SessionEnded()
    return { role: s.role, org: s.org, identity: { kind: 'sso', sub: s.sub, email: s.email }, session: { id, csrf: s.csrf, expires_at: s.expires_at, name: s.name, idToken: s.id_token } }
  }

  scope.addHook('onRequest', async (request) => {
    const url = request.routeOptions.url
    if (url === undefined || !GUARDED_PREFIXES.some((p) => url.startsWith(p))) return
    const rule = accessRule(request.method, url)
    if (rule === undefined) throw new Internal({ trace_id: request.id })
    const admin = url.startsWith('/admin/')
    // no admin token and no single sign-on: the admin API is not there
    if (admin && !open) throw new RouteNotFound({ method: request.method, url: request.url.split('?')[0] ?? request.url })
    if (rule.who === 'public') return
    // the developer console's own sign-in, a bearer that is no admin token: the route checks it as an API key
    const bearer = bearerOf(request)
    if (rule.who === 'key-or-operator' && bearer !== undefined && tokenHolder(bearer) === undefined) return
    const op = await operatorOf(request, admin)
    if (op.session !== null && !SAFE_METHODS.has(request.method)) {
      const sent = request.headers['x-csrf-token']
      if (typeof sent !== 'string' || !same(sent, op.session.csrf)) throw new CsrfFailed()
    }
    if (Array.isArray(rule.who) && !rule.who.includes(op.role)) throw new PermissionDenied({ role: op.role, action: rule.does })
    request.operator = op
  })

  scope.addHook('preHandler', async (request) => {
    const op = request.operator
    if (op === null || op.role !== 'org_admin') return
    const rule = accessRule(request.method, request.routeOptions.url ?? '')
    const own = op.org as string
    const params = request.params as Record<string, string>
    const query = request.query as Record<string, unknown>
    switch (rule?.reach) {
      case 'org-param':
        if (params.org !== own) throw new OrgNotFound({ org: params.org ?? '' })
        break
      case 'org-query':
      case 'operator-project':
        if (query.org !== undefined && query.org !== own) throw new OrgNotFound({ org: String(query.org) })
        query.org = own
        break
      case 'org-body': {
        const org = (request.body as { org?: unknown } | null)?.org
        if (org !== own) throw new OrgNotFound({ org: String(org) })
        break
      }
      case 'key-param':
        if ((await store.keys.get(params.id ?? ''))?.org !== own) throw new KeyNotFound({ id: params.id ?? '' })
        break
      case 'trace-param':
        if ((await store.usage.byTrace(params.trace_id ?? ''))?.row.org_id !== own) throw new UsageNotFound({ trace_id: params.trace_id ?? '' })
        break
      default:
    }
  })
}

const same = (a: string, b: string): boolean => {
  const x = Buffer.from(a)
  const y = Buffer.from(b)
  return x.length === y.length && timingSafeEqual(x, y)
}

/** What GET /admin/v1/whoami answers: the caller's identity and role (and, for a session, its CSRF token and end). */
export function whoami (op: Operator): Whoami {
  const base = { role: op.role, org: op.org }
  if (op.identity.kind === 'token') return { kind: 'token', name: op.identity.name, ...base, sub: null, email: null, expires_at: null, csrf_token: null }
  return {
    kind: 'sso',
    name: op.session?.name ?? null,
    ...base,
    sub: op.identity.sub,
    email: op.identity.email,
    expires_at: op.session === null ? null : new Date(op.session.expires_at).toISOString(),
    csrf_token: op.session?.csrf ?? null
  }
}
