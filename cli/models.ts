import { UsageError, type CommandInput } from './command.js'

export const help = `modelgate models add PROVIDER UPSTREAM_MODEL [--id ID] [--context-length N] [--max-output-tokens N] [--write] [--config FILE]
modelgate models check [--json] [--config FILE]

The catalog against the maintained model and price database the gateway ships
(@pydantic/genai-prices, installed with it; nothing is fetched). add prints a catalog entry for
UPSTREAM_MODEL of the config's provider PROVIDER: its display name, context length, modalities
and every price (cache reads and writes, long-context tiers), with notes on what was derived or
left out;
--write appends it to the config file's models instead (the file is checked first, and nothing
is written when the result would not be valid). --id names the entry (default
PROVIDER/UPSTREAM_MODEL); --context-length gives the context length when the database has none,
--max-output-tokens the model's output limit (the database has none).
check lists every catalog price that differs from the database's price in force today (exit
status 1 when there is any); --json prints {object, data, unknown, checked}.`

export const flags = { add: ['id', 'context-length', 'max-output-tokens', 'write', 'config'], check: ['json', 'config'] } as const

export async function run ({ args, positionals: [sub, ...rest] }: CommandInput): Promise<void> {
  if (sub === 'add') { await add(args, rest); return }
  if (sub === 'check') { await check(args); return }
  throw new UsageError('models add PROVIDER UPSTREAM_MODEL | models check', 'models')
}

async function add (args: CommandInput['args'], [providerId, upstream]: string[]): Promise<void> {
  if (providerId === undefined || upstream === undefined) throw new UsageError('models add PROVIDER UPSTREAM_MODEL', 'models')
  const whole = (flag: 'context-length' | 'max-output-tokens'): number | undefined => {
    const value = args[flag]
    if (value === undefined) return undefined
    if (!/^\d+$/.test(value) || Number(value) < 1) throw new UsageError(`--${flag}: a whole number above 0: ${value}`, 'models')
    return Number(value)
  }
  const contextLength = whole('context-length')
  const maxOutputTokens = whole('max-output-tokens')
  const { readConfig } = await import('./config-file.js')
  const { catalogEntry } = await import('../engine/gateway/price-reference.js')
  const { file, config } = await readConfig(args)
  const provider = config.providers.find((p) => p.id === providerId)
  if (provider === undefined) throw new UsageError(`${providerId} is no provider of ${file} (it has ${config.providers.map((p) => p.id).join(', ')})`, 'models')
  if (provider.builtin !== undefined) throw new UsageError(`${providerId} is the built-in demo provider: the database has no prices for it`, 'models')
  const id = args.id ?? `${providerId}/${upstream}`
  if (config.models.some((m) => m.id === id)) throw new UsageError(`${file} already has a model ${id} (--id names another)`, 'models')
  const found = catalogEntry(provider, upstream, { id, contextLength, maxOutputTokens, at: new Date() })
  if (found.kind === 'unknown') throw new UsageError(`the database does not know ${upstream} of ${providerId}`, 'models')
  if (found.kind === 'no_context') throw new UsageError(`the database has no context length for ${upstream}: give --context-length N`, 'models')
  if (found.kind === 'unbillable') {
    throw new UsageError(`the database prices ${upstream} in no unit the gateway bills by (${found.prices.join(', ') || 'no price at all'}): write its pricing by hand`, 'models')
  }
  const comments = [`from ${found.source}`, ...found.notes].map((n) => `# ${n}`).join('\n')
  if (args.write !== true) {
    const YAML = (await import('yaml')).default
    const doc = new YAML.Document([])
    ;(doc.contents as import('yaml').YAMLSeq).add(await entryNode(doc, found.entry))
    process.stdout.write(`${comments}\n${doc.toString({ lineWidth: 0 })}`)
    return
  }
  await write(file, found.entry, found.notes)
  process.stdout.write(`${comments}\nadded ${id} to ${file}\n`)
}

/** An entry as the shipped catalog writes one: its architecture, parameters and pricing on a line each. */
async function entryNode (doc: import('yaml').Document, entry: Record<string, unknown>): Promise<import('yaml').YAMLMap> {
  const node = doc.createNode(entry) as import('yaml').YAMLMap
  for (const key of ['architecture', 'supported_parameters', 'pricing']) {
    const child = node.get(key, true) as { flow?: boolean } | undefined
    if (child !== undefined) child.flow = true
  }
  return node
}

/** Appends `entry` to the models of the config file, keeping the rest of it as it is (comments too). */
async function write (file: string, entry: Record<string, unknown>, notes: string[]): Promise<void> {
  const { readFileSync, rmSync, writeFileSync } = await import('node:fs')
  const { basename, dirname, extname, join } = await import('node:path')
  const { loadConfig } = await import('../config/load.js')
  const YAML = (await import('yaml')).default
  const text = readFileSync(file, 'utf8')
  let out: string
  if (extname(file) === '.json') {
    const raw = JSON.parse(text) as { models?: unknown[] }
    raw.models = [...raw.models ?? [], entry]
    out = JSON.stringify(raw, null, 2) + '\n'
  } else {
    const doc = YAML.parseDocument(text)
    const node = await entryNode(doc, entry)
    node.commentBefore = notes.map((n) => ` ${n}`).join('\n')
    const models = doc.get('models', true) as import('yaml').YAMLSeq | undefined
    if (models === undefined) doc.set('models', doc.createNode([entry]))
    else models.add(node)
    out = doc.toString({ lineWidth: 0 })
  }
  // the file as it would be, checked like any config (beside it: its relative paths hold) before it replaces it
  const trial = join(dirname(file), `.${basename(file)}.models-add${extname(file)}`)
  writeFileSync(trial, out, { mode: 0o600 })
  try { await loadConfig(trial) } finally { rmSync(trial, { force: true }) }
  writeFileSync(file, out)
}

async function check (args: CommandInput['args']): Promise<void> {
  const { readConfig } = await import('./config-file.js')
  const { checkPrices, DATABASE, databaseVersion } = await import('../engine/gateway/price-reference.js')
  const { file, config } = await readConfig(args)
  const result = checkPrices(config, new Date())
  if (args.json === true) {
    process.stdout.write(JSON.stringify({ object: 'list', data: result.differences, unknown: result.unknown, checked: result.checked }, null, 2) + '\n')
  } else {
    const version = databaseVersion()
    process.stdout.write(`${file}: ${result.checked} priced models checked against ${DATABASE}${version === null ? '' : `@${version}`}\n`)
    for (const d of result.differences) process.stdout.write(`${d.model}  ${d.field}: ${d.catalog} in the catalog, ${d.reference} in the database (${d.source})\n`)
    if (result.unknown.length > 0) process.stdout.write(`not in the database: ${result.unknown.join(', ')}\n`)
    process.stdout.write(result.differences.length === 0 ? 'no price differs\n' : `${result.differences.length} price(s) differ\n`)
  }
  if (result.differences.length > 0) process.exitCode = 1
}
