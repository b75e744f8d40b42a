import { spawn, type ChildProcess } from 'node:child_process'
import { fromRoot } from '../paths.js'

// The bench's servers (the upstream, the bare proxies, modelgate) run as child processes of this
// Node. Each prints its port once it listens: the upstream and the bare proxies as
// `listening <port>`, modelgate as `… listening on http://127.0.0.1:<port>`.

export interface Server { port: number, pid: number, child: ChildProcess }

const children: ChildProcess[] = []
// a bench that throws or is interrupted leaves no server behind
process.on('exit', () => { for (const c of children) c.kill('SIGKILL') })

/** Counts `child` among the servers to stop (one started some other way, as Portkey is). */
export function own (child: ChildProcess): void { children.push(child) }

/** Runs `node <args>` (with `env` added) and resolves once it prints its port. */
export async function startServer (args: string[], env: Record<string, string> = {}): Promise<Server> {
  const child = spawn(process.execPath, args, { cwd: fromRoot(), env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'inherit'] })
  own(child)
  return await new Promise((resolve, reject) => {
    let out = ''
    child.stdout!.on('data', (d: Buffer) => {
      out += String(d)
      const m = /listening (\d+)|127\.0\.0\.1:(\d+)/.exec(out)
      if (m !== null) resolve({ port: Number(m[1] ?? m[2]), pid: child.pid!, child })
    })
    child.on('exit', (code) => reject(new Error(`node ${args.join(' ')} exited with ${String(code)}`)))
  })
}

async function stopChild (c: ChildProcess): Promise<void> {
  if (c.exitCode !== null || c.signalCode !== null) return
  const exited = new Promise((resolve) => c.once('exit', resolve))
  c.kill('SIGTERM')
  await exited
}

/** Stops `servers` gracefully (SIGTERM) and waits until they have exited. */
export async function stopSome (servers: Server[]): Promise<void> {
  await Promise.all(servers.map(async (s) => { await stopChild(s.child) }))
}

/** Stops every server started here, gracefully (SIGTERM), and waits until they have exited. */
export async function stopServers (): Promise<void> {
  await Promise.all(children.map(stopChild))
}
