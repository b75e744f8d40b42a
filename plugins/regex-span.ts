// The longest text a regular expression can match (Infinity when it has no bound: `*`, `+`,
// `{n,}`, back-references), from its source. The guardrails plugin holds back that much of a
// streamed answer, so that a match split across two deltas is still seen whole. Lookarounds count
// with what they look at: they read text beyond the match.

interface Cursor { s: string, i: number, unicode: boolean }

/** The most characters (UTF-16 code units) a match of `source` spans. */
export function maxMatchLength (source: string, flags = ''): number {
  const c: Cursor = { s: source, i: 0, unicode: flags.includes('u') || flags.includes('v') }
  const n = alternation(c)
  if (c.i < source.length) throw new SyntaxError(`unbalanced ) at ${c.i} in /${source}/`)
  return n
}

function alternation (c: Cursor): number {
  let best = sequence(c)
  while (c.s[c.i] === '|') {
    c.i++
    best = Math.max(best, sequence(c))
  }
  return best
}

function sequence (c: Cursor): number {
  let total = 0
  while (c.i < c.s.length && c.s[c.i] !== '|' && c.s[c.i] !== ')') {
    const atom = atomLength(c)
    total += quantified(c, atom)
  }
  return total
}

function quantified (c: Cursor, atom: number): number {
  const ch = c.s[c.i]
  let n = atom
  if (ch === '*' || ch === '+') { c.i++; n = atom === 0 ? 0 : Infinity } else if (ch === '?') { c.i++ } else if (ch === '{') {
    const m = /^\{(\d+)(,(\d*))?\}/.exec(c.s.slice(c.i))
    if (m !== null) {
      c.i += m[0].length
      const upper = m[2] === undefined ? Number(m[1]) : m[3] === '' ? Infinity : Number(m[3])
      n = atom === 0 ? 0 : atom * upper
    } else {
      return atom // a literal {
    }
  } else {
    return atom
  }
  if (c.s[c.i] === '?') c.i++ // lazy: the same bound
  return n
}

/** One character: a code unit, or under the u flag possibly a surrogate pair. */
const one = (c: Cursor): number => c.unicode ? 2 : 1

/** Width of one literal character of the pattern (a surrogate pair is two code units). */
function charWidth (c: Cursor): number {
  const code = c.s.charCodeAt(c.i)
  const pair = code >= 0xd800 && code <= 0xdbff && c.i + 1 < c.s.length
  c.i += pair ? 2 : 1
  return pair ? 2 : 1
}

function atomLength (c: Cursor): number {
  const ch = c.s[c.i]
  switch (ch) {
    case '^':
    case '$':
      c.i++
      return 0
    case '.':
      c.i++
      return one(c)
    case '[':
      skipClass(c)
      return one(c)
    case '(': {
      c.i++
      if (c.s.startsWith('?:', c.i)) c.i += 2
      else if (/^\?<[=!]/.test(c.s.slice(c.i)) || /^\?[=!]/.test(c.s.slice(c.i))) c.i += c.s[c.i + 1] === '<' ? 3 : 2
      else if (c.s.startsWith('?<', c.i)) c.i = c.s.indexOf('>', c.i) + 1
      const inner = alternation(c)
      if (c.s[c.i] !== ')') throw new SyntaxError(`unterminated group in /${c.s}/`)
      c.i++
      return inner
    }
    case '\\':
      return escapeLength(c)
    default:
      return charWidth(c)
  }
}

function escapeLength (c: Cursor): number {
  const next = c.s[c.i + 1]
  if (next === undefined) throw new SyntaxError(`trailing \\ in /${c.s}/`)
  c.i += 2
  if (next === 'b' || next === 'B') return 0
  if (/[1-9]/.test(next)) { while (/\d/.test(c.s[c.i] ?? '')) c.i++; return Infinity } // a back-reference
  if (next === 'k' && c.s[c.i] === '<') { c.i = c.s.indexOf('>', c.i) + 1; return Infinity }
  if (next === 'x') { c.i += 2; return 1 }
  if (next === 'u') {
    if (c.s[c.i] === '{') { c.i = c.s.indexOf('}', c.i) + 1; return 2 }
    c.i += 4
    return 1
  }
  if (next === 'c') { c.i++; return 1 }
  if ((next === 'p' || next === 'P') && c.s[c.i] === '{') { c.i = c.s.indexOf('}', c.i) + 1; return 2 }
  return /[dDwWsS]/.test(next) ? one(c) : 1
}

function skipClass (c: Cursor): void {
  c.i++ // [
  if (c.s[c.i] === '^') c.i++
  if (c.s[c.i] === ']') c.i++ // a literal ] first
  let depth = 1
  while (c.i < c.s.length && depth > 0) {
    const ch = c.s[c.i]
    if (ch === '\\') c.i += 2
    else if (ch === '[' && c.unicode) { depth++; c.i++ } else if (ch === ']') { depth--; c.i++ } else c.i++
  }
  if (depth > 0) throw new SyntaxError(`unterminated character class in /${c.s}/`)
}
