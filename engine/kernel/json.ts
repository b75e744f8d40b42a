// A JSON object as the gateway reads one it does not trust (a client's or an upstream's body, a
// config section), and the one test that a value is such an object.

export type Json = Record<string, unknown>

/** A plain object: not null, not an array. */
export const isObj = (v: unknown): v is Json => v !== null && typeof v === 'object' && !Array.isArray(v)
