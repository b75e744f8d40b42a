import { errorBody, InvalidField, NoImageGenerated, UnsupportedOnUpstream } from '../kernel/errors.js'
import { Dropped, isObj, sortFields, type Fate } from '../protocols/fields.js'
import { geminiPath, googleError, usageFromGemini } from '../protocols/gemini/wire.js'
import { imageUsage, openaiImageUsage } from './images.js'
import { upstreamMessage } from '../protocols/upstream-error.js'
import type { Json, WholePair } from './types.js'

// OpenAI's POST /images/generations in front of a Gemini image model: one generateContent call
// whose user turn is the prompt, asking for image output (responseModalities), `n` as
// candidateCount and `size` as the nearest of Gemini's aspect ratios (imageConfig.aspectRatio).
// Every inline image of the answer comes back as one `b64_json` entry, with the tokens Gemini
// reported as gpt-image's usage block. Gemini returns no URLs: response_format "url" is a 400.
// An answer without an image (a refused prompt, a text reply) is a 400 naming its finish reason.
// quality, background, output_format, output_compression, moderation, style and user have no
// Gemini equivalent: dropped and reported.

const FATES: Record<string, Fate> = { model: 'mapped', prompt: 'mapped', n: 'mapped', size: 'mapped', response_format: 'mapped' }

// Gemini's aspect ratios, and each one's width over height
const RATIOS: Array<[string, number]> = [['1:1', 1], ['2:3', 2 / 3], ['3:2', 3 / 2], ['3:4', 3 / 4], ['4:3', 4 / 3], ['4:5', 4 / 5], ['5:4', 5 / 4], ['9:16', 9 / 16], ['16:9', 16 / 9], ['21:9', 21 / 9]]

/** OpenAI's `size` (`1536x1024`) as the nearest Gemini aspect ratio; undefined for `auto`. */
export function aspectRatio (size: string): string | undefined {
  if (size === 'auto') return undefined
  const m = /^(\d{1,5})x(\d{1,5})$/.exec(size)
  const w = Number(m?.[1])
  const h = Number(m?.[2])
  if (m === null || w === 0 || h === 0) throw new InvalidField({ field: 'size', reason: 'must be "auto" or WIDTHxHEIGHT, such as 1024x1024' })
  const want = Math.log(w / h)
  let best = RATIOS[0] as [string, number]
  for (const r of RATIOS) if (Math.abs(Math.log(r[1]) - want) < Math.abs(Math.log(best[1]) - want)) best = r
  return best[0]
}

export const imagesToGemini: WholePair = {
  client: 'openai',
  upstream: 'gemini',
  path: (ctx) => geminiPath(ctx.upstreamModel, false),
  request (body: Json, ctx) {
    if (body.response_format === 'url') throw new UnsupportedOnUpstream({ feature: 'response_format "url"', model: ctx.model })
    const dropped = new Dropped()
    sortFields(body, FATES, dropped)
    const config: Json = { responseModalities: ['TEXT', 'IMAGE'] }
    if (typeof body.n === 'number' && body.n > 1) config.candidateCount = body.n
    const ratio = typeof body.size === 'string' ? aspectRatio(body.size) : undefined
    if (ratio !== undefined) config.imageConfig = { aspectRatio: ratio }
    return { body: { contents: [{ role: 'user', parts: [{ text: body.prompt }] }], generationConfig: config }, dropped: dropped.list() }
  },
  response (body: Json, ctx) {
    const data: Json[] = []
    let reason = 'none'
    for (const c of Array.isArray(body.candidates) ? body.candidates : []) {
      if (!isObj(c)) continue
      if (typeof c.finishReason === 'string') reason = c.finishReason
      const parts = isObj(c.content) && Array.isArray(c.content.parts) ? c.content.parts : []
      for (const p of parts as unknown[]) {
        if (!isObj(p) || p.thought === true || !isObj(p.inlineData)) continue
        if (typeof p.inlineData.data === 'string') data.push({ b64_json: p.inlineData.data })
      }
    }
    if (data.length === 0) {
      const blocked = isObj(body.promptFeedback) && typeof body.promptFeedback.blockReason === 'string' ? body.promptFeedback.blockReason : null
      throw new NoImageGenerated({ model: ctx.model, reason: blocked ?? reason })
    }
    const u = usageFromGemini(body.usageMetadata)
    const usage = imageUsage(data.length, { input: u?.prompt_tokens, cached: u?.cached_input_tokens, output: u?.completion_tokens }, ctx.clientRequest)
    return { body: { created: ctx.created, data, usage: openaiImageUsage(usage) }, usage }
  },
  error: (status, body) => errorBody('openai', { status, message: upstreamMessage(status, googleError(body)) })
}
