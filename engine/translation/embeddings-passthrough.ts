import { estimateTokens } from '../kernel/estimate.js'
import { embeddingUsage, geminiEmbedTokens, geminiRequests, contentText, geminiModelRef } from './embeddings.js'
import { geminiPassthrough } from './passthrough.js'
import { geminiPath } from '../protocols/gemini/wire.js'
import { openaiPassthrough } from './passthrough.js'
import type { Json, WholePair } from './types.js'
import { usageFromOpenAI } from '../protocols/chat/usage.js'

// Embeddings with the same protocol on both sides: the body goes up with the upstream's model
// name and the answer comes back as it is; the pair reads the usage.

/** OpenAI's POST /embeddings to an OpenAI-protocol upstream (also what pass-through reads). */
export const embeddingsPassthrough: WholePair = {
  client: 'openai',
  upstream: 'openai',
  path: '/embeddings',
  request: (body, ctx) => ({ body: { ...body, model: ctx.upstreamModel }, dropped: [] }),
  response: (body) => {
    const u = usageFromOpenAI(body.usage)
    return { body: null, usage: u === null ? null : embeddingUsage(u.prompt_tokens) }
  },
  error: openaiPassthrough.error
}

/**
 * Google's embedContent or batchEmbedContents (the client's method, read from its body) to a
 * Gemini upstream. The requests of a batch name the upstream's model instead of the catalog id.
 * Google reports no tokens for embeddings: without a usageMetadata they are estimated from the
 * texts, about four characters a token.
 */
export const geminiEmbedPassthrough: WholePair = {
  client: 'gemini',
  upstream: 'gemini',
  path: (ctx) => geminiPath(ctx.upstreamModel, false, Array.isArray(ctx.clientRequest?.requests) ? 'batchEmbedContents' : 'embedContent'),
  request (body: Json, ctx) {
    const { model: _model, ...rest } = body
    if (!Array.isArray(rest.requests)) return { body: rest, dropped: [] }
    const model = geminiModelRef(ctx.upstreamModel)
    return { body: { ...rest, requests: (rest.requests as Json[]).map((r) => ({ ...r, model })) }, dropped: [] }
  },
  response (body: Json, ctx) {
    const reported = geminiEmbedTokens(body)
    const estimate = (): number => geminiRequests(ctx.clientRequest ?? {}).reduce((n, r) => n + estimateTokens(contentText(r.content)), 0)
    return { body: null, usage: embeddingUsage(reported ?? estimate()) }
  },
  error: geminiPassthrough.error
}
