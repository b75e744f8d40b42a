import { randomBytes } from 'node:crypto'
import { chmodSync, existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { join, relative, resolve } from 'node:path'
import { shippedFile } from '../paths.js'
import { CommandError, type CommandInput } from './command.js'
import { withStore } from './with-store.js'

export const help = `modelgate init [DIR]

Writes a starter gateway.yaml (the demo catalog, answered in-process, so it works with no
provider key) and data/ into DIR (default: the current folder), never overwriting. Creates an API
key for the demo tenant and an admin token, and prints both once. Then, in DIR: modelgate serve
(or from anywhere: modelgate serve --config DIR/gateway.yaml)`

export const flags = { '': [] } as const

// where the starter config says when it was written and what its admin token is
const DATE = '@date@'
const TOKEN = '@admin-token@'

/**
 * The starter config, with placeholders for its date and admin token: the shipped config's
 * catalog and chain, its store beside it, and no literal key (the demo tenant's key is made in
 * the store). The build writes it ahead (dist/init-gateway.yaml), so that init need not load the
 * YAML writer that keeps the shipped config's comments.
 */
export async function starterTemplate (): Promise<string> {
  const { default: YAML } = await import('yaml')
  const doc = YAML.parseDocument(shippedFile('config', 'gateway.yaml').toString('utf8'))
  doc.commentBefore = ` modelgate: the config modelgate init wrote (${DATE}).
 Serve it with: modelgate serve (in this folder), or modelgate serve --config <this file> from
 anywhere; the store is data/modelgate.db beside this file (relative paths here are relative to
 this folder). The demo/* models answer in-process, with no provider key; set
 OPENAI_API_KEY / ANTHROPIC_API_KEY for the others. Keep this file private: it holds the admin
 token (or set MODELGATE_ADMIN_TOKEN and remove it here).`
  // eslint-disable-next-line no-template-curly-in-string -- the config file's own ${VAR} syntax, written as it is
  const store = doc.createNode('${MODELGATE_DB:-data/modelgate.db}')
  store.comment = ' relative to this file\'s folder: data/ beside this file'
  doc.setIn(['store', 'sqlite'], store)
  const token = doc.createNode(`\${MODELGATE_ADMIN_TOKEN:-${TOKEN}}`)
  token.comment = ' made by modelgate init'
  doc.setIn(['admin', 'token'], token)
  // the demo tenant's key lives in the store (created below), not in this file
  doc.setIn(['tenants', 0, 'projects', 0, 'keys'], doc.createNode([]))
  return doc.toString({ lineWidth: 0 })
}

/** The starter config written on `date` with `adminToken`: from the build's template, else from one made now. */
async function starter (date: string, adminToken: string): Promise<string> {
  let template: string
  try {
    template = shippedFile('dist', 'init-gateway.yaml').toString('utf8')
  } catch {
    template = await starterTemplate()
  }
  return template.replace(DATE, () => date).replace(TOKEN, () => adminToken)
}

/**
 * The shipped config's catalog and chain with a demo tenant whose key is made here (stored as a
 * hash, printed once) and an admin token of its own, and data/ for the store. Never overwrites:
 * an existing gateway.yaml is an error.
 */
export async function run ({ positionals: [dirArg] }: CommandInput): Promise<void> {
  const dir = resolve(dirArg ?? '.')
  const file = join(dir, 'gateway.yaml')
  if (existsSync(file)) throw new CommandError(`${file} exists already; init never overwrites a config (pick another folder, or move it away)`)
  const { loadConfig } = await import('../config/load.js')
  mkdirSync(join(dir, 'data'), { recursive: true, mode: 0o700 })
  const adminToken = 'mga-' + randomBytes(24).toString('base64url')
  writeFileSync(file, await starter(new Date().toISOString().slice(0, 10), adminToken), { flag: 'wx', mode: 0o600 })
  chmodSync(file, 0o600)
  const config = await loadConfig(file)
  const tenant = config.tenants[0]
  const project = tenant?.projects[0]
  let key = ''
  if (tenant !== undefined && project !== undefined) {
    await withStore(config, async (store) => {
      key = (await store.keys.create({ org: tenant.org, project: project.id, name: 'demo', models: ['*'], source: 'cli' }, Date.now())).key
    })
  }
  const shown = (path: string): string => { const r = relative(process.cwd(), path); return r === '' ? '.' : r.startsWith('..') ? path : r }
  process.stdout.write([
    `modelgate: wrote ${shown(file)} and ${shown(join(dir, 'data'))}/`,
    '',
    `  API key (${tenant?.org ?? '-'}/${project?.id ?? '-'}): ${key}`,
    `  admin token:            ${adminToken}`,
    '',
    'The key is shown only this once (the store keeps its hash); the admin token is in gateway.yaml.',
    `Next: ${shown(dir) === '.' ? '' : `cd ${shown(dir)} && `}modelgate serve`,
    ''
  ].join('\n'))
}
