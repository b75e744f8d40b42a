import { Type } from '@sinclair/typebox'
import { definePlugin, estimatePromptTokens, InsufficientBalance, NoOrgContext, then, unmeteredRefusal, worstCaseCharge, type CallView, type CatalogModel, type Json } from './api/index.js'

// Gateway hooks: onAdmission (hold), onCallEnd (settle or release).
// Prepaid credits: at admission a hold of the call's worst-case cost is taken from the org's
// balance (an upper bound of the prompt plus max_tokens, or the model's output cap, all at the
// highest token rate of the model's price sheet, tiers included, plus its per-request price and,
// for an image generation, its dearest per-image price for each image asked for; a call priced
// per call, an MCP tool call, holds its price); 402 when balance − held cannot cover it, 403
// when the caller has no organization, 403 for a call that may spend without reporting what (a
// pass-through batch job: `call.unmetered`). When the call ends the hold is settled to the real
// charge, or released when nothing was billed. The store takes holds under the guard
// balance − held ≥ amount, so concurrent calls on any number of workers or instances cannot
// overdraw.

const options = Type.Object({
  // moved to the store's own section (store.stale_hold_s): the store's maintenance is no plugin's
  stale_hold_s: Type.Optional(Type.Number({ exclusiveMinimum: 0, deprecated: true }))
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
  plugin: async (fastify, opts) => {
    const { store, clock } = fastify.gateway
    if (opts.stale_hold_s !== undefined) fastify.log.warn('balance: the stale_hold_s option has moved to the config\'s store.stale_hold_s, and is not read here')
    fastify.decorateRequest('balanceHold', null)

    /** The most a call priced by its tokens (and images) can cost: its prompt and longest answer at the dearest rates. */
    const worstCase = (call: CallView, model: CatalogModel, body: Json): number => {
      const price = model.price as NonNullable<CatalogModel['price']>
      const gemini = body.generationConfig as { maxOutputTokens?: unknown } | null | undefined
      const perAnswer = model.config.max_output_tokens ?? model.config.context_length
      // an embedding has no output tokens; an image model's output cap bounds each image's
      const images = call.endpoint === 'images.generations' ? (typeof body.n === 'number' && body.n > 0 ? body.n : 1) : 0
      const maxOut = call.endpoint === 'embeddings'
        ? 0
        : images > 0
          ? images * perAnswer
          : [body.max_tokens, body.max_completion_tokens, body.max_output_tokens, gemini?.maxOutputTokens].find((v): v is number => typeof v === 'number' && v > 0) ?? perAnswer
      return worstCaseCharge(price, estimatePromptTokens(body) + maxOut, images)
    }

    fastify.gateway.addHook('onAdmission', ({ request, call, principal, model, body }) => {
      if (!call.billable) return
      if (principal === null) throw new NoOrgContext()
      // what it spends cannot be held for, nor charged: never a way past the balance
      if (call.unmetered) throw unmeteredRefusal(request, call)
      const fixed = call.fixedCostNano
      // a free model, a pass-through call with no catalog price, a free MCP tool
      if (fixed === 0 || (fixed === null && (model === null || model.price === null))) return
      const amount = fixed ?? worstCase(call, model as CatalogModel, body)
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
