import { Type } from '@sinclair/typebox'
import { InvalidQuery } from '../plugins/gateway/errors.js'

// Schemas the route families share.

/** An ISO 8601 date (`2026-01-15`) or date and time (`2026-01-15T12:00:00Z`). */
export const IsoTime = Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}(T\\d{2}:\\d{2}(:\\d{2}(\\.\\d{1,9})?)?(Z|[+-]\\d{2}:?\\d{2})?)?$', description: 'an ISO 8601 date or time' })

/** Milliseconds since the epoch of an IsoTime (undefined when absent); a date that does not exist is refused. */
export function parseIsoTime (text: string | undefined, param: string): number | undefined {
  if (text === undefined) return undefined
  const t = Date.parse(text)
  if (Number.isNaN(t)) throw new InvalidQuery({ param, reason: 'an ISO 8601 date or time' })
  return t
}
