import { Type } from '@sinclair/typebox'
import { estimatePromptTokens, settle } from './billing.js'
import { afterResponse, syncHook } from './context.js'
import { InsufficientBalance, NoOrgContext } from './errors.js'
import { definePlugin } from './registry.js'
import { Leases } from './store/leases.js'
import type { Json } from './translation/types.js'

// Phases: preHandler (hold), then when the response is over (settle or release).
// Prepaid credits: at admission a hold of the call's worst-case cost is taken from the org's
// balance (prompt estimate + max_tokens, or the model's output cap, all at the higher of the
// input and output rates); 402 when balance − held cannot cover it, 403 when the caller has no
// organization. When the call ends the hold is settled to the real charge, or released when
// nothing was billed. Concurrent calls cannot overdraw: every hold is backed by an amount
// reserved in the store under the guard balance − held ≥ amount (see Leases).

const options = Type.Object({
  stale_hold_s: Type.Number({ default: 21_600, exclusiveMinimum: 0 })
}, { additionalProperties: false })

export default definePlugin({
  name: 'balance',
  options,
  plugin: async (fastify, opts) => {
    const { store, clock, catalog } = fastify.gw
    // holds and leases left by a process that died mid-call
    store.ledger.releaseOlderThan(clock.now() - opts.stale_hold_s * 1000)
    const leases = new Leases(store.ledger, fastify.gw.writer)

    fastify.addHook('preHandler', syncHook((request, reply) => {
      if (request.routeConfig.metered !== true) return
      const principal = request.principal
      if (principal === null) throw new NoOrgContext()
      const body = request.body as Json | null
      const model = typeof body?.model === 'string' ? catalog.find(body.model, principal.models) : undefined
      if (model === undefined || model.price === null) return // the handler answers 404; or a free model
      const maxOut = [body?.max_tokens, body?.max_completion_tokens].find((v): v is number => typeof v === 'number' && v > 0) ??
        model.config.max_output_tokens ?? model.config.context_length
      const rate = Math.max(model.price.input, model.price.output)
      const worstCase = (estimatePromptTokens(body as Json) + maxOut) * rate
      const org = principal.org
      if (!leases.hold(org, worstCase, clock.now())) throw new InsufficientBalance({ org })
      afterResponse(reply, () => {
        const call = request.call
        const billed = call !== null && (call.provider !== null || call.status !== null)
        leases.end(org, worstCase, billed ? settle(call, model.price).cost : 0, clock.now())
      })
    }))
  }
})
