import type { FastifyPluginAsync } from 'fastify'
import { ModelNotFound, UpstreamUnavailable } from '../../plugins/gateway/errors.js'
import { countTokens } from '../../plugins/translation/tokenizer.js'
import { pairFor } from '../../plugins/translation/index.js'
import type { Json } from '../../plugins/translation/types.js'
import { CallAbort } from '../../plugins/upstream/types.js'
import { dispatch, messagesHeaders, parseJson, readText } from '../../plugins/upstream/dispatch.js'
import { checkBody } from '../../plugins/gateway/validation.js'
import { callHandler, retryPolicy } from './call.js'

// POST /v1/messages (also with ?beta=true, which is ignored) and POST /v1/messages/count_tokens.
// Both accept x-api-key as well as Authorization: Bearer and answer errors in the Messages shape.

const config = { family: 'messages', apiKeyHeader: true } as const

const messages: FastifyPluginAsync = async (fastify) => {
  const { catalog, upstreams, config: gwConfig } = fastify.gateway
  fastify.post('/messages', { config: { ...config, metered: true, endpoint: 'messages', protocol: 'messages' } }, callHandler(fastify, 'messages'))

  // Sent to the model's Messages providers (failover as for calls); for other models counted
  // locally with a tokenizer (an estimate), never a fake 0.
  fastify.post('/messages/count_tokens', { config }, async (request, reply) => {
    const body = checkBody({ ...(request.body as Json), max_tokens: 1 }, 'messages')
    delete body.max_tokens
    const model = catalog.find(body.model as string, request.principal?.models ?? null)
    if (model === undefined) throw new ModelNotFound({ model: body.model as string })
    const providers = model.providers.filter((id) => upstreams.get(id)?.protocol === 'messages')
    if (providers.length === 0 || upstreams.candidates(providers).length === 0) return { input_tokens: await countTokens(body) }
    const abort = new CallAbort()
    reply.raw.once('close', () => { if (!reply.raw.writableEnded) abort.abort() })
    const pair = pairFor('messages', 'messages')
    const answer = await dispatch(upstreams, {
      request,
      providers,
      abort,
      model: model.id,
      retry: retryPolicy(fastify.gateway),
      timeoutS: gwConfig.server.request_timeout_s,
      forwardToMessages: messagesHeaders(request),
      plan: () => ({ path: '/v1/messages/count_tokens', body: { ...body, model: model.upstreamModel }, protocol: 'messages', error: pair.error })
    })
    const json = parseJson(await readText(answer.res.body))
    if (json === null || typeof json !== 'object') throw new UpstreamUnavailable()
    return json
  })
}

export default messages
