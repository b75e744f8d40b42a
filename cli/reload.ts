import type { Config } from '../config/schema.js'
import type { Answer } from './ask-gateway.js'
import { CommandError, type CommandInput } from './command.js'
import { readConfig } from './config-file.js'
import { adminBaseOf, pidFilePath, runningGateways, type PidEntry } from './pid-file.js'

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
export const flags = { '': ['config'] } as const

export async function run ({ args }: CommandInput): Promise<void> {
  const { config } = await readConfig(args)
  const path = pidFilePath(config)
  if (path === null) throw new CommandError('the store is :memory:, so no pid file says where the gateway runs: use POST /admin/v1/reload or send it SIGHUP')
  const gateways = runningGateways(config)
  if (gateways.length === 0) throw new CommandError(`no running gateway found (none in ${path}); is it serving with this config?`)
  // instances on PostgreSQL from one folder: each reads its file again
  let status = 0
  for (const found of gateways) {
    const who = gateways.length > 1 ? `pid ${found.pid}: ` : ''
    status = Math.max(status, config.admin.token === '' ? await signal(config, found, who) : await ask(config, found, who))
  }
  if (status !== 0) process.exit(status)
}

/** Sends SIGHUP (no admin token): the result is in the gateway's log. */
async function signal (config: Config, found: PidEntry, who: string): Promise<number> {
  try {
    process.kill(found.pid, 'SIGHUP')
  } catch (err) {
    process.stderr.write(`modelgate: ${who}cannot signal the gateway (pid ${found.pid}): ${(err as Error).message}\n`)
    return 1
  }
  // through the admin API the gateway writes the audit line itself
  const { withStore } = await import('./with-store.js')
  await withStore(config, async (store) => { await store.audit.record({ action: 'reload', target: 'config', detail: { signal: 'SIGHUP', pid: found.pid } }, Date.now(), 'cli') })
  process.stdout.write(`sent SIGHUP to the gateway (pid ${found.pid}); its log says what changed\n`)
  return 0
}

/** Asks the admin API, which answers what changed, or every problem of the file. */
async function ask (config: Config, found: PidEntry, who: string): Promise<number> {
  const { askGateway } = await import('./ask-gateway.js')
  if (found.port === null) {
    process.stderr.write(`modelgate: ${who}the gateway (pid ${found.pid}) is still starting; it will read the file as it is now\n`)
    return 0
  }
  const base = adminBaseOf(config, { ...found, port: found.port })
  let res: Answer
  try {
    res = await askGateway(base, 'POST', '/admin/v1/reload', config.admin.token)
  } catch (err) {
    process.stderr.write(`modelgate: ${who}the gateway at ${base} did not answer: ${(err as Error).message}\n`)
    return 1
  }
  const body = res.body as { changes?: string[], problems?: string[], workers?: number, error?: { message?: string } }
  if (res.status === 200) {
    const changes = body.changes ?? []
    process.stdout.write(`${who}reloaded${body.workers === undefined ? '' : ` (${body.workers} workers)`}: ${changes.length === 0 ? 'nothing changed' : ''}\n${changes.map((c) => `  ${c}\n`).join('')}`)
    return 0
  }
  if (res.status === 400 && body.problems !== undefined) {
    process.stderr.write(`${who}the gateway kept its configuration; problems:\n${body.problems.map((p) => `  - ${p}`).join('\n')}\n`)
    return 2
  }
  process.stderr.write(`modelgate: ${who}the gateway answered ${res.status}: ${body.error?.message ?? ''}\n`)
  return 1
}
