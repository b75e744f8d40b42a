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
  return (content as Json[]).filter((p) => p?.type === 'text' && typeof p.text === 'string').map((p) => p.text as string).join('\n')
}
