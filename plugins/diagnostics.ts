import { Type } from '@sinclair/typebox'
import { definePlugin } from './api/index.js'

// Phase: onSend. Adds `{prefix}Model` (the model that answered, or was tried last),
// `{prefix}Provider`, `{prefix}Dropped-Params` and `{prefix}Fallback` (the models tried that could
// not answer, and why: `openai/gpt-4o-mini:rate_limited`) to the answers of metered calls
// (errors included, once the model is known). The `{prefix}Trace-ID`
// header is not optional: the gateway sets it on every response, 404s included.

const options = Type.Object({}, { additionalProperties: false })

/** A model id as header text: visible ASCII, its commas and percent signs (and anything else) percent-encoded. */
const headerText = (id: string): string => id.replace(/[^\x21-\x7e]|[,%]/g, (c) => encodeURIComponent(c))

export default definePlugin({
  name: 'diagnostics',
  description: '{prefix}Model, {prefix}Provider, {prefix}Dropped-Params and {prefix}Fallback headers',
  options,
  plugin: async (fastify) => {
    const names = fastify.gateway.headers
    fastify.addHook('onSend', (request, reply, payload, done) => {
      const call = request.call
      if (call !== null) {
        if (call.model !== null) reply.header(names.model, call.model.id)
        if (call.provider !== null) reply.header(names.provider, call.provider)
        if (call.dropped.length > 0) reply.header(names.droppedParams, call.dropped.join(','))
        if (call.fallbacks.length > 0) reply.header(names.fallback, call.fallbacks.map((f) => `${headerText(f.model)}:${f.why}`).join(','))
      }
      done(null, payload)
    })
  }
})
