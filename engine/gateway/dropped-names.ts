// The one form a dropped request field's name takes wherever it goes: the
// `{prefix}Dropped-Params` response header, the usage record's `dropped_params`, the admin API
// and the consoles. A name may be any JSON key a client chose (a newline, a comma, Chinese text,
// ten thousand characters), so it is encoded here, once, as a token: characters outside
// [A-Za-z0-9_.-] are percent-encoded (their UTF-8 bytes, `%2C` for a comma), which makes the
// header a valid value and a comma-separated list in which each name is one item.

/** The longest encoded name kept; a longer one is cut at a character's boundary. */
export const MAX_NAME_CHARS = 128
/** The most names a call keeps. */
export const MAX_NAMES = 64
/** The longest list kept, commas included: a header well inside what proxies and clients accept. */
export const MAX_LIST_CHARS = 4096

const SAFE = /^[A-Za-z0-9_.-]*$/
const SAFE_CHAR = /[A-Za-z0-9_.-]/

/** `%XX` for each UTF-8 byte of one character; a lone surrogate becomes U+FFFD's bytes. */
function escape (ch: string): string {
  let out = ''
  for (const byte of Buffer.from(ch, 'utf8')) out += `%${byte < 16 ? '0' : ''}${byte.toString(16).toUpperCase()}`
  return out
}

/** A client field's name as a header token: safe characters as they are, the others percent-encoded; `""` (`%22%22`) for the empty name. */
export function droppedName (raw: string): string {
  if (raw === '') return '%22%22'
  if (raw.length <= MAX_NAME_CHARS && SAFE.test(raw)) return raw
  let out = ''
  for (const ch of raw) {
    const piece = SAFE_CHAR.test(ch) ? ch : escape(ch)
    if (out.length + piece.length > MAX_NAME_CHARS) break
    out += piece
  }
  return out
}

/**
 * Adds the encoded `names` to `list` (a call's dropped names), each once, while the list keeps
 * within MAX_NAMES names and MAX_LIST_CHARS characters joined by commas.
 */
export function addDroppedNames (list: string[], names: readonly string[]): void {
  let chars = list.reduce((n, name) => n + name.length + 1, -1)
  for (const raw of names) {
    if (list.length >= MAX_NAMES) return
    const name = droppedName(raw)
    if (list.includes(name)) continue
    if (chars + 1 + name.length > MAX_LIST_CHARS) return
    list.push(name)
    chars += name.length + 1
  }
}
