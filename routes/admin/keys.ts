import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { actorOf } from '../access.js'
import { ConfigOwned, KeyExpiredNotRotated, KeyNotFound, KeyRevoked, OrgNotFound, ProjectNotFound } from '../../engine/kernel/errors.js'
import type { KeyPatch } from '../../engine/store/types.js'
import { parseIsoTime } from '../schemas.js'
import { Answers } from './answers.js'
import { KeyParams, KeyPatchBody, KeysQuery, NewKeyBody, RotateBody } from './schemas.js'
import { budgetOf, mergedLimits, views } from './views.js'

// API keys with a lifecycle: created with their grants, expiry, limits and budget; changed;
// rotated (a new secret with the same grants, limits and budget, the old one valid for a grace
// period); revoked. A key the config file declares belongs to the file: it is changed and rotated
// there (409 config_owned here), but revoked here for good, whatever the file says after. The secret is shown once, when it is made. Every change is in the audit log
// and heard by every worker and instance before it is answered.

const keys: FastifyPluginAsyncTypebox = async (fastify) => {
  const { store, clock } = fastify.gateway
  const view = views(store, clock.now)

  const existing = async (id: string): Promise<NonNullable<Awaited<ReturnType<typeof store.keys.get>>>> => {
    const k = await store.keys.get(id)
    if (k === undefined) throw new KeyNotFound({ id })
    return k
  }

  fastify.post('/keys', { schema: { body: NewKeyBody, response: { 201: Answers.newKey } } }, async (request, reply) => {
    const b = request.body
    if (await store.orgs.get(b.org) === undefined) throw new OrgNotFound({ org: b.org })
    if (!(await store.orgs.projects(b.org)).some((p) => p.id === b.project)) throw new ProjectNotFound({ org: b.org, project: b.project })
    const k = await store.keys.create({
      org: b.org,
      project: b.project,
      models: b.models ?? ['*'],
      passthrough: b.passthrough ?? [],
      mcp: b.mcp ?? [],
      name: b.name ?? '',
      source: 'admin',
      by: actorOf(request),
      expires_at: b.expires_at === undefined || b.expires_at === null ? null : parseIsoTime(b.expires_at, 'expires_at', 'body'),
      limits: b.limits === undefined || b.limits === null ? null : mergedLimits(null, b.limits),
      budget: b.budget === undefined || b.budget === null ? null : budgetOf(b.budget, 'budget')
    }, clock.now())
    return reply.status(201).send({ ...await view.key(k), key: k.key })
  })

  fastify.get('/keys', { schema: { querystring: KeysQuery, response: { 200: Answers.keys } } }, async (request) => ({
    object: 'list' as const,
    data: await Promise.all((await store.keys.list(request.query.org, request.query.project)).map(async (k) => await view.key(k)))
  }))

  fastify.get('/keys/:id', { schema: { params: KeyParams, response: { 200: Answers.key } } }, async (request) => await view.key(await existing(request.params.id)))

  fastify.patch('/keys/:id', { schema: { params: KeyParams, body: KeyPatchBody, response: { 200: Answers.key } } }, async (request) => {
    const { id } = request.params
    const current = await existing(id)
    if (current.revoked) throw new KeyRevoked({ id })
    if (current.source === 'config') throw new ConfigOwned({ what: 'API key', id })
    const b = request.body
    const patch: KeyPatch = {}
    if (b.models !== undefined) patch.models = b.models
    if (b.passthrough !== undefined) patch.passthrough = b.passthrough
    if (b.mcp !== undefined) patch.mcp = b.mcp
    if (b.name !== undefined) patch.name = b.name
    if (b.expires_at !== undefined) patch.expires_at = b.expires_at === null ? null : parseIsoTime(b.expires_at, 'expires_at', 'body')
    if (b.limits !== undefined) patch.limits = b.limits === null ? null : mergedLimits(current.limits, b.limits)
    if (b.budget !== undefined) patch.budget = b.budget === null ? null : budgetOf(b.budget, 'budget')
    const updated = await store.keys.update(id, patch, clock.now(), actorOf(request))
    if (updated === undefined) throw new KeyRevoked({ id })
    return await view.key(updated)
  })

  fastify.post('/keys/:id/rotate', {
    schema: { params: KeyParams, body: RotateBody, response: { 201: Answers.rotation } },
    // no body: the defaults (no grace)
    preValidation: async (request) => { request.body ??= { grace_s: 0 } }
  }, async (request, reply) => {
    const { id } = request.params
    const current = await existing(id)
    if (current.revoked) throw new KeyRevoked({ id })
    // the file holds its secret: a new one goes there
    if (current.source === 'config') throw new ConfigOwned({ what: 'API key', id })
    const now = clock.now()
    if (current.expires_at !== null && current.expires_at <= now) throw new KeyExpiredNotRotated({ id, expired_at: new Date(current.expires_at).toISOString() })
    const rotation = await store.keys.rotate(id, now + request.body.grace_s * 1000, now, actorOf(request))
    if (rotation === undefined) throw new KeyRevoked({ id })
    return reply.status(201).send({ id: rotation.key.id, key: rotation.key.key, replaces: id, old_valid_until: new Date(rotation.old.expires_at ?? now).toISOString() })
  })

  fastify.delete('/keys/:id', { schema: { params: KeyParams, response: { 200: Answers.revoked } } }, async (request) => {
    const { id } = request.params
    await existing(id)
    await store.keys.revoke(id, clock.now(), actorOf(request))
    return { id, revoked: true as const }
  })
}

export default keys
