import { entry, list, text } from './fields.js'
import type { Json } from './types.js'

// Small content helpers both cross-protocol pairs use.

/** Tool-call arguments (a JSON string) → an input object; "" is {} and a non-object is wrapped. */
export function parseToolArguments (text: unknown): Json {
  if (typeof text !== 'string' || text.trim() === '') return {}
  try {
    const v = JSON.parse(text) as unknown
    return v !== null && typeof v === 'object' && !Array.isArray(v) ? v as Json : { value: v }
  } catch {
    return { raw: text }
  }
}

/** The text of a string content or of the text parts/blocks of an array, joined by newlines. */
export function textOf (content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  return (content as Array<Json | null>).filter((p) => p?.type === 'text' && typeof p.text === 'string').map((p) => p?.text as string).join('\n')
}

/**
 * The texts of a client's content (a string, or text parts among others), checked: every part
 * must be an object and a text part must have its text; each other part is handed to `other`
 * (to be reported) and left out.
 */
export function textParts (content: unknown, field: string, other: (part: Json) => void): string[] {
  if (typeof content === 'string') return [content]
  const texts: string[] = []
  for (const [i, raw] of list(content, field).entries()) {
    const part = entry(raw, `${field}[${i}]`)
    if (part.type === 'text') texts.push(text(part.text, `${field}[${i}].text`))
    else other(part)
  }
  return texts
}

/** textParts joined by newlines, as textOf joins them. */
export const joinText = (content: unknown, field: string, other: (part: Json) => void): string => textParts(content, field, other).join('\n')
