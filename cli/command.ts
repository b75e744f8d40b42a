import type { parseArgs } from 'node:util'

// What every command shares: the options the command line may carry, how a command is shaped,
// and how a command says that it was used wrongly.

export const OPTIONS = {
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
  help: { type: 'boolean', short: 'h' },
  version: { type: 'boolean', short: 'v' }
} as const

export type Args = ReturnType<typeof parseArgs<{ options: typeof OPTIONS, allowPositionals: true }>>['values']

export interface CommandInput {
  args: Args
  /** The words after the command's name: `keys revoke ID` gives ['revoke', 'ID']. */
  positionals: string[]
}

/**
 * A command's module (cli/<name>.ts): its usage text (the first paragraph is its synopsis in
 * `modelgate --help`) and what it does. A module loads what it needs inside `run`, so that
 * listing the commands, or running one, loads no other's dependencies.
 */
export interface Command {
  help: string
  run: (input: CommandInput) => Promise<void>
}

/** A command used wrongly: its message, then the command's usage, and exit status 2. */
export class UsageError extends Error {
  constructor (message: string, readonly command?: string) { super(message) }
}

export function fail (message: string, code = 1): never {
  process.stderr.write(message.endsWith('\n') ? message : message + '\n')
  process.exit(code)
}
