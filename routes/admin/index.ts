import { createHash, timingSafeEqual } from 'node:crypto'
import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import {
  AdminUnauthorized, InvalidCursor, InvalidField, InvalidQuery, KeyNotFound, MissingField, OrgNotFound, RouteNotFound
} from '../../plugins/errors.js'
import { nanoToUsd, parseUsd } from '../../plugins/money.js'
import { singleValued, type Query } from '../../plugins/query.js'
import { quotaStatus, quotaWindow, type QuotaRule } from '../../plugins/quota.js'
import { decodeCursor, encodeCursor } from '../../plugins/store/usage.js'
import { usageRecord } from './usage-record.js'

// The admin API (PRODUCT.md §4) under /admin/v1: Bearer admin.token, numeric-code errors, JSON.
// With no admin token configured every admin path answers 404, as if it did not exist.

const digest = (s: string): Buffer => createHash('sha256').update(s).digest()

function isoTime (q: Query, name: string): number | undefined {
  const v = q[name]
  if (v === undefined) return undefined
  const t = Date.parse(v)
  if (Number.isNaN(t)) throw new InvalidQuery({ param: name, reason: 'an ISO 8601 date or time' })
  return t
}

function stringArray (v: unknown, field: string): string[] | undefined {
  if (v === undefined) return undefined
  if (!Array.isArray(v) || v.some((x) => typeof x !== 'string' || x === '')) throw new InvalidField({ field, reason: 'must be an array of non-empty strings' })
  return v as string[]
}

const admin: FastifyPluginAsync = async (fastify) => {
  const { store, config, clock, events } = fastify.gw
  const token = config.admin.token
  const expected = digest(token)

  fastify.addHook('onRequest', async (request: FastifyRequest) => {
    if (token === '') throw new RouteNotFound({ method: request.method, url: request.url.split('?')[0] ?? request.url })
    const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '')
    if (m === null || !timingSafeEqual(digest(m[1] as string), expected)) throw new AdminUnauthorized()
    // what calls have written but the deferred writer not yet committed (usage records,
    // charges, lease give-backs, quota counts) is part of every answer here
    fastify.gw.writer.flush()
  })

  const quotaOf = (rule: QuotaRule | undefined): Record<string, unknown> | null => {
    if (rule === undefined) return null
    const now = clock.now()
    return { ...quotaStatus(rule, store.quota.used(rule.scope, quotaWindow(rule.quota.per, now).start), now) }
  }

  const orgView = (id: string): Record<string, unknown> => {
    const org = store.orgs.get(id)
    if (org === undefined) throw new OrgNotFound({ org: id })
    const tenant = config.tenants.find((t) => t.org === id)
    return {
      id,
      balance_usd: nanoToUsd(org.balance_nano),
      held_usd: nanoToUsd(org.held_nano),
      spent_usd: nanoToUsd(org.spent_nano),
      quota: quotaOf(tenant?.quota === undefined ? undefined : { scope: `org:${id}`, kind: 'organization', id, quota: tenant.quota }),
      projects: store.orgs.projects(id).map((p) => {
        const q = tenant?.projects.find((x) => x.id === p.id)?.quota
        return { id: p.id, quota: quotaOf(q === undefined ? undefined : { scope: `project:${id}/${p.id}`, kind: 'project', id: `${id}/${p.id}`, quota: q }) }
      })
    }
  }

  fastify.get('/usage', async (request) => {
    const q = singleValued(request.query)
    const limitText = q.limit ?? '100'
    if (!/^\d{1,5}$/.test(limitText) || Number(limitText) < 1 || Number(limitText) > 10_000) throw new InvalidQuery({ param: 'limit', reason: 'an integer from 1 to 10000' })
    const limit = Number(limitText)
    const cursor = q.cursor === undefined ? undefined : decodeCursor(q.cursor)
    if (q.cursor !== undefined && cursor === undefined) throw new InvalidCursor()
    const rows = store.usage.page({ org: q.org, project: q.project, key_id: q.key_id, model: q.model, since: isoTime(q, 'since'), until: isoTime(q, 'until') }, limit + 1, cursor)
    const page = rows.slice(0, limit)
    const last = page[page.length - 1]
    return {
      object: 'list',
      data: page.map(usageRecord),
      next_cursor: rows.length > limit && last !== undefined ? encodeCursor({ created_at: last.created_at, id: last.id }) : null
    }
  })

  fastify.get('/orgs/:org', async (request) => orgView((request.params as { org: string }).org))

  fastify.post('/orgs/:org/credits', async (request) => {
    const { org } = request.params as { org: string }
    const body = (request.body ?? {}) as { amount_usd?: unknown }
    if (body.amount_usd === undefined) throw new MissingField({ field: 'amount_usd' })
    const amount = typeof body.amount_usd === 'number' ? parseUsd(String(body.amount_usd)) : typeof body.amount_usd === 'string' ? parseUsd(body.amount_usd) : undefined
    if (amount === undefined || amount <= 0) throw new InvalidField({ field: 'amount_usd', reason: 'a positive amount in USD, at most 9 decimals' })
    if (!store.orgs.credit(org, amount)) throw new OrgNotFound({ org })
    return orgView(org)
  })

  fastify.post('/keys', async (request, reply) => {
    const body = (request.body ?? {}) as { org?: unknown, project?: unknown, models?: unknown, name?: unknown }
    if (typeof body.org !== 'string' || body.org === '') throw new MissingField({ field: 'org' })
    if (typeof body.project !== 'string' || body.project === '') throw new MissingField({ field: 'project' })
    if (body.name !== undefined && typeof body.name !== 'string') throw new InvalidField({ field: 'name', reason: 'must be a string' })
    const models = stringArray(body.models, 'models') ?? ['*']
    if (store.orgs.get(body.org) === undefined) throw new OrgNotFound({ org: body.org })
    if (!store.orgs.projects(body.org).some((p) => p.id === body.project)) throw new InvalidField({ field: 'project', reason: `no project ${String(body.project)} in ${body.org}` })
    const k = store.keys.create({ org: body.org, project: body.project, models, name: body.name ?? '', source: 'admin' }, clock.now())
    return reply.status(201).send({ id: k.id, key: k.key, org: k.org, project: k.project, models: k.models, name: k.name })
  })

  fastify.get('/keys', async (request) => {
    const q = singleValued(request.query)
    return {
      object: 'list',
      data: store.keys.list(q.org, q.project).map((k) => ({ id: k.id, org: k.org, project: k.project, models: k.models, name: k.name, created_at: new Date(k.created_at).toISOString(), revoked: k.revoked }))
    }
  })

  fastify.delete('/keys/:id', async (request) => {
    const { id } = request.params as { id: string }
    if (store.keys.get(id) === undefined) throw new KeyNotFound({ id })
    store.keys.revoke(id, clock.now())
    events.emit('key-revoked', id)
    return { id, revoked: true }
  })
}

export default admin
