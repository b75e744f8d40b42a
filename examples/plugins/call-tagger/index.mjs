// call-tagger: an example of a modelgate plugin written outside the project, as a package of its
// own (`npm pack` here makes a tarball to install beside modelgate).
//
// It tags the answer of every call with a header, and counts the calls each organization made
// per model, which GET /v1/call-tags shows to a key of that organization. It imports the plugin
// API as any outside package does, from `modelgate/plugin`; its options are a JSON Schema, and
// everything else comes through `fastify.gateway` (see docs/plugins.md).
//
// Install it where the config is (`npm install ./modelgate-call-tagger-1.0.0.tgz`) and load it
// after auth (it reads the caller's organization):
//
//   plugins:
//     - name: auth
//     - name: call-tagger
//       module: modelgate-call-tagger
//       options: { tag: blue }

import { definePlugin } from 'modelgate/plugin'

export default definePlugin({
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
  dependencies: ['auth'],
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

    // a route of its own, under /v1: the chain (rate limit, auth) covers it
    fastify.get('/call-tags', async (request) => {
      const org = request.principal?.org
      if (org === undefined) throw fastify.gateway.refusal({ status: 401, message: 'A key is needed.' })
      return { org, tag: options.tag, calls: Object.fromEntries(counts.get(org) ?? []) }
    })
  }
})
