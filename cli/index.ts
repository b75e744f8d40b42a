#!/usr/bin/env node
import cluster from 'node:cluster'
import { randomBytes } from 'node:crypto'
import { chmodSync, existsSync, mkdirSync, readFileSync, unlinkSync, writeFileSync } from 'node:fs'
import { availableParallelism } from 'node:os'
import { dirname, join, relative, resolve } from 'node:path'
import { parseArgs } from 'node:util'
import YAML from 'yaml'
import { ConfigError, configPath, loadConfig } from '../config/load.js'
import { fromRoot } from '../paths.js'
import type { Config } from '../config/schema.js'
import { openStore } from '../plugins/store/index.js'
import type { Store } from '../plugins/store/types.js'
import { nanoToUsd, parseUsd } from '../plugins/gateway/money.js'
import { usageRecord } from '../routes/admin/usage-record.js'
import { describeOptions } from '../plugins/gateway/plugin-options.js'
import { builtinPlugins, definitionOf } from '../plugins/gateway/registry.js'

const VERSION = (JSON.parse(readFileSync(fromRoot('package.json'), 'utf8')) as { version: string }).version

const CONFIG_RULE = 'The config is --config FILE, else $MODELGATE_CONFIG, else config/gateway.yaml, else gateway.yaml (in the current folder).'

// Each command's usage, shown by `modelgate <command> --help` and with its usage errors.
const HELP: Record<string, string> = {
  serve: `modelgate serve [--config FILE] [--port N] [--host H] [--workers N] [--pretty]

Serves the config's gateway. PORT does what --port does. --workers defaults to one per core
(one for a :memory: store); the workers share the port and the store. --pretty: readable logs.`,
  init: `modelgate init [DIR]

Writes a starter gateway.yaml (the demo catalog, answered in-process, so it works with no
provider key) and data/ into DIR (default: the current folder), never overwriting. Creates an API
key for the demo tenant and an admin token, and prints both once. Then, in DIR: modelgate serve`,
  keys: `modelgate keys create --org O --project P [--models GLOB,GLOB] [--passthrough PROVIDER,PROVIDER] [--name NAME] [--config FILE]
modelgate keys list [--org O] [--project P] [--json] [--config FILE]
modelgate keys revoke ID [--config FILE]

A created key is printed once; only its SHA-256 is stored. --passthrough: the providers whose
/passthrough/{provider}/* routes the key may use (none by default).`,
  usage: `modelgate usage [--org O] [--project P] [--since ISO] [--limit N] [--json] [--config FILE]

Usage records, newest first, and their totals.`,
  credits: `modelgate credits add --org O --amount-usd N [--config FILE]

Tops up an organization's prepaid balance (exact to the nano-dollar).`,
  config: `modelgate config check [FILE]

Validates a config (plugin modules and their options included) and lists every problem with its
path. Exit status 2 when it is not valid.`,
  plugins: `modelgate plugins [--config FILE] [--json]

Lists the built-in plugins and the config's chain, with every option and its default.`,
  store: `modelgate store migrate --from FILE.db --to postgres://…

Copies a SQLite store (stop the gateway first) into an empty PostgreSQL database: organizations,
balances, projects, keys, open holds, quota usage, usage records and stored content, in one
transaction; then compares the totals of both and exits with status 1 if they differ.`,
  reload: `modelgate reload [--config FILE]

Makes the running gateway read its config file again (as SIGHUP does). The file is checked first:
its problems are listed and nothing changes (exit status 2). The gateway is found by the
modelgate.pid file beside its store; with an admin token it is asked through the admin API, which
answers what changed, else it is sent SIGHUP.`
}

const USAGE = `modelgate ${VERSION}: a self-hosted model gateway

${Object.values(HELP).map((h) => h.split('\n\n')[0]?.split('\n').map((l) => `  ${l}`).join('\n')).join('\n')}
  modelgate --version

${CONFIG_RULE} \`modelgate <command> --help\` tells more.`

const OPTIONS = {
  config: { type: 'string' },
  port: { type: 'string' },
  host: { type: 'string' },
  workers: { type: 'string' },
  pretty: { type: 'boolean' },
  org: { type: 'string' },
  project: { type: 'string' },
  models: { type: 'string' },
  passthrough: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  name: { type: 'string' },
  since: { type: 'string' },
  limit: { type: 'string' },
  json: { type: 'boolean' },
  'amount-usd': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' }
} as const

type Args = ReturnType<typeof parseArgs<{ options: typeof OPTIONS, allowPositionals: true }>>['values']

class UsageError extends Error {
  constructor (message: string, readonly command?: string) { super(message) }
}

function fail (message: string, code = 1): never {
  process.stderr.write(message.endsWith('\n') ? message : message + '\n')
  process.exit(code)
}

async function readConfig (args: Args): Promise<Config> {
  return await loadConfig(configPath(args))
}

async function storeCommand (sub: string | undefined, args: Args): Promise<void> {
  if (sub !== 'migrate') throw new UsageError('store migrate --from FILE.db --to postgres://…', 'store')
  if (args.from === undefined || args.to === undefined) throw new UsageError('store migrate needs --from and --to', 'store')
  if (!/^postgres(ql)?:\/\//.test(args.to)) throw new UsageError('--to: a postgres:// URL', 'store')
  const { migrateSqliteToPostgres } = await import('../plugins/store/postgres/from-sqlite.js')
  const r = await migrateSqliteToPostgres(args.from, args.to)
  process.stdout.write(`${'total'.padEnd(18)}${'sqlite'.padStart(22)}${'postgres'.padStart(22)}\n`)
  for (const [k, v] of Object.entries(r.source)) {
    const t = r.target[k as keyof typeof r.target]
    process.stdout.write(`${k.padEnd(18)}${String(v).padStart(22)}${String(t).padStart(22)}${v === t ? '' : '   DIFFERS'}\n`)
  }
  if (!r.same) fail('modelgate: the totals differ: the copy was made, check the rows above', 1)
  process.stdout.write('modelgate: copied; every total matches\n')
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
  if (!/^\d+$/.test(port) || Number(port) > 65535) throw new UsageError(`--port: not a port number: ${port}`, 'serve')
  return Number(port)
}

async function serve (args: Args): Promise<void> {
  const file = configPath(args)
  const fromFile = await loadConfig(file)
  const port = portOverride(args)
  // what serves: the file's config with the command line's address (the file's is kept for reloads)
  const config: Config = { ...fromFile, server: { ...fromFile.server, port: port ?? fromFile.server.port, host: args.host ?? fromFile.server.host } }
  const workers = args.workers === undefined ? defaultWorkers(config) : Number(args.workers)
  if (!Number.isInteger(workers) || workers < 1) throw new UsageError(`--workers: a whole number >= 1, or omit it (cores here: ${availableParallelism()})`, 'serve')

  // node:cluster: the workers share the port; every policy's state is in the shared SQLite file.
  if (workers > 1 && cluster.isPrimary) {
    ;(await import('../plugins/ops/cluster.js')).servePrimary()
    for (let i = 0; i < workers; i++) cluster.fork()
    // announced once every worker listens, so that the first connections reach all of them
    let listening = 0
    cluster.on('listening', (_worker, address) => {
      if (++listening !== workers) return
      banner(config, workers, address.port)
      writePidFile(config, address.port)
    })
    let stopping = false
    // A worker that dies is replaced: at once when it had served a while, after a doubling pause
    // (up to 10 s) when workers keep dying young, so a broken config or store does not spin.
    const born = new Map<number, number>()
    cluster.on('fork', (worker) => { born.set(worker.id, Date.now()) })
    let pauseMs = 0
    cluster.on('exit', (worker, code, signal) => {
      const lived = Date.now() - (born.get(worker.id) ?? 0)
      born.delete(worker.id)
      if (stopping) {
        if (Object.keys(cluster.workers ?? {}).length === 0) { removePidFile(config); process.exit(0) }
        return
      }
      pauseMs = lived > 10_000 ? 0 : Math.min(10_000, Math.max(100, pauseMs * 2))
      process.stderr.write(`modelgate: worker ${worker.process.pid} exited with ${signal ?? code}; starting another${pauseMs > 0 ? ` in ${pauseMs} ms` : ''}\n`)
      setTimeout(() => { if (!stopping) cluster.fork() }, pauseMs)
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
  // loaded here, not at the top: a cluster's primary, and every other command, never need the app
  const { GatewayServer } = await import('../server.js')
  const server = await GatewayServer.start({ file, config: fromFile, host: args.host, port, logger, worker: cluster.isWorker })
  const address = await server.listen()
  // the signals are handled before the banner tells anyone that the gateway is there
  process.on('SIGHUP', () => { void server.reload() })
  installShutdown(server, config)
  if (cluster.isPrimary) {
    banner(config, 1, address.port)
    writePidFile(config, address.port)
  }
}

// One worker per core, except for an in-memory store, which a worker cannot share.
function defaultWorkers (config: Config): number {
  return config.store.sqlite === ':memory:' ? 1 : availableParallelism()
}

// The key config/gateway.yaml ships for local trials. It is printed by the banner when it is the
// configured key; no other key is ever printed (they are secrets, and stdout often ends up in logs).
const SHIPPED_DEMO_KEY = 'mg-demo-local-only-0123456789abcdef'

function banner (config: Config, workers: number, port: number): void {
  const url = `http://${config.server.host.includes(':') ? `[${config.server.host}]` : config.server.host}:${port}`
  const lines = [
    `modelgate listening on ${url} (${workers} worker${workers > 1 ? 's' : ''})`,
    `  API:      ${url}/v1   console: ${url}/console`
  ]
  if (config.tenants.some((t) => t.projects.some((p) => p.keys.some((k) => k.key === SHIPPED_DEMO_KEY)))) {
    lines.push(`  demo key: ${SHIPPED_DEMO_KEY} (for local trials only)`, `  try:      curl ${url}/v1/chat/completions -H 'Authorization: Bearer ${SHIPPED_DEMO_KEY}' -H 'Content-Type: application/json' -d '{"model":"demo/echo-1","messages":[{"role":"user","content":"Hello"}]}'`)
  } else {
    lines.push('  API keys: the tenants\' keys in the config, or `modelgate keys create --org O --project P`')
  }
  process.stdout.write(lines.join('\n') + '\n')
}

// SIGTERM/SIGINT: stop accepting, let in-flight requests finish (bounded), close the store.
function installShutdown (server: import('../server.js').GatewayServer, config: Config): void {
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
  if (path === null) throw new UsageError('the store is :memory:, so no pid file says where the gateway runs: use POST /admin/v1/reload or send it SIGHUP', 'reload')
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
      if (args.org === undefined || args.project === undefined) throw new UsageError('keys create needs --org and --project', 'keys')
      const org = await store.orgs.get(args.org)
      if (org === undefined) throw new UsageError(`no organization ${args.org} (tenants come from the config)`, 'keys')
      if (!(await store.orgs.projects(args.org)).some((p) => p.id === args.project)) throw new UsageError(`no project ${args.project} in ${args.org}`, 'keys')
      const models = args.models === undefined ? ['*'] : args.models.split(',').map((s) => s.trim()).filter((s) => s !== '')
      const passthrough = args.passthrough === undefined ? [] : args.passthrough.split(',').map((s) => s.trim()).filter((s) => s !== '')
      const unknown = passthrough.filter((id) => !config.providers.some((p) => p.id === id && p.passthrough))
      if (unknown.length > 0) throw new UsageError(`--passthrough: ${unknown.join(', ')} is not a provider with passthrough: true in the config`, 'keys')
      const created = await store.keys.create({ org: args.org, project: args.project, models, passthrough, name: args.name ?? '', source: 'cli' }, Date.now())
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
      if (id === undefined) throw new UsageError('keys revoke needs a key id (see keys list)', 'keys')
      if (await store.keys.get(id) === undefined) throw new UsageError(`no key ${id}`, 'keys')
      await store.keys.revoke(id, Date.now())
      process.stdout.write(`${id} revoked\n`)
    } else {
      throw new UsageError(`unknown keys command ${sub ?? ''}`, 'keys')
    }
  })
}

async function credits (sub: string | undefined, args: Args): Promise<void> {
  if (sub !== 'add') throw new UsageError('credits add --org O --amount-usd N', 'credits')
  if (args.org === undefined || args['amount-usd'] === undefined) throw new UsageError('credits add needs --org and --amount-usd', 'credits')
  const amount = parseUsd(args['amount-usd'])
  if (amount === undefined || amount <= 0) throw new UsageError(`--amount-usd: a positive decimal amount, at most 9 decimals: ${args['amount-usd']}`, 'credits')
  await withStore(await readConfig(args), async (store) => {
    if (!await store.orgs.credit(args.org as string, amount)) throw new UsageError(`no organization ${args.org}`, 'credits')
    const org = await store.orgs.get(args.org as string)
    process.stdout.write(`${args.org}: balance ${nanoToUsd(org?.balance_nano ?? 0)} USD\n`)
  })
}

async function usage (args: Args): Promise<void> {
  const since = args.since === undefined ? undefined : Date.parse(args.since)
  if (since !== undefined && Number.isNaN(since)) throw new UsageError(`--since: not an ISO date: ${args.since}`, 'usage')
  const limit = args.limit === undefined ? 50 : Number(args.limit)
  if (!Number.isInteger(limit) || limit < 1 || limit > 10_000) throw new UsageError('--limit: an integer from 1 to 10000', 'usage')
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

/**
 * `modelgate init [DIR]`: the shipped config's catalog and chain with a demo tenant whose key is
 * made here (stored as a hash, printed once) and an admin token of its own, and data/ for the
 * store. Never overwrites: an existing gateway.yaml is an error.
 */
async function init (dirArg: string | undefined): Promise<void> {
  const dir = resolve(dirArg ?? '.')
  const file = join(dir, 'gateway.yaml')
  if (existsSync(file)) throw new UsageError(`${file} exists already; init never overwrites a config (pick another folder, or move it away)`, 'init')
  mkdirSync(join(dir, 'data'), { recursive: true })
  const adminToken = 'mga-' + randomBytes(24).toString('base64url')
  const doc = YAML.parseDocument(readFileSync(fromRoot('config', 'gateway.yaml'), 'utf8'))
  doc.commentBefore = ` modelgate: the config modelgate init wrote (${new Date().toISOString().slice(0, 10)}).
 Serve it from this folder with: modelgate serve (the store is data/modelgate.db, relative to the
 folder you serve from). The demo/* models answer in-process, with no provider key; set
 OPENAI_API_KEY / ANTHROPIC_API_KEY for the others. Keep this file private: it holds the admin
 token (or set MODELGATE_ADMIN_TOKEN and remove it here).`
  const token = doc.createNode(`\${MODELGATE_ADMIN_TOKEN:-${adminToken}}`)
  token.comment = ' made by modelgate init'
  doc.setIn(['admin', 'token'], token)
  // the demo tenant's key lives in the store (created below), not in this file
  doc.setIn(['tenants', 0, 'projects', 0, 'keys'], doc.createNode([]))
  writeFileSync(file, doc.toString({ lineWidth: 0 }), { flag: 'wx', mode: 0o600 })
  chmodSync(file, 0o600)
  const config = await loadConfig(file, { ...process.env, MODELGATE_DB: join(dir, 'data', 'modelgate.db') })
  const tenant = config.tenants[0]
  const project = tenant?.projects[0]
  let key = ''
  if (tenant !== undefined && project !== undefined) {
    await withStore(config, async (store) => {
      key = (await store.keys.create({ org: tenant.org, project: project.id, name: 'demo', models: ['*'], source: 'cli' }, Date.now())).key
    })
  }
  const shown = (path: string): string => { const r = relative(process.cwd(), path); return r === '' ? '.' : r.startsWith('..') ? path : r }
  process.stdout.write([
    `modelgate: wrote ${shown(file)} and ${shown(join(dir, 'data'))}/`,
    '',
    `  API key (${tenant?.org ?? '-'}/${project?.id ?? '-'}): ${key}`,
    `  admin token:            ${adminToken}`,
    '',
    'The key is shown only this once (the store keeps its hash); the admin token is in gateway.yaml.',
    `Next: ${shown(dir) === '.' ? '' : `cd ${shown(dir)} && `}modelgate serve`,
    ''
  ].join('\n'))
}

async function main (argv: string[]): Promise<void> {
  const { values: args, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true })
  const [command, sub, ...rest] = positionals
  if (args.version === true) { process.stdout.write(`${VERSION}\n`); return }
  if (command === 'help') { process.stdout.write((HELP[sub ?? ''] ?? USAGE) + '\n'); return }
  if (args.help === true) { process.stdout.write((command === undefined ? USAGE : HELP[command] ?? USAGE) + '\n'); return }
  switch (command) {
    case undefined:
    case 'serve': return await serve(args)
    case 'init': return await init(sub)
    case 'keys': return await keys(sub, rest, args)
    case 'credits': return await credits(sub, args)
    case 'usage': return await usage(args)
    case 'plugins': return await plugins(args)
    case 'reload': return await reload(args)
    case 'store': return await storeCommand(sub, args)
    case 'config': {
      if (sub !== 'check') throw new UsageError('config check [FILE]', 'config')
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
  if (err instanceof UsageError) fail(`modelgate: ${err.message}\n\n${(err.command !== undefined ? HELP[err.command] : undefined) ?? USAGE}`, 2)
  if ((err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') === true) fail(`modelgate: ${(err as Error).message}\n\n${USAGE}`, 2)
  fail(`modelgate: ${(err as Error).stack ?? String(err)}`)
})
