import { CommandError, UsageError, type CommandInput } from './command.js'
import { readConfig } from './config-file.js'
import { withStore } from './with-store.js'

export const help = `modelgate projects create ORG ID [--config FILE]

Makes a project in an organization, beside those of the config (it lives in the store alone).
Its keys: modelgate keys create --org ORG --project ID.`

export const flags = { create: ['config'] } as const

const ID = /^[A-Za-z0-9_.-]{1,64}$/

export async function run ({ args, positionals: [, org, id] }: CommandInput): Promise<void> {
  if (org === undefined || id === undefined || !ID.test(id)) throw new UsageError('projects create needs an organization and an id: letters, digits, _ . - (up to 64)', 'projects')
  await withStore((await readConfig(args)).config, async (store) => {
    const made = await store.orgs.createProject(org, id, null, Date.now(), 'cli')
    if (made === 'no_org') throw new CommandError(`no organization ${org} (see modelgate orgs list)`)
    if (made === 'exists') throw new CommandError(`the project ${id} exists already in ${org} (a deleted one keeps its id)`)
    process.stdout.write(`created ${org}/${id}\n`)
  })
}
