import type { FastifyPluginAsync } from 'fastify'
import { callOf, hooksOf } from '../../plugins/gateway/core.js'
import { BodyObjects, topLevelObjects } from '../../plugins/gateway/body-objects.js'
import { admit, grantedModel, objectProviders } from '../../plugins/gateway/gate.js'
import { relayJson, send, translateCtx, type Pipe } from '../../plugins/gateway/pipeline.js'
import { CountTokensBody, MessagesBody } from '../../plugins/gateway/request-schemas.js'
import { checkMedia } from '../../plugins/gateway/validation.js'
import { callBodyCompiler } from '../schemas.js'
import { countTokens } from '../../plugins/translation/tokenizer.js'
import { upstreamPath } from '../../plugins/translation/index.js'
import { countTokensPair } from '../../plugins/translation/passthrough.js'
import type { Json } from '../../plugins/translation/types.js'
import { messagesHeaders } from '../../plugins/upstream/dispatch.js'
import { callHandler } from './call.js'

// POST /v1/messages (also with ?beta=true, which is ignored) and POST /v1/messages/count_tokens.
// Both accept x-api-key as well as Authorization: Bearer and answer errors in the Messages shape.

const config = { family: 'messages', apiKeyHeader: true } as const

const messages: FastifyPluginAsync = async (fastify) => {
  const gateway = fastify.gateway
  const hooks = hooksOf(gateway)
  const { upstreams } = gateway
  fastify.post('/messages', { config: { ...config, metered: true, endpoint: 'messages', protocol: 'messages' }, schema: { body: MessagesBody }, validatorCompiler: callBodyCompiler }, callHandler(fastify, 'messages'))

  // Sent to the model's Messages providers (failover as for calls); for other models counted
  // locally with a tokenizer (an estimate), never a fake 0. Its media and the objects it names
  // are checked as a call's are: a count reads what it counts.
  fastify.post('/messages/count_tokens', { config: { ...config, metered: true, endpoint: 'count_tokens', protocol: 'messages' }, schema: { body: CountTokensBody }, validatorCompiler: callBodyCompiler }, async (request, reply) => {
    const p: Pipe = { gateway, hooks, request, reply, call: callOf(request) }
    const valid = request.body as Json
    const model = grantedModel(gateway, request.principal, valid.model as string, 'chat')
    // the body goes as it is: what it names of the provider's account, in its parts and at its top
    const objects = new BodyObjects('messages')
    checkMedia(valid, model, 'messages', objects)
    topLevelObjects(valid, objects)
    p.call.resolved(model, false)
    const reachable = await objectProviders(p, model.providers, objects)
    const body = await admit(p, model, valid)
    const providers = reachable.filter((id) => upstreams.get(id)?.protocol === 'messages')
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
