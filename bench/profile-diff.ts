// node --import tsx bench/profile-diff.ts DIR_A DIR_B CALLS_A [CALLS_B]: the self time per function of two
// processes, each profiled with --cpu-prof into a directory of its own (every thread's profile in
// it counted: the main thread and the store's checkpoint thread), in µs per call (CALLS_A and
// CALLS_B: the calls each answered; B's the same as A's when not given), the largest differences
// first. A function is named with its bundle line.
import { readdirSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { functionName, type CpuProfile } from './by-module.js'

const [a, b, callsA, callsB = callsA] = process.argv.slice(2)
if (a === undefined || b === undefined || callsA === undefined) throw new Error('usage: profile-diff.ts DIR_A DIR_B CALLS_A [CALLS_B]')
const calls = { a: Number(callsA), b: Number(callsB) }

/** Self time (µs) by function over every profile in `dir`, and their sum. */
function selfTimes (dir: string): { by: Map<string, number>, total: number } {
  const by = new Map<string, number>()
  let total = 0
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'))) {
    const prof = JSON.parse(readFileSync(join(dir, file), 'utf8')) as CpuProfile
    const nodes = new Map(prof.nodes.map((n) => [n.id, n]))
    for (let i = 0; i < prof.samples.length; i++) {
      const name = functionName(nodes.get(prof.samples[i]!)!.callFrame)
      if (name.startsWith('(idle)')) continue
      const dt = prof.timeDeltas[i] ?? 0
      by.set(name, (by.get(name) ?? 0) + dt)
      total += dt
    }
  }
  return { by, total }
}

const A = selfTimes(a)
const B = selfTimes(b)
console.log(`µs per call: ${a} ${(A.total / calls.a).toFixed(1)}, ${b} ${(B.total / calls.b).toFixed(1)} (with the profiler's own cost)`)
console.log('   A − B        A  function')
const rows = [...new Set([...A.by.keys(), ...B.by.keys()])].map((k) => ({ k, d: (A.by.get(k) ?? 0) / calls.a - (B.by.get(k) ?? 0) / calls.b, v: (A.by.get(k) ?? 0) / calls.a }))
rows.sort((x, y) => Math.abs(y.d) - Math.abs(x.d))
for (const r of rows.slice(0, Number(process.env.TOP ?? 30))) console.log(`${r.d.toFixed(2).padStart(8)} ${r.v.toFixed(2).padStart(8)}  ${r.k}`)
