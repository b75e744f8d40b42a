import { readFileSync } from 'node:fs'

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
