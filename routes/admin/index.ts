import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import {
  InvalidCursor, InvalidField, KeyNotFound, OrgNotFound
} from '../../plugins/gateway/errors.js'
import { adminGuard } from '../../plugins/ops/admin-token.js'
import { nanoToUsd, parseUsd } from '../../plugins/gateway/money.js'
import { quotaStatus, quotaWindow, QuotaRules, type QuotaRule } from '../../plugins/gateway/quota-windows.js'
import { decodeCursor, encodeCursor } from '../../plugins/store/cursor.js'
import { IsoTime, parseIsoTime } from '../schemas.js'
import { usageRecord } from './usage-record.js'
import type { ReloadResult } from '../../plugins/ops/operations.js'

// The admin API under /admin/v1: Bearer admin.token, numeric-code errors, JSON. With no admin
// token configured every admin path answers 404, as if it did not exist.

const UsageQuery = Type.Object({
  org: Type.Optional(Type.String()),
  project: Type.Optional(Type.String()),
  key_id: Type.Optional(Type.String()),
  model: Type.Optional(Type.String()),
  since: Type.Optional(IsoTime),
  until: Type.Optional(IsoTime),
  limit: Type.Integer({ minimum: 1, maximum: 10_000, default: 100 }),
  cursor: Type.Optional(Type.String())
})

const KeysQuery = Type.Object({ org: Type.Optional(Type.String()), project: Type.Optional(Type.String()) })

const NewKeyBody = Type.Object({
  org: Type.String({ minLength: 1 }),
  project: Type.String({ minLength: 1 }),
  models: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
  passthrough: Type.Optional(Type.Array(Type.String({ minLength: 1 }))),
  name: Type.Optional(Type.String())
})

// a decimal string keeps every digit; a JSON number is taken as it prints
const CreditsBody = Type.Object({ amount_usd: Type.Union([Type.String(), Type.Number()]) })

const OrgParams = Type.Object({ org: Type.String() })
const KeyParams = Type.Object({ id: Type.String() })

export interface AdminOptions {
  /** Re-reads the configuration file (a serving process); without it POST /reload answers 404. */
  reload?: () => Promise<ReloadResult>
}

const admin: FastifyPluginAsyncTypebox<AdminOptions> = async (fastify, opts) => {
  const { store, config, clock } = fastify.gateway
  const guard = adminGuard(config.admin.token)
  const quotas = new QuotaRules(config)

  fastify.addHook('onRequest', async (request) => {
    guard(request)
    // what the store delays (lease give-backs) is part of every answer here
    await store.flush()
  })

  const quotaOf = async (rule: QuotaRule | undefined): Promise<Record<string, unknown> | null> => {
    if (rule === undefined) return null
    const now = clock.now()
    return { ...quotaStatus(rule, await store.quota.used(rule.scope, quotaWindow(rule.quota.per, now).start), now) }
  }

  const orgView = async (id: string): Promise<Record<string, unknown>> => {
    const org = await store.orgs.get(id)
    if (org === undefined) throw new OrgNotFound({ org: id })
    const projects = await store.orgs.projects(id)
    return {
      id,
      balance_usd: nanoToUsd(org.balance_nano),
      held_usd: nanoToUsd(org.held_nano),
      spent_usd: nanoToUsd(org.spent_nano),
      quota: await quotaOf(quotas.org(id)),
      projects: await Promise.all(projects.map(async (p) => ({ id: p.id, quota: await quotaOf(quotas.project(id, p.id)) })))
    }
  }

  fastify.get('/usage', { schema: { querystring: UsageQuery } }, async (request) => {
    const q = request.query
    const cursor = q.cursor === undefined ? undefined : decodeCursor(q.cursor)
    if (q.cursor !== undefined && cursor === undefined) throw new InvalidCursor()
    const filter = { org: q.org, project: q.project, key_id: q.key_id, model: q.model, since: parseIsoTime(q.since, 'since'), until: parseIsoTime(q.until, 'until') }
    const rows = await store.usage.page(filter, q.limit + 1, cursor)
    const page = rows.slice(0, q.limit)
    const last = page[page.length - 1]
    return {
      object: 'list',
      data: page.map(usageRecord),
      next_cursor: rows.length > q.limit && last !== undefined ? encodeCursor({ created_at: last.created_at, id: last.id }) : null
    }
  })

  fastify.get('/orgs/:org', { schema: { params: OrgParams } }, async (request) => await orgView(request.params.org))

  fastify.post('/orgs/:org/credits', { schema: { params: OrgParams, body: CreditsBody } }, async (request) => {
    const { org } = request.params
    const amount = parseUsd(String(request.body.amount_usd))
    if (amount === undefined || amount <= 0) throw new InvalidField({ field: 'amount_usd', reason: 'a positive amount in USD, at most 9 decimals' })
    if (!await store.orgs.credit(org, amount)) throw new OrgNotFound({ org })
    return await orgView(org)
  })

  fastify.post('/keys', { schema: { body: NewKeyBody } }, async (request, reply) => {
    const body = request.body
    if (await store.orgs.get(body.org) === undefined) throw new OrgNotFound({ org: body.org })
    if (!(await store.orgs.projects(body.org)).some((p) => p.id === body.project)) throw new InvalidField({ field: 'project', reason: `no project ${body.project} in ${body.org}` })
    const k = await store.keys.create({ org: body.org, project: body.project, models: body.models ?? ['*'], passthrough: body.passthrough ?? [], name: body.name ?? '', source: 'admin' }, clock.now())
    return reply.status(201).send({ id: k.id, key: k.key, org: k.org, project: k.project, models: k.models, passthrough: k.passthrough, name: k.name })
  })

  fastify.get('/keys', { schema: { querystring: KeysQuery } }, async (request) => ({
    object: 'list',
    data: (await store.keys.list(request.query.org, request.query.project)).map((k) => ({
      id: k.id, org: k.org, project: k.project, models: k.models, passthrough: k.passthrough, name: k.name, created_at: new Date(k.created_at).toISOString(), revoked: k.revoked
    }))
  }))

  // Re-reads the config file: 200 with what changed, or 400 with every problem (the running
  // configuration is kept). With several workers, every worker reloads.
  const reload = opts.reload
  if (reload !== undefined) {
    fastify.post('/reload', async (_request, reply) => {
      const r = await reload()
      if (r.ok) return { reloaded: true, changes: r.changes, generation: r.generation, ...(r.workers === undefined ? {} : { workers: r.workers }) }
      return await reply.status(400).send({
        error: { code: 'invalid_config', type: 'invalid_request_error', message: `The configuration file has ${r.problems.length} problem(s); the running configuration is kept.` },
        problems: r.problems
      })
    })
  }

  fastify.delete('/keys/:id', { schema: { params: KeyParams } }, async (request) => {
    const { id } = request.params
    if (await store.keys.get(id) === undefined) throw new KeyNotFound({ id })
    await store.keys.revoke(id, clock.now())
    return { id, revoked: true }
  })
}

export default admin
