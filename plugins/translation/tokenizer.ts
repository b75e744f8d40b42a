import { Tiktoken } from 'js-tiktoken/lite'
import type { Json } from './types.js'

// Token counts for POST /v1/messages/count_tokens when the model's upstream is not a Messages
// provider: OpenAI's o200k_base encoding from js-tiktoken. It is an estimate of what another
// vendor's tokenizer would say, never a fake 0. The rank table is loaded on first use.

// An image is billed by its pixels, which we do not decode; a typical image is about this many.
const IMAGE_TOKENS = 1_600
// Per-message framing the providers add around each turn.
const PER_MESSAGE = 4

let encoder: Tiktoken | null = null

async function load (): Promise<Tiktoken> {
  if (encoder === null) {
    const ranks = (await import('js-tiktoken/ranks/o200k_base')).default
    encoder = new Tiktoken(ranks)
  }
  return encoder
}

function collect (node: unknown, texts: string[], counts: { images: number }): void {
  if (typeof node === 'string') { texts.push(node); return }
  if (Array.isArray(node)) { for (const v of node) collect(v, texts, counts); return }
  if (node === null || typeof node !== 'object') return
  const o = node as Json
  if (o.type === 'image' || o.type === 'image_url' || o.type === 'document') { counts.images++; return }
  for (const [k, v] of Object.entries(o)) {
    if (k === 'type' || k === 'cache_control' || k === 'id' || k === 'tool_use_id') continue
    collect(v, texts, counts)
  }
}

/** Input tokens of a Messages-shaped request: system, messages and tool definitions. */
export async function countTokens (body: Json): Promise<number> {
  const enc = await load()
  const texts: string[] = []
  const counts = { images: 0 }
  collect(body.system, texts, counts)
  const messages = Array.isArray(body.messages) ? body.messages : []
  collect(messages, texts, counts)
  if (Array.isArray(body.tools)) texts.push(JSON.stringify(body.tools))
  let n = counts.images * IMAGE_TOKENS + messages.length * PER_MESSAGE
  for (const t of texts) if (t !== '') n += enc.encode(t).length
  return Math.max(1, n)
}
