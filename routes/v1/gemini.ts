import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import type { FastifyContextConfig } from 'fastify'
import type { CatalogModel } from '../../engine/gateway/catalog.js'
import { callOf } from '../../engine/gateway/core.js'
import { InvalidQuery, MissingModelId, RouteNotFound } from '../../engine/kernel/errors.js'
import { checkGeminiEmbedBody, type GeminiEmbedMethod } from '../../engine/translation/embeddings.js'
import { BodyObjects } from '../../engine/gateway/body-objects.js'
import { grantedModel, grantedModels, shownModel } from '../../engine/gateway/gate.js'
import { GeminiBody } from '../../engine/gateway/request-schemas.js'
import { validBody } from '../../engine/gateway/validation.js'
import type { Json } from '../../engine/translation/types.js'
import { callHandler } from './call.js'
import { countTokensCall } from './count-tokens.js'
import { callRunner } from './run-call.js'
import { wholeCall } from './whole-call.js'

// Google's Gemini API for any sellable model, translated to and from the model's upstream
// protocol like the other client APIs:
//   POST {base}/models/{model}:generateContent         a GenerateContentResponse
//   POST {base}/models/{model}:streamGenerateContent   ?alt=sse: SSE `data:` chunks; else one JSON array of them
//   POST {base}/models/{model}:countTokens             {totalTokens}; free, like Messages' count_tokens
//   POST {base}/models/{model}:embedContent            an embedding model's vector (batchEmbedContents: several)
//   GET  {base}/models, {base}/models/{id}             the key's models in Google's shape
// registered under /v1beta and under /v1, where GET /models[/{id}] stay OpenAI's listing. {model}
// is a catalog id: it may hold slashes, plain or as %2F, and may come as `models/{id}`. The key
// comes in x-goog-api-key, ?key= (never logged, never sent on) or Authorization: Bearer; every
// error is in Google's shape.

export interface GeminiRoutesOptions {
  /**
   * The routes share /v1 with OpenAI's: GET /models[/{id}] are that API's, and a POST below
   * /models takes its error shape from its URL (a Gemini method call) rather than from the route.
   */
  underOpenAI: boolean
}

const CHAT_METHODS = ['generateContent', 'streamGenerateContent', 'countTokens'] as const
const EMBED_METHODS = ['embedContent', 'batchEmbedContents'] as const
const METHODS = [...CHAT_METHODS, ...EMBED_METHODS] as const
type Method = typeof METHODS[number]
const isEmbed = (m: Method): m is GeminiEmbedMethod => (EMBED_METHODS as readonly string[]).includes(m)

const CallQuery = Type.Object({
  alt: Type.Optional(Type.Union([Type.Literal('json'), Type.Literal('sse')], { description: 'sse: a stream of SSE chunks; json (default): one JSON array' })),
  key: Type.Optional(Type.String())
})
const ListQuery = Type.Object({
  pageSize: Type.Integer({ minimum: 1, maximum: 1000, default: 50 }),
  pageToken: Type.Optional(Type.String()),
  key: Type.Optional(Type.String())
})
const Rest = Type.Object({ '*': Type.String() })

/** `{model}:{method}` below /models/: the method follows the last colon (a model id may hold colons too). */
function methodCall (rest: string): { model: string, method: Method } | null {
  const at = rest.lastIndexOf(':')
  if (at <= 0) return null
  const method = rest.slice(at + 1)
  return (METHODS as readonly string[]).includes(method) ? { model: rest.slice(0, at), method: method as Method } : null
}

/** A model in Google's Model shape. */
function geminiModel (m: CatalogModel): Json {
  return {
    name: `models/${m.id}`,
    displayName: m.config.name,
    inputTokenLimit: m.config.context_length,
    outputTokenLimit: m.config.max_output_tokens ?? m.config.context_length,
    supportedGenerationMethods: m.kind === 'chat' ? [...CHAT_METHODS] : m.kind === 'embeddings' ? [...EMBED_METHODS] : []
  }
}

/** A countTokens body: its contents, or the generateContentRequest they come in (whose model is the URL's). */
function countBody (body: unknown): unknown {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) return body
  const b = body as Json
  const inner = b.generateContentRequest
  if (b.contents !== undefined || inner === null || typeof inner !== 'object' || Array.isArray(inner)) return b
  const { model: _model, ...request } = inner as Json
  return request
}

const gemini: FastifyPluginAsyncTypebox<GeminiRoutesOptions> = async (fastify, opts) => {
  const gateway = fastify.gateway
  const { catalog } = gateway
  const generate = callHandler(fastify, 'gemini')
  const run = callRunner(fastify)
  const keys = { apiKeyHeader: 'x-goog-api-key', apiKeyQuery: 'key' } as const

  /** The catalog id a path names: `models/{id}` is `{id}` when the catalog has no such id. */
  const modelId = (name: string): string => name.startsWith('models/') && catalog.get(name) === undefined ? name.slice('models/'.length) : name

  const config: FastifyContextConfig = { ...keys, metered: true, endpoint: 'generate_content', protocol: 'gemini' }
  if (!opts.underOpenAI) config.family = 'gemini'
  fastify.post('/models/*', { config, schema: { params: Rest, querystring: CallQuery } }, async (request, reply) => {
    const path = request.params['*']
    const call = methodCall(path)
    if (call === null) throw new RouteNotFound({ method: 'POST', url: request.url.split('?')[0] ?? request.url })
    const id = modelId(call.model)
    if (call.method === 'countTokens') {
      // a count from the start: a body refused is a refused count, not a refused generation
      callOf(request).kind('count_tokens')
      return await run(request, reply, countTokensCall('gemini', id, validBody(GeminiBody, countBody(request.body))))
    }
    if (isEmbed(call.method)) {
      callOf(request).kind('embeddings')
      // the model the path names first: a chat model is told so, whatever its body
      grantedModel(gateway, request.principal, id, 'embeddings')
      const objects = new BodyObjects('gemini')
      const body = checkGeminiEmbedBody(request.body, call.method, id, objects)
      return await run(request, reply, wholeCall({ kind: 'embeddings', model: 'embeddings', client: 'gemini', name: id, body, answerable: true, defaults: false, objects }))
    }
    const stream = call.method === 'streamGenerateContent'
    return await generate(request, reply, { model: id, stream, arrayStream: stream && request.query.alt !== 'sse' })
  })

  if (opts.underOpenAI) return
  const listing = { config: { family: 'gemini', ...keys } } as const

  fastify.get('/models', { ...listing, schema: { querystring: ListQuery } }, async (request) => {
    const visible = grantedModels(gateway, request.principal)
    const token = request.query.pageToken
    const start = token === undefined || token === '' ? 0 : /^\d{1,9}$/.test(token) ? Number(token) : NaN
    if (!(start <= visible.length)) throw new InvalidQuery({ param: 'pageToken', reason: 'is not a page token this list gave' })
    const end = start + request.query.pageSize
    const page: Json = { models: visible.slice(start, end).map(geminiModel) }
    if (end < visible.length) page.nextPageToken = String(end)
    return page
  })

  fastify.get('/models/*', { ...listing, schema: { params: Rest } }, async (request) => {
    const id = request.params['*']
    if (id === '') throw new MissingModelId()
    return geminiModel(shownModel(gateway, request.principal, modelId(id)))
  })

  // any other path: a 404 after the key is checked, as under /v1, with the key where Gemini clients put it
  fastify.all('/*', listing, async (request) => { throw new RouteNotFound({ method: request.method, url: request.url.split('?')[0] ?? request.url }) })
}

export default gemini
