// A value now or later. The embedded store answers most calls at once, without a promise or a
// microtask on the hot path; a network store returns promises; hooks may be synchronous or not.
// Callers handle both with `then`, which stays synchronous while the value is.

export type MaybePromise<T> = T | Promise<T>

export function isPromise<T> (v: MaybePromise<T>): v is Promise<T> {
  return typeof (v as { then?: unknown } | null)?.then === 'function'
}

/** Runs `next` on the value, at once when it is there, after it resolves otherwise. */
export function then<T, R> (v: MaybePromise<T>, next: (value: T) => MaybePromise<R>): MaybePromise<R> {
  return isPromise(v) ? v.then(next) : next(v)
}
