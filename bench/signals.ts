// node --import tsx bench/signals.ts: what the spend signals (a call's tags, a key's rate-limit
// headers) cost a chat call, every plugin on, one worker. Three gateways of this build, each its
// own store, the key with the same limits in each (rpm and tpm out of reach: enforced, never
// reached):
//   on:     the six rate-limit headers on every answer, two tags on every call (kept on its record);
//   off:    the quota plugin's rate_limit_headers: false, no tags: the same call without the signals;
//   off 2:  the same as off: the instrument's own error (a ratio that should be 1).
// Two things on this machine move CPU per call by more than the signals cost:
//   - its speed moves from one second to the next: so the three are loaded at the same time, each
//     offered BENCH_RATE calls a second (default 1000, well under what one answers on two cores),
//     and a gateway that is not saturated does the same work a call whatever the others do;
//   - a process keeps for its life a cost of its own, a few per cent either way (where its code
//     and heap landed): two gateways of the same build, started one after the other, measured
//     1.075× apart over ten rounds of bench/ab.ts. So the three are started afresh for each of
//     BENCH_BLOCKS blocks (default 8, in a rotating order), each warmed up for BENCH_WARM_S
//     seconds (default 5), then loaded for BENCH_ROUNDS rounds (default 4) of BENCH_SLICE_S seconds
//     (default 3), a fresh Idempotency-Key a call.
// CPU per call is each process's (/proc, every thread). A block's figure is the median of its
// rounds' on / mean(off, off 2) (a process sometimes spends far more a call for a few seconds:
// its checkpoint, its collector); the figure is the geometric mean of the blocks' with a 90%
// interval (Student's t over the blocks, in logarithms). The null pair (off 2 / off) is measured
// the same way: it should contain 1. Beside it, what the signals add in µs a call (the blocks' median
// differences): a gateway that is not saturated spends more a call than one at full load (fewer
// calls share each wake-up and each commit), so npm run bench also weighs these µs against the CPU
// per call of its saturated gateway.
// BENCH_TURNS=1: each round loads the three one at a time (in an order reversed every other round)
// instead of at once: wider intervals here (the machine's speed moves between slices).
// PROF=1: one block, the on and off gateways run with --cpu-prof, each into a directory of its own,
// for bench/profile-diff.ts (the printed command).
// Exported as `measureSignals` for npm run bench.
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import autocannon from 'autocannon'
import { fromRoot } from '../paths.js'
import { processCpuUs } from './proc-cpu.js'
import { startServer, stopSome, type Server } from './servers.js'
import { ALL_PLUGINS, BENCH_KEY, writeSmallConfig } from './small-config.js'

type Role = 'on' | 'off' | 'off2'
const ROLES: Role[] = ['on', 'off', 'off2']

export interface SignalsResult {
  /** CPU per call with the signals over without (the mean of the two gateways without): the geometric mean of the blocks'. */
  ratio: number
  /** A 90% interval of it. */
  interval: [number, number]
  /** The null pair (two gateways alike, off 2 / off), the same way: how far this instrument's 1 is from 1. */
  nullRatio: number
  nullInterval: [number, number]
  /** What the signals add to a call, µs of CPU (on − the mean of off and off 2): the mean of the blocks', and a 90% interval. */
  addedUs: number
  addedInterval: [number, number]
  /** CPU per call (µs) of each role over every round. */
  us: Record<Role, number>
  /** Each block's figures: its on / off, off 2 / off and on − off (µs), and its rounds' CPU per call. */
  blocks: Array<{ ratio: number, nullRatio: number, added: number, rounds: Array<Record<Role, number>> }>
  errors: number
}

const median = (xs: number[]): number => { const s = [...xs].sort((a, b) => a - b); return s.length % 2 === 1 ? s[(s.length - 1) / 2]! : (s[s.length / 2 - 1]! + s[s.length / 2]!) / 2 }

// Student's t, two-sided 90% (the 95th percentile), by degrees of freedom; 1.645 past 30
const T90 = [NaN, 6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782, 1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697]

/** The mean of `xs` and its 90% interval (NaN wide for a single one). */
function meanInterval (xs: number[]): { mean: number, interval: [number, number] } {
  const m = xs.reduce((a, b) => a + b, 0) / xs.length
  const sd = Math.sqrt(xs.reduce((a, b) => a + (b - m) ** 2, 0) / (xs.length - 1))
  const half = (T90[xs.length - 1] ?? 1.645) * sd / Math.sqrt(xs.length)
  return { mean: m, interval: [m - half, m + half] }
}

/** The geometric mean of ratios and its 90% interval: the mean of their logarithms. */
function geometric (xs: number[]): { mean: number, interval: [number, number] } {
  const { mean, interval } = meanInterval(xs.map(Math.log))
  return { mean: Math.exp(mean), interval: [Math.exp(interval[0]), Math.exp(interval[1])] }
}

export async function measureSignals (opts: { upstream: Server, blocks: number, rounds: number, slice: number, warm: number, rate: number, turns?: boolean, prof?: boolean, root?: string, log?: (line: string) => void }): Promise<SignalsResult> {
  const root = opts.root ?? fromRoot()
  const dir = mkdtempSync(join(tmpdir(), 'mg-bench-signals-'))
  const limits = { rpm: 1e9, tpm: 1e12 }
  const base = `http://127.0.0.1:${opts.upstream.port}`
  const body = JSON.stringify({ model: 'b/o', max_tokens: 10, messages: [{ role: 'user', content: 'hi' }] })
  const plain = { 'content-type': 'application/json', authorization: `Bearer ${BENCH_KEY}` }
  const headersOf: Record<Role, Record<string, string>> = { on: { ...plain, 'x-svc-tags': 'team-a, feature-x' }, off: plain, off2: plain }
  let n = 0
  let errors = 0
  const sum = { on: { calls: 0, us: 0 }, off: { calls: 0, us: 0 }, off2: { calls: 0, us: 0 } }
  const blocks: SignalsResult['blocks'] = []
  for (let b = 0; b < opts.blocks; b++) {
    const boot = async (role: Role): Promise<Server> => {
      const name = `${role}-${b}`
      const config = writeSmallConfig(join(dir, `${name}.json`), join(dir, `${name}.db`), base, ALL_PLUGINS, { limits, limitHeaders: role === 'on' })
      const prof = opts.prof === true && role !== 'off2' ? ['--cpu-prof', `--cpu-prof-dir=${join(dir, name)}`] : []
      return await startServer([...prof, join(root, 'dist', 'cli', 'index.js'), 'serve', '--config', config, '--workers', '1'], { LOG_LEVEL: 'error' })
    }
    // started one after the other, in an order that turns with the block
    const servers = {} as Record<Role, Server>
    for (let i = 0; i < ROLES.length; i++) { const role = ROLES[(b + i) % ROLES.length]!; servers[role] = await boot(role) }
    const load = async (role: Role, seconds: number): Promise<{ calls: number, us: number }> => {
      const s = servers[role]
      const headers = headersOf[role]
      const c0 = processCpuUs(s.pid)
      const r = await autocannon({
        url: `http://127.0.0.1:${s.port}/v1/chat/completions`,
        method: 'POST',
        body,
        headers,
        connections: 16,
        duration: seconds,
        ...(opts.rate > 0 ? { overallRate: opts.rate } : {}),
        requests: [{ setupRequest: (req: autocannon.Request) => ({ ...req, headers: { ...headers, 'idempotency-key': `s-${process.pid}-${n++}` } }) }]
      })
      errors += r.non2xx + r.errors
      return { calls: r.requests.total, us: processCpuUs(s.pid) - c0 }
    }
    await Promise.all(ROLES.map(async (role) => await load(role, opts.warm))) // every path compiled and optimized
    const rounds: Array<Record<Role, number>> = []
    for (let r = 0; r < opts.rounds; r++) {
      let got: Array<{ calls: number, us: number }>
      if (opts.turns === true) {
        // one at a time, in an order reversed every other round
        const order = r % 2 === 0 ? ROLES : [...ROLES].reverse()
        const by = new Map<Role, { calls: number, us: number }>()
        for (const role of order) by.set(role, await load(role, opts.slice))
        got = ROLES.map((role) => by.get(role)!)
      } else got = await Promise.all(ROLES.map(async (role) => await load(role, opts.slice)))
      const row = { on: 0, off: 0, off2: 0 }
      ROLES.forEach((role, i) => { const g = got[i]!; sum[role].calls += g.calls; sum[role].us += g.us; row[role] = g.us / g.calls })
      rounds.push(row)
    }
    await stopSome(Object.values(servers))
    const block = { ratio: median(rounds.map((x) => x.on / ((x.off + x.off2) / 2))), nullRatio: median(rounds.map((x) => x.off2 / x.off)), added: median(rounds.map((x) => x.on - (x.off + x.off2) / 2)), rounds }
    blocks.push(block)
    opts.log?.(`block ${b + 1}/${opts.blocks}: on / off ${block.ratio.toFixed(3)}, off 2 / off ${block.nullRatio.toFixed(3)} (µs a call: ${rounds.map((x) => `${x.on.toFixed(0)}/${x.off.toFixed(0)}/${x.off2.toFixed(0)}`).join(' ')})`)
  }
  if (opts.prof === true) opts.log?.(`profiles: node --import tsx bench/profile-diff.ts ${join(dir, 'on-0')} ${join(dir, 'off-0')} ${sum.on.calls} ${sum.off.calls} (the warm-up's calls besides)`)
  const on = geometric(blocks.map((x) => x.ratio))
  const nul = geometric(blocks.map((x) => x.nullRatio))
  const added = meanInterval(blocks.map((x) => x.added))
  return {
    addedUs: added.mean,
    addedInterval: added.interval,
    ratio: on.mean,
    interval: on.interval,
    nullRatio: nul.mean,
    nullInterval: nul.interval,
    us: { on: sum.on.us / sum.on.calls, off: sum.off.us / sum.off.calls, off2: sum.off2.us / sum.off2.calls },
    blocks,
    errors
  }
}

/** The figure as npm run bench prints it. */
export function signalsLine (r: SignalsResult): string {
  const x = (v: number): string => v.toFixed(3)
  return `Tags and rate-limit headers on / off, CPU per call: ${x(r.ratio)}× (90% interval ${x(r.interval[0])}–${x(r.interval[1])}, ${r.blocks.length} blocks of fresh gateways; target ≤ 1.05); ` +
    `the null pair ${x(r.nullRatio)}× (${x(r.nullInterval[0])}–${x(r.nullInterval[1])}); they add ${r.addedUs.toFixed(1)} µs a call (${r.addedInterval[0].toFixed(1)} to ${r.addedInterval[1].toFixed(1)})`
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  const upstream = await startServer([fromRoot('bench', 'upstream.mjs')])
  const prof = process.env.PROF === '1'
  const r = await measureSignals({
    upstream,
    blocks: prof ? 1 : Number(process.env.BENCH_BLOCKS ?? 8),
    rounds: Number(process.env.BENCH_ROUNDS ?? 4),
    slice: Number(process.env.BENCH_SLICE_S ?? 3),
    warm: Number(process.env.BENCH_WARM_S ?? 5),
    rate: Number(process.env.BENCH_RATE ?? 1000),
    turns: process.env.BENCH_TURNS === '1',
    prof,
    root: process.env.ROOT,
    log: (line) => { console.log(line) }
  })
  console.log(`CPU per call over every round: on ${r.us.on.toFixed(1)} µs, off ${r.us.off.toFixed(1)} µs, off 2 ${r.us.off2.toFixed(1)} µs; ${r.errors} errors`)
  console.log(signalsLine(r))
  await stopSome([upstream])
  process.exit(0)
}
