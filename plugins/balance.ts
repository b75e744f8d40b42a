import { Type } from '@sinclair/typebox'
import { definePlugin, holdOf, InsufficientBalance, NoOrgContext, then, unmeteredRefusal, type CatalogModel } from './api/index.js'

// Gateway hooks: onAdmission (hold), onCallEnd (settle or release).
// Prepaid credits: at admission a hold of the call's worst-case cost is taken from the org's
// balance (holdOf: an upper bound of the prompt plus the largest output limit the body names in
// any protocol's field, or the model's output cap, times every candidate answer, all at the
// highest token rate of the model's price sheet, tiers included, plus its per-request price, the
// per-use price of each server tool times its use cap and, for an image generation, its dearest
// per-image price for each image asked for; a call priced per call, an MCP tool call, holds its
// price); 402 when balance − held cannot cover it, 403
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

/** The largest hold over the models a call may be answered by (a free one holds nothing). */
function worstHold (models: readonly CatalogModel[], endpoint: string, protocol: string, body: Parameters<typeof holdOf>[3], defaultMaxTokens: number): number {
  let max = 0
  for (const m of models) if (m.price !== null) max = Math.max(max, holdOf(m, endpoint, protocol, body, defaultMaxTokens))
  return max
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
    // what a translator sends as the output limit of a call that names none
    const defaultMaxTokens = fastify.gateway.config.translation.default_max_tokens

    fastify.gateway.addHook('onAdmission', ({ request, call, principal, model, body }) => {
      if (!call.billable) return
      if (principal === null) throw new NoOrgContext()
      // what it spends cannot be held for, nor charged: never a way past the balance
      if (call.unmetered) throw unmeteredRefusal(request, call)
      const fixed = call.fixedCostNano
      // a free model, a pass-through call with no catalog price, a free MCP tool
      // (of every model that may answer: an alias's targets, the fallbacks)
      const models = model === null ? [] : call.candidates
      if (fixed === 0 || (fixed === null && models.every((m) => m.price === null))) return
      // the dearest of them is held before the first is sent
      const amount = fixed ?? worstHold(models, call.endpoint, call.protocol, body, defaultMaxTokens)
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
