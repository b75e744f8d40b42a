import type { Json, TranslateCtx, Usage } from './types.js'
import { toMessagesUsage } from './usage.js'

// The answer written to a Messages client, whole: the pairs in front of one and the demo provider
// write it here. A stream is written by the pairs' mappers, or replayed from the whole answer
// (replay.ts).

const ZERO: Usage = { prompt_tokens: 0, cached_input_tokens: 0, completion_tokens: 0, cache_creation_input_tokens: 0 }

/** A Message: its content blocks, why it stopped, and its usage (zero when the upstream gave none). */
export function messageBody (ctx: Pick<TranslateCtx, 'id' | 'model'>, content: Json[], stopReason: string, stopSequence: string | null, usage: Usage | null): Json {
  return {
    id: `msg_${ctx.id}`,
    type: 'message',
    role: 'assistant',
    model: ctx.model,
    content,
    stop_reason: stopReason,
    stop_sequence: stopSequence,
    usage: toMessagesUsage(usage ?? ZERO)
  }
}
