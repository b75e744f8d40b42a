import fastifyStatic from '@fastify/static'
import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { FastifyRequest } from 'fastify'
import type { PricingConfig } from '../../config/schema.js'
import { chargeOf, ZERO_USAGE } from '../../engine/gateway/billing.js'
import type { CatalogModel } from '../../engine/gateway/catalog.js'
import { KeyExpired, OperatorScopeRequired, OrgNotFound, ProjectNotFound, Unauthorized } from '../../engine/kernel/errors.js'
import { adminOpen, bearerOf } from '../../engine/ops/admin-token.js'
import { nanoToUsd, usdToNano } from '../../engine/kernel/money.js'
import { orgRule, projectRule, quotaStatus, quotaWindow, type QuotaRule } from '../../engine/gateway/quota-windows.js'
import type { ApiKey, UsageBucket } from '../../engine/store/types.js'
import { fromRoot, inExecutable, shippedFiles } from '../../paths.js'
import { usageRecord } from '../admin/usage-record.js'
import { shippedPage } from './shipped-page.js'
import { Integer } from '../schemas.js'
import { accessGate } from '../access.js'
import auth from './auth.js'

// The developer console: the page, bundled by esbuild into dist/console and served as static
// files, and its small JSON API under /console/api. The marketplace is public; the usage views
// need an API key (Bearer) and show only that key's project, or a console session (single
// sign-on, ./auth.ts) and show a project it names of an organization the role reaches. The
// operator's console, a page of its own over the admin API, is served under /console/admin
// (adminConsole below). Who may call what is in the access table (../access.ts).
// In the executable file, the pages' files are its assets, served from memory (shipped-page.ts).

const RANGES = { '24h': { span: 86_400_000, bucket: 3_600_000 }, '7d': { span: 7 * 86_400_000, bucket: 86_400_000 }, '30d': { span: 30 * 86_400_000, bucket: 86_400_000 } } as const

// with a console session, the project to show (an API key shows its own)
const Project = { org: Type.Optional(Type.String({ minLength: 1 })), project: Type.Optional(Type.String({ minLength: 1 })) }
const MeQuery = Type.Object(Project)
const UsageQuery = Type.Object({ range: Type.Union([Type.Literal('24h'), Type.Literal('7d'), Type.Literal('30d')], { default: '24h' }), ...Project })
const CallsQuery = Type.Object({ limit: Integer({ minimum: 1, maximum: 500, default: 50 }), ...Project })

const COUNTS = ['calls', 'prompt_tokens', 'cached_input_tokens', 'completion_tokens', 'cost_nano', 'saved_nano'] as const

const usdText = (usd: number): string => nanoToUsd(usdToNano(usd))
const usdOrNull = (usd: number | undefined): string | null => usd === undefined ? null : usdText(usd)

/**
 * A model's price sheet as the marketplace shows it: token rates in USD per million tokens (cache
 * writes, audio tokens and tiers only where the catalog sets them), per_request, per_image and server
 * tools' per-use prices in USD, and for an image model billed by tokens alone what one image costs at most.
 */
function marketPrice (p: PricingConfig, m: CatalogModel): Record<string, unknown> {
  // an image model billed by its tokens alone: one image's output tokens at most, and what they cost as a call is charged
  const imageTokens = m.kind === 'image' && p.per_image === undefined && p.output !== undefined ? m.config.max_output_tokens : undefined
  return {
    input: usdText(p.input),
    cached_input: usdText(p.cached_input ?? p.input),
    cached_input_configured: p.cached_input !== undefined,
    output: usdOrNull(p.output),
    cache_write: usdOrNull(p.cache_write),
    cache_write_1h: usdOrNull(p.cache_write_1h),
    input_audio: usdOrNull(p.input_audio),
    output_audio: usdOrNull(p.output_audio),
    tiers: (p.tiers ?? []).map((t) => ({
      above_input_tokens: t.above_input_tokens,
      input: usdText(t.input),
      cached_input: usdOrNull(t.cached_input),
      cache_write: usdOrNull(t.cache_write),
      cache_write_1h: usdOrNull(t.cache_write_1h),
      output: usdOrNull(t.output),
      input_audio: usdOrNull(t.input_audio),
      output_audio: usdOrNull(t.output_audio)
    })),
    per_request: usdOrNull(p.per_request),
    per_image: p.per_image === undefined ? null : typeof p.per_image === 'number' ? { default: usdText(p.per_image) } : Object.fromEntries(Object.entries(p.per_image).map(([size, v]) => [size, usdText(v)])),
    server_tools: p.server_tools === undefined ? null : Object.fromEntries(Object.entries(p.server_tools).map(([kind, v]) => [kind, usdText(v)])),
    image_output_max: imageTokens === undefined ? null : { tokens: imageTokens, usd: nanoToUsd(chargeOf({ ...ZERO_USAGE, completion_tokens: imageTokens }, m.price)) },
    unit: 'USD per million tokens'
  }
}

const consoleRoutes: FastifyPluginAsyncTypebox = async (fastify) => {
  const { store, catalog, clock } = fastify.gateway
  // both consoles (the operator's is registered below, inside this scope): the page may load, run and call only this origin
  fastify.addHook('onSend', async (_request, reply) => { reply.headers(CONSOLE_HEADERS) })
  accessGate(fastify, fastify.operatorRoutes)

  const keyOf = async (request: FastifyRequest): Promise<ApiKey> => {
    const bearer = bearerOf(request)
    const key = bearer === undefined ? undefined : await store.keys.verify(bearer)
    if (key === undefined) throw new Unauthorized()
    if (key.expires_at !== null && key.expires_at <= clock.now()) throw new KeyExpired({ expired_at: new Date(key.expires_at).toISOString() })
    return key
  }

  /** The project a usage view shows: an API key's own, or the one a console session names (the access gate kept an org_admin to its organization). */
  const viewOf = async (request: FastifyRequest, q: { org?: string, project?: string }): Promise<{ org: string, project: string, key: ApiKey | null }> => {
    if (request.operator === null) {
      const key = await keyOf(request)
      return { org: key.org, project: key.project, key }
    }
    if (q.org === undefined || q.project === undefined) throw new OperatorScopeRequired()
    if (await store.orgs.get(q.org) === undefined) throw new OrgNotFound({ org: q.org })
    if (!(await store.orgs.projects(q.org)).some((p) => p.id === q.project)) throw new ProjectNotFound({ org: q.org, project: q.project })
    return { org: q.org, project: q.project, key: null }
  }

  // The projects the usage views may show: an API key's own; every live project of the
  // organizations a console session's role reaches.
  fastify.get('/api/projects', async (request) => {
    const op = request.operator
    if (op === null) {
      const key = await keyOf(request)
      return { object: 'list', data: [{ org: key.org, project: key.project }] }
    }
    const orgs = (await store.orgs.list()).filter((o) => op.org === null || o.id === op.org)
    const data = []
    for (const o of orgs) for (const p of await store.orgs.projects(o.id)) data.push({ org: o.id, project: p.id })
    return { object: 'list', data }
  })

  // Prices come from the catalog that routes and bills calls: what is shown is what a call costs.
  fastify.get('/api/models', async () => ({
    object: 'list',
    data: catalog.available().map((m) => {
      const p = m.config.pricing
      return {
        id: m.id,
        name: m.config.name,
        vendor: m.id.includes('/') ? m.id.slice(0, m.id.indexOf('/')) : m.id,
        // chat, embeddings or image: which route serves it, and which of its prices apply
        kind: m.kind,
        context_length: m.config.context_length,
        max_output_tokens: m.config.max_output_tokens ?? null,
        input_modalities: m.config.architecture.input_modalities,
        output_modalities: m.config.architecture.output_modalities,
        supported_parameters: m.config.supported_parameters,
        pricing: p === undefined ? null : marketPrice(p, m)
      }
    })
  }))

  // without the balance plugin, calls are not charged to a balance: it stays as topped up and nothing shows as spent
  const charged = fastify.gateway.config.plugins.some((p) => p.name === 'balance' && p.module === undefined && p.enabled)
  // Where the APIs are, for the page's quick start: /mcp only when the gateway serves MCP tools.
  fastify.get('/api/endpoints', async () => ({ openai: '/v1', anthropic: '/', gemini: '/v1beta', mcp: fastify.gateway.config.mcp.servers.length > 0 ? '/mcp' : null }))

  fastify.get('/api/me', { schema: { querystring: MeQuery } }, async (request) => {
    const { org: orgId, project: projectId, key } = await viewOf(request, request.query)
    await store.flush() // lease give-backs the store delays
    const org = await store.orgs.get(orgId)
    const project = (await store.orgs.projects(orgId)).find((p) => p.id === projectId)
    const now = clock.now()
    const quota = async (rule: QuotaRule | undefined) => rule === undefined ? null : quotaStatus(rule, await store.quota.used(rule.scope, quotaWindow(rule.quota.per, now).start), now)
    return {
      org: orgId,
      project: projectId,
      key: key === null ? null : { id: key.id, name: key.name, hint: key.hint, models: key.models, mcp: key.mcp },
      balance_usd: nanoToUsd(org?.balance_nano ?? 0),
      held_usd: nanoToUsd(org?.held_nano ?? 0),
      spent_usd: nanoToUsd(org?.spent_nano ?? 0),
      balance_charged: charged,
      org_quota: await quota(org?.quota === null || org === undefined ? undefined : orgRule(orgId, org.quota)),
      project_quota: await quota(project?.quota === null || project === undefined ? undefined : projectRule(orgId, projectId, project.quota))
    }
  })

  fastify.get('/api/usage', { schema: { querystring: UsageQuery } }, async (request) => {
    const view = await viewOf(request, request.query)
    const range = request.query.range
    const { span, bucket } = RANGES[range]
    const now = clock.now()
    const since = Math.floor((now - span) / bucket) * bucket + bucket
    const rows = new Map((await store.usage.buckets(view.org, view.project, since, bucket)).map((b) => [b.t, b]))
    const buckets = []
    const totals = { calls: 0, prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, cost_nano: 0, saved_nano: 0 }
    for (let t = since; t <= now; t += bucket) {
      const b: UsageBucket = rows.get(t) ?? { t, calls: 0, prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, cost_nano: 0, saved_nano: 0 }
      for (const k of COUNTS) totals[k] += b[k]
      buckets.push({
        start: new Date(t).toISOString(),
        calls: b.calls,
        prompt_tokens: b.prompt_tokens,
        cached_input_tokens: b.cached_input_tokens,
        completion_tokens: b.completion_tokens,
        cost_usd: nanoToUsd(b.cost_nano),
        saved_usd: nanoToUsd(b.saved_nano)
      })
    }
    const { cost_nano: cost, saved_nano: saved, ...counts } = totals
    // spend by tag over the same range (a call counts under each of its tags; untagged calls: tag null)
    const byTag = (await store.usage.summary({ org: view.org, project: view.project, since }, ['tag']))
      .map((r) => ({ tag: r.tag ?? null, calls: r.calls, cost_usd: nanoToUsd(r.cost_nano) }))
    return { range, bucket_s: bucket / 1000, buckets, totals: { ...counts, cost_usd: nanoToUsd(cost), saved_usd: nanoToUsd(saved) }, by_tag: byTag }
  })

  fastify.get('/api/calls', { schema: { querystring: CallsQuery } }, async (request) => {
    const view = await viewOf(request, request.query)
    return { object: 'list', data: (await store.usage.page({ org: view.org, project: view.project }, request.query.limit)).map(usageRecord) }
  })

  const skipAdmin = (path: string): boolean => path.startsWith('admin/')
  if (!shippedFiles('dist', 'console').includes('index.html')) {
    fastify.get('/', async (_request, reply) => reply.status(503).type('text/plain').send('The console is not built: run `npm run build`.\n'))
  } else if (inExecutable) {
    await fastify.register(shippedPage, { folder: ['dist', 'console'], skip: skipAdmin, setHeaders: cacheHeaders })
  } else {
    // hashed assets may be cached; index.html (served for /console and /console/) is revalidated
    await fastify.register(fastifyStatic, {
      root: fromRoot('dist', 'console'),
      prefix: '/',
      index: ['index.html'],
      wildcard: false,
      globIgnore: ['admin/**'], // the operator's console, served below with headers of its own
      cacheControl: false, // (send's own Cache-Control would replace the one setHeaders sets)
      setHeaders: cacheHeaders
    })
  }

  await fastify.register(auth, { prefix: '/auth', sso: fastify.gateway.config.sso })
  await fastify.register(adminConsole, { prefix: '/admin' })
}

const cacheHeaders = (res: { setHeader: (name: string, value: string) => unknown }, path: string): void => {
  res.setHeader('cache-control', path.endsWith('.html') ? 'no-cache' : 'public, max-age=31536000, immutable')
}

/** What every answer under /console carries: the page may load, run and call only this origin. */
const CONSOLE_HEADERS = {
  'content-security-policy': "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'",
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer'
}

// The operator's console: a page of its own (dist/console/admin) that signs in with an admin
// token or through single sign-on and calls /admin/v1 from the browser. The page holds no data and
// no secret: signed out it can do nothing, and with no admin access configured it only says that
// the admin API is off.
const adminConsole: FastifyPluginAsyncTypebox = async (fastify) => {
  const folder = ['dist', 'console', 'admin']
  if (!adminOpen(fastify.gateway.config)) {
    fastify.get('/', async (_request, reply) => await reply.status(404).type('text/html; charset=utf-8').header('cache-control', 'no-cache').send(ADMIN_OFF))
  } else if (!shippedFiles(...folder).includes('index.html')) {
    fastify.get('/', async (_request, reply) => reply.status(503).type('text/plain').send('The console is not built: run `npm run build`.\n'))
  } else if (inExecutable) {
    await fastify.register(shippedPage, { folder, setHeaders: cacheHeaders })
  } else {
    // the page at /console/admin and /console/admin/, its hashed assets under /console/admin/assets/
    await fastify.register(fastifyStatic, { root: fromRoot(...folder), prefix: '/', index: ['index.html'], wildcard: false, decorateReply: false, cacheControl: false, setHeaders: cacheHeaders })
  }
}

const ADMIN_OFF = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>modelgate operator's console</title><link rel="icon" type="image/svg+xml" href="/console/favicon.svg"></head>
<body><main><h1>The admin API is off</h1>
<p>This gateway has no admin token configured (<code>admin.token</code> in its config file is empty), so the admin API and the operator's console are switched off. To switch them on, give it a token (a long random string, such as <code>openssl rand -base64 32</code> prints), in one of two ways:</p>
<ul>
<li>in the environment variable the config reads it from (the shipped config: <code>token: \${MODELGATE_ADMIN_TOKEN:-}</code>), then <strong>restart</strong> the gateway: a reload reads the config file again, not the environment;</li>
<li>or written in the config file itself (keep the file private), then reload it (<code>modelgate reload</code>, or <code>kill -HUP</code> the gateway).</li>
</ul></main></body></html>
`

export default consoleRoutes
