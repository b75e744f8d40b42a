import { UsageError, type CommandInput } from './command.js'

export const help = `modelgate config check [FILE]

Validates a config (plugin modules and their options included) and lists every problem with its
path. Exit status 2 when it is not valid.`

export async function run ({ args, positionals: [sub, given] }: CommandInput): Promise<void> {
  if (sub !== 'check') throw new UsageError('config check [FILE]', 'config')
  const [{ configPath }, { loadGatewayConfig }] = await Promise.all([import('../config/load.js'), import('../plugins/host/index.js')])
  const file = given ?? configPath(args)
  await loadGatewayConfig(file)
  process.stdout.write(`${file}: ok\n`)
}
