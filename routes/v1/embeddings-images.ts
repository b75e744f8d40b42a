import type { FastifyPluginAsync } from 'fastify'
import { NotImplemented } from '../../engine/kernel/errors.js'
import { BodyObjects, topLevelObjects } from '../../engine/gateway/body-objects.js'
import type { Json } from '../../engine/translation/types.js'
import { checkEmbeddingsBody } from '../../engine/translation/embeddings.js'
import { checkImagesBody } from '../../engine/translation/images.js'
import { callRunner } from './run-call.js'
import { wholeCall } from './whole-call.js'

// POST /v1/embeddings and POST /v1/images/generations, in OpenAI's shapes, for the catalog's
// embedding and image models, whatever their provider's protocol (OpenAI's, forwarded; Gemini's,
// translated). Each answers the spec's 501 while the catalog holds no active model of its kind.
// Embeddings may be answered from the response cache; images never are.

/** What an OpenAI-shaped body names of the provider's account: its fields are settings and text, but one the gateway does not know may name objects. */
function namedBy (body: Json): BodyObjects {
  const objects = new BodyObjects('openai')
  topLevelObjects(body, objects)
  return objects
}

const embeddings: FastifyPluginAsync = async (fastify) => {
  const gateway = fastify.gateway
  const run = callRunner(fastify)

  fastify.post('/embeddings', { config: { family: 'openai', metered: true, endpoint: 'embeddings', protocol: 'openai' } }, async (request, reply) => {
    if (!gateway.catalog.serves('embeddings')) throw new NotImplemented()
    const body = checkEmbeddingsBody(request.body)
    return await run(request, reply, wholeCall({ kind: 'embeddings', model: 'embeddings', client: 'openai', name: body.model as string, body, answerable: true, defaults: true, objects: namedBy(body) }))
  })

  fastify.post('/images/generations', { config: { family: 'openai', metered: true, endpoint: 'images.generations', protocol: 'openai' } }, async (request, reply) => {
    if (!gateway.catalog.serves('image')) throw new NotImplemented()
    const body = checkImagesBody(request.body)
    return await run(request, reply, wholeCall({ kind: 'images', model: 'image', client: 'openai', name: body.model as string, body, answerable: false, defaults: true, objects: namedBy(body) }))
  })
}

export default embeddings
