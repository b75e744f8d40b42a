// What a regular expression's matches can look like, read from its source: the longest text a
// match can span (Infinity when it has no bound: `*`, `+`, `{n,}`, back-references), and which
// characters a match can start with. The guardrails plugin uses both to hold back, in a streamed
// answer, only the text that could still turn out to be part of a match. Lookarounds count with
// what they look at, since they read text beyond the match.

/** A single-character matcher's source (`s`, `\d`, `[a-z]`, `.`), or 'any' when anything may come first. */
type First = Set<string> | 'any'

interface Shape {
  min: number
  max: number
  first: First
}

interface Cursor { s: string, i: number, unicode: boolean }

export interface RegexShape {
  /** The most characters (UTF-16 code units) a match spans. */
  max: number
  /** Sticky: tests (at lastIndex) whether a match may start with the character there; null: with any character. */
  starts: RegExp | null
}

/** The longest match and the possible first characters of `/source/flags`; throws SyntaxError. */
export function regexShape (source: string, flags = ''): RegexShape {
  const c: Cursor = { s: source, i: 0, unicode: flags.includes('u') || flags.includes('v') }
  const shape = alternation(c)
  if (c.i < source.length) throw new SyntaxError(`unbalanced ) at ${c.i} in /${source}/`)
  const sets = shape.first
  const starts = sets === 'any' || sets.size === 0 ? null : new RegExp(`(?:${[...sets].join('|')})`, flags.replace(/[gy]/g, '') + 'y')
  return { max: shape.max, starts }
}

/** The most characters (UTF-16 code units) a match of `source` spans. */
export function maxMatchLength (source: string, flags = ''): number {
  return regexShape(source, flags).max
}

const union = (a: First, b: First): First => a === 'any' || b === 'any' ? 'any' : new Set([...a, ...b])

function alternation (c: Cursor): Shape {
  let best = sequence(c)
  while (c.s[c.i] === '|') {
    c.i++
    const next = sequence(c)
    best = { min: Math.min(best.min, next.min), max: Math.max(best.max, next.max), first: union(best.first, next.first) }
  }
  return best
}

function sequence (c: Cursor): Shape {
  let min = 0
  let max = 0
  let first: First = new Set()
  let open = true // every atom so far may match nothing: the next one's first characters count too
  while (c.i < c.s.length && c.s[c.i] !== '|' && c.s[c.i] !== ')') {
    const atom = quantified(c, atomShape(c))
    if (open) first = union(first, atom.first)
    if (atom.min > 0) open = false
    min += atom.min
    max += atom.max
  }
  return { min, max, first }
}

function quantified (c: Cursor, atom: Shape): Shape {
  const ch = c.s[c.i]
  let out = atom
  if (ch === '*') { c.i++; out = { min: 0, max: atom.max === 0 ? 0 : Infinity, first: atom.first } } else if (ch === '+') { c.i++; out = { ...atom, max: atom.max === 0 ? 0 : Infinity } } else if (ch === '?') { c.i++; out = { ...atom, min: 0 } } else if (ch === '{') {
    const m = /^\{(\d+)(,(\d*))?\}/.exec(c.s.slice(c.i))
    if (m === null) return atom // a literal {
    c.i += m[0].length
    const lower = Number(m[1])
    const upper = m[2] === undefined ? lower : m[3] === '' ? Infinity : Number(m[3])
    out = { min: atom.min * lower, max: atom.max === 0 ? 0 : atom.max * upper, first: atom.first }
  } else {
    return atom
  }
  if (c.s[c.i] === '?') c.i++ // lazy: the same bounds
  return out
}

/** One character: a code unit, or under the u flag possibly a surrogate pair. */
const one = (c: Cursor): number => c.unicode ? 2 : 1

const single = (c: Cursor, source: string): Shape => ({ min: 1, max: one(c), first: new Set([source]) })

function atomShape (c: Cursor): Shape {
  const start = c.i
  const ch = c.s[c.i] as string
  switch (ch) {
    case '^':
    case '$':
      c.i++
      return { min: 0, max: 0, first: new Set() }
    case '.':
      c.i++
      return { min: 1, max: one(c), first: 'any' }
    case '[':
      skipClass(c)
      return single(c, c.s.slice(start, c.i))
    case '(':
      return group(c)
    case '\\':
      return escapeShape(c)
    default: {
      const code = c.s.charCodeAt(c.i)
      const pair = code >= 0xd800 && code <= 0xdbff && c.i + 1 < c.s.length
      c.i += pair ? 2 : 1
      const lit = c.s.slice(start, c.i)
      return { min: pair ? 2 : 1, max: pair ? 2 : 1, first: new Set([lit.replace(/[.*+?^${}()|[\]\\/]/g, '\\$&')]) }
    }
  }
}

function group (c: Cursor): Shape {
  c.i++ // (
  let lookaround = false
  if (c.s.startsWith('?:', c.i)) c.i += 2
  else if (/^\?<?[=!]/.test(c.s.slice(c.i))) { lookaround = true; c.i += c.s[c.i + 1] === '<' ? 3 : 2 } else if (c.s.startsWith('?<', c.i)) c.i = c.s.indexOf('>', c.i) + 1
  const inner = alternation(c)
  if (c.s[c.i] !== ')') throw new SyntaxError(`unterminated group in /${c.s}/`)
  c.i++
  // a lookaround consumes nothing, but reads as far as it looks
  return lookaround ? { min: 0, max: inner.max, first: new Set() } : inner
}

function escapeShape (c: Cursor): Shape {
  const start = c.i
  const next = c.s[c.i + 1]
  if (next === undefined) throw new SyntaxError(`trailing \\ in /${c.s}/`)
  c.i += 2
  if (next === 'b' || next === 'B') return { min: 0, max: 0, first: new Set() }
  if (/[1-9]/.test(next)) { while (/\d/.test(c.s[c.i] ?? '')) c.i++; return { min: 0, max: Infinity, first: 'any' } } // a back-reference
  if (next === 'k' && c.s[c.i] === '<') { c.i = c.s.indexOf('>', c.i) + 1; return { min: 0, max: Infinity, first: 'any' } }
  if (next === 'x') c.i += 2
  else if (next === 'u') c.i = c.s[c.i] === '{' ? c.s.indexOf('}', c.i) + 1 : c.i + 4
  else if (next === 'c') c.i++
  else if ((next === 'p' || next === 'P') && c.s[c.i] === '{') c.i = c.s.indexOf('}', c.i) + 1
  const source = c.s.slice(start, c.i)
  const wide = next === 'u' && source.includes('{')
  const cls = /[dDwWsSpP.]/.test(next)
  return { min: 1, max: wide ? 2 : cls ? one(c) : 1, first: new Set([source]) }
}

function skipClass (c: Cursor): void {
  c.i++ // [
  if (c.s[c.i] === '^') c.i++
  let depth = 1
  while (c.i < c.s.length && depth > 0) {
    const ch = c.s[c.i]
    if (ch === '\\') c.i += 2
    else if (ch === '[' && c.unicode) { depth++; c.i++ } else if (ch === ']') { depth--; c.i++ } else c.i++
  }
  if (depth > 0) throw new SyntaxError(`unterminated character class in /${c.s}/`)
}
