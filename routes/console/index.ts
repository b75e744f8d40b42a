import { existsSync } from 'node:fs'
import fastifyStatic from '@fastify/static'
import type { FastifyPluginAsync, FastifyRequest } from 'fastify'
import { InvalidQuery, Unauthorized } from '../../plugins/errors.js'
import { nanoToUsd, usdToNano } from '../../plugins/money.js'
import { singleValued } from '../../plugins/query.js'
import { quotaStatus, quotaWindow, type QuotaRule } from '../../plugins/quota.js'
import { ConsoleQueries } from '../../plugins/store/console-queries.js'
import { fromRoot } from '../../paths.js'
import { usageRecord } from '../admin/usage-record.js'

// The developer console (PRODUCT.md §5): the page, bundled by esbuild into dist/console and served as
// static files, and its small JSON API under /console/api. The marketplace is public; the usage
// views need an API key (Bearer) and show only that key's project.

const RANGES = { '24h': { span: 86_400_000, bucket: 3_600_000 }, '7d': { span: 7 * 86_400_000, bucket: 86_400_000 }, '30d': { span: 30 * 86_400_000, bucket: 86_400_000 } } as const

const consoleRoutes: FastifyPluginAsync = async (fastify) => {
  const { store, catalog, config, clock } = fastify.gw
  const queries = new ConsoleQueries(store.db)
  const root = fromRoot('dist', 'console')

  const principal = (request: FastifyRequest) => {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(request.headers.authorization ?? '')
    const key = m === null ? undefined : store.keys.verify(m[1] as string)
    if (key === undefined) throw new Unauthorized()
    return key
  }

  // Prices come from the catalog that routes and bills calls: what is shown is what a call costs.
  fastify.get('/api/models', async () => ({
    object: 'list',
    data: catalog.active().map((m) => {
      const p = m.config.pricing
      return {
        id: m.id,
        name: m.config.name,
        vendor: m.id.includes('/') ? m.id.slice(0, m.id.indexOf('/')) : m.id,
        context_length: m.config.context_length,
        max_output_tokens: m.config.max_output_tokens ?? null,
        input_modalities: m.config.architecture.input_modalities,
        output_modalities: m.config.architecture.output_modalities,
        supported_parameters: m.config.supported_parameters,
        pricing: p === undefined
          ? null
          : {
              input: nanoToUsd(usdToNano(p.input)),
              cached_input: nanoToUsd(usdToNano(p.cached_input ?? p.input)),
              cached_input_configured: p.cached_input !== undefined,
              output: nanoToUsd(usdToNano(p.output)),
              unit: 'USD per million tokens'
            }
      }
    })
  }))

  fastify.get('/api/me', async (request) => {
    const key = principal(request)
    fastify.gw.writer.flush() // the charges, lease give-backs and quota counts of ended calls
    const org = store.orgs.get(key.org)
    const tenant = config.tenants.find((t) => t.org === key.org)
    const now = clock.now()
    const quota = (rule: QuotaRule | null) => rule === null ? null : quotaStatus(rule, store.quota.used(rule.scope, quotaWindow(rule.quota.per, now).start), now)
    const projectQuota = tenant?.projects.find((p) => p.id === key.project)?.quota
    return {
      org: key.org,
      project: key.project,
      key: { id: key.id, name: key.name, hint: key.hint, models: key.models },
      balance_usd: nanoToUsd(org?.balance_nano ?? 0),
      held_usd: nanoToUsd(org?.held_nano ?? 0),
      spent_usd: nanoToUsd(org?.spent_nano ?? 0),
      org_quota: quota(tenant?.quota === undefined ? null : { scope: `org:${key.org}`, kind: 'organization', id: key.org, quota: tenant.quota }),
      project_quota: quota(projectQuota === undefined ? null : { scope: `project:${key.org}/${key.project}`, kind: 'project', id: `${key.org}/${key.project}`, quota: projectQuota })
    }
  })

  fastify.get('/api/usage', async (request) => {
    const key = principal(request)
    const range = singleValued(request.query).range ?? '24h'
    if (!Object.hasOwn(RANGES, range)) throw new InvalidQuery({ param: 'range', reason: 'one of 24h, 7d, 30d' })
    const { span, bucket } = RANGES[range as keyof typeof RANGES]
    fastify.gw.writer.flush()
    const now = clock.now()
    const since = Math.floor((now - span) / bucket) * bucket + bucket
    const rows = new Map(queries.buckets(key.org, key.project, since, bucket).map((b) => [b.t, b]))
    const buckets = []
    const totals = { calls: 0, prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, cost_nano: 0 }
    for (let t = since; t <= now; t += bucket) {
      const b = rows.get(t) ?? { t, calls: 0, prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, cost_nano: 0 }
      for (const k of ['calls', 'prompt_tokens', 'cached_input_tokens', 'completion_tokens', 'cost_nano'] as const) totals[k] += b[k]
      buckets.push({ start: new Date(t).toISOString(), calls: b.calls, prompt_tokens: b.prompt_tokens, cached_input_tokens: b.cached_input_tokens, completion_tokens: b.completion_tokens, cost_usd: nanoToUsd(b.cost_nano) })
    }
    const { cost_nano: cost, ...counts } = totals
    return { range, bucket_s: bucket / 1000, buckets, totals: { ...counts, cost_usd: nanoToUsd(cost) } }
  })

  fastify.get('/api/calls', async (request) => {
    const key = principal(request)
    const text = singleValued(request.query).limit ?? '50'
    if (!/^\d{1,3}$/.test(text) || Number(text) < 1 || Number(text) > 500) throw new InvalidQuery({ param: 'limit', reason: 'an integer from 1 to 500' })
    fastify.gw.writer.flush()
    return { object: 'list', data: store.usage.page({ org: key.org, project: key.project }, Number(text)).map(usageRecord) }
  })

  if (existsSync(root)) {
    // hashed assets may be cached; index.html (served for /console and /console/) is revalidated
    await fastify.register(fastifyStatic, {
      root,
      prefix: '/',
      index: ['index.html'],
      wildcard: false,
      setHeaders: (res, path) => { res.setHeader('cache-control', path.endsWith('.html') ? 'no-cache' : 'public, max-age=31536000, immutable') }
    })
  } else {
    fastify.get('/', async (_request, reply) => reply.status(503).type('text/plain').send('The console is not built: run `npm run build`.\n'))
  }
}

export default consoleRoutes
