import { readFileSync } from 'node:fs'
import { fail, UsageError, type CommandInput } from './command.js'
import { readConfig } from './config-file.js'
import { baseUrlOf, pidFilePath, type PidFile } from './pid-file.js'

export const help = `modelgate reload [--config FILE]

Makes the running gateway read its config file again (as SIGHUP does). The file is checked first:
its problems are listed and nothing changes (exit status 2). The gateway is found by the
modelgate.pid file beside its store; with an admin token it is asked through the admin API, which
answers what changed, else it is sent SIGHUP.`

/**
 * Checks the file first (its problems, exit status 2), then finds the running gateway by the pid
 * file beside the store. With an admin token it asks the admin API, which answers what changed
 * (or the problems it found); without one it sends SIGHUP, and the result is in the gateway's log.
 */
export async function run ({ args }: CommandInput): Promise<void> {
  const { config } = await readConfig(args)
  const path = pidFilePath(config)
  if (path === null) throw new UsageError('the store is :memory:, so no pid file says where the gateway runs: use POST /admin/v1/reload or send it SIGHUP', 'reload')
  let found: PidFile
  try {
    found = JSON.parse(readFileSync(path, 'utf8')) as PidFile
  } catch {
    fail(`modelgate: no running gateway found (no ${path}); is it serving with this config?`)
  }
  if (config.admin.token === '') {
    try {
      process.kill(found.pid, 'SIGHUP')
    } catch (err) {
      fail(`modelgate: cannot signal the gateway (pid ${found.pid}): ${(err as Error).message}`)
    }
    // through the admin API the gateway writes the audit line itself
    const { withStore } = await import('./with-store.js')
    await withStore(config, async (store) => { await store.audit.record({ action: 'reload', target: 'config', detail: { signal: 'SIGHUP', pid: found.pid } }, Date.now(), 'cli') })
    process.stdout.write(`sent SIGHUP to the gateway (pid ${found.pid}); its log says what changed\n`)
    return
  }
  const base = baseUrlOf(found)
  let res: Response
  try {
    res = await fetch(`${base}/admin/v1/reload`, { method: 'POST', headers: { authorization: `Bearer ${config.admin.token}` } })
  } catch (err) {
    fail(`modelgate: the gateway at ${base} did not answer: ${(err as Error).message}`)
  }
  const body = await res.json().catch(() => ({})) as { changes?: string[], problems?: string[], workers?: number, error?: { message?: string } }
  if (res.status === 200) {
    const changes = body.changes ?? []
    process.stdout.write(`reloaded${body.workers === undefined ? '' : ` (${body.workers} workers)`}: ${changes.length === 0 ? 'nothing changed' : ''}\n${changes.map((c) => `  ${c}\n`).join('')}`)
    return
  }
  if (res.status === 400 && body.problems !== undefined) fail(`the gateway kept its configuration; problems:\n${body.problems.map((p) => `  - ${p}`).join('\n')}`, 2)
  fail(`modelgate: the gateway answered ${res.status}: ${body.error?.message ?? ''}`)
}
