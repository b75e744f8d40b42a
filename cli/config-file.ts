import type { Config } from '../config/schema.js'
import type { Args } from './command.js'

/** The config file a command reads (--config, $MODELGATE_CONFIG, ...), and its validated content. */
export async function readConfig (args: Args): Promise<{ file: string, config: Config }> {
  const { configPath, loadConfig } = await import('../config/load.js')
  const file = configPath(args)
  return { file, config: await loadConfig(file) }
}
