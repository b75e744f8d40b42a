import { isObj } from '../kernel/json.js'

/** The message of an upstream error body, whatever its shape. */
export function upstreamMessage (status: number, body: unknown): string {
  const e = isObj(body) ? body.error : undefined
  if (isObj(e) && typeof e.message === 'string') return e.message
  if (typeof e === 'string') return e
  return `The upstream provider answered ${status}.`
}
