import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import type { RouteOptions } from 'fastify'
import { InvalidCursor, UsageNotFound } from '../../engine/kernel/errors.js'
import { accessGate, actorOf, whoami } from '../access.js'
import { nanoToUsd } from '../../engine/kernel/money.js'
import { decodeCursor, encodeCursor } from '../../engine/store/cursor.js'
import type { Cursor, SummaryField, UsageFilter, UsageStatus } from '../../engine/store/types.js'
import { parseIsoTime } from '../schemas.js'
import keys from './keys.js'
import { Answers, type AnswerOf } from './answers.js'
import { AuditQuery, DeliveriesQuery, SummaryQuery, TraceParams, UsageQuery } from './schemas.js'
import tenants from './tenants.js'
import sessions from './sessions.js'
import gateway from './gateway.js'
import prices from './prices.js'
import { usageDetail } from './usage-record.js'
import type { ReloadResult } from '../../engine/ops/operations.js'
import type { Link } from '../../engine/host/index.js'
import type { HealthReport } from '../../engine/upstream/health.js'

// The admin API under /admin/v1: an admin token (Bearer) or a console session, each with a role
// (../access.ts), numeric-code errors, JSON. With no admin token and no single sign-on configured
// every admin path answers 404, as if it did not exist. Tenants and keys are
// in ./tenants.ts and ./keys.ts, the providers and the plugin chain in ./gateway.ts, the price
// check in ./prices.ts, the operators' console sessions in ./sessions.ts; usage, its summary,
// the audit log and reload here. What every route answers is described in ./answers.ts, the
// response schemas the routes register and the types the operator's console reads.

const BUCKETS = { hour: 3_600_000, day: 86_400_000 } as const

export interface AdminOptions {
  /** Re-reads the configuration file (a serving process); without it POST /reload answers 404. */
  reload?: () => Promise<ReloadResult>
  /** The configuration's generation in a serving process (1 at start, one more per reload); none for an app built on its own. */
  generation?: number
  /** Every worker's view of the providers (serve --workers N); without it, this process's own. */
  providerHealth?: () => Promise<HealthReport[]>
  /** The plugin chain as it applies (the plugin host's links), for GET /plugins. */
  plugins?: readonly Link[]
}

/** An onRoute hook: a route without a response schema for its success stops the build. */
export function answerSchemaRequired (route: RouteOptions): void {
  const response = route.schema?.response as Record<string, unknown> | undefined
  if (response === undefined || !Object.keys(response).some((status) => status.startsWith('2'))) {
    throw new Error(`${String(route.method)} ${route.url} has no response schema: describe its answer in routes/admin/answers.ts`)
  }
}

const admin: FastifyPluginAsyncTypebox<AdminOptions> = async (fastify, opts) => {
  const { store, clock } = fastify.gateway
  // who may call each route, in one table (../access.ts)
  accessGate(fastify, fastify.operatorRoutes)
  // what each route answers, in one module (./answers.ts)
  fastify.addHook('onRoute', answerSchemaRequired)

  fastify.addHook('onRequest', async () => {
    // what the store delays (lease give-backs, when keys were last used) is part of every answer here
    await store.flush()
  })

  // The caller's identity and role; a console session's CSRF token, which its changes must carry.
  fastify.get('/whoami', { schema: { response: { 200: Answers.whoami } } }, async (request) => whoami(request.operator as NonNullable<typeof request.operator>))

  await fastify.register(tenants)
  await fastify.register(keys)
  await fastify.register(gateway, { generation: opts.generation, providerHealth: opts.providerHealth, plugins: opts.plugins })
  await fastify.register(prices)
  await fastify.register(sessions)

  const filterOf = (q: { org?: string, project?: string, key_id?: string, model?: string, status?: string, endpoint?: string, provider?: string, tag?: string, since?: string, until?: string }): UsageFilter => ({
    org: q.org,
    project: q.project,
    key_id: q.key_id,
    model: q.model,
    // (the schema let only known statuses through)
    status: q.status === undefined ? undefined : [...new Set(q.status.split(','))] as UsageStatus[],
    endpoint: q.endpoint,
    provider: q.provider,
    tag: q.tag,
    since: parseIsoTime(q.since, 'since'),
    until: parseIsoTime(q.until, 'until')
  })

  const cursorOf = (text: string | undefined): Cursor | undefined => {
    if (text === undefined) return undefined
    const cursor = decodeCursor(text)
    if (cursor === undefined) throw new InvalidCursor()
    return cursor
  }

  /** A page of `limit` rows out of `rows` (one more was read to know whether another page follows). */
  const pageOf = <R extends { id: string }, V>(rows: R[], limit: number, at: (r: R) => number, show: (r: R) => V): { object: 'list', data: V[], next_cursor: string | null } => {
    const page = rows.slice(0, limit)
    const last = page[page.length - 1]
    return {
      object: 'list',
      data: page.map(show),
      next_cursor: rows.length > limit && last !== undefined ? encodeCursor({ created_at: at(last), id: last.id }) : null
    }
  }

  fastify.get('/usage', { schema: { querystring: UsageQuery, response: { 200: Answers.usage } } }, async (request) => {
    const q = request.query
    const rows = await store.usage.page(filterOf(q), q.limit + 1, cursorOf(q.cursor))
    return pageOf(rows, q.limit, (r) => r.created_at, usageDetail)
  })

  // One call by its trace id: its record with its attempts and dropped parameters, and the
  // request and answer the usage plugin kept (store_content), or null.
  fastify.get('/usage/:trace_id', { schema: { params: TraceParams, response: { 200: Answers.call } } }, async (request) => {
    const { trace_id: traceId } = request.params
    const found = await store.usage.byTrace(traceId)
    if (found === undefined) throw new UsageNotFound({ trace_id: traceId })
    return { ...usageDetail(found.row), content: found.content === null ? null : { request: found.content.request, response: found.content.response } }
  })

  // Sums of the usage records the filters select, grouped, and bucketed by UTC hour or day:
  // computed by the store in one SQL aggregate; money summed in nano-dollars, exact.
  fastify.get('/usage/summary', { schema: { querystring: SummaryQuery, response: { 200: Answers.summary } } }, async (request) => {
    const q = request.query
    const groupBy = q.group_by === undefined ? [] : [...new Set(q.group_by.split(','))] as SummaryField[]
    const rows = await store.usage.summary(filterOf(q), groupBy, q.bucket === undefined ? undefined : BUCKETS[q.bucket])
    return {
      object: 'list' as const,
      data: rows.map((r) => ({
        ...Object.fromEntries(groupBy.map((g) => [g, r[g] ?? null])) as Partial<Record<SummaryField, string | null>>,
        ...(r.bucket_start === undefined ? {} : { bucket_start: new Date(r.bucket_start).toISOString() }),
        calls: r.calls,
        errors: r.errors,
        prompt_tokens: r.prompt_tokens,
        cached_input_tokens: r.cached_input_tokens,
        completion_tokens: r.completion_tokens,
        cost_usd: nanoToUsd(r.cost_nano),
        saved_usd: nanoToUsd(r.saved_nano)
      }))
    }
  })

  // Every change made through this API or the CLI, newest first; never a secret. With `org` (an
  // org_admin's own, always), the lines about that organization, selected by the store's query.
  fastify.get('/audit', { schema: { querystring: AuditQuery, response: { 200: Answers.audit } } }, async (request) => {
    const q = request.query
    const rows = await store.audit.page(q.limit + 1, cursorOf(q.cursor), q.org)
    return pageOf(rows, q.limit, (r) => r.at, (r) => ({ id: r.id, at: new Date(r.at).toISOString(), action: r.action, target: r.target, org: r.org, actor: r.actor, identity: r.identity, detail: r.detail }))
  })

  // The alerts' webhook deliveries, newest first: each event and webhook, how its delivery stands
  // (pending, delivered, failed), its attempts and its last answer. A webhook's query string (which
  // may carry a token of the receiver's) is left out.
  fastify.get('/alerts/deliveries', { schema: { querystring: DeliveriesQuery, response: { 200: Answers.deliveries } } }, async (request) => {
    const q = request.query
    const rows = await store.alerts.page(q.limit + 1, cursorOf(q.cursor))
    const iso = (ms: number): string => new Date(ms).toISOString()
    return pageOf(rows, q.limit, (r) => r.created_at, (r) => {
      const url = new URL(r.webhook)
      return {
        id: r.id,
        type: r.type,
        webhook: `${url.origin}${url.pathname}`,
        status: r.status,
        attempts: r.attempts,
        created_at: iso(r.created_at),
        next_attempt_at: r.status === 'pending' ? iso(r.next_at) : null,
        delivered_at: r.delivered_at === null ? null : iso(r.delivered_at),
        last_status: r.last_status,
        last_error: r.last_error,
        event: JSON.parse(r.payload) as AnswerOf<'deliveries'>['data'][number]['event']
      }
    })
  })

  // Re-reads the config file: 200 with what changed, or 400 with every problem (the running
  // configuration is kept). With several workers, every worker reloads.
  const reload = opts.reload
  if (reload !== undefined) {
    fastify.post('/reload', { schema: { response: { 200: Answers.reloaded, 400: Answers.reloadRefused } } }, async (request, reply) => {
      const r = await reload()
      if (r.ok) {
        await store.audit.record({ action: 'reload', target: 'config', detail: { changes: r.changes, generation: r.generation } }, clock.now(), actorOf(request))
        return { reloaded: true as const, changes: r.changes, generation: r.generation, ...(r.workers === undefined ? {} : { workers: r.workers }) }
      }
      return await reply.status(400).send({
        error: { code: 'invalid_config', type: 'invalid_request_error', message: `The configuration file has ${r.problems.length} problem(s); the running configuration is kept.` },
        problems: r.problems
      })
    })
  }
}

export default admin
