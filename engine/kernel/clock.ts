/** Time source; tests pass a fake one so windows and expiries need no sleeping. */
export interface Clock { now: () => number }

export const systemClock: Clock = { now: () => Date.now() }
