import { InvalidBody, InvalidField, MissingField } from '../kernel/errors.js'
import { isObj, optText } from '../protocols/fields.js'
import type { Json, Usage } from './types.js'

// What the image generation pairs share: OpenAI's request checked, and the usage of a call.
//
//   {model, prompt, n?, size?, quality?, response_format?: "b64_json" | "url", background?,
//    output_format?, output_compression?, moderation?, style?, user?}
//   → {created, data: [{b64_json | url, revised_prompt?}], usage?}

const given = (v: unknown): boolean => v !== undefined && v !== null

/** How many images a call may ask for (OpenAI's own bound). */
export const MAX_IMAGES = 10

/** The fields of an OpenAI image generation request the gateway reads, checked. */
export function checkImagesBody (body: unknown): Json {
  if (!isObj(body)) throw new InvalidBody()
  if (!given(body.model) || body.model === '') throw new MissingField({ field: 'model' })
  if (typeof body.model !== 'string') throw new InvalidField({ field: 'model', reason: 'must be a string' })
  if (!given(body.prompt)) throw new MissingField({ field: 'prompt' })
  if (typeof body.prompt !== 'string' || body.prompt === '') throw new InvalidField({ field: 'prompt', reason: 'must be a non-empty string' })
  const n = body.n
  if (given(n) && (typeof n !== 'number' || !Number.isInteger(n) || n < 1 || n > MAX_IMAGES)) throw new InvalidField({ field: 'n', reason: `must be an integer from 1 to ${MAX_IMAGES}` })
  const format = body.response_format
  if (given(format) && format !== 'b64_json' && format !== 'url') throw new InvalidField({ field: 'response_format', reason: 'must be "b64_json" or "url"' })
  for (const field of ['size', 'quality', 'background', 'output_format', 'moderation', 'style', 'user']) optText(body[field], field)
  if (given(body.stream) && body.stream !== false) throw new InvalidField({ field: 'stream', reason: 'is not supported: images are answered whole' })
  return body
}

/** How many images a request asks for. */
export const imagesAsked = (body: Json): number => typeof body.n === 'number' ? body.n : 1

/**
 * The usage of an image generation call: the images made, and the tokens the upstream reported
 * (prompt and output; 0 where it reports none). The one place a call's image count is set.
 */
export function imageUsage (images: number, tokens: { input?: unknown, cached?: unknown, output?: unknown } = {}, request?: Json): Usage {
  const n = (v: unknown): number => typeof v === 'number' && Number.isFinite(v) && v > 0 ? Math.floor(v) : 0
  const input = n(tokens.input)
  const usage: Usage = { prompt_tokens: input, cached_input_tokens: Math.min(n(tokens.cached), input), completion_tokens: n(tokens.output), cache_creation_input_tokens: 0, images }
  // the size asked for picks the model's per_image price
  if (typeof request?.size === 'string') usage.image_size = request.size
  return usage
}

/** OpenAI's image usage block (gpt-image models) for a call's usage. */
export function openaiImageUsage (u: Usage): Json {
  return {
    input_tokens: u.prompt_tokens,
    input_tokens_details: { text_tokens: u.prompt_tokens, image_tokens: 0 },
    output_tokens: u.completion_tokens,
    total_tokens: u.prompt_tokens + u.completion_tokens
  }
}
