import type { ApiKey, KeyBudget, KeyLimits, KeyPatch, QuotaPer } from '../engine/store/types.js'
import { CommandError, UsageError, type Args, type CommandInput } from './command.js'
import { readConfig } from './config-file.js'
import { withStore } from './with-store.js'

export const help = `modelgate keys create --org O --project P [--models GLOB,GLOB] [--passthrough PROVIDER,PROVIDER] [--mcp GLOB,GLOB] [--name NAME]
    [--expires ISO] [--rpm N] [--tpm N] [--budget-usd N --per minute|hour|day|month] [--config FILE]
modelgate keys list [--org O] [--project P] [--json] [--config FILE]
modelgate keys update ID [--models GLOB,GLOB] [--passthrough PROVIDER,PROVIDER] [--mcp GLOB,GLOB] [--name NAME] [--expires ISO|never]
    [--rpm N] [--tpm N] [--budget-usd N --per minute|hour|day|month] [--config FILE]
modelgate keys rotate ID [--grace-s N] [--config FILE]
modelgate keys revoke ID [--config FILE]

A created key is printed once; only its SHA-256 is stored. --passthrough: the providers whose
/passthrough/{provider}/* routes the key may use (none by default). --mcp: globs over
"{server}/{tool}", the MCP tools the key may list and call at /mcp (none by default; --mcp ''
in an update takes them all away). --expires: from then on the
key answers 401. --rpm and --tpm: the key's calls and billed tokens per minute; --budget-usd: the
most it may spend per UTC window (--per). In an update, 0 removes a limit (--budget-usd 0 the
budget), and what is not given is kept. rotate prints a new key with the old one's grants,
limits, budget and expiry, and lets the old one work --grace-s seconds more (default 0).`

const SETTINGS = ['models', 'passthrough', 'mcp', 'name', 'expires', 'rpm', 'tpm', 'budget-usd', 'per'] as const
export const flags = {
  create: ['org', 'project', ...SETTINGS, 'config'],
  list: ['org', 'project', 'json', 'config'],
  update: [...SETTINGS, 'config'],
  rotate: ['grace-s', 'config'],
  revoke: ['config']
} as const

const PERS = ['minute', 'hour', 'day', 'month'] as const
const MAX_GRACE_S = 30 * 86_400

const list = (value: string): string[] => value.split(',').map((s) => s.trim()).filter((s) => s !== '')

function whole (value: string, flag: string, max = 1_000_000_000): number {
  if (!/^\d+$/.test(value) || Number(value) > max) throw new UsageError(`--${flag}: a whole number from 0 to ${max}: ${value}`, 'keys')
  return Number(value)
}

/** What the options say of a key's settings; undefined where they say nothing (`current`: the key's settings before). */
async function settings (args: Args, current: ApiKey | null, providers: Array<{ id: string, passthrough: boolean }>): Promise<KeyPatch> {
  const { isoTimeMs } = await import('../config/schema.js')
  const { parseUsd } = await import('../engine/kernel/money.js')
  const patch: KeyPatch = {}
  if (args.models !== undefined) {
    patch.models = list(args.models)
    if (patch.models.length === 0) throw new UsageError('--models: at least one glob (* for every model)', 'keys')
  }
  if (args.passthrough !== undefined) {
    patch.passthrough = list(args.passthrough)
    const unknown = patch.passthrough.filter((p) => !providers.some((provider) => provider.id === p && provider.passthrough))
    if (unknown.length > 0) throw new UsageError(`--passthrough: ${unknown.join(', ')} is not a provider with passthrough: true in the config`, 'keys')
  }
  if (args.mcp !== undefined) patch.mcp = list(args.mcp)
  if (args.name !== undefined) patch.name = args.name
  if (args.expires !== undefined) {
    const at = args.expires === 'never' ? null : isoTimeMs(args.expires)
    if (at === undefined) throw new UsageError(`--expires: an ISO 8601 date or time that exists, or never: ${args.expires}`, 'keys')
    patch.expires_at = at
  }
  if (args.rpm !== undefined || args.tpm !== undefined) {
    const limits: KeyLimits = { ...current?.limits }
    for (const k of ['rpm', 'tpm'] as const) {
      const v = args[k]
      if (v === undefined) continue
      const n = whole(v, k)
      if (n === 0) delete limits[k]
      else limits[k] = n
    }
    patch.limits = limits.rpm === undefined && limits.tpm === undefined ? null : limits
  }
  const per = args.per
  if (per !== undefined && !(PERS as readonly string[]).includes(per)) throw new UsageError(`--per: one of ${PERS.join(', ')}: ${per}`, 'keys')
  if (args['budget-usd'] !== undefined) {
    const nano = parseUsd(args['budget-usd'])
    if (nano === undefined || nano < 0) throw new UsageError(`--budget-usd: an amount in USD, at most 9 decimals (0 removes the budget): ${args['budget-usd']}`, 'keys')
    const window = (per ?? current?.budget?.per) as QuotaPer | undefined
    if (nano > 0 && window === undefined) throw new UsageError('--budget-usd needs --per minute|hour|day|month', 'keys')
    patch.budget = nano === 0 ? null : { nano, per: window } as KeyBudget
  } else if (per !== undefined) {
    if (current?.budget === null || current?.budget === undefined) throw new UsageError('--per without --budget-usd changes a budget the key has: it has none', 'keys')
    patch.budget = { nano: current.budget.nano, per: per as QuotaPer }
  }
  return patch
}

/** A key the config file declares belongs to the file: changed there, then reloaded. */
function refuseConfigOwned (k: ApiKey, verb: string): void {
  if (k.source === 'config') throw new UsageError(`the key ${k.id} is declared in the config file: it is ${verb} there (then modelgate reload), not here; keys revoke ${k.id} revokes it for good`, 'keys')
}

export async function run ({ args, positionals: [sub, id] }: CommandInput): Promise<void> {
  const { config } = await readConfig(args)
  await withStore(config, async (store) => {
    /** The key named on the command line, which must exist and (`live`) not be revoked. */
    const named = async (verb: string, live: boolean): Promise<ApiKey> => {
      if (id === undefined) throw new UsageError(`keys ${verb} needs a key id (see keys list)`, 'keys')
      const k = await store.keys.get(id)
      if (k === undefined) throw new CommandError(`no key ${id} (see modelgate keys list)`)
      if (live && k.revoked) throw new CommandError(`the key ${id} is revoked: it can no longer be changed or rotated`)
      return k
    }
    if (sub === 'create') {
      if (args.org === undefined || args.project === undefined) throw new UsageError('keys create needs --org and --project', 'keys')
      const org = await store.orgs.get(args.org)
      if (org === undefined) throw new CommandError(`no organization ${args.org} (see modelgate orgs list)`)
      if (!(await store.orgs.projects(args.org)).some((p) => p.id === args.project)) throw new CommandError(`no project ${args.project} in ${args.org} (modelgate projects create ${args.org} ${args.project} makes it)`)
      const s = await settings(args, null, config.providers)
      const created = await store.keys.create({
        org: args.org, project: args.project, models: s.models ?? ['*'], passthrough: s.passthrough ?? [], mcp: s.mcp ?? [], name: s.name ?? '', source: 'cli', expires_at: s.expires_at, limits: s.limits, budget: s.budget
      }, Date.now())
      process.stdout.write(`${created.key}\n`)
      process.stderr.write(`created ${created.id} for ${created.org}/${created.project} (models: ${created.models.join(',')}${created.mcp.length > 0 ? `; mcp: ${created.mcp.join(',')}` : ''}); the key is shown only once\n`)
    } else if (sub === 'list') {
      const keys = await store.keys.list(args.org, args.project)
      const now = Date.now()
      if (args.json === true) {
        // what the admin API answers for each key (GET /admin/v1/keys/{id}), with its hint and state
        const { views } = await import('../routes/admin/views.js')
        const view = views(store, () => now)
        process.stdout.write(JSON.stringify(await Promise.all(keys.map(async (k) => ({ ...await view.key(k), hint: k.hint, state: stateOf(k, now) }))), null, 2) + '\n')
        return
      }
      const rows = keys.map((k) => [k.id, `${k.org}/${k.project}`, k.hint, k.name || '-', k.models.join(','), stateOf(k, now), new Date(k.created_at).toISOString(), k.expires_at === null ? 'never' : new Date(k.expires_at).toISOString()])
      process.stdout.write(table(['ID', 'PROJECT', 'KEY', 'NAME', 'MODELS', 'STATE', 'CREATED', 'EXPIRES'], rows))
    } else if (sub === 'update') {
      const current = await named('update', true)
      refuseConfigOwned(current, 'changed')
      const patch = await settings(args, current, config.providers)
      if (Object.keys(patch).length === 0) throw new UsageError('keys update: nothing to change (--models, --passthrough, --mcp, --name, --expires, --rpm, --tpm, --budget-usd, --per)', 'keys')
      const k = await store.keys.update(current.id, patch, Date.now(), 'cli')
      if (k === undefined) throw new CommandError(`the key ${current.id} is revoked: it can no longer be changed`)
      const limits = k.limits === null ? 'none' : `rpm ${k.limits.rpm ?? '-'}, tpm ${k.limits.tpm ?? '-'}`
      const { nanoToUsd } = await import('../engine/kernel/money.js')
      const budget = k.budget === null ? 'none' : `${nanoToUsd(k.budget.nano)} USD per ${k.budget.per}`
      process.stdout.write(`${k.id} updated: models ${k.models.join(',')}; mcp ${k.mcp.length === 0 ? 'none' : k.mcp.join(',')}; expires ${k.expires_at === null ? 'never' : new Date(k.expires_at).toISOString()}; limits ${limits}; budget ${budget}\n`)
    } else if (sub === 'rotate') {
      const current = await named('rotate', true)
      refuseConfigOwned(current, 'rotated')
      const grace = args['grace-s'] === undefined ? 0 : whole(args['grace-s'], 'grace-s', MAX_GRACE_S)
      const now = Date.now()
      if (current.expires_at !== null && current.expires_at <= now) throw new CommandError(`the key ${current.id} expired at ${new Date(current.expires_at).toISOString()}: extend it (keys update --expires) before rotating it, or create a new key`)
      const r = await store.keys.rotate(current.id, now + grace * 1000, now, 'cli')
      if (r === undefined) throw new CommandError(`the key ${current.id} is revoked: it can no longer be rotated`)
      process.stdout.write(`${r.key.key}\n`)
      process.stderr.write(`created ${r.key.id} in place of ${current.id}, which works until ${new Date(r.old.expires_at ?? now).toISOString()}; the new key is shown only once\n`)
    } else {
      await named('revoke', false)
      await store.keys.revoke(id as string, Date.now(), 'cli')
      process.stdout.write(`${id as string} revoked\n`)
    }
  })
}

/** What a key is now: revoked, expired (past expires_at, a rotated key past its grace too), or active. */
function stateOf (k: ApiKey, now: number): 'revoked' | 'expired' | 'active' {
  if (k.revoked) return 'revoked'
  return k.expires_at !== null && k.expires_at <= now ? 'expired' : 'active'
}

/** Rows under a header, in columns as wide as their widest cell. */
function table (header: string[], rows: string[][]): string {
  const widths = header.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  return [header, ...rows].map((r) => r.map((c, i) => i === r.length - 1 ? c : c.padEnd(widths[i] ?? 0)).join('  ')).join('\n') + '\n'
}
