import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Type } from '@sinclair/typebox'
import { MissingModelId } from '../../engine/kernel/errors.js'
import { grantedModels, shownModel } from '../../engine/gateway/gate.js'
import { Integer } from '../schemas.js'

// GET /v1/models and GET /v1/models/{id}: the catalog's model objects, never a price, only the
// active models the calling key may see (its `models` globs) that some provider can serve (one
// given credentials). A `limit` outside 1–1000 is 400.

const ListQuery = Type.Object({ limit: Integer({ minimum: 1, maximum: 1000, default: 500 }) })
const ModelParams = Type.Object({ '*': Type.String() })

// named: a path below /v1/models ending in `:method` would otherwise be taken for a Gemini call's
const config = { family: 'openai' } as const

const models: FastifyPluginAsyncTypebox = async (fastify) => {
  const gateway = fastify.gateway

  fastify.get('/models', { config, schema: { querystring: ListQuery } }, async (request) => {
    const visible = grantedModels(gateway, request.principal)
    return { object: 'list', data: visible.slice(0, request.query.limit).map((m) => m.public) }
  })

  fastify.get('/models/*', { config, schema: { params: ModelParams } }, async (request) => {
    const id = request.params['*']
    if (id === '') throw new MissingModelId()
    return shownModel(gateway, request.principal, id).public
  })
}

export default models
