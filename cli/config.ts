import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import { CommandError, type CommandInput } from './command.js'
import { configFile } from './config-file.js'

export const help = `modelgate config check [FILE]

Validates a config (plugin modules and their options included) and lists every problem with its
path. Exit status 2 when it is not valid. FILE defaults to the config every command reads.`

export const flags = { check: ['config'] } as const

export async function run ({ args, positionals: [, given] }: CommandInput): Promise<void> {
  if (given !== undefined && !existsSync(given)) throw new CommandError(`no config file at ${resolve(given)}`)
  const file = given ?? await configFile(args)
  const { loadGatewayConfig } = await import('../engine/host/index.js')
  await loadGatewayConfig(file)
  process.stdout.write(`${file}: ok\n`)
}
