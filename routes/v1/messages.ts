import type { FastifyPluginAsync } from 'fastify'
import { CountTokensBody, MessagesBody } from '../../engine/gateway/request-schemas.js'
import { callBodyCompiler } from '../schemas.js'
import type { Json } from '../../engine/translation/types.js'
import { callHandler } from './call.js'
import { countTokensCall } from './count-tokens.js'
import { callRunner } from './run-call.js'

// POST /v1/messages (also with ?beta=true, which is ignored) and POST /v1/messages/count_tokens.
// Both accept x-api-key as well as Authorization: Bearer and answer errors in the Messages shape.

const config = { family: 'messages', apiKeyHeader: true } as const

const messages: FastifyPluginAsync = async (fastify) => {
  const run = callRunner(fastify)
  fastify.post('/messages', { config: { ...config, metered: true, endpoint: 'messages', protocol: 'messages' }, schema: { body: MessagesBody }, validatorCompiler: callBodyCompiler }, callHandler(fastify, 'messages'))

  fastify.post('/messages/count_tokens', { config: { ...config, metered: true, endpoint: 'count_tokens', protocol: 'messages' }, schema: { body: CountTokensBody }, validatorCompiler: callBodyCompiler }, async (request, reply) => {
    const valid = request.body as Json
    return await run(request, reply, countTokensCall('messages', valid.model as string, valid))
  })
}

export default messages
