import { Type } from '@sinclair/typebox'
import { definePlugin, estimatePromptTokens, InsufficientBalance, NoOrgContext, then, worstCaseCharge } from './api/index.js'

// Gateway hooks: onAdmission (hold), onCallEnd (settle or release).
// Prepaid credits: at admission a hold of the call's worst-case cost is taken from the org's
// balance (an upper bound of the prompt plus max_tokens, or the model's output cap, all at the
// highest token rate of the model's price sheet, tiers included, plus its per-request price);
// 402 when balance − held cannot cover it, 403 when the caller has no organization. When the
// call ends the hold is settled to the real charge, or released when nothing was billed. The
// store takes holds under the guard balance − held ≥ amount, so concurrent calls on any number
// of workers or instances cannot overdraw.

const options = Type.Object({
  // how long the holds of a process that stopped (killed, crashed) may stay before the live
  // processes release them; read by the store's maintenance (default 30 s)
  stale_hold_s: Type.Optional(Type.Number({ exclusiveMinimum: 0 }))
}, { additionalProperties: false })

interface Hold { org: string, amount: number }

declare module 'fastify' {
  interface FastifyRequest {
    /** The amount this call holds of its org's balance (balance plugin). */
    balanceHold: Hold | null
  }
}

export default definePlugin({
  name: 'balance',
  description: 'prepaid credits: a hold at admission, settled to the real charge: 402',
  options,
  dependencies: ['auth'],
  plugin: async (fastify) => {
    const { store, clock } = fastify.gateway
    fastify.decorateRequest('balanceHold', null)

    fastify.gateway.addHook('onAdmission', ({ request, call, principal, model, body }) => {
      if (!call.billable) return
      if (principal === null) throw new NoOrgContext()
      if (model === null || model.price === null) return // a free model, or a pass-through call with no catalog price
      const gemini = body.generationConfig as { maxOutputTokens?: unknown } | null | undefined
      const maxOut = [body.max_tokens, body.max_completion_tokens, body.max_output_tokens, gemini?.maxOutputTokens].find((v): v is number => typeof v === 'number' && v > 0) ??
        model.config.max_output_tokens ?? model.config.context_length
      const hold: Hold = { org: principal.org, amount: worstCaseCharge(model.price, estimatePromptTokens(body) + maxOut) }
      return then(store.balance.hold(hold.org, hold.amount, clock.now()), (ok) => {
        if (!ok) throw new InsufficientBalance({ org: hold.org })
        request.balanceHold = hold
      })
    })

    fastify.gateway.addHook('onCallEnd', (outcome, { request }) => {
      const hold = request.balanceHold
      if (hold === null) return
      return store.balance.settle(hold.org, hold.amount, outcome.billed ? outcome.costNano : 0, clock.now())
    })
  }
})
