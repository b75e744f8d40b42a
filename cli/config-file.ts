import { existsSync } from 'node:fs'
import { resolve } from 'node:path'
import type { Config } from '../config/schema.js'
import { CommandError, type Args } from './command.js'

/**
 * The config file a command reads (--config, $MODELGATE_CONFIG, config/gateway.yaml, gateway.yaml),
 * which must be there: when it is not, what to do about it.
 */
export async function configFile (args: Args): Promise<string> {
  const { configPath } = await import('../config/load.js')
  const file = configPath(args)
  if (existsSync(file)) return file
  if (args.config !== undefined) throw new CommandError(`no config file at ${resolve(file)} (--config); \`modelgate init DIR\` writes one into DIR`)
  if (process.env.MODELGATE_CONFIG !== undefined && process.env.MODELGATE_CONFIG !== '') throw new CommandError(`no config file at ${resolve(file)} ($MODELGATE_CONFIG); \`modelgate init DIR\` writes one into DIR`)
  throw new CommandError(`no config here: neither config/gateway.yaml nor gateway.yaml is in ${process.cwd()}.
  modelgate init                      writes a starter gateway.yaml (and data/) in this folder
  modelgate <command> --config FILE   reads another (or set MODELGATE_CONFIG=FILE)`)
}

/**
 * The config file a command reads, and its validated content; `gateway`: as a serving gateway
 * reads it, its plugin chain loaded and checked too (the plugin host's loader).
 */
export async function readConfig (args: Args, opts: { gateway?: boolean } = {}): Promise<{ file: string, config: Config }> {
  const file = await configFile(args)
  if (opts.gateway === true) {
    const { loadGatewayConfig } = await import('../engine/host/index.js')
    return { file, config: await loadGatewayConfig(file) }
  }
  const { loadConfig } = await import('../config/load.js')
  return { file, config: await loadConfig(file) }
}
