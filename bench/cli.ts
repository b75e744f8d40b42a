import { spawnSync } from 'node:child_process'
import { appendFileSync, readFileSync } from 'node:fs'
import { availableParallelism, loadavg } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { pathToFileURL } from 'node:url'
import { fromRoot } from '../paths.js'
import { tempDir } from '../test/temp-dir.js'
import { startServer, stopSome, type Server } from './servers.js'

// How long each `modelgate` command takes, as a whole process, against Node's own start (`node -e
// 0`): the figure the targets name (`--help` adding at most 0.3 s, every other command at most
// 0.5 s, medians of five on an idle machine). Part of `npm run bench`; alone:
// `npm run bench:cli [-- RUNS [CHECKOUT]]`, CHECKOUT another checkout of the project (built, with
// its node_modules), measured the same way in the same rounds, for a before/after comparison.
//
// Each checkout gets a folder made by its own `modelgate init` (the shipped catalog, an admin
// token), with an MCP server in its config, and a gateway serving it (for `reload` and `mcp list`,
// which ask its admin API). A round runs every command once in each checkout, then `node -e 0`,
// in that order, and so for RUNS rounds after one not counted (the file cache, the store made):
// a neighbour's burst on a shared machine then hits a command and its yardstick alike. Each
// figure is the median of its runs: wall seconds from spawn to exit, and the CPU seconds (user
// and system) the kernel counted for the process. Output is read and thrown away.

interface Command { name: string, args: (n: number) => string[], target: number }

const COMMANDS: Command[] = [
  { name: '--help', args: () => ['--help'], target: 0.3 },
  { name: '(no command)', args: () => [], target: 0.5 },
  { name: '--version', args: () => ['--version'], target: 0.5 },
  { name: 'init DIR', args: (n) => ['init', `init-${n}`], target: 0.5 },
  { name: 'config check', args: () => ['config', 'check'], target: 0.5 },
  { name: 'plugins', args: () => ['plugins'], target: 0.5 },
  { name: 'keys list', args: () => ['keys', 'list'], target: 0.5 },
  { name: 'keys create', args: () => ['keys', 'create', '--org', 'demo', '--project', 'playground'], target: 0.5 },
  { name: 'keys revoke ID', args: () => ['keys', 'revoke', '$KEY'], target: 0.5 },
  { name: 'orgs list', args: () => ['orgs', 'list'], target: 0.5 },
  { name: 'credits add', args: () => ['credits', 'add', '--org', 'demo', '--amount-usd', '1'], target: 0.5 },
  { name: 'usage', args: () => ['usage'], target: 0.5 },
  { name: 'models add', args: () => ['models', 'add', 'openai', 'gpt-4.1-nano'], target: 0.5 },
  { name: 'models check', args: () => ['models', 'check'], target: 0.5 },
  { name: 'reload', args: () => ['reload'], target: 0.5 },
  { name: 'mcp list', args: () => ['mcp', 'list'], target: 0.5 }
]

/** A checkout, its command, and the folder and gateway its commands work on. */
interface Checkout { root: string, bin: string, dir: string, key: string, gateway: Server }

export interface Figure { wall_s: number, cpu_s: number }
export interface CliTimes {
  runs: number
  load: { min: number, max: number }
  node: Figure
  /** command → checkout (its folder's name) → its medians, and its wall median less node -e 0's */
  commands: Record<string, Record<string, Figure & { added_s: number, target_s: number }>>
}

/** CPU seconds of the children this process has waited for (Linux /proc; NaN elsewhere). */
function childrenCpuS (): number {
  try {
    const fields = readFileSync('/proc/self/stat', 'utf8').split(') ')[1]?.split(' ') ?? []
    return (Number(fields[13]) + Number(fields[14])) / 100 // cutime + cstime, in ticks of 1/100 s
  } catch {
    return NaN
  }
}

/** Runs `node ARGS` in `cwd` to its end: its wall and CPU seconds; throws when it fails. */
function timed (args: string[], cwd: string, env: NodeJS.ProcessEnv): Figure {
  const cpu = childrenCpuS()
  const start = performance.now()
  const r = spawnSync(process.execPath, args, { cwd, env, stdio: ['ignore', 'ignore', 'pipe'], maxBuffer: 1 << 24 })
  const wall = (performance.now() - start) / 1000
  if (r.status !== 0) throw new Error(`node ${args.join(' ')} (in ${cwd}) exited with ${String(r.status ?? r.signal)}: ${String(r.stderr)}`)
  return { wall_s: wall, cpu_s: childrenCpuS() - cpu }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 === 1 ? s[m] as number : ((s[m - 1] as number) + (s[m] as number)) / 2
}

async function prepare (root: string, mcpPort: number): Promise<Checkout> {
  const bin = join(root, (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { bin: Record<string, string> }).bin.modelgate as string)
  const dir = tempDir('bench-cli')
  const env = { ...process.env, MODELGATE_CONFIG: '' }
  timed([bin, 'init', '.'], dir, env)
  appendFileSync(join(dir, 'gateway.yaml'), `\nmcp:\n  servers:\n    - { id: bench, transport: http, url: "http://127.0.0.1:${mcpPort}/mcp" }\n`)
  const created = spawnSync(process.execPath, [bin, 'keys', 'create', '--org', 'demo', '--project', 'playground'], { cwd: dir, env, encoding: 'utf8' })
  const key = /created (key_[0-9a-f]+)/.exec(created.stderr)?.[1]
  if (key === undefined) throw new Error(`keys create in ${dir} made no key: ${created.stderr}`)
  const gateway = await startServer([bin, 'serve', '--workers', '1'], { PORT: '0', LOG_LEVEL: 'error', MODELGATE_CONFIG: join(dir, 'gateway.yaml') })
  return { root, bin, dir, key, gateway }
}

/** Every command of each checkout in `roots` and `node -e 0`, in turn, `runs` times after one round not counted. */
export async function cliTimes (opts: { runs?: number, roots?: string[] } = {}): Promise<CliTimes> {
  const runs = opts.runs ?? 5
  const roots = opts.roots ?? [fromRoot()]
  const mcp = await startServer([fromRoot('bench', 'mcp-upstream.mjs')])
  const checkouts: Checkout[] = []
  for (const root of roots) checkouts.push(await prepare(root, mcp.port))
  const name = (c: Checkout): string => roots.length === 1 ? 'this checkout' : basename(c.root)
  const figures = new Map<string, Figure[]>()
  const add = (k: string, f: Figure): void => { figures.set(k, [...(figures.get(k) ?? []), f]) }
  const load = [loadavg()[0] as number]
  let n = 0
  for (let round = 0; round <= runs; round++) {
    for (const command of COMMANDS) {
      for (const c of checkouts) {
        const args = command.args(n++).map((a) => a === '$KEY' ? c.key : a)
        const f = timed([c.bin, ...args], c.dir, { ...process.env, MODELGATE_CONFIG: join(c.dir, 'gateway.yaml') })
        if (round > 0) add(`${command.name}\0${name(c)}`, f)
      }
      const node = timed(['-e', '0'], fromRoot(), process.env)
      if (round > 0) add('node -e 0', node)
    }
    load.push(loadavg()[0] as number)
  }
  await stopSome([mcp, ...checkouts.map((c) => c.gateway)])
  const med = (k: string): Figure => ({ wall_s: median((figures.get(k) ?? []).map((f) => f.wall_s)), cpu_s: median((figures.get(k) ?? []).map((f) => f.cpu_s)) })
  const node = med('node -e 0')
  const commands: CliTimes['commands'] = {}
  for (const command of COMMANDS) {
    commands[command.name] = Object.fromEntries(checkouts.map((c) => {
      const f = med(`${command.name}\0${name(c)}`)
      return [name(c), { ...f, added_s: f.wall_s - node.wall_s, target_s: command.target }]
    }))
  }
  return { runs, load: { min: Math.min(...load), max: Math.max(...load) }, node, commands }
}

export function printCliTimes (t: CliTimes): void {
  const s = (x: number): string => x.toFixed(3).padStart(7)
  const checkouts = Object.keys(Object.values(t.commands)[0] ?? {})
  console.log(`command${' '.repeat(17)}${checkouts.length > 1 ? 'checkout'.padEnd(18) : ''}wall s  added s  target  CPU s`)
  for (const [name, byCheckout] of Object.entries(t.commands)) {
    for (const [checkout, f] of Object.entries(byCheckout)) {
      console.log(`${name.padEnd(24)}${checkouts.length > 1 ? checkout.padEnd(18) : ''}${s(f.wall_s)}  ${s(f.added_s)}  ≤ ${f.target_s.toFixed(1)}  ${s(f.cpu_s)}`)
    }
  }
  console.log(`${'node -e 0'.padEnd(24)}${checkouts.length > 1 ? ''.padEnd(18) : ''}${s(t.node.wall_s)}                 ${s(t.node.cpu_s)}`)
  console.log(`medians of ${t.runs} runs each, after one not counted; ${availableParallelism()} cores, 1-minute load average ${t.load.min.toFixed(1)} to ${t.load.max.toFixed(1)}; Node ${process.version}`)
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(resolve(process.argv[1])).href) {
  const runs = Number(process.argv[2] ?? 5)
  const roots = [fromRoot(), ...(process.argv[3] === undefined ? [] : [resolve(process.argv[3])])]
  printCliTimes(await cliTimes({ runs, roots }))
  process.exit(0)
}
