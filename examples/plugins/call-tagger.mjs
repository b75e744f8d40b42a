// call-tagger: an example of a modelgate plugin written outside the project.
//
// It tags the answer of every call with a header, and counts the calls each organization made
// per model, which GET /v1/call-tags shows to a key of that organization. It needs nothing from
// modelgate to be written: the default export is a plain object, its options a JSON Schema, and
// everything else comes through `fastify.gateway` (see docs/plugins.md).
//
// Load it from the config, after auth (it reads the caller's organization):
//
//   plugins:
//     - name: auth
//     - name: call-tagger
//       module: ./examples/plugins/call-tagger.mjs
//       options: { tag: blue }

export default {
  name: 'call-tagger',
  description: 'tags call answers with a header and counts calls per organization and model',
  options: {
    type: 'object',
    properties: {
      tag: { type: 'string', minLength: 1, description: 'the value of the header' },
      header: { type: 'string', default: 'x-call-tag', description: 'the header to set' }
    },
    required: ['tag'],
    additionalProperties: false
  },
  async plugin (fastify, options) {
    // org -> model -> calls; a real plugin would keep this in a store shared by the workers
    const counts = new Map()

    // after admission: the call is allowed and its model known; the header goes on the answer,
    // streamed or not, and on an error answer too
    fastify.gateway.addHook('onAdmission', ({ reply }) => {
      reply.header(options.header, options.tag)
    })

    // once per call, with its outcome: count the calls that reached a provider
    fastify.gateway.addHook('onCallEnd', (outcome) => {
      if (!outcome.attempted || outcome.principal === null) return
      const org = outcome.principal.org
      const byModel = counts.get(org) ?? new Map()
      byModel.set(outcome.model, (byModel.get(outcome.model) ?? 0) + 1)
      counts.set(org, byModel)
    })

    // a route of its own, in the /v1 scope: the chain (rate limit, auth) covers it
    fastify.get('/call-tags', async (request) => {
      const org = request.principal?.org
      if (org === undefined) throw fastify.gateway.refusal({ status: 401, message: 'A key is needed.' })
      return { org, tag: options.tag, calls: Object.fromEntries(counts.get(org) ?? []) }
    })
  }
}
