// node --import tsx bench/by-function.ts DIR: the main thread's self time per function, µs per
// call, of the two calls bench/bedrock.ts profiled (PROF=1 leaves DIR with the profile and the
// windows each call was loaded in), the largest differences first. A function is named with its
// bundle line; bench/by-module.ts gives the same time by source module.
import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { functionName, type CpuProfile } from './by-module.js'

const dir = process.argv[2]
if (dir === undefined) throw new Error('usage: by-function.ts DIR')
const meta = JSON.parse(readFileSync(join(dir, 'windows.json'), 'utf8')) as { profile: string, windows: Record<string, Array<{ from: number, to: number, calls: number }>> }
const prof = JSON.parse(readFileSync(join(dir, meta.profile), 'utf8')) as CpuProfile
const nodes = new Map(prof.nodes.map((n) => [n.id, n]))
const nameOf = (id: number): string => functionName(nodes.get(id)!.callFrame)
const per: Record<string, Map<string, number>> = {}
for (const [call, windows] of Object.entries(meta.windows)) {
  const sum = new Map<string, number>()
  let calls = 0
  for (const w of windows) calls += w.calls
  let t = prof.startTime
  for (let i = 0; i < prof.samples.length; i++) {
    const dt = prof.timeDeltas[i] ?? 0
    t += dt
    if (!windows.some((w) => t >= w.from && t <= w.to)) continue
    const k = nameOf(prof.samples[i]!)
    if (k.startsWith('(idle)')) continue
    sum.set(k, (sum.get(k) ?? 0) + dt)
  }
  per[call] = new Map([...sum].map(([k, v]) => [k, v / calls]))
}
const [a, b] = Object.keys(per) as [string, string]
const names = [...new Set([...per[a]!.keys(), ...per[b]!.keys()])]
const rows = names.map((k) => ({ k, x: per[a]!.get(k) ?? 0, y: per[b]!.get(k) ?? 0 }))
console.log(`${a.padStart(7)} ${b.padStart(7)}    diff  function (self time, µs per call)`)
for (const r of rows.sort((p, q) => Math.abs(q.y - q.x) - Math.abs(p.y - p.x)).slice(0, Number(process.env.TOP ?? 50))) console.log(`${r.x.toFixed(1).padStart(7)} ${r.y.toFixed(1).padStart(7)} ${(r.y - r.x).toFixed(1).padStart(7)}  ${r.k}`)
