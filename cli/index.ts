#!/usr/bin/env node
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { fromRoot } from '../paths.js'
import { fail, OPTIONS, UsageError, type Command } from './command.js'

// The `modelgate` command: parses the command line and runs one command, whose module is loaded
// only then (cli/<name>.ts). A new command is a module exporting `help` and `run`, and a line here.
const COMMANDS: Record<string, () => Promise<Command>> = {
  serve: async () => await import('./serve.js'),
  init: async () => await import('./init.js'),
  keys: async () => await import('./keys.js'),
  orgs: async () => await import('./orgs.js'),
  projects: async () => await import('./projects.js'),
  usage: async () => await import('./usage.js'),
  credits: async () => await import('./credits.js'),
  config: async () => await import('./config.js'),
  plugins: async () => await import('./plugins.js'),
  store: async () => await import('./store.js'),
  reload: async () => await import('./reload.js'),
  mcp: async () => await import('./mcp.js')
}

const commandNamed = (name: string | undefined): (() => Promise<Command>) | undefined =>
  name !== undefined && Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined

const CONFIG_RULE = 'The config is --config FILE, else $MODELGATE_CONFIG, else config/gateway.yaml, else gateway.yaml (in the current folder).'

const version = (): string => (JSON.parse(readFileSync(fromRoot('package.json'), 'utf8')) as { version: string }).version

/** Every command's synopsis. */
async function usage (): Promise<string> {
  const commands = await Promise.all(Object.values(COMMANDS).map(async (load) => await load()))
  const synopses = commands.map((c) => (c.help.split('\n\n')[0] ?? '').split('\n').map((l) => `  ${l}`).join('\n'))
  return `modelgate ${version()}: a self-hosted model gateway\n\n${synopses.join('\n')}\n  modelgate --version\n\n${CONFIG_RULE} \`modelgate <command> --help\` tells more.`
}

/** A command's usage, or every command's synopsis for a name that is none. */
async function helpOf (name: string | undefined): Promise<string> {
  const load = commandNamed(name)
  return load === undefined ? await usage() : (await load()).help
}

async function main (argv: string[]): Promise<void> {
  const { values: args, positionals } = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true })
  const [name, ...rest] = positionals
  if (args.version === true) { process.stdout.write(`${version()}\n`); return }
  if (name === 'help') { process.stdout.write(await helpOf(rest[0]) + '\n'); return }
  if (args.help === true) { process.stdout.write(await helpOf(name) + '\n'); return }
  const load = commandNamed(name ?? 'serve')
  if (load === undefined) throw new UsageError(`unknown command ${name ?? ''}`)
  await (await load()).run({ args, positionals: rest })
}

main(process.argv.slice(2)).catch(async (err: unknown) => {
  // a config's problems (config/load.ts's ConfigError), known by name: that module is not loaded for --help
  if ((err as Error | null)?.name === 'ConfigError') fail((err as Error).message, 2)
  if (err instanceof UsageError) fail(`modelgate: ${err.message}\n\n${await helpOf(err.command)}`, 2)
  if ((err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS') === true) fail(`modelgate: ${(err as Error).message}\n\n${await usage()}`, 2)
  fail(`modelgate: ${(err as Error).stack ?? String(err)}`)
})
