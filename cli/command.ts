import type { parseArgs } from 'node:util'

// What every command shares: the flags the command line may carry (one table of their types;
// each command names those it takes), how a command is shaped, and how a command says that it was
// used wrongly or that it cannot do what was asked.

export const FLAGS = {
  config: { type: 'string' },
  port: { type: 'string' },
  host: { type: 'string' },
  workers: { type: 'string' },
  pretty: { type: 'boolean' },
  org: { type: 'string' },
  project: { type: 'string' },
  models: { type: 'string' },
  passthrough: { type: 'string' },
  mcp: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
  name: { type: 'string' },
  since: { type: 'string' },
  limit: { type: 'string' },
  json: { type: 'boolean' },
  'amount-usd': { type: 'string' },
  'balance-usd': { type: 'string' },
  expires: { type: 'string' },
  rpm: { type: 'string' },
  tpm: { type: 'string' },
  'budget-usd': { type: 'string' },
  per: { type: 'string' },
  'grace-s': { type: 'string' },
  id: { type: 'string' },
  write: { type: 'boolean' },
  'context-length': { type: 'string' },
  'max-output-tokens': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' }
} as const

export type Flag = keyof typeof FLAGS

export type Args = ReturnType<typeof parseArgs<{ options: typeof FLAGS, allowPositionals: true }>>['values']

export interface CommandInput {
  args: Args
  /** The words after the command's name: `keys revoke ID` gives ['revoke', 'ID']. */
  positionals: string[]
}

/**
 * A command's module (cli/<name>.ts): its usage text (the first paragraph is its synopsis in
 * `modelgate --help`), the flags it takes, and what it does. A module loads what it needs inside
 * `run`, so that listing the commands, or running one, loads no other's dependencies.
 */
export interface Command {
  help: string
  /**
   * The flags each subcommand takes (`keys list` → flags.list), or, for a command without
   * subcommands, flags[''] alone. Any other flag is refused, naming these.
   */
  flags: Readonly<Record<string, readonly Flag[]>>
  run: (input: CommandInput) => Promise<void>
}

/** The command line is wrong: its message, then the command's synopsis, and exit status 2. */
export class UsageError extends Error {
  constructor (message: string, readonly command?: string) { super(message) }
}

/**
 * The command was understood but cannot be done (no such organization, a revoked key, a config
 * that is not there): its message alone, and exit status 2.
 */
export class CommandError extends Error {}

export function fail (message: string, code = 1): never {
  process.stderr.write(message.endsWith('\n') ? message : message + '\n')
  process.exit(code)
}
