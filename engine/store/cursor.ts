import type { Cursor } from './types.js'

// A page cursor of the usage list: the last row's time and id, opaque to clients.

export function encodeCursor (c: Cursor): string {
  return Buffer.from(`${c.created_at}:${c.id}`).toString('base64url')
}

export function decodeCursor (text: string): Cursor | undefined {
  const m = /^(\d+):(.+)$/.exec(Buffer.from(text, 'base64url').toString('utf8'))
  return m === null ? undefined : { created_at: Number(m[1]), id: m[2] as string }
}
