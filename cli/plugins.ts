import { existsSync } from 'node:fs'
import type { Config } from '../config/schema.js'
import type { AnyGatewayPlugin } from '../plugins/api/index.js'
import type { CommandInput } from './command.js'

export const help = `modelgate plugins [--config FILE] [--json]

Lists the built-in plugins and the config's chain, with every option and its default.`

export const flags = { '': ['config', 'json'] } as const

export async function run ({ args }: CommandInput): Promise<void> {
  const [{ configPath }, { builtinPlugin, builtinPlugins, describeOptions, loadGatewayConfig }, { loadPlugin }] = await Promise.all([
    import('../config/load.js'), import('../engine/host/index.js'), import('../engine/host/modules.js')
  ])
  // an entry's plugin: a built-in, or the module the config's check loaded (a file: URL by then)
  const definitionOf = async (e: { name: string, module?: string }): Promise<AnyGatewayPlugin | undefined> => e.module === undefined ? await builtinPlugin(e.name) : await loadPlugin(e.module)
  const describe = (schema: object | undefined, values?: Record<string, unknown>): string[] =>
    describeOptions(schema).map((o) => `      ${o.name}: ${o.type}${o.required ? ' (required)' : ''}${o.default !== undefined ? `, default ${JSON.stringify(o.default)}` : ''}${values !== undefined && o.name in values ? ` = ${JSON.stringify(values[o.name])}` : ''}${o.description !== undefined ? `  ${o.description}` : ''}`)
  const file = configPath(args)
  // with no config here, the built-ins alone are worth listing; a config named must be there
  const named = args.config !== undefined || (process.env.MODELGATE_CONFIG ?? '') !== ''
  const config: Config | undefined = named || existsSync(file) ? await loadGatewayConfig(await (await import('./config-file.js')).configFile(args)) : undefined
  const builtins = await builtinPlugins()
  if (args.json === true) {
    const entries = config === undefined ? null : await Promise.all(config.plugins.map(async (e) => ({ ...e, builtin: e.module === undefined, description: (await definitionOf(e))?.description ?? null, schema: (await definitionOf(e))?.options ?? null })))
    process.stdout.write(JSON.stringify({ builtin: builtins.map((p) => ({ name: p.name, description: p.description ?? null, scope: p.scope ?? 'api', options: describeOptions(p.options) })), config: entries }, null, 2) + '\n')
    return
  }
  const lines = ['built-in plugins:']
  for (const p of builtins) {
    lines.push(`  ${p.name}${p.description === undefined ? '' : ` - ${p.description}`}`)
    lines.push(...describe(p.options))
  }
  if (config === undefined) {
    lines.push('', `(no config at ${file}: only the built-ins are listed)`)
  } else {
    lines.push('', `the chain of ${file}, in order:`)
    for (const [i, e] of config.plugins.entries()) {
      const def = await definitionOf(e)
      lines.push(`  ${i + 1}. ${e.name}${e.module === undefined ? '' : ` (from ${e.module})`}${e.enabled ? '' : ' [disabled]'}`)
      lines.push(...describe(def?.options, e.options))
    }
  }
  process.stdout.write(lines.join('\n') + '\n')
}
