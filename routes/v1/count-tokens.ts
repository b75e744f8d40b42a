import type { BodyObjects } from '../../engine/gateway/body-objects.js'
import type { CatalogModel } from '../../engine/gateway/catalog.js'
import type { Pipe } from '../../engine/gateway/pipeline.js'
import { checkMedia } from '../../engine/gateway/validation.js'
import { geminiCountTokensPair } from '../../engine/translation/passthrough.js'
import { countTokensPair } from '../../engine/translation/passthrough.js'
import { countGeminiTokens, countTokens } from '../../engine/translation/tokenizer.js'
import type { Json, TranslatorPair } from '../../engine/translation/types.js'
import type { CallSpec } from './run-call.js'

// The one count-tokens call, of the two protocols that have one: Messages' POST
// /v1/messages/count_tokens and Gemini's {model}:countTokens, declared for the call runner
// (run-call.ts). Sent to the model's providers of the client's own protocol (failover as for
// calls, in the config's order); for other models counted locally with a tokenizer (an
// estimate), never a fake 0. Its media and the objects it names are checked as a call's are: a
// count reads what it counts. Free: the call ends with no usage.

interface Counter {
  pair: TranslatorPair
  /** The count made here, in the protocol's answer shape. */
  local: (body: Json) => Promise<Json>
}

const COUNTERS = {
  messages: { pair: countTokensPair, local: async (body) => ({ input_tokens: await countTokens(body) }) },
  gemini: { pair: geminiCountTokensPair, local: async (body) => ({ totalTokens: await countGeminiTokens(body) }) }
} satisfies Record<string, Counter>

/** Counts the tokens of `body` (its shape checked) for the catalog model `name`. */
export function countTokensCall (protocol: keyof typeof COUNTERS, name: string, body: Json): CallSpec {
  const counter: Counter = COUNTERS[protocol]
  return {
    protocol,
    kind: 'count_tokens',
    modelKind: 'chat',
    name,
    body,
    pairFor: (up) => up === protocol ? counter.pair : undefined,
    // the body goes as it is: what it names of the provider's account, in its parts and at its top
    prepare: (_p: Pipe, model: CatalogModel, valid: Json, objects: BodyObjects) => { checkMedia(valid, model, protocol, objects); return valid },
    answerable: false,
    routed: false,
    local: counter.local
  }
}
