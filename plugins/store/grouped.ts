import { isBusy, type DB } from './db.js'

/**
 * Group commit for an admission write that cannot wait for the deferred batch (it decides
 * whether a request runs): every call made during one turn of the event loop is run in a single
 * transaction when the turn ends (setImmediate), and each call's promise gets its own result.
 * A commit costs several times the statement it carries, so under load many admissions share
 * one; a lone call waits only for the end of the current turn. The statements keep their own
 * atomicity: two calls for the same row in one group see each other's write in call order.
 *
 * When the group's transaction fails, each call is run again in a transaction of its own, so
 * a call that fails alone rejects alone and the others still get their answer. When it failed
 * because another worker held the lock past busy_timeout, every call of the group rejects at
 * once: rerunning them one by one would only block the event loop that long again for each.
 */
export function grouped<A extends unknown[], R> (db: DB, fn: (...args: A) => R): (...args: A) => Promise<R> {
  interface Pending { args: A, resolve: (r: R) => void, reject: (err: unknown) => void }
  let queue: Pending[] = []
  // IMMEDIATE: the write lock is taken (waiting up to busy_timeout) before anything is read
  const runGroup = db.transaction((items: Pending[]) => items.map((p) => fn(...p.args))).immediate
  const runOne = db.transaction((args: A) => fn(...args)).immediate

  const drain = (): void => {
    const items = queue
    queue = []
    let results: R[]
    try {
      results = runGroup(items)
    } catch (err) {
      if (isBusy(err)) {
        for (const p of items) p.reject(err)
        return
      }
      for (const p of items) {
        try {
          p.resolve(runOne(p.args))
        } catch (err) {
          p.reject(err)
        }
      }
      return
    }
    for (let i = 0; i < items.length; i++) (items[i] as Pending).resolve(results[i] as R)
  }

  return (...args: A): Promise<R> => new Promise<R>((resolve, reject) => {
    if (queue.length === 0) setImmediate(drain)
    queue.push({ args, resolve, reject })
  })
}
