import t from 'tap'
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { fromRoot } from '../paths.js'
import { startMockUpstream } from './mock-upstream.js'
import { eventually, childEnv, mockCatalog, spawnGateway } from './helper.js'
import { tempDir } from './temp-dir.js'

// The tenancy through the built CLI, beside a gateway serving the same SQLite file with two
// workers: orgs and projects made, keys made with limits, changed, rotated and revoked; each
// change reaches the serving workers (they read the store's changes), and the audit log says
// who made it, without a secret.

const run = promisify(execFile)
const CLI = fromRoot('dist', 'cli', 'index.js')
const ADMIN = 'cli-tenancy-admin-token-0123456789'

async function cli (args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { env: childEnv({}) })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number, stdout: string, stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

t.test('orgs, projects and keys through the CLI while two workers serve the store', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const c = mockCatalog(mock)
  const gw = await spawnGateway(t, {
    store: { sqlite: join(tempDir('cli-tenancy'), 'gw.db') },
    admin: { token: ADMIN },
    plugins: [{ name: 'auth', options: { cache_ttl_s: 60 } }, { name: 'quota' }, { name: 'usage' }],
    providers: c.providers,
    models: c.models,
    tenants: [{ org: 'acme', projects: [{ id: 'web' }] }]
  }, ['--workers', '2'])
  const config = ['--config', gw.configFile]
  const base = `http://127.0.0.1:${gw.port}`
  const call = async (key: string, model = 'openai/gpt-test'): Promise<number> => {
    const res = await fetch(`${base}/v1/chat/completions`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', connection: 'close' },
      body: JSON.stringify({ model, max_tokens: 20, messages: [{ role: 'user', content: 'x' }] })
    })
    await res.text()
    return res.status
  }
  const both = async (key: string, model?: string): Promise<number[]> => await Promise.all([call(key, model), call(key, model), call(key, model), call(key, model)])

  const org = await cli(['orgs', 'create', 'globex', '--balance-usd', '12.5', ...config])
  t.equal(org.code, 0, org.stderr)
  t.match(org.stdout, /created globex \(balance 12\.5 USD\)/)
  const again = await cli(['orgs', 'create', 'globex', ...config])
  t.equal(again.code, 2)
  t.match(again.stderr, /exists already/)
  t.equal((await cli(['orgs', 'create', 'bad id', ...config])).code, 2)
  t.equal((await cli(['orgs', 'create', 'x', '--balance-usd', 'lots', ...config])).code, 2)
  const project = await cli(['projects', 'create', 'globex', 'shop', ...config])
  t.equal(project.code, 0, project.stderr)
  t.equal((await cli(['projects', 'create', 'globex', 'shop', ...config])).code, 2, 'a project exists once')
  t.match((await cli(['projects', 'create', 'ghost', 'shop', ...config])).stderr, /no organization ghost/)
  const orgs = JSON.parse((await cli(['orgs', 'list', '--json', ...config])).stdout) as Array<{ id: string, balance_usd: string, projects: string[] }>
  t.same(orgs.map((o) => [o.id, o.balance_usd, o.projects]), [['acme', '0', ['web']], ['globex', '12.5', ['shop']]])
  t.match((await cli(['orgs', 'list', ...config])).stdout, /^globex\tbalance 12\.5 USD/m)
  // the admin API on a worker sees what the CLI made
  const viewed = await (await fetch(`${base}/admin/v1/orgs/globex`, { headers: { authorization: `Bearer ${ADMIN}` } })).json() as { projects: Array<{ id: string }> }
  t.same(viewed.projects.map((p) => p.id), ['shop'])

  const created = await cli(['keys', 'create', '--org', 'globex', '--project', 'shop', '--models', 'openai/*,anthropic/*', '--mcp', 'docs/*,files/read', '--rpm', '100', '--budget-usd', '1', '--per', 'day', '--expires', '2030-01-01', ...config])
  t.equal(created.code, 0, created.stderr)
  const key = created.stdout.trim()
  const id = /created (key_[0-9a-f]+)/.exec(created.stderr)?.[1] as string
  const listed = (JSON.parse((await cli(['keys', 'list', '--org', 'globex', '--json', ...config])).stdout) as Array<Record<string, unknown>>)[0]
  t.match(listed, { id, mcp: ['docs/*', 'files/read'], limits: { rpm: 100 }, budget: { limit: '1', per: 'day', unit: 'usd' }, expires_at: '2030-01-01T00:00:00.000Z', revoked: false, state: 'active' }, 'the admin API\'s shape: ISO times, USD strings')
  t.same(await both(key, 'anthropic/claude-test'), [200, 200, 200, 200], 'the key calls on both workers (and is cached there)')

  const narrowed = await cli(['keys', 'update', id, '--models', 'openai/*', '--mcp', '', '--rpm', '0', '--tpm', '5000', '--budget-usd', '0', '--expires', 'never', ...config])
  t.equal(narrowed.code, 0, narrowed.stderr)
  t.match(narrowed.stdout, `${id} updated: models openai/*; mcp none; expires never; limits rpm -, tpm 5000; budget none`)
  const refused = await eventually(1000, async () => await both(key, 'anthropic/claude-test'), (v) => v.every((s) => s === 404))
  t.same(refused, [404, 404, 404, 404], 'narrowed by the CLI: both workers refuse the other model within a second')
  t.same(await both(key), [200, 200, 200, 200])
  t.equal((await cli(['keys', 'update', id, ...config])).code, 2, 'nothing to change')
  t.match((await cli(['keys', 'update', id, '--per', 'day', ...config])).stderr, /has none/, '--per alone needs a budget')
  t.match((await cli(['keys', 'update', id, '--budget-usd', '2', ...config])).stderr, /needs --per/)
  t.match((await cli(['keys', 'update', id, '--expires', '2026-02-30', ...config])).stderr, /--expires/)
  t.match((await cli(['keys', 'update', id, '--rpm', '-1', ...config])).stderr, /--rpm/)
  t.match((await cli(['keys', 'update', 'key_nope', '--rpm', '1', ...config])).stderr, /no key key_nope/)

  const rotated = await cli(['keys', 'rotate', id, '--grace-s', '0', ...config])
  t.equal(rotated.code, 0, rotated.stderr)
  const fresh = rotated.stdout.trim()
  t.match(fresh, /^mg-/)
  t.match(rotated.stderr, new RegExp(`in place of ${id}, which works until`))
  const old = await eventually(1000, async () => await both(key), (v) => v.every((s) => s === 401))
  t.same(old, [401, 401, 401, 401], 'rotated with no grace: the old secret answers 401 on both workers within a second')
  t.same(await both(fresh), [200, 200, 200, 200], 'the new one works')
  t.equal(await call(fresh, 'anthropic/claude-test'), 404, 'with the old one\'s grants')
  const freshId = /created (key_[0-9a-f]+)/.exec(rotated.stderr)?.[1] as string
  t.equal((await cli(['keys', 'rotate', id, ...config])).code, 2, 'an expired key is not rotated')
  t.equal((await cli(['keys', 'revoke', freshId, ...config])).code, 0)
  t.same(await eventually(1000, async () => await both(fresh), (v) => v.every((s) => s === 401)), [401, 401, 401, 401], 'revoked: refused within a second')
  t.match((await cli(['keys', 'update', freshId, '--rpm', '1', ...config])).stderr, /revoked/)
  t.equal((await cli(['credits', 'add', '--org', 'globex', '--amount-usd', '0.5', ...config])).code, 0)

  const audit = await fetch(`${base}/admin/v1/audit`, { headers: { authorization: `Bearer ${ADMIN}` } })
  const text = await audit.text()
  const all = (JSON.parse(text) as { data: Array<{ action: string, target: string, actor: string }> }).data.reverse()
  t.ok(all.slice(0, 2).every((l) => l.actor === 'config'), 'first what serving the config made')
  const lines = all.filter((l) => l.actor !== 'config')
  t.same(lines.map((l) => `${l.action} ${l.target} ${l.actor}`), [
    'org.create globex cli', 'project.create globex/shop cli', `key.create ${id} cli`, `key.update ${id} cli`, `key.rotate ${id} cli`, `key.revoke ${freshId} cli`, 'credits.add globex cli'
  ], 'the audit log: every change the CLI made')
  for (const secret of [key, fresh]) t.notOk(text.includes(secret), 'never a secret')
  gw.kill('SIGTERM')
  t.equal(await gw.exited, 0)
})
