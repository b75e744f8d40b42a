import { spawn, type ChildProcess } from 'node:child_process'
import { existsSync, readFileSync } from 'node:fs'
import { request } from 'node:http'
import { createServer } from 'node:net'
import { availableParallelism, loadavg } from 'node:os'
import { basename, join, resolve } from 'node:path'
import { fromRoot } from '../paths.js'
import { tempDir } from '../test/temp-dir.js'

// `npm run bench:start [-- RUNS [CHECKOUT]]`: how long `npm start` takes to serve when nothing
// changed since the last build: from spawning it to the first GET /healthz answered 200, with one
// worker and with the default workers (one per core), on the shipped config (its store in a
// temporary folder, MODELGATE_DB). Also the same through the built command directly (`node <bin>
// serve`), without npm and its build check, and through the one executable file when
// `npm run release` has built it (release/modelgate-linux-x64 serve). Each case runs once to warm up (the store is made,
// the file cache filled), then RUNS times (default 7), the cases taken in turn; the median, the
// minimum and the maximum are printed, with the time to the start banner. CHECKOUT: another
// checkout of the project (built, with its node_modules), measured the same way in the same
// rounds, for a before/after comparison.

const runs = Number(process.argv[2] ?? 7)
const roots = [fromRoot(), ...(process.argv[3] === undefined ? [] : [resolve(process.argv[3])])]

interface Case { name: string, root: string, command: string, args: string[] }
const RELEASE = join('release', 'modelgate-linux-x64')
const cases: Case[] = roots.flatMap((root) => {
  const bin = (JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { bin: Record<string, string> }).bin.modelgate as string
  const at = roots.length > 1 ? ` (${basename(root)})` : ''
  return [
    { name: `npm start, 1 worker${at}`, root, command: 'npm', args: ['start', '--silent', '--', '--workers', '1'] },
    { name: `npm start, default workers${at}`, root, command: 'npm', args: ['start', '--silent'] },
    { name: `node ${bin} serve, 1 worker${at}`, root, command: process.execPath, args: [join(root, bin), 'serve', '--workers', '1'] },
    { name: `node ${bin} serve, default workers${at}`, root, command: process.execPath, args: [join(root, bin), 'serve'] },
    ...(existsSync(join(root, RELEASE))
      ? [
          { name: `${RELEASE} serve, 1 worker${at}`, root, command: join(root, RELEASE), args: ['serve', '--workers', '1'] },
          { name: `${RELEASE} serve, default workers${at}`, root, command: join(root, RELEASE), args: ['serve'] }
        ]
      : [])
  ]
})

async function freePort (): Promise<number> {
  const server = createServer()
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const port = (server.address() as { port: number }).port
  await new Promise((resolve) => server.close(resolve))
  return port
}

const healthy = async (port: number): Promise<boolean> => await new Promise((resolve) => {
  const req = request({ host: '127.0.0.1', port, path: '/healthz', agent: false }, (res) => { res.resume(); resolve(res.statusCode === 200) })
  req.on('error', () => { resolve(false) })
  req.end()
})

async function stop (child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((resolve) => child.once('exit', resolve))
  // its own process group: npm, its shell and the gateway with its workers
  process.kill(-(child.pid as number), 'SIGTERM')
  await exited
}

/** Milliseconds from spawn to the first 200 from /healthz, and to the start banner. */
async function once (c: Case, db: string): Promise<{ healthz: number, banner: number }> {
  const port = await freePort()
  const started = performance.now()
  const child = spawn(c.command, c.args, {
    cwd: c.root,
    env: { ...process.env, PORT: String(port), MODELGATE_DB: db, LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'inherit'],
    detached: true
  })
  let banner = NaN
  let out = ''
  child.stdout?.on('data', (d: Buffer) => {
    out += String(d)
    if (Number.isNaN(banner) && out.includes('listening on')) banner = performance.now() - started
  })
  let failed: Error | undefined
  child.once('exit', (code) => { failed = new Error(`${c.name} exited with ${String(code)}`) })
  try {
    for (;;) {
      if (failed !== undefined) throw failed
      if (await healthy(port)) break
      await new Promise((resolve) => setTimeout(resolve, 5))
    }
    const healthz = performance.now() - started
    // eslint-disable-next-line no-unmodified-loop-condition -- both are set by the child's output handlers
    while (Number.isNaN(banner) && failed === undefined) await new Promise((resolve) => setTimeout(resolve, 5))
    return { healthz, banner }
  } finally {
    await stop(child)
  }
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b)
  const m = s.length >> 1
  return s.length % 2 === 1 ? s[m] as number : ((s[m - 1] as number) + (s[m] as number)) / 2
}

// nothing changed since the last build: the build npm start runs first then does nothing
for (const root of roots) {
  await new Promise<void>((resolve, reject) => spawn(process.execPath, [join(root, 'build.mjs')], { stdio: 'inherit' }).once('exit', (code) => { if (code === 0) resolve(); else reject(new Error(`the build of ${root} failed`)) }))
}
const dir = tempDir('bench-start')
const results = new Map<Case, Array<{ healthz: number, banner: number }>>(cases.map((c) => [c, []]))
const load = [loadavg()[0] as number]
for (const [i, c] of cases.entries()) await once(c, join(dir, `${i}.db`))
for (let r = 0; r < runs; r++) {
  // every other round in reverse order, so that no case always follows the same one
  for (const [i, c] of (r % 2 === 0 ? [...cases.entries()] : [...cases.entries()].reverse())) results.get(c)?.push(await once(c, join(dir, `${i}.db`)))
  load.push(loadavg()[0] as number)
}
const ms = (x: number): string => `${Math.round(x)}`.padStart(7)
const width = Math.max(...cases.map((c) => c.name.length))
process.stdout.write(`${'ms from spawn to GET /healthz 200'.padEnd(width)}  median    min    max  banner (median)\n`)
for (const c of cases) {
  const rs = results.get(c) ?? []
  const h = rs.map((x) => x.healthz)
  process.stdout.write(`${c.name.padEnd(width)}${ms(median(h))}${ms(Math.min(...h))}${ms(Math.max(...h))}${ms(median(rs.map((x) => x.banner)))}\n`)
}
process.stdout.write(`${runs} runs each after a warm-up; ${availableParallelism()} cores, 1-minute load average ${Math.min(...load).toFixed(1)} to ${Math.max(...load).toFixed(1)}; Node ${process.version}\n`)
