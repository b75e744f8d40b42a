import { nanoToUsd, parseUsd } from '../engine/kernel/money.js'
import { CommandError, UsageError, type CommandInput } from './command.js'
import { readConfig } from './config-file.js'
import { withStore } from './with-store.js'

export const help = `modelgate orgs create ID [--balance-usd N] [--config FILE]
modelgate orgs list [--json] [--config FILE]

Organizations at runtime, beside those of the config: made here, they live in the store alone
(restarts and reloads keep them). --balance-usd: the new organization's prepaid credits (default
0). Projects: modelgate projects create ORG ID.`

export const flags = { create: ['balance-usd', 'config'], list: ['json', 'config'] } as const

const ID = /^[A-Za-z0-9_.-]{1,64}$/

export async function run ({ args, positionals: [sub, id] }: CommandInput): Promise<void> {
  if (sub === 'create') {
    if (id === undefined || !ID.test(id)) throw new UsageError('orgs create needs an id: letters, digits, _ . - (up to 64)', 'orgs')
    const balance = args['balance-usd'] === undefined ? 0 : parseUsd(args['balance-usd'])
    if (balance === undefined || balance < 0) throw new UsageError(`--balance-usd: an amount in USD, at most 9 decimals: ${args['balance-usd'] ?? ''}`, 'orgs')
    await withStore((await readConfig(args)).config, async (store) => {
      if (!await store.orgs.create({ id, balanceNano: balance, quota: null }, Date.now(), 'cli')) throw new CommandError(`the organization ${id} exists already (a deleted one keeps its id)`)
      process.stdout.write(`created ${id} (balance ${nanoToUsd(balance)} USD)\n`)
    })
  } else {
    await withStore((await readConfig(args)).config, async (store) => {
      const orgs = await Promise.all((await store.orgs.list()).map(async (o) => ({ ...o, projects: (await store.orgs.projects(o.id)).map((p) => p.id) })))
      if (args.json === true) {
        process.stdout.write(JSON.stringify(orgs.map((o) => ({ id: o.id, balance_usd: nanoToUsd(o.balance_nano), held_usd: nanoToUsd(o.held_nano), spent_usd: nanoToUsd(o.spent_nano), uncollected_usd: nanoToUsd(o.uncollected_nano), quota: o.quota, projects: o.projects })), null, 2) + '\n')
        return
      }
      for (const o of orgs) {
        const quota = o.quota === null ? '-' : 'tokens' in o.quota ? `${o.quota.tokens} tokens/${o.quota.per}` : `${o.quota.usd} USD/${o.quota.per}`
        process.stdout.write(`${o.id}\tbalance ${nanoToUsd(o.balance_nano)} USD\tspent ${nanoToUsd(o.spent_nano)} USD${o.uncollected_nano > 0 ? ` (uncollected ${nanoToUsd(o.uncollected_nano)} USD)` : ''}\tquota ${quota}\tprojects ${o.projects.join(',') || '-'}\n`)
      }
    })
  }
}
