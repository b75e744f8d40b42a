import { Type } from '@sinclair/typebox'
import { definePlugin } from './api/index.js'

// Phase: onSend. Adds `{prefix}Model`, `{prefix}Provider` and `{prefix}Dropped-Params` to the
// answers of metered calls (errors included, once the model is known). The `{prefix}Trace-ID`
// header is not optional: the gateway sets it on every response, 404s included.

const options = Type.Object({}, { additionalProperties: false })

export default definePlugin({
  name: 'diagnostics',
  description: '{prefix}Model, {prefix}Provider and {prefix}Dropped-Params headers',
  options,
  plugin: async (fastify) => {
    const names = fastify.gateway.headers
    fastify.addHook('onSend', (request, reply, payload, done) => {
      const call = request.call
      if (call !== null) {
        if (call.model !== null) reply.header(names.model, call.model.id)
        if (call.provider !== null) reply.header(names.provider, call.provider)
        if (call.dropped.length > 0) reply.header(names.droppedParams, call.dropped.join(','))
      }
      done(null, payload)
    })
  }
})
