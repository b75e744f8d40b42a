import type { ChildProcessByStdio } from 'node:child_process'
import type { Readable } from 'node:stream'

/**
 * The port a `modelgate serve` child process says it listens on (`… listening on
 * http://HOST:PORT`); rejects with what it wrote to stderr if it exits first. `what` names the
 * command in that error.
 */
export async function servedPort (child: ChildProcessByStdio<null, Readable, Readable>, what: string): Promise<number> {
  let err = ''
  child.stderr.on('data', (d: Buffer) => { err += String(d) })
  return await new Promise<number>((resolve, reject) => {
    let out = ''
    child.stdout.on('data', (d: Buffer) => {
      out += String(d)
      const m = /listening on http:\/\/[^/]+:(\d+)/.exec(out)
      if (m !== null) resolve(Number(m[1]))
    })
    child.once('exit', (code) => { reject(new Error(`${what} exited with ${String(code)}: ${err}`)) })
  })
}
