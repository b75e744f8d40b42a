import { imageUsage } from './images.js'
import { isObj } from '../protocols/fields.js'
import { openaiPassthrough } from './passthrough.js'
import type { WholePair } from './types.js'

// OpenAI's POST /images/generations to an OpenAI-protocol upstream: the body goes up with the
// upstream's model name, the answer comes back as it is; the pair counts the images and reads the
// tokens a gpt-image model reports (a DALL·E model reports none).

export const imagesPassthrough: WholePair = {
  client: 'openai',
  upstream: 'openai',
  path: '/images/generations',
  request: (body, ctx) => ({ body: { ...body, model: ctx.upstreamModel }, dropped: [] }),
  response (body, ctx) {
    const images = Array.isArray(body.data) ? body.data.length : 0
    const u = isObj(body.usage) ? body.usage : {}
    const details = isObj(u.input_tokens_details) ? u.input_tokens_details : {}
    return { body: null, usage: imageUsage(images, { input: u.input_tokens, cached: details.cached_tokens, output: u.output_tokens }, ctx.clientRequest) }
  },
  error: openaiPassthrough.error
}
