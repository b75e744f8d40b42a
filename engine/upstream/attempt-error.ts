import type { AttemptReport } from './types.js'

// How an attempt at a provider failed, in a few words, for the usage record's attempts and the
// provider's recent failures: the error's code where it has one (ECONNREFUSED,
// UND_ERR_HEADERS_TIMEOUT...), else the start of its message, else how the attempt went
// (server_error for a 5xx, client_error for a 4xx). Made only for attempts that failed.

const MAX_MESSAGE = 200

/** The first string `code` along the error's chain of causes. */
function codeOf (err: unknown): string | undefined {
  for (let e = err as { code?: unknown, cause?: unknown } | null, depth = 0; e !== null && typeof e === 'object' && depth < 4; e = e.cause as typeof e, depth++) {
    if (typeof e.code === 'string' && e.code !== '') return e.code
  }
  return undefined
}

/** A short description of the attempt's failure; null when it did not fail. */
export function attemptError (r: Pick<AttemptReport, 'outcome' | 'error'>): string | null {
  if (r.outcome === 'ok') return null
  const err = r.error
  if (err === undefined || err === null) return r.outcome
  const code = codeOf(err)
  if (code !== undefined) return code
  const message = typeof err === 'string' ? err : (err as { message?: unknown }).message
  return typeof message === 'string' && message !== '' ? message.slice(0, MAX_MESSAGE) : r.outcome
}
