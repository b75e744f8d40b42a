import { nanoToUsd, parseUsd } from '../engine/kernel/money.js'
import { CommandError, UsageError, type CommandInput } from './command.js'
import { readConfig } from './config-file.js'
import { withStore } from './with-store.js'

export const help = `modelgate credits add --org O --amount-usd N [--config FILE]

Tops up an organization's prepaid balance (exact to the nano-dollar).`

export const flags = { add: ['org', 'amount-usd', 'config'] } as const

export async function run ({ args }: CommandInput): Promise<void> {
  const org = args.org
  if (org === undefined || args['amount-usd'] === undefined) throw new UsageError('credits add needs --org and --amount-usd', 'credits')
  const amount = parseUsd(args['amount-usd'])
  if (amount === undefined || amount <= 0) throw new UsageError(`--amount-usd: a positive decimal amount, at most 9 decimals: ${args['amount-usd']}`, 'credits')
  await withStore((await readConfig(args)).config, async (store) => {
    if (!await store.orgs.credit(org, amount, Date.now(), 'cli')) throw new CommandError(`no organization ${org} (see modelgate orgs list)`)
    process.stdout.write(`${org}: balance ${nanoToUsd((await store.orgs.get(org))?.balance_nano ?? 0)} USD\n`)
  })
}
