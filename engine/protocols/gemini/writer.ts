import { errorBody } from '../../kernel/errors.js'
import { toGeminiUsage } from './wire.js'
import { frame } from '../sse.js'
import type { SseEvent, TranslateCtx, Usage } from '../types.js'
import type { GeminiCandidate, GeminiFinishReason, GeminiPart, GeminiResponse } from './types.js'

// The answers the pairs in front of a Gemini client write: a GenerateContentResponse, whole or
// as stream chunks (`data:` frames, each with the new parts only; the last with finishReason and
// usageMetadata; no [DONE]).

export function candidate (index: number, parts: GeminiPart[], finishReason?: GeminiFinishReason): GeminiCandidate {
  const c: GeminiCandidate = { content: { role: 'model', parts }, index }
  if (finishReason !== undefined) c.finishReason = finishReason
  return c
}

/** A GenerateContentResponse: the whole answer, or one chunk of a stream. */
export function responseBody (ctx: Pick<TranslateCtx, 'id' | 'model'>, candidates: GeminiCandidate[], usage: Usage | null = null): GeminiResponse {
  const out: GeminiResponse = { candidates }
  if (usage !== null) out.usageMetadata = toGeminiUsage(usage)
  out.modelVersion = ctx.model
  out.responseId = ctx.id
  return out
}

export const chunk = (ctx: Pick<TranslateCtx, 'id' | 'model'>, candidates: GeminiCandidate[], usage: Usage | null = null): SseEvent => frame(responseBody(ctx, candidates, usage))

/** An error after the stream started, as Google writes it: a data frame with an `error` object. */
export const errorChunk = (status: number, message: string): SseEvent => frame(errorBody('gemini', { status, message }))
