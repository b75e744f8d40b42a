import type { FastifyPluginAsync } from 'fastify'
import { callHandler } from './call.js'

const chatCompletions: FastifyPluginAsync = async (fastify) => {
  fastify.post('/chat/completions', { config: { family: 'openai', metered: true, endpoint: 'chat.completions', protocol: 'openai' } }, callHandler(fastify, 'openai'))
}

export default chatCompletions
