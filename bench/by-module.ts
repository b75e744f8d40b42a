// A CPU profile's main-thread time per source module, in µs per call, for bench/profile.ts
// (MODULES=1). Each sample goes to the innermost JavaScript frame that has a file, and time V8
// spends on that frame's behalf (its builtins, its native calls, the syscalls under them) goes
// with it; samples outside any such frame are named by what V8 calls them ((garbage collector),
// (program)). A frame in the build's bundle (dist/) is placed by the `// path` comment esbuild
// writes at the start of each module it bundles: one of the project's own files, or a package;
// a package loaded from node_modules at run time is named by its folder; Node's own modules are
// one row, `node:` (with `node: 'file'`, a row per module; with `node: 'caller'`, a row per
// module of the package or project file that called into Node, `node: ← <caller>`). Only samples between `from` and `to` (µs on the monotonic clock the profile
// is timed on, process.hrtime's) count: the warm-up and the start stay out.
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'

interface ProfileNode { id: number, callFrame: { url: string, lineNumber: number, functionName: string }, children?: number[] }
export interface CpuProfile { nodes: ProfileNode[], startTime: number, samples: number[], timeDeltas: number[] }

/** A profiled function as bench/by-function.ts and bench/profile-diff.ts name it: its name, and its file (within node_modules or dist) and line. */
export function functionName (f: ProfileNode['callFrame']): string {
  return `${f.functionName === '' ? '(anon)' : f.functionName} ${f.url.replace(/.*node_modules\//, '').replace(/.*\/dist\//, 'dist/')}:${f.lineNumber}`
}

/** The module each line of a bundled file starts, from the comments esbuild leaves: [line (0-based), name]. */
function modulesOf (file: string): Array<[number, string]> {
  const starts: Array<[number, string]> = []
  let text = ''
  try { text = readFileSync(file, 'utf8') } catch { return starts }
  const lines = text.split('\n')
  for (let i = 0; i < lines.length; i++) {
    const m = /^\/\/ (\S+\.(?:ts|js|mjs|cjs|json))$/.exec(lines[i] as string)
    if (m !== null) starts.push([i, m[1] as string])
  }
  return starts
}

/** A package's name from a path inside node_modules (scoped ones whole). */
function packageOf (path: string): string {
  const rest = path.slice(path.lastIndexOf('node_modules/') + 'node_modules/'.length).split('/')
  return `npm:${rest[0]?.startsWith('@') === true ? `${rest[0]}/${rest[1] ?? ''}` : rest[0] ?? ''}`
}

export function byModule (prof: CpuProfile, from: number, to: number, opts: { node?: 'one' | 'file' | 'caller' } = {}): Map<string, number> {
  const bundles = new Map<string, Array<[number, string]>>()
  const splitNode = opts.node ?? 'one'
  const nameOfFrame = (url: string, line: number): string | null => {
    if (url === '') return null
    if (url.startsWith('node:')) return splitNode === 'file' ? url : 'node:'
    if (!url.startsWith('file://')) return url
    const path = fileURLToPath(url)
    if (path.includes('/node_modules/')) return packageOf(path)
    if (!path.includes('/dist/')) return path
    let starts = bundles.get(path)
    if (starts === undefined) { starts = modulesOf(path); bundles.set(path, starts) }
    let name: string | null = null
    for (const [at, mod] of starts) { if (at > line) break; name = mod }
    if (name === null) return path.slice(path.indexOf('/dist/') + 1)
    return name.startsWith('node_modules/') ? packageOf(name) : name
  }
  const parent = new Map<number, ProfileNode>()
  const byId = new Map<number, ProfileNode>()
  for (const n of prof.nodes) { byId.set(n.id, n); for (const c of n.children ?? []) parent.set(c, n) }
  const owner = new Map<number, string>()
  const ownerOf = (id: number): string => {
    const known = owner.get(id)
    if (known !== undefined) return known
    let n = byId.get(id)
    let name: string | null = null
    const leaf = n
    while (n !== undefined && name === null) {
      name = nameOfFrame(n.callFrame.url, n.callFrame.lineNumber)
      n = parent.get(n.id)
    }
    // Node's own frames go to the first frame above them that is not Node's
    if (name === 'node:' && splitNode === 'caller') {
      let caller: string | null = 'node:'
      while (n !== undefined && (caller === null || caller === 'node:')) {
        caller = nameOfFrame(n.callFrame.url, n.callFrame.lineNumber)
        n = parent.get(n.id)
      }
      name = `node: ← ${caller === 'node:' || caller === null ? '(Node alone)' : caller}`
    }
    const result = name ?? leaf?.callFrame.functionName ?? '?'
    owner.set(id, result)
    return result
  }
  const out = new Map<string, number>()
  let t = prof.startTime
  for (let i = 0; i < prof.samples.length; i++) {
    const dt = prof.timeDeltas[i] ?? 0
    t += dt
    if (t < from || t > to) continue
    const name = ownerOf(prof.samples[i] as number)
    if (name === '(idle)') continue
    out.set(name, (out.get(name) ?? 0) + dt)
  }
  return out
}
