import type { FastifyPluginAsync } from 'fastify'
import { callOf, hooksOf } from '../../plugins/gateway/core.js'
import { admit, relayJson, send, translateCtx, type Pipe } from '../../plugins/gateway/pipeline.js'
import { checkBody } from '../../plugins/gateway/validation.js'
import { countTokens } from '../../plugins/translation/tokenizer.js'
import { upstreamPath } from '../../plugins/translation/index.js'
import { countTokensPair } from '../../plugins/translation/passthrough.js'
import type { Json } from '../../plugins/translation/types.js'
import { messagesHeaders } from '../../plugins/upstream/dispatch.js'
import { callHandler, findModel } from './call.js'

// POST /v1/messages (also with ?beta=true, which is ignored) and POST /v1/messages/count_tokens.
// Both accept x-api-key as well as Authorization: Bearer and answer errors in the Messages shape.

const config = { family: 'messages', apiKeyHeader: true } as const

const messages: FastifyPluginAsync = async (fastify) => {
  const gateway = fastify.gateway
  const hooks = hooksOf(gateway)
  const { upstreams } = gateway
  fastify.post('/messages', { config: { ...config, metered: true, endpoint: 'messages', protocol: 'messages' } }, callHandler(fastify, 'messages'))

  // Sent to the model's Messages providers (failover as for calls); for other models counted
  // locally with a tokenizer (an estimate), never a fake 0.
  fastify.post('/messages/count_tokens', { config: { ...config, metered: true, endpoint: 'count_tokens', protocol: 'messages' } }, async (request, reply) => {
    const p: Pipe = { gateway, hooks, request, reply, call: callOf(request) }
    const valid = checkBody({ ...(request.body as Json), max_tokens: 1 }, 'messages')
    delete valid.max_tokens
    const model = findModel(p, valid.model as string, 'chat')
    p.call.resolved(model, false)
    const body = await admit(p, model, valid)
    const providers = model.providers.filter((id) => upstreams.get(id)?.protocol === 'messages')
    if (providers.length === 0 || upstreams.candidates(providers).length === 0) {
      const counted = { input_tokens: await countTokens(body) }
      p.call.answering()
      await p.call.end({ status: 'ok', usage: null, complete: true })
      return counted
    }
    const ctx = translateCtx(p, model, body)
    const answer = await send(p, {
      providers,
      model,
      plan: () => ({ path: upstreamPath(countTokensPair, ctx), body: countTokensPair.request(body, ctx).body, protocol: 'messages', headers: messagesHeaders(request), error: countTokensPair.error })
    })
    return await relayJson(p, answer, { pair: countTokensPair, ctx })
  })
}

export default messages
