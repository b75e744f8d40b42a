import { InvalidQuery } from './errors.js'

// Fastify parses `?org=a&org=b` into an array. Every route here reads one value per parameter,
// so a repeated parameter is refused rather than passed on (an array bound into SQL was a 500).

export type Query = Record<string, string | undefined>

/** The request's query, one string per parameter; a parameter given twice is a 400. */
export function singleValued (query: unknown): Query {
  const out: Query = Object.create(null) as Query
  if (query === null || typeof query !== 'object') return out
  for (const [name, value] of Object.entries(query)) {
    if (Array.isArray(value)) throw new InvalidQuery({ param: name, reason: 'must be given once' })
    if (typeof value === 'string') out[name] = value
  }
  return out
}
