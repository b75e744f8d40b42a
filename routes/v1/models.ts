import type { FastifyPluginAsync } from 'fastify'
import { InvalidLimit, MissingModelId, ModelNotFound } from '../../plugins/errors.js'
import { singleValued } from '../../plugins/query.js'

// GET /v1/models and GET /v1/models/{id}: the spec's model objects, never a price, only the
// active models the calling key may see (its `models` globs).

function parseLimit (raw: string | undefined): number {
  if (raw === undefined) return 500
  if (!/^\d{1,4}$/.test(raw)) throw new InvalidLimit()
  const n = Number(raw)
  if (n < 1 || n > 1000) throw new InvalidLimit()
  return n
}

const models: FastifyPluginAsync = async (fastify) => {
  const { catalog } = fastify.gw

  fastify.get('/models', async (request) => {
    const limit = parseLimit(singleValued(request.query).limit)
    const visible = catalog.visible(request.principal?.models ?? null)
    return { object: 'list', data: visible.slice(0, limit).map((m) => m.public) }
  })

  fastify.get('/models/*', async (request) => {
    const id = (request.params as { '*': string })['*']
    if (id === '') throw new MissingModelId()
    const model = catalog.find(id, request.principal?.models ?? null)
    if (model === undefined) throw new ModelNotFound({ model: id })
    return model.public
  })
}

export default models
