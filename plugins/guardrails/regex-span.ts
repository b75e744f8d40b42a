import { RegExpParser, type AST } from '@eslint-community/regexpp'

// What a regular expression's matches can look like, read from its syntax tree (parsed by
// @eslint-community/regexpp, the parser ESLint uses): the longest text a match can span (Infinity
// when it has no bound: `*`, `+`, `{n,}`, back-references), and which characters a match can
// start with. The guardrails plugin uses both to hold back, in a streamed answer, only the text
// that could still turn out to be part of a match. Lookarounds count with what they look at,
// since they read text beyond the match. Not part of the plugin API: the guardrails' own.

/** The sources of the single-character matchers a match may start with, or 'any'. */
type First = Set<string> | 'any'

interface Shape { min: number, max: number, first: First }

export interface RegexShape {
  /** The most characters (UTF-16 code units) a match spans. */
  max: number
  /** Sticky: tests (at lastIndex) whether a match may start with the character there; null: with any character. */
  starts: RegExp | null
}

const parser = new RegExpParser({ ecmaVersion: 2025 })

const union = (a: First, b: First): First => a === 'any' || b === 'any' ? 'any' : new Set([...a, ...b])
const NOTHING: Shape = { min: 0, max: 0, first: new Set() }
const UNBOUNDED: Shape = { min: 0, max: Infinity, first: 'any' }

/** The longest match and the possible first characters of `/source/flags`; throws SyntaxError. */
export function regexShape (source: string, flags = ''): RegexShape {
  const unicode = flags.includes('u') || flags.includes('v')
  const pattern = parser.parsePattern(source, 0, source.length, { unicode: flags.includes('u'), unicodeSets: flags.includes('v') })
  // one character: a code unit, or under the u or v flag possibly a surrogate pair
  const one = unicode ? 2 : 1
  const shape = alternatives(pattern.alternatives, one)
  const sets = shape.first
  const starts = sets === 'any' || sets.size === 0 ? null : new RegExp(`(?:${[...sets].join('|')})`, flags.replace(/[gy]/g, '') + 'y')
  return { max: shape.max, starts }
}

/** The most characters (UTF-16 code units) a match of `source` spans. */
export function maxMatchLength (source: string, flags = ''): number {
  return regexShape(source, flags).max
}

function alternatives (list: readonly AST.Alternative[], one: number): Shape {
  return list.map((a) => sequence(a.elements, one)).reduce((best, next) => ({ min: Math.min(best.min, next.min), max: Math.max(best.max, next.max), first: union(best.first, next.first) }))
}

function sequence (elements: readonly AST.Element[], one: number): Shape {
  let min = 0
  let max = 0
  let first: First = new Set()
  let open = true // every element so far may match nothing: the next one's first characters count too
  for (const e of elements) {
    const s = element(e, one)
    if (open) first = union(first, s.first)
    if (s.min > 0) open = false
    min += s.min
    max += s.max
  }
  return { min, max, first }
}

function element (e: AST.Element, one: number): Shape {
  switch (e.type) {
    case 'Character': {
      const width = e.value > 0xffff ? 2 : 1
      return { min: width, max: width, first: new Set([e.raw]) }
    }
    case 'CharacterSet':
      // `.` and `\p{…}` may be any character; `\d`, `\w`, `\s` start as they say
      return { min: 1, max: e.kind === 'property' || e.kind === 'any' ? one : 1, first: e.kind === 'any' ? 'any' : new Set([e.raw]) }
    case 'CharacterClass':
    case 'ExpressionCharacterClass':
      return { min: 1, max: one, first: new Set([e.raw]) }
    case 'Group':
    case 'CapturingGroup':
      return alternatives(e.alternatives, one)
    case 'Quantifier': {
      const inner = element(e.element, one)
      return { min: inner.min * e.min, max: inner.max === 0 ? 0 : inner.max * e.max, first: inner.first }
    }
    case 'Assertion':
      // a lookaround consumes nothing, but reads as far as it looks; ^, $ and \b read nothing
      return e.kind === 'lookahead' || e.kind === 'lookbehind' ? { ...alternatives(e.alternatives, one), min: 0, first: new Set() } : NOTHING
    case 'Backreference':
      return UNBOUNDED
    default:
      return UNBOUNDED
  }
}
