import type { FastifyPluginAsyncTypebox } from '@fastify/type-provider-typebox'
import { Answers } from './answers.js'

// GET /admin/v1/prices/check: every catalog price that differs from the maintained price
// database the gateway ships (engine/gateway/price-reference.ts), at the prices in force today.
// The database is loaded on the first check, not at start: it is large and rarely asked.

const prices: FastifyPluginAsyncTypebox = async (fastify) => {
  const { config, clock } = fastify.gateway

  fastify.get('/prices/check', { schema: { response: { 200: Answers.prices } } }, async () => {
    const { checkPrices } = await import('../../engine/gateway/price-reference.js')
    const result = checkPrices(config, new Date(clock.now()))
    return { object: 'list' as const, data: result.differences, unknown: result.unknown, checked: result.checked }
  })
}

export default prices
