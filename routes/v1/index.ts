import type { FastifyPluginAsync } from 'fastify'
import chatCompletions from './chat-completions.js'
import embeddingsImages from './embeddings-images.js'
import gemini from './gemini.js'
import messages from './messages.js'
import models from './models.js'
import responses from './responses.js'

const v1: FastifyPluginAsync = async (fastify) => {
  await fastify.register(chatCompletions)
  await fastify.register(messages)
  await fastify.register(models)
  await fastify.register(responses)
  await fastify.register(gemini, { underOpenAI: true })
  await fastify.register(embeddingsImages)
}

export default v1
