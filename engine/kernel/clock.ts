/** Time source; tests pass a fake one so windows and expiries need no sleeping. */
export interface Clock {
  now: () => number
  /** Waits `ms` (a retry's pause); a fake clock moves on instead. Default: a timer. */
  sleep?: (ms: number) => Promise<void>
}

export const systemClock: Clock = { now: () => Date.now() }
