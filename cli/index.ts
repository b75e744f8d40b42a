#!/usr/bin/env node
import cluster from 'node:cluster'
import { parseArgs } from 'node:util'
import { buildInfo, inExecutable } from '../paths.js'
import { CommandError, fail, FLAGS, UsageError, type Command, type CommandInput, type Flag } from './command.js'

// The `modelgate` command: parses the command line and runs one command, whose module is loaded
// only then (cli/<name>.ts). A new command is a module exporting `help`, `flags` and `run`, and a
// line here.
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
  models: async () => await import('./models.js'),
  mcp: async () => await import('./mcp.js')
}

const commandNamed = (name: string | undefined): (() => Promise<Command>) | undefined =>
  name !== undefined && Object.hasOwn(COMMANDS, name) ? COMMANDS[name] : undefined

const CONFIG_RULE = 'The config is --config FILE, else $MODELGATE_CONFIG, else config/gateway.yaml, else gateway.yaml (in the current folder); `modelgate init` writes one.'

const version = (): string => buildInfo().version
/** The version, and the commit when the build knew it (the executable file). */
function versionLine (): string {
  const { version, commit } = buildInfo()
  return commit === null ? version : `${version} (commit ${commit})`
}

/** A command's synopsis: the first paragraph of its help. */
const synopsis = (c: Command): string => c.help.split('\n\n')[0] ?? ''

/** Every command's synopsis. */
async function usage (): Promise<string> {
  const commands = await Promise.all(Object.values(COMMANDS).map(async (load) => await load()))
  const synopses = commands.map((c) => synopsis(c).split('\n').map((l) => `  ${l}`).join('\n'))
  return `modelgate ${version()}: a self-hosted model gateway\n\n${synopses.join('\n')}\n  modelgate --version\n\n${CONFIG_RULE} \`modelgate <command> --help\` tells more.`
}

/** A command's usage, or every command's synopsis for a name that is none. */
async function helpOf (name: string | undefined): Promise<string> {
  const load = commandNamed(name)
  return load === undefined ? await usage() : (await load()).help
}

const flagList = (flags: readonly Flag[]): string => flags.length === 0 ? 'no flags' : flags.map((f) => `--${f}`).join(', ')

/**
 * The command line of command `name`: its flags, which must be the ones its subcommand (or the
 * command) takes, and its words. Anything else is a usage error naming what it takes.
 */
function parseFor (name: string, command: Command, argv: string[]): CommandInput {
  const subs = Object.keys(command.flags).filter((s) => s !== '')
  // the subcommand, for the messages below (a flag's value cannot be one: values follow flags)
  const guessed = argv.find((a) => subs.includes(a))
  const where = (sub: string | undefined): string => `${name}${sub === undefined || sub === '' ? '' : ` ${sub}`}`
  const takes = (sub: string | undefined): string => {
    if (sub !== undefined || subs.length === 0) return `${where(sub)} takes ${flagList(command.flags[sub ?? ''] ?? [])}`
    return subs.map((s) => `${where(s)} takes ${flagList(command.flags[s] ?? [])}`).join('; ')
  }
  let parsed: ReturnType<typeof parseArgs<{ options: typeof FLAGS, allowPositionals: true }>>
  try {
    parsed = parseArgs({ args: argv, options: FLAGS, allowPositionals: true, strict: true })
  } catch (err) {
    const e = err as Error & { code?: string }
    const flag = /option '([^']+)'/i.exec(e.message)?.[1]
    if (e.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION') throw new UsageError(`unknown flag ${flag ?? ''}: ${takes(guessed)}`, name)
    if (e.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE') throw new UsageError(`${(flag ?? '').replace(/ <value>$/, '')} needs a value`, name)
    throw new UsageError(e.message, name)
  }
  const { values: args, positionals } = parsed
  if (args.help === true) return { args, positionals }
  const [sub] = positionals
  if (subs.length > 0 && sub === undefined) throw new UsageError(`${where(undefined)} needs one of: ${subs.join(', ')}`, name)
  if (subs.length > 0 && !subs.includes(sub as string)) throw new UsageError(`${where(undefined)} has no ${sub as string}: one of ${subs.join(', ')}`, name)
  const key = subs.length > 0 ? sub as string : ''
  const allowed = command.flags[key] ?? []
  const wrong = (Object.keys(args) as Flag[]).filter((f) => !allowed.includes(f))
  if (wrong.length > 0) throw new UsageError(`${flagList(wrong)}: not for ${where(key)}, which takes ${flagList(allowed)}`, name)
  return { args, positionals }
}

async function main (argv: string[]): Promise<void> {
  const [first, ...rest] = argv
  // bare `modelgate` explains itself; serving is `modelgate serve` (or `npm start`)
  if (first === undefined || first === '--help' || first === '-h') { process.stdout.write(await usage() + '\n'); return }
  if (first === '--version' || first === '-v') { process.stdout.write(`${versionLine()}\n`); return }
  if (first === 'help') { process.stdout.write(await helpOf(rest[0]) + '\n'); return }
  if (first.startsWith('-')) throw new UsageError(`the command comes first: modelgate <command> [flags] (${first} came before any)`)
  const load = commandNamed(first)
  if (load === undefined) throw new UsageError(`unknown command ${first}`)
  const command = await load()
  const input = parseFor(first, command, rest)
  if (input.args.help === true) { process.stdout.write(command.help + '\n'); return }
  await command.run(input)
}

// A cluster worker of the executable file is started as `FILE ARGV[1] ARGS…` (node:cluster runs
// `process.execPath process.argv[1] …`), and the file puts its own path first again: one word more.
main(process.argv.slice(inExecutable && cluster.isWorker ? 3 : 2)).catch(async (err: unknown) => {
  const e = err as (Error & { code?: unknown }) | null
  // a config's problems (config/load.ts's ConfigError), known by name: that module is not loaded for --help
  if (e?.name === 'ConfigError') fail(e.message, 2)
  if (err instanceof CommandError) fail(`modelgate: ${err.message}`, 2)
  if (err instanceof UsageError) {
    const load = commandNamed(err.command)
    const shown = load === undefined ? await usage() : `usage:\n${synopsis(await load()).split('\n').map((l) => `  ${l}`).join('\n')}\n\`modelgate ${err.command as string} --help\` tells more.`
    fail(`modelgate: ${err.message}\n\n${shown}`, 2)
  }
  // an error of the system (a port in use, a file that cannot be read): its message says it
  if (typeof e?.code === 'string' && /^E[A-Z]+$/.test(e.code)) fail(`modelgate: ${e.message}`)
  fail(`modelgate: ${e?.stack ?? String(err)}`)
})
