import type { FastifyPluginAsync } from 'fastify'
import { ChatBody } from '../../engine/gateway/request-schemas.js'
import { callBodyCompiler } from '../schemas.js'
import { callHandler } from './call.js'

const chatCompletions: FastifyPluginAsync = async (fastify) => {
  fastify.post('/chat/completions', {
    config: { family: 'openai', metered: true, endpoint: 'chat.completions', protocol: 'openai' },
    schema: { body: ChatBody },
    validatorCompiler: callBodyCompiler
  }, callHandler(fastify, 'openai'))
}

export default chatCompletions
