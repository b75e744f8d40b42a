import { readdirSync, readFileSync } from 'node:fs'

// CPU time a process has spent, from /proc (Linux): user + system, in microseconds. `main`
// counts its main thread alone (the event loop); the whole process adds SQLite's checkpoint
// thread, V8's GC helpers and libuv's pool. NaN where /proc cannot be read (not Linux, or the
// process has gone), so that a figure built on it prints as n/a rather than a wrong number.

const TICK_US = 1e6 / 100 // USER_HZ is 100 on Linux

function ticks (stat: string): number {
  try {
    const fields = readFileSync(stat, 'utf8').split(') ')[1]!.split(' ')
    return (Number(fields[11]) + Number(fields[12])) * TICK_US // utime + stime
  } catch {
    return NaN
  }
}

export const processCpuUs = (pid: number): number => ticks(`/proc/${pid}/stat`)
export const mainThreadCpuUs = (pid: number): number => ticks(`/proc/${pid}/task/${pid}/stat`)

/**
 * CPU time of each of a process's threads, by the order they started in: `main` (the event loop),
 * then `t1`, `t2`, … by thread id. Node names none of its threads, so the kind of each is read from
 * that order: V8's platform threads (GC helpers, the optimizing compiler) start with the process,
 * libuv's pool (fs, dns, crypto) on its first use, a worker thread (the store's checkpointer) when
 * it is made.
 */
export function threadsCpuUs (pid: number): Map<string, number> {
  const out = new Map<string, number>()
  let tids: number[] = []
  try { tids = readdirSync(`/proc/${pid}/task`).map(Number).sort((a, b) => a - b) } catch { return out }
  let i = 0
  for (const tid of tids) {
    const us = ticks(`/proc/${pid}/task/${tid}/stat`)
    if (Number.isNaN(us)) continue
    out.set(tid === pid ? 'main' : `t${++i}`, us)
  }
  return out
}
