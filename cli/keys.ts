import { UsageError, type CommandInput } from './command.js'
import { readConfig } from './config-file.js'
import { withStore } from './with-store.js'

export const help = `modelgate keys create --org O --project P [--models GLOB,GLOB] [--passthrough PROVIDER,PROVIDER] [--name NAME] [--config FILE]
modelgate keys list [--org O] [--project P] [--json] [--config FILE]
modelgate keys revoke ID [--config FILE]

A created key is printed once; only its SHA-256 is stored. --passthrough: the providers whose
/passthrough/{provider}/* routes the key may use (none by default).`

const list = (value: string): string[] => value.split(',').map((s) => s.trim()).filter((s) => s !== '')

export async function run ({ args, positionals: [sub, id] }: CommandInput): Promise<void> {
  const { config } = await readConfig(args)
  await withStore(config, async (store) => {
    if (sub === 'create') {
      if (args.org === undefined || args.project === undefined) throw new UsageError('keys create needs --org and --project', 'keys')
      const org = await store.orgs.get(args.org)
      if (org === undefined) throw new UsageError(`no organization ${args.org} (tenants come from the config)`, 'keys')
      if (!(await store.orgs.projects(args.org)).some((p) => p.id === args.project)) throw new UsageError(`no project ${args.project} in ${args.org}`, 'keys')
      const models = args.models === undefined ? ['*'] : list(args.models)
      const passthrough = args.passthrough === undefined ? [] : list(args.passthrough)
      const unknown = passthrough.filter((p) => !config.providers.some((provider) => provider.id === p && provider.passthrough))
      if (unknown.length > 0) throw new UsageError(`--passthrough: ${unknown.join(', ')} is not a provider with passthrough: true in the config`, 'keys')
      const created = await store.keys.create({ org: args.org, project: args.project, models, passthrough, name: args.name ?? '', source: 'cli' }, Date.now())
      process.stdout.write(`${created.key}\n`)
      process.stderr.write(`created ${created.id} for ${created.org}/${created.project} (models: ${created.models.join(',')}); the key is shown only once\n`)
    } else if (sub === 'list') {
      const keys = await store.keys.list(args.org, args.project)
      if (args.json === true) { process.stdout.write(JSON.stringify(keys, null, 2) + '\n'); return }
      for (const k of keys) {
        process.stdout.write(`${k.id}\t${k.org}/${k.project}\t${k.hint}\t${k.name || '-'}\t${k.models.join(',')}\t${k.revoked ? 'revoked' : 'active'}\t${new Date(k.created_at).toISOString()}\n`)
      }
    } else if (sub === 'revoke') {
      if (id === undefined) throw new UsageError('keys revoke needs a key id (see keys list)', 'keys')
      if (await store.keys.get(id) === undefined) throw new UsageError(`no key ${id}`, 'keys')
      await store.keys.revoke(id, Date.now())
      process.stdout.write(`${id} revoked\n`)
    } else {
      throw new UsageError(`unknown keys command ${sub ?? ''}`, 'keys')
    }
  })
}
