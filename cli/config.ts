import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { CommandError, type CommandInput } from './command.js'
import { configFile } from './config-file.js'

export const help = `modelgate config check [FILE]

Validates a config (plugin modules and their options included) and lists every problem with its
path, and the providers without credentials with the variable to set (a cloud platform's provider
without them is a problem: it can serve nothing). Exit status 2 when it is not valid. FILE
defaults to the config every command reads.`

export const flags = { check: ['config'] } as const

export async function run ({ args, positionals: [, given] }: CommandInput): Promise<void> {
  if (given !== undefined && !existsSync(given)) throw new CommandError(`no config file at ${resolve(given)}`)
  const file = given ?? await configFile(args)
  const [{ loadGatewayConfig }, { uncredentialedProviders }] = await Promise.all([import('../engine/host/index.js'), import('./credentials.js')])
  const config = await loadGatewayConfig(file)
  const missing = uncredentialedProviders(config, file)
  const line = (m: typeof missing[number]): string => `providers[${m.index}] (${m.provider.id}): no credentials: ${m.what}`
  const onPlatform = missing.filter((m) => m.provider.platform !== undefined)
  if (onPlatform.length > 0) throw new CommandError(`${file}: not valid:\n${onPlatform.map((m) => `  - ${line(m)}`).join('\n')}`)
  for (const m of missing) process.stderr.write(`note: ${line(m)}\n`)
  process.stdout.write(`${file}: ok\n`)
}
