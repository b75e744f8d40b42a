import { InvalidField } from '../kernel/errors.js'
import { entry, isObj, list, text } from './fields.js'
import type { Json } from './types.js'

// Small content helpers both cross-protocol pairs use.

/** Tool-call arguments (a JSON string) → an input object; "" is {} and a non-object is wrapped. */
export function parseToolArguments (text: unknown): Json {
  if (typeof text !== 'string' || text.trim() === '') return {}
  try {
    const v = JSON.parse(text) as unknown
    return isObj(v) ? v : { value: v }
  } catch {
    return { raw: text }
  }
}

/** The text of a string content or of the text parts/blocks of an array, joined by newlines. */
export function textOf (content: unknown): string {
  if (typeof content === 'string') return content
  if (!Array.isArray(content)) return ''
  const parts: readonly unknown[] = content
  return parts.filter((p): p is { type: 'text', text: string } => isObj(p) && p.type === 'text' && typeof p.text === 'string').map((p) => p.text).join('\n')
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

/** A `data:` URL carrying base64 (`data:image/png;base64,…`): its media type and data; null for any other URL. */
export function dataUrl (url: string): { mediaType: string, data: string } | null {
  const m = /^data:([^;,]+);base64,(.*)$/s.exec(url)
  return m === null ? null : { mediaType: m[1] ?? '', data: m[2] ?? '' }
}

/** The image types a Messages upstream takes inline. */
export type MessagesImageType = 'image/jpeg' | 'image/png' | 'image/gif' | 'image/webp'
const MESSAGES_IMAGE_TYPES: ReadonlySet<string> = new Set<MessagesImageType>(['image/jpeg', 'image/png', 'image/gif', 'image/webp'])
export const isMessagesImageType = (s: string): s is MessagesImageType => MESSAGES_IMAGE_TYPES.has(s)

/**
 * An image URL as a Messages image source: a data: URL inline (a JPEG, PNG, GIF or WebP image,
 * anything else a 400 naming `field`), any other URL by reference.
 */
export function messagesImageSource (url: string, field: string): { type: 'url', url: string } | { type: 'base64', media_type: MessagesImageType, data: string } {
  const inline = dataUrl(url)
  if (inline === null) return { type: 'url', url }
  if (!isMessagesImageType(inline.mediaType)) throw new InvalidField({ field, reason: 'must be a JPEG, PNG, GIF or WebP image' })
  return { type: 'base64', media_type: inline.mediaType, data: inline.data }
}
