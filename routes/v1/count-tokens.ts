import type { FastifyRequest } from 'fastify'
import { BodyObjects, topLevelObjects } from '../../plugins/gateway/body-objects.js'
import { admit, grantedModel, objectProviders } from '../../plugins/gateway/gate.js'
import { relayJson, send, translateCtx, type Pipe } from '../../plugins/gateway/pipeline.js'
import { checkMedia } from '../../plugins/gateway/validation.js'
import { geminiCountTokensPair } from '../../plugins/translation/gemini-passthrough.js'
import { upstreamPath } from '../../plugins/translation/index.js'
import { countTokensPair } from '../../plugins/translation/passthrough.js'
import { countGeminiTokens, countTokens } from '../../plugins/translation/tokenizer.js'
import type { Json, TranslatorPair } from '../../plugins/translation/types.js'
import { messagesHeaders } from '../../plugins/upstream/dispatch.js'

// The one count-tokens call, of the two protocols that have one: Messages' POST
// /v1/messages/count_tokens and Gemini's {model}:countTokens. Sent to the model's providers of
// the client's own protocol (failover as for calls); for other models counted locally with a
// tokenizer (an estimate), never a fake 0. Its media and the objects it names are checked as a
// call's are: a count reads what it counts. Free: the call ends with no usage.

interface Counter {
  pair: TranslatorPair
  /** The count made here, in the protocol's answer shape. */
  local: (body: Json) => Promise<Json>
  headers?: (request: FastifyRequest) => Record<string, string>
}

const COUNTERS = {
  messages: { pair: countTokensPair, local: async (body) => ({ input_tokens: await countTokens(body) }), headers: messagesHeaders },
  gemini: { pair: geminiCountTokensPair, local: async (body) => ({ totalTokens: await countGeminiTokens(body) }) }
} satisfies Record<string, Counter>

/** Counts the tokens of `valid` (the body, its shape checked) for the catalog model `id`. */
export async function countTokensCall (p: Pipe, protocol: keyof typeof COUNTERS, id: string, valid: Json): Promise<unknown> {
  const counter: Counter = COUNTERS[protocol]
  const { gateway } = p
  p.call.kind('count_tokens')
  const model = grantedModel(gateway, p.request.principal, id, 'chat')
  // the body goes as it is: what it names of the provider's account, in its parts and at its top
  const objects = new BodyObjects(protocol)
  checkMedia(valid, model, protocol, objects)
  topLevelObjects(valid, objects)
  p.call.resolved(model, false)
  const reachable = await objectProviders(p, model.providers, objects)
  const body = await admit(p, model, valid)
  const providers = reachable.filter((pid) => gateway.upstreams.get(pid)?.protocol === protocol)
  if (providers.length === 0 || gateway.upstreams.candidates(providers).length === 0) {
    const counted = await counter.local(body)
    p.call.answering()
    await p.call.end({ status: 'ok', usage: null, complete: true })
    return counted
  }
  const ctx = translateCtx(p, model, body)
  const { pair } = counter
  const answer = await send(p, {
    providers,
    model,
    plan: () => ({ path: upstreamPath(pair, ctx), body: pair.request(body, ctx).body, protocol, headers: counter.headers?.(p.request), error: pair.error })
  })
  return await relayJson(p, answer, { pair, ctx })
}
