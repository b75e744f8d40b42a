import type { TObject } from '@sinclair/typebox'
import type { FastifyRequest } from 'fastify'
import { UnmeteredEndpoint, type GatewayError } from '../../engine/kernel/errors.js'
import type { CallView, GatewayPlugin } from './types.js'

// The plugin API, what an outside package imports as `modelgate/plugin`: everything a concern
// plugin needs, and exactly what the built-in plugins use. It imports no plugin, so any plugin
// module can be imported and registered alone, and a contributor's plugin can do whatever a
// built-in does. The test helper is apart, in `modelgate/testing` (./testing.ts).
//
// A plugin is a Fastify plugin (`async (fastify, options) => {}`) registered inside the API's
// scope in config order (its own routes go under /v1). Besides Fastify's own hooks it gets the
// gateway's, through `fastify.gateway.addHook(name, fn)`: see ./types.ts.

export type * from './types.js'

/** Identity, for the types: `export default definePlugin({ name, options, dependencies, plugin })`. */
export function definePlugin<S extends TObject> (p: GatewayPlugin<S>): GatewayPlugin<S> {
  return p
}

// What a plugin may use of the gateway's machinery.

/** A store answer that may be a promise: the embedded store answers most calls at once. */
export { isPromise, then, type MaybePromise } from '../../engine/kernel/maybe-promise.js'
/** The id of a call's usage record, made from its trace id. */
export { usageId } from '../../engine/store/types.js'
/** The errors a plugin may throw to refuse a call, rendered in the route family's shape (or use `gateway.refusal`). */
export {
  ContentBlocked, DuplicateRequest, InsufficientBalance, KeyExpired, KeyRateLimited, NoOrgContext, QuotaExceeded, RateLimited, StoreUnavailable, Unauthorized, UnmeteredEndpoint,
  isGatewayError, retryAfterHeaders, type ErrorFamily, type GatewayError
} from '../../engine/kernel/errors.js'
/** Money: integers of nano-dollars, decimal strings at the edges. */
export { nanoToUsd, usdToNano } from '../../engine/kernel/money.js'
/** A call's charge, and the upper bound of its input the balance plugin holds for. */
export { chargeOf, costOf, estimatePromptTokens, worstCaseCharge } from '../../engine/gateway/billing.js'
/** The most a call to a priced model can cost, read from its body as the translators read it (the balance's hold). */
export { holdOf, serverTools } from '../../engine/gateway/holds.js'
/** UTC quota windows and the tenants' quota rules. */
export { amountOf, budgetScope, budgetStatus, limitOf, limitStatus, quotaLimit, quotaStatus, quotaWindow, QuotaRules, type QuotaRule, type QuotaStatus } from '../../engine/gateway/quota-windows.js'
/** The rate-limit headers of a key with limits (OpenAI's and Anthropic's names). */
export { headerStyle, putLimitHeaders, rateLimitHeaders, RATE_LIMIT_HEADER_NAMES, type HeaderSink, type HeaderStyle, type LimitReading } from '../../engine/gateway/rate-limit-headers.js'
/** The conversational text of requests, answers and stream events, in any client protocol. */
export { hasTokenInput, mapRequestText, mapResponseText, streamText } from './content-text.js'
/** How an attempt at a provider failed, in a few words (an error code, or how it went); null when it did not. */
export { attemptError } from '../../engine/upstream/attempt-error.js'
/** An in-stream error event in a client protocol. */
export { errorEvent } from '../../engine/protocols/index.js'
/** A streamed answer folded into the whole answer of its protocol (what a client that asked for no stream gets). */
export { aggregateStream, type AggregateOptions, type StreamEventLike } from '../../engine/protocols/index.js'

/** The refusal of a call that may spend without reporting what (`call.unmetered`), for a plugin that holds money or counts spend. */
export function unmeteredRefusal (request: FastifyRequest, call: CallView): GatewayError {
  const path = (request.url.split('?', 1)[0] ?? '').slice(0, 200)
  return new UnmeteredEndpoint({ method: request.method, path, provider: call.provider ?? '' })
}
