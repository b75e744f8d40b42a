import type { FastifyPluginAsync } from 'fastify'
import { NotImplemented } from '../../plugins/kernel/errors.js'

// Registered so clients get a clear 501 rather than a 404 (spec: "What the service does" 8).
const notImplemented: FastifyPluginAsync = async (fastify) => {
  const answer = async (): Promise<never> => { throw new NotImplemented() }
  fastify.post('/embeddings', answer)
  fastify.post('/images/generations', answer)
}

export default notImplemented
