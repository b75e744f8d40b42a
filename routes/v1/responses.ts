import type { FastifyPluginAsync } from 'fastify'
import { NoStoredResponse } from '../../engine/kernel/errors.js'
import { ResponsesBody } from '../../engine/gateway/request-schemas.js'
import { callBodyCompiler } from '../schemas.js'
import { callHandler } from './call.js'

// POST /v1/responses: the OpenAI Responses API for any sellable model, translated to the model's
// upstream protocol (or passed through to a provider that serves it itself). Stateless like the
// rest of the service: nothing is stored, so there is no response to retrieve, delete or cancel.

const responses: FastifyPluginAsync = async (fastify) => {
  fastify.post('/responses', {
    config: { family: 'openai', metered: true, endpoint: 'responses', protocol: 'responses' },
    schema: { body: ResponsesBody },
    validatorCompiler: callBodyCompiler
  }, callHandler(fastify, 'responses'))

  const none = async (request: { params: unknown }): Promise<never> => {
    throw new NoStoredResponse({ id: (request.params as { id: string }).id })
  }
  fastify.get('/responses/:id', none)
  fastify.delete('/responses/:id', none)
  fastify.post('/responses/:id/cancel', none)
  fastify.get('/responses/:id/input_items', none)
}

export default responses
