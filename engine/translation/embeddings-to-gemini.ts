import { estimateTokens } from '../kernel/estimate.js'
import { errorBody, UnsupportedOnUpstream } from '../kernel/errors.js'
import { embeddingInputs, embeddingUsage, geminiEmbedTokens, geminiModelRef, numbers, openaiList } from './embeddings.js'
import { Dropped, isObj, sortFields, type Fate } from '../protocols/fields.js'
import { geminiPath, googleError } from '../protocols/gemini/wire.js'
import { upstreamMessage } from '../protocols/upstream-error.js'
import type { Json, WholePair } from './types.js'

// OpenAI's POST /embeddings in front of a Gemini upstream: every input becomes one request of a
// batchEmbedContents call (its text as the one part of its content), `dimensions` becomes each
// request's outputDimensionality, and the embeddings come back in order as OpenAI's list, floats
// or base64 as the client asked. Token-id inputs have no Gemini equivalent: 400. Google reports
// no tokens for embeddings: without a usageMetadata they are estimated, about four characters a
// token.

const FATES: Record<string, Fate> = { model: 'mapped', input: 'mapped', encoding_format: 'mapped', dimensions: 'mapped', user: 'dropped' }

export const embeddingsToGemini: WholePair = {
  client: 'openai',
  upstream: 'gemini',
  path: (ctx) => geminiPath(ctx.upstreamModel, false, 'batchEmbedContents'),
  request (body: Json, ctx) {
    const dropped = new Dropped()
    sortFields(body, FATES, dropped)
    const model = geminiModelRef(ctx.upstreamModel)
    const requests = embeddingInputs(body.input).map((input): Json => {
      if (typeof input !== 'string') throw new UnsupportedOnUpstream({ feature: 'input as token ids', model: ctx.model })
      const r: Json = { model, content: { parts: [{ text: input }] } }
      if (typeof body.dimensions === 'number') r.outputDimensionality = body.dimensions
      return r
    })
    return { body: { requests }, dropped: dropped.list() }
  },
  response (body: Json, ctx) {
    const embeddings = Array.isArray(body.embeddings) ? body.embeddings : []
    const vectors = embeddings.map((e) => numbers(isObj(e) ? e.values : undefined))
    const request = ctx.clientRequest ?? {}
    const tokens = geminiEmbedTokens(body) ?? embeddingInputs(request.input).reduce((n, i) => n + (typeof i === 'string' ? estimateTokens(i) : i.length), 0)
    return { body: openaiList(vectors, request.encoding_format, ctx.model, tokens), usage: embeddingUsage(tokens) }
  },
  error: (status, body) => errorBody('openai', { status, message: upstreamMessage(status, googleError(body)) })
}
