#!/usr/bin/env node
import cluster from 'node:cluster'
import { availableParallelism } from 'node:os'
import { parseArgs } from 'node:util'
import { readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { dirname, join, resolve } from 'node:path'
import { servePrimary } from './plugins/cluster.js'
import { GatewayServer } from './server.js'
import { ConfigError, configPath, loadConfig } from './config/load.js'
import type { Config } from './config/schema.js'
import { openStore } from './plugins/store/index.js'
import type { Store } from './plugins/store/types.js'
import { nanoToUsd, parseUsd } from './plugins/money.js'
import { usageRecord } from './routes/admin/usage-record.js'
import { describeOptions } from './plugins/plugin-options.js'
import { builtinPlugins, definitionOf } from './plugins/registry.js'

const USAGE = `modelgate: a self-hosted model gateway

  modelgate serve [--config FILE] [--port N] [--host H] [--workers N] [--pretty]
  modelgate keys create --org O --project P [--models GLOB,GLOB] [--name NAME] [--config FILE]
  modelgate keys list [--org O] [--project P] [--config FILE]
  modelgate keys revoke ID [--config FILE]
  modelgate usage [--org O] [--project P] [--since ISO] [--limit N] [--json] [--config FILE]
  modelgate credits add --org O --amount-usd N [--config FILE]
  modelgate config check FILE
  modelgate plugins [--config FILE] [--json]
  modelgate reload [--config FILE]

The config is --config FILE, else $MODELGATE_CONFIG, else config/gateway.yaml.`

const OPTIONS = {
  config: { type: 'string' },
  port: { type: 'string' },
  host: { type: 'string' },
  workers: { type: 'string' },
  pretty: { type: 'boolean' },
  org: { type: 'string' },
  project: { type: 'string' },
  models: { type: 'string' },
  name: { type: 'string' },
  since: { type: 'string' },
  limit: { type: 'string' },
  json: { type: 'boolean' },
  'amount-usd': { type: 'string' },
  help: { type: 'boolean', short: 'h' }
} as const

type Args = ReturnType<typeof parseArgs<{ options: typeof OPTIONS, allowPositionals: true }>>['values']

class UsageError extends Error {}

function fail (message: string, code = 1): never {
  process.stderr.write(message.endsWith('\n') ? message : message + '\n')
  process.exit(code)
}

async function readConfig (args: Args): Promise<Config> {
  return await loadConfig(configPath(args))
}

async function withStore<T> (config: Config, fn: (store: Store) => Promise<T>): Promise<T> {
  const store = openStore(config)
  try {
    await store.syncTenants(config, Date.now())
    return await fn(store)
  } finally {
    await store.close()
  }
}

function portOverride (args: Args): number | undefined {
  const port = args.port ?? process.env.PORT
  if (port === undefined) return undefined
  if (!/^\d+$/.test(port) || Number(port) > 65535) throw new UsageError(`--port: not a port number: ${port}`)
  return Number(port)
}

async function serve (args: Args): Promise<void> {
  const file = configPath(args)
  const fromFile = await loadConfig(file)
  const port = portOverride(args)
  // what serves: the file's config with the command line's address (the file's is kept for reloads)
  const config: Config = { ...fromFile, server: { ...fromFile.server, port: port ?? fromFile.server.port, host: args.host ?? fromFile.server.host } }
  const workers = args.workers === undefined ? defaultWorkers(config) : Number(args.workers)
  if (!Number.isInteger(workers) || workers < 1) throw new UsageError(`--workers: a whole number >= 1, or omit it (cores here: ${availableParallelism()})`)

  // node:cluster: the workers share the port; every policy's state is in the shared SQLite file.
  if (workers > 1 && cluster.isPrimary) {
    servePrimary()
    for (let i = 0; i < workers; i++) cluster.fork()
    // announced once every worker listens, so that the first connections reach all of them
    let listening = 0
    cluster.on('listening', (_worker, address) => {
      if (++listening !== workers) return
      banner(config, workers, address.port)
      writePidFile(config, address.port)
    })
    let stopping = false
    cluster.on('exit', (worker, code) => {
      if (!stopping) process.stderr.write(`modelgate: worker ${worker.process.pid} exited with ${code}\n`)
      if (Object.keys(cluster.workers ?? {}).length === 0) { removePidFile(config); process.exit(stopping ? 0 : 1) }
    })
    const stop = (): void => {
      stopping = true
      for (const w of Object.values(cluster.workers ?? {})) w?.kill('SIGTERM')
    }
    process.on('SIGTERM', stop)
    process.on('SIGINT', stop)
    // every worker reads the file again on its own
    process.on('SIGHUP', () => { for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGHUP') })
    return
  }

  const logger = args.pretty === true
    ? { level: process.env.LOG_LEVEL ?? 'info', transport: { target: 'pino-pretty' } }
    : { level: process.env.LOG_LEVEL ?? 'info' }
  const server = await GatewayServer.start({ file, config: fromFile, host: args.host, port, logger, worker: cluster.isWorker })
  const address = await server.listen()
  if (cluster.isPrimary) {
    banner(config, 1, address.port)
    writePidFile(config, address.port)
  }
  process.on('SIGHUP', () => { void server.reload() })
  installShutdown(server, config)
}

// One worker per core, except for an in-memory store, which a worker cannot share.
function defaultWorkers (config: Config): number {
  return config.store.sqlite === ':memory:' ? 1 : availableParallelism()
}

function banner (config: Config, workers: number, port: number): void {
  const url = `http://${config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host}:${port}`
  const demo = config.tenants[0]?.projects[0]?.keys[0]
  const lines = [
    `modelgate listening on ${url} (${workers} worker${workers > 1 ? 's' : ''})`,
    `  API:      ${url}/v1   console: ${url}/console`
  ]
  if (demo !== undefined) lines.push(`  demo key: ${demo.key}`, `  try:      curl ${url}/v1/chat/completions -H 'Authorization: Bearer ${demo.key}' -H 'Content-Type: application/json' -d '{"model":"demo/echo-1","messages":[{"role":"user","content":"Hello"}]}'`)
  process.stdout.write(lines.join('\n') + '\n')
}

// SIGTERM/SIGINT: stop accepting, let in-flight requests finish (bounded), close the store.
function installShutdown (server: GatewayServer, config: Config): void {
  let closing = false
  const shutdown = (signal: string): void => {
    if (closing) return
    closing = true
    server.app.log.info({ signal }, 'shutting down')
    const timer = setTimeout(() => {
      server.app.log.error('in-flight requests did not finish in time; exiting')
      process.exit(1)
    }, config.server.shutdown_timeout_s * 1000)
    timer.unref()
    server.close().then(() => {
      if (cluster.isPrimary) removePidFile(config)
      process.exit(0)
    }, (err: unknown) => {
      server.app.log.error({ err }, 'error while closing')
      process.exit(1)
    })
  }
  process.on('SIGTERM', () => shutdown('SIGTERM'))
  process.on('SIGINT', () => shutdown('SIGINT'))
}

// The running gateway's pid and address, beside its store, so that `modelgate reload` finds it.
function pidFilePath (config: Config): string | null {
  return config.store.sqlite === ':memory:' ? null : join(dirname(resolve(config.store.sqlite)), 'modelgate.pid')
}

function writePidFile (config: Config, port: number): void {
  const path = pidFilePath(config)
  if (path === null) return
  try {
    writeFileSync(path, JSON.stringify({ pid: process.pid, host: config.server.host, port }) + '\n')
  } catch (err) {
    process.stderr.write(`modelgate: cannot write ${path}: ${(err as Error).message} (modelgate reload will not find this gateway)\n`)
  }
}

function removePidFile (config: Config): void {
  const path = pidFilePath(config)
  if (path === null) return
  try {
    const found = JSON.parse(readFileSync(path, 'utf8')) as { pid?: number }
    if (found.pid === process.pid) unlinkSync(path)
  } catch {}
}

/**
 * `modelgate reload`: checks the file first (its problems, exit status 2), then finds the running
 * gateway by the pid file beside the store. With an admin token it asks the admin API, which
 * answers what changed (or the problems it found); without one it sends SIGHUP, and the result
 * is in the gateway's log.
 */
async function reload (args: Args): Promise<void> {
  const config = await readConfig(args)
  const path = pidFilePath(config)
  if (path === null) throw new UsageError('the store is :memory:, so no pid file says where the gateway runs: use POST /admin/v1/reload or send it SIGHUP')
  let found: { pid: number, host: string, port: number }
  try {
    found = JSON.parse(readFileSync(path, 'utf8')) as typeof found
  } catch {
    fail(`modelgate: no running gateway found (no ${path}); is it serving with this config?`)
  }
  if (config.admin.token === '') {
    try {
      process.kill(found.pid, 'SIGHUP')
    } catch (err) {
      fail(`modelgate: cannot signal the gateway (pid ${found.pid}): ${(err as Error).message}`)
    }
    process.stdout.write(`sent SIGHUP to the gateway (pid ${found.pid}); its log says what changed\n`)
    return
  }
  const host = found.host === '0.0.0.0' || found.host === '::' ? '127.0.0.1' : found.host.includes(':') ? `[${found.host}]` : found.host
  let res: Response
  try {
    res = await fetch(`http://${host}:${found.port}/admin/v1/reload`, { method: 'POST', headers: { authorization: `Bearer ${config.admin.token}` } })
  } catch (err) {
    fail(`modelgate: the gateway at ${host}:${found.port} did not answer: ${(err as Error).message}`)
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

async function keys (sub: string | undefined, rest: string[], args: Args): Promise<void> {
  const config = await readConfig(args)
  await withStore(config, async (store) => {
    if (sub === 'create') {
      if (args.org === undefined || args.project === undefined) throw new UsageError('keys create needs --org and --project')
      const org = await store.orgs.get(args.org)
      if (org === undefined) throw new UsageError(`no organization ${args.org} (tenants come from the config)`)
      if (!(await store.orgs.projects(args.org)).some((p) => p.id === args.project)) throw new UsageError(`no project ${args.project} in ${args.org}`)
      const models = args.models === undefined ? ['*'] : args.models.split(',').map((s) => s.trim()).filter((s) => s !== '')
      const created = await store.keys.create({ org: args.org, project: args.project, models, name: args.name ?? '', source: 'cli' }, Date.now())
      process.stdout.write(`${created.key}\n`)
      process.stderr.write(`created ${created.id} for ${created.org}/${created.project} (models: ${created.models.join(',')}); the key is shown only once\n`)
    } else if (sub === 'list') {
      const list = await store.keys.list(args.org, args.project)
      if (args.json === true) { process.stdout.write(JSON.stringify(list, null, 2) + '\n'); return }
      for (const k of list) {
        process.stdout.write(`${k.id}\t${k.org}/${k.project}\t${k.hint}\t${k.name || '-'}\t${k.models.join(',')}\t${k.revoked ? 'revoked' : 'active'}\t${new Date(k.created_at).toISOString()}\n`)
      }
    } else if (sub === 'revoke') {
      const id = rest[0]
      if (id === undefined) throw new UsageError('keys revoke needs a key id (see keys list)')
      if (await store.keys.get(id) === undefined) throw new UsageError(`no key ${id}`)
      await store.keys.revoke(id, Date.now())
      process.stdout.write(`${id} revoked\n`)
    } else {
      throw new UsageError(`unknown keys command ${sub ?? ''}`)
    }
  })
}

async function credits (sub: string | undefined, args: Args): Promise<void> {
  if (sub !== 'add') throw new UsageError('credits add --org O --amount-usd N')
  if (args.org === undefined || args['amount-usd'] === undefined) throw new UsageError('credits add needs --org and --amount-usd')
  const amount = parseUsd(args['amount-usd'])
  if (amount === undefined || amount <= 0) throw new UsageError(`--amount-usd: a positive decimal amount, at most 9 decimals: ${args['amount-usd']}`)
  await withStore(await readConfig(args), async (store) => {
    if (!await store.orgs.credit(args.org as string, amount)) throw new UsageError(`no organization ${args.org}`)
    const org = await store.orgs.get(args.org as string)
    process.stdout.write(`${args.org}: balance ${nanoToUsd(org?.balance_nano ?? 0)} USD\n`)
  })
}

async function usage (args: Args): Promise<void> {
  const since = args.since === undefined ? undefined : Date.parse(args.since)
  if (since !== undefined && Number.isNaN(since)) throw new UsageError(`--since: not an ISO date: ${args.since}`)
  const limit = args.limit === undefined ? 50 : Number(args.limit)
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new UsageError('--limit: an integer from 1 to 10000')
  await withStore(await readConfig(args), async (store) => {
    const filter = { org: args.org, project: args.project, since }
    const records = (await store.usage.page(filter, limit)).map(usageRecord)
    const t = await store.usage.totals(filter)
    const totals = { calls: t.calls, prompt_tokens: t.prompt_tokens, cached_input_tokens: t.cached_input_tokens, completion_tokens: t.completion_tokens, total_tokens: t.total_tokens, cost_usd: nanoToUsd(t.cost_nano) }
    if (args.json === true) { process.stdout.write(JSON.stringify({ totals, data: records }, null, 2) + '\n'); return }
    for (const r of records) {
      process.stdout.write(`${String(r.created_at)}  ${String(r.org)}/${String(r.project)}  ${String(r.model)}  ${String(r.status)}  in ${String(r.prompt_tokens)} (cached ${String(r.cached_input_tokens)})  out ${String(r.completion_tokens)}  $${String(r.cost_usd)}\n`)
    }
    process.stdout.write(`total: ${totals.calls} calls, ${totals.prompt_tokens} input tokens (${totals.cached_input_tokens} cached), ${totals.completion_tokens} output tokens, $${totals.cost_usd}\n`)
  })
}

async function plugins (args: Args): Promise<void> {
  const describe = (schema: object | undefined, values?: Record<string, unknown>): string[] =>
    describeOptions(schema).map((o) => `      ${o.name}: ${o.type}${o.required ? ' (required)' : ''}${o.default !== undefined ? `, default ${JSON.stringify(o.default)}` : ''}${values !== undefined && o.name in values ? ` = ${JSON.stringify(values[o.name])}` : ''}${o.description !== undefined ? `  ${o.description}` : ''}`)
  const file = configPath(args)
  let config: Config | undefined
  try {
    config = await loadConfig(file)
  } catch (err) {
    if (args.config !== undefined || process.env.MODELGATE_CONFIG !== undefined) throw err
  }
  if (args.json === true) {
    const entries = config?.plugins.map((e) => ({ ...e, builtin: e.module === undefined, description: definitionOf(e)?.description ?? null, schema: definitionOf(e)?.options ?? null })) ?? null
    process.stdout.write(JSON.stringify({ builtin: builtinPlugins().map((p) => ({ name: p.name, description: p.description ?? null, scope: p.scope ?? 'api', options: describeOptions(p.options) })), config: entries }, null, 2) + '\n')
    return
  }
  const lines = ['built-in plugins:']
  for (const p of builtinPlugins()) {
    lines.push(`  ${p.name}${p.description === undefined ? '' : ` - ${p.description}`}`)
    lines.push(...describe(p.options))
  }
  if (config === undefined) {
    lines.push('', `(no config at ${file}: only the built-ins are listed)`)
  } else {
    lines.push('', `the chain of ${file}, in order:`)
    config.plugins.forEach((e, i) => {
      const def = definitionOf(e)
      lines.push(`  ${i + 1}. ${e.name}${e.module === undefined ? '' : ` (from ${e.module})`}${e.enabled ? '' : ' [disabled]'}`)
      lines.push(...describe(def?.options, e.options))
    })
  }
  process.stdout.write(lines.join('\n') + '\n')
}

async function main (argv: string[]): Promise<void> {
  const { values: args, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true })
  const [command, sub, ...rest] = positionals
  if (args.help === true || command === 'help') { process.stdout.write(USAGE + '\n'); return }
  switch (command) {
    case undefined:
    case 'serve': return await serve(args)
    case 'keys': return await keys(sub, rest, args)
    case 'credits': return await credits(sub, args)
    case 'usage': return await usage(args)
    case 'plugins': return await plugins(args)
    case 'reload': return await reload(args)
    case 'config': {
      if (sub !== 'check') throw new UsageError('config check FILE')
      const file = rest[0] ?? configPath(args)
      await loadConfig(file)
      process.stdout.write(`${file}: ok\n`)
      return
    }
    default: throw new UsageError(`unknown command ${command}`)
  }
}

main(process.argv.slice(2)).catch((err: unknown) => {
  if (err instanceof ConfigError) fail(err.message, 2)
  if (err instanceof UsageError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') === true) fail(`modelgate: ${(err as Error).message}\n\n${USAGE}`, 2)
  fail(`modelgate: ${(err as Error).stack ?? String(err)}`)
})
