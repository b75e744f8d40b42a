import { UnsupportedOnUpstream } from '../kernel/errors.js'
import { contentText, embeddingUsage, geminiRequests, numbers, vectorFromBase64 } from './embeddings.js'
import { Dropped, isObj, sortFields, type Fate } from '../protocols/fields.js'
import { geminiError } from '../protocols/gemini/wire.js'
import type { Json, WholePair } from './types.js'
import { usageFromOpenAI } from '../protocols/chat/usage.js'

// Google's embedContent or batchEmbedContents in front of an OpenAI-protocol upstream: one POST
// /embeddings with each request's text (its text parts, one per line) as one input, asked for
// floats; outputDimensionality becomes `dimensions` (one value for the whole call, as OpenAI has).
// The vectors come back as `{embedding: {values}}` (embedContent) or `{embeddings: [{values}]}`.
// taskType and title have no OpenAI equivalent: dropped and reported. A part that is not text
// (an image for a multimodal embedding model) cannot be sent: 400.

const FATES: Record<string, Fate> = { model: 'mapped', content: 'mapped', outputDimensionality: 'mapped', taskType: 'dropped', title: 'dropped' }

export const geminiEmbedToEmbeddings: WholePair = {
  client: 'gemini',
  upstream: 'openai',
  path: '/embeddings',
  request (body: Json, ctx) {
    const dropped = new Dropped()
    const batch = Array.isArray(body.requests)
    const requests = geminiRequests(body)
    const dimensions = new Set<number>()
    const input = requests.map((r, i) => {
      sortFields(r, FATES, dropped)
      if (typeof r.outputDimensionality === 'number') dimensions.add(r.outputDimensionality)
      const parts = isObj(r.content) && Array.isArray(r.content.parts) ? r.content.parts : []
      if (parts.some((p) => !isObj(p) || typeof p.text !== 'string')) {
        throw new UnsupportedOnUpstream({ feature: `${batch ? `requests[${i}].` : ''}content with parts other than text`, model: ctx.model })
      }
      return contentText(r.content)
    })
    if (dimensions.size > 1) throw new UnsupportedOnUpstream({ feature: 'a different outputDimensionality per request', model: ctx.model })
    const out: Json = { model: ctx.upstreamModel, input, encoding_format: 'float' }
    const [dims] = dimensions
    if (dims !== undefined) out.dimensions = dims
    return { body: out, dropped: dropped.list() }
  },
  response (body: Json, ctx) {
    const data = (Array.isArray(body.data) ? body.data : []).filter(isObj)
    // in the order of the inputs, whatever order the list came in
    data.sort((a, b) => (typeof a.index === 'number' ? a.index : 0) - (typeof b.index === 'number' ? b.index : 0))
    const vectors = data.map((d) => typeof d.embedding === 'string' ? vectorFromBase64(d.embedding) : numbers(d.embedding))
    const u = usageFromOpenAI(body.usage)
    const usage = u === null ? null : embeddingUsage(u.prompt_tokens)
    if (!Array.isArray(ctx.clientRequest?.requests)) return { body: { embedding: { values: vectors[0] ?? [] } }, usage }
    return { body: { embeddings: vectors.map((values) => ({ values })) }, usage }
  },
  error: geminiError
}
