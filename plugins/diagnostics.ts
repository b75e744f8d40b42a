import { Type } from '@sinclair/typebox'
import { definePlugin } from './registry.js'

// Phase: onSend. Adds `{prefix}Model`, `{prefix}Provider` and `{prefix}Dropped-Params` to the
// chat and messages responses (errors included, once the model is known). The
// `{prefix}Trace-ID` header is not optional: app.ts sets it on every response, 404s included.

const options = Type.Object({}, { additionalProperties: false })

export default definePlugin({
  name: 'diagnostics',
  options,
  plugin: async (fastify) => {
    const names = fastify.gw.headers
    fastify.addHook('onSend', (request, reply, payload, done) => {
      const call = request.call
      if (call !== null) {
        reply.header(names.model, call.model)
        if (call.provider !== null) reply.header(names.provider, call.provider)
        if (call.dropped.length > 0) reply.header(names.droppedParams, call.dropped.join(','))
      }
      done(null, payload)
    })
  }
})
