import type { Config } from '../config/schema.js'
import type { Answer } from './ask-gateway.js'
import { fail, UsageError, type CommandInput } from './command.js'
import { readConfig } from './config-file.js'
import { adminBaseOf, listeningGateway } from './pid-file.js'

export const help = `modelgate mcp list [--json] [--config FILE]

The MCP servers of the config (served at /mcp): each one's transport, status (ready, starting,
down), tools and last error. The running gateway is asked through its admin API (found by the
modelgate.pid file beside its store; it needs the admin token), which says how its workers see
them; without one, this command connects to each server itself (spawning the stdio ones), lists
its tools and closes.`

interface ServerLine { id: string, transport: string, status: string, tools: string[], last_error: string | null }

/** The servers as the running gateway sees them; null when there is none to ask. */
async function fromGateway (config: Config): Promise<{ from: string, servers: ServerLine[] } | null> {
  const found = listeningGateway(config)
  if (found === null || config.admin.token === '') return null
  const base = adminBaseOf(config, found)
  const { askGateway } = await import('./ask-gateway.js')
  let res: Answer
  try {
    res = await askGateway(base, 'GET', '/admin/v1/mcp/servers', config.admin.token)
  } catch {
    return null
  }
  if (res.status !== 200) fail(`modelgate: the gateway at ${base} answered ${res.status}`)
  return { from: `the gateway at ${base}`, servers: (res.body as { data: ServerLine[] }).data }
}

/** The servers as this command finds them, connecting to each. */
async function direct (config: Config): Promise<{ from: string, servers: ServerLine[] }> {
  const { default: pino } = await import('pino')
  const { McpServers } = await import('../engine/mcp/servers.js')
  const { announceVersion } = await import('../engine/mcp/link.js')
  const { buildInfo } = await import('../paths.js')
  announceVersion(buildInfo().version)
  const servers = new McpServers(config, pino({ level: 'silent' }))
  servers.start()
  await Promise.all([...servers.links.values()].map(async (l) => { await l.settled(l.timeoutMs) }))
  const lines = servers.views()
  await servers.close()
  return { from: 'this command, connecting to each server', servers: lines }
}

export const flags = { list: ['json', 'config'] } as const

export async function run ({ args, positionals: [sub] }: CommandInput): Promise<void> {
  if (sub !== 'list') throw new UsageError(`unknown mcp command ${sub ?? ''}`, 'mcp')
  const { config } = await readConfig(args)
  if (config.mcp.servers.length === 0) {
    if (args.json === true) process.stdout.write('[]\n')
    else process.stderr.write('the config names no MCP servers (mcp.servers)\n')
    return
  }
  const { from, servers } = await fromGateway(config) ?? await direct(config)
  if (args.json === true) {
    process.stdout.write(JSON.stringify(servers, null, 2) + '\n')
    return
  }
  process.stderr.write(`MCP servers, as seen by ${from}:\n`)
  for (const s of servers) {
    const tools = s.tools.length === 0 ? 'no tools' : `${s.tools.length} tool${s.tools.length === 1 ? '' : 's'}: ${s.tools.join(', ')}`
    process.stdout.write(`${s.id}\t${s.transport}\t${s.status}\t${tools}${s.last_error === null ? '' : `\t(${s.last_error})`}\n`)
  }
  // a script can tell that a server is not serving its tools
  if (servers.some((s) => s.status !== 'ready')) process.exitCode = 1
}
