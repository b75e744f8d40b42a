import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { actorOf } from '../access.js'
import { ConfigOwned, OrgExists, OrgNotFound, ProjectExists, ProjectNotFound } from '../../engine/kernel/errors.js'
import { Answers } from './answers.js'
import { CreditsBody, NewOrgBody, NewProjectBody, OrgParams, ProjectParams, QuotaBody } from './schemas.js'
import { quotaOf, usdField, views } from './views.js'

// Organizations and projects at runtime: created, given or relieved of a quota, deleted (the
// rows stay for their usage records; their keys answer 401 at once), topped up. Each change is
// in the audit log, and heard by every worker and instance before it is answered.

const tenants: FastifyPluginAsyncTypebox = async (fastify) => {
  const { store, clock, config } = fastify.gateway
  const view = views(store, clock.now)

  // a quota the config file names belongs to the file: a reload would set it back
  const fileQuota = (org: string, project?: string): boolean => {
    const t = config.tenants.find((x) => x.org === org)
    if (t === undefined) return false
    if (project === undefined) return t.quota !== undefined
    return t.projects.find((p) => p.id === project)?.quota !== undefined
  }

  fastify.get('/orgs', { schema: { response: { 200: Answers.orgs } } }, async (request) => {
    // an org_admin lists its own organization only
    const own = request.operator?.role === 'org_admin' ? request.operator.org : null
    const orgs = (await store.orgs.list()).filter((o) => own === null || o.id === own)
    return { object: 'list' as const, data: await Promise.all(orgs.map(async (o) => await view.org(o.id))) }
  })

  fastify.post('/orgs', { schema: { body: NewOrgBody, response: { 201: Answers.org } } }, async (request, reply) => {
    const b = request.body
    const balanceNano = b.balance_usd === undefined ? 0 : usdField(b.balance_usd, 'balance_usd', { zero: true })
    const quota = b.quota === undefined || b.quota === null ? null : quotaOf(b.quota, 'quota')
    if (!await store.orgs.create({ id: b.id, balanceNano, quota }, clock.now(), actorOf(request))) throw new OrgExists({ org: b.id })
    return reply.status(201).send(await view.org(b.id))
  })

  fastify.get('/orgs/:org', { schema: { params: OrgParams, response: { 200: Answers.org } } }, async (request) => await view.org(request.params.org))

  fastify.patch('/orgs/:org', { schema: { params: OrgParams, body: QuotaBody, response: { 200: Answers.org } } }, async (request) => {
    const { org } = request.params
    if (fileQuota(org)) throw new ConfigOwned({ what: 'The quota of organization', id: org })
    const quota = request.body.quota === null ? null : quotaOf(request.body.quota, 'quota')
    if (!await store.orgs.setQuota(org, quota, clock.now(), actorOf(request))) throw new OrgNotFound({ org })
    return await view.org(org)
  })

  fastify.delete('/orgs/:org', { schema: { params: OrgParams, response: { 200: Answers.deleted } } }, async (request) => {
    const { org } = request.params
    if (!await store.orgs.remove(org, clock.now(), actorOf(request))) throw new OrgNotFound({ org })
    return { id: org, deleted: true as const }
  })

  fastify.post('/orgs/:org/credits', { schema: { params: OrgParams, body: CreditsBody, response: { 200: Answers.org } } }, async (request) => {
    const { org } = request.params
    const amount = usdField(request.body.amount_usd, 'amount_usd')
    if (!await store.orgs.credit(org, amount, clock.now(), actorOf(request))) throw new OrgNotFound({ org })
    return await view.org(org)
  })

  fastify.post('/orgs/:org/projects', { schema: { params: OrgParams, body: NewProjectBody, response: { 201: Answers.project } } }, async (request, reply) => {
    const { org } = request.params
    const b = request.body
    const quota = b.quota === undefined || b.quota === null ? null : quotaOf(b.quota, 'quota')
    const done = await store.orgs.createProject(org, b.id, quota, clock.now(), actorOf(request))
    if (done === 'no_org') throw new OrgNotFound({ org })
    if (done === 'exists') throw new ProjectExists({ org, project: b.id })
    return reply.status(201).send(await view.project(org, b.id, quota))
  })

  fastify.patch('/orgs/:org/projects/:project', { schema: { params: ProjectParams, body: QuotaBody, response: { 200: Answers.project } } }, async (request) => {
    const { org, project } = request.params
    if (fileQuota(org, project)) throw new ConfigOwned({ what: 'The quota of project', id: `${org}/${project}` })
    const quota = request.body.quota === null ? null : quotaOf(request.body.quota, 'quota')
    if (!await store.orgs.setProjectQuota(org, project, quota, clock.now(), actorOf(request))) await notFound(org, project)
    return await view.project(org, project, quota)
  })

  fastify.delete('/orgs/:org/projects/:project', { schema: { params: ProjectParams, response: { 200: Answers.deleted } } }, async (request) => {
    const { org, project } = request.params
    if (!await store.orgs.removeProject(org, project, clock.now(), actorOf(request))) await notFound(org, project)
    return { id: project, deleted: true as const }
  })

  /** The 404 of a project that is not there: its organization's, when that is not there either. */
  const notFound = async (org: string, project: string): Promise<never> => {
    if (await store.orgs.get(org) === undefined) throw new OrgNotFound({ org })
    throw new ProjectNotFound({ org, project })
  }
}

export default tenants
