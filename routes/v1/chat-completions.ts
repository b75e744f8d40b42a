import type { FastifyPluginAsync } from 'fastify'
import { callHandler } from './call.js'

const chatCompletions: FastifyPluginAsync = async (fastify) => {
  fastify.post('/chat/completions', { config: { family: 'openai', metered: true } }, callHandler(fastify, 'openai'))
}

export default chatCompletions
