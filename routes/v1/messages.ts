import type { FastifyPluginAsync } from 'fastify'
import { clientAborted } from '../../plugins/context.js'
import { ModelNotFound, MissingField, InvalidField, UpstreamClientError, UpstreamUnavailable } from '../../plugins/errors.js'
import { countTokens } from '../../plugins/translation/tokenizer.js'
import { pairFor } from '../../plugins/translation/index.js'
import type { Json } from '../../plugins/translation/types.js'
import { CallAbort } from '../../plugins/upstream/index.js'
import { checkBody } from '../../plugins/validation.js'
import { callHandler, readText } from './call.js'

// POST /v1/messages (also with ?beta=true, which is ignored) and POST /v1/messages/count_tokens.
// Both accept x-api-key as well as Authorization: Bearer and answer errors in the Messages shape.

const config = { family: 'messages', apiKeyHeader: true } as const

const messages: FastifyPluginAsync = async (fastify) => {
  fastify.post('/messages', { config: { ...config, metered: true } }, callHandler(fastify, 'messages'))

  // Forwarded to a Messages upstream; for other models counted locally with a real tokenizer
  // (an estimate, said so in the README), never a fake 0.
  fastify.post('/messages/count_tokens', { config }, async (request, reply) => {
    const body = request.body as Json | null
    if (body === null || typeof body !== 'object' || Array.isArray(body)) throw new InvalidField({ field: 'body', reason: 'must be a JSON object' })
    if (typeof body.model !== 'string' || body.model === '') throw new MissingField({ field: 'model' })
    checkBody({ ...body, max_tokens: 1 }, 'messages')
    const model = fastify.gw.catalog.find(body.model, request.principal?.models ?? null)
    if (model === undefined) throw new ModelNotFound({ model: body.model })
    const upstream = fastify.gw.upstreams.candidates(model.providers).find((u) => u.protocol === 'messages')
    if (upstream === undefined) return { input_tokens: await countTokens(body) }
    const headers: Record<string, string> = {}
    for (const name of ['anthropic-version', 'anthropic-beta']) {
      const v = request.headers[name]
      if (typeof v === 'string') headers[name] = v
    }
    const abort = new CallAbort()
    reply.raw.once('close', () => { if (clientAborted(reply)) abort.abort() })
    let res
    try {
      res = await upstream.request({ path: '/v1/messages/count_tokens', headers, body: JSON.stringify({ ...body, model: model.upstreamModel }), signal: abort })
    } catch (err) {
      throw new UpstreamUnavailable({}, { cause: err })
    }
    const text = await readText(res.body)
    const json = (() => { try { return JSON.parse(text) as Json } catch { return null } })()
    if (res.statusCode >= 500 || json === null) throw new UpstreamUnavailable()
    if (res.statusCode >= 400) throw new UpstreamClientError(res.statusCode, pairFor('messages', 'messages').error(res.statusCode, json), 'count_tokens refused upstream')
    return json
  })
}

export default messages
