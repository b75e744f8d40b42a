import type { GatewayHookName, GatewayHooks, HookFn } from '../../plugins/api/index.js'

// The gateway hooks' registry and runners. Hooks run in the order they were added, which is the
// order of the plugins in the config. A hook that returns a promise is awaited before the next
// one runs; one that returns nothing costs no promise and no microtask.

type Maybe<T> = T | Promise<T>

const isThenable = (v: unknown): v is Promise<unknown> => typeof (v as { then?: unknown } | null)?.then === 'function'

export class HookRegistry implements GatewayHooks {
  readonly onAdmission: Array<HookFn<'onAdmission'>> = []
  readonly onUpstreamRequest: Array<HookFn<'onUpstreamRequest'>> = []
  readonly onResponseBody: Array<HookFn<'onResponseBody'>> = []
  readonly onStreamEvent: Array<HookFn<'onStreamEvent'>> = []
  readonly onStreamEnd: Array<HookFn<'onStreamEnd'>> = []
  readonly onCallEnd: Array<HookFn<'onCallEnd'>> = []

  add<N extends GatewayHookName> (name: N, fn: HookFn<N>): void {
    const list = this[name] as unknown as Array<HookFn<N>> | undefined
    if (!Array.isArray(list)) throw new TypeError(`unknown gateway hook ${String(name)}`)
    if (typeof fn !== 'function') throw new TypeError(`gateway hook ${name}: a function is needed`)
    list.push(fn)
  }
}

/** Runs `fns` in order with `arg`; synchronous as long as none returns a promise. */
export function runSeries<A> (fns: ReadonlyArray<(arg: A) => unknown>, arg: A): Maybe<void> {
  for (let i = 0; i < fns.length; i++) {
    const r = (fns[i] as (arg: A) => unknown)(arg)
    if (isThenable(r)) return r.then(() => runSeries(fns.slice(i + 1), arg))
  }
  return undefined
}

/** Runs `fns` in order with `arg` until `stop()` says so; synchronous as long as none returns a promise. */
export function runSeriesUntil<A> (fns: ReadonlyArray<(arg: A) => unknown>, arg: A, stop: () => boolean, from = 0): Maybe<void> {
  for (let i = from; i < fns.length && !stop(); i++) {
    const r = (fns[i] as (arg: A) => unknown)(arg)
    if (isThenable(r)) return r.then(() => runSeriesUntil(fns, arg, stop, i + 1))
  }
  return undefined
}

/**
 * Runs every hook, whatever the others do: the end-of-call hooks each settle something of their
 * own (a record, a charge, a key), and one failing must not keep the others from theirs. Resolves
 * once all are done; the first failure is rethrown after that.
 */
export function runAll<A extends unknown[]> (fns: ReadonlyArray<(...args: A) => unknown>, ...args: A): Maybe<void> {
  let pending: Array<Promise<unknown>> | null = null
  let failure: { err: unknown } | null = null
  for (const fn of fns) {
    try {
      const r = fn(...args)
      if (isThenable(r)) (pending ??= []).push(r)
    } catch (err) {
      failure ??= { err }
    }
  }
  if (pending === null) {
    if (failure !== null) throw failure.err
    return undefined
  }
  return Promise.allSettled(pending).then((results) => {
    if (failure !== null) throw failure.err
    for (const r of results) if (r.status === 'rejected') throw r.reason
  })
}
