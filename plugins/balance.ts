import { Type } from '@sinclair/typebox'
import { definePlugin, estimatePromptTokens, InsufficientBalance, NoOrgContext, then, type CatalogModel, type Json } from './api/index.js'

// Gateway hooks: onAdmission (hold), onCallEnd (settle or release).
// Prepaid credits: at admission a hold of the call's worst-case cost is taken from the org's
// balance (an upper bound of the prompt plus max_tokens, or the model's output cap, all at the
// higher of the input and output rates; a call priced per call, an MCP tool call, holds its price); 402 when balance − held cannot cover it, 403 when the
// caller has no organization. When the call ends the hold is settled to the real charge, or
// released when nothing was billed. The store takes holds under the guard balance − held ≥ amount,
// so concurrent calls on any number of workers or instances cannot overdraw.

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

    /** The most the call can cost: its price when it has one per call, else its prompt and longest answer at the higher token rate. */
    const worstCase = (model: CatalogModel, body: Json): number => {
      const price = model.price as NonNullable<CatalogModel['price']>
      const gemini = body.generationConfig as { maxOutputTokens?: unknown } | null | undefined
      const maxOut = [body.max_tokens, body.max_completion_tokens, body.max_output_tokens, gemini?.maxOutputTokens].find((v): v is number => typeof v === 'number' && v > 0) ??
        model.config.max_output_tokens ?? model.config.context_length
      return (estimatePromptTokens(body) + maxOut) * Math.max(price.input, price.output)
    }

    fastify.gateway.addHook('onAdmission', ({ request, call, principal, model, body }) => {
      if (!call.billable) return
      if (principal === null) throw new NoOrgContext()
      const fixed = call.fixedCostNano
      // a free model, a pass-through call with no catalog price, a free MCP tool
      if (fixed === 0 || (fixed === null && (model === null || model.price === null))) return
      const amount = fixed ?? worstCase(model as CatalogModel, body)
      const hold: Hold = { org: principal.org, amount }
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
