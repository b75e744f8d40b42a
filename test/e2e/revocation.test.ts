import t from 'tap'
import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { fromRoot } from '../../paths.js'
import { startMockUpstream } from '../mock-upstream.js'
import { childEnv, eventually, mockCatalog, spawnGateway } from '../helper.js'
import { tempDir } from '../temp-dir.js'

// A key the config file declares belongs to the file, and a revocation is final: revoked through
// the admin API, it stays revoked through a read-only CLI command (which once re-applied the
// file), a reload and a restart; the start log says the file still lists it; a change of its
// grants through the admin API is refused (409 config_owned) rather than reverted at the next
// reload; what the file itself changes is in the audit log as the config's.

const run = promisify(execFile)
const ADMIN = 'revocation-admin-token-0123456789'
const KEY = 'mg-config-declared-0123456789abcdef'
const OTHER = 'mg-config-declared-other-0123456789'

t.test('a config-declared key revoked through the admin API stays revoked across a CLI command, a reload and a restart', async (t) => {
  const mock = await startMockUpstream()
  t.teardown(() => mock.close())
  const c = mockCatalog(mock)
  const config = {
    store: { sqlite: join(tempDir('revocation'), 'gw.db') },
    admin: { token: ADMIN },
    plugins: [{ name: 'auth', options: { cache_ttl_s: 60 } }, { name: 'usage' }],
    providers: c.providers,
    models: c.models,
    tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: KEY, name: 'web', models: ['*'] }, { key: OTHER, name: 'other', models: ['openai/*'] }] }] }]
  }
  let gw = await spawnGateway(t, config, ['--workers', '1'])
  const admin = async (method: string, path: string, body?: unknown): Promise<{ status: number, body: any }> => {
    const res = await fetch(`http://127.0.0.1:${gw.port}/admin/v1${path}`, { method, headers: { authorization: `Bearer ${ADMIN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, body: body === undefined ? undefined : JSON.stringify(body) })
    return { status: res.status, body: await res.json() }
  }
  const call = async (key: string): Promise<number> => {
    const res = await fetch(`http://127.0.0.1:${gw.port}/v1/chat/completions`, {
      method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'openai/gpt-test', max_tokens: 5, messages: [{ role: 'user', content: 'x' }] })
    })
    await res.text()
    return res.status
  }
  t.equal(await call(KEY), 200)
  const keys = (await admin('GET', '/keys')).body.data as Array<{ id: string, name: string }>
  const id = keys.find((k) => k.name === 'web')?.id as string
  const other = keys.find((k) => k.name === 'other')?.id as string

  const patch = await admin('PATCH', `/keys/${other}`, { models: ['*'] })
  t.equal(patch.status, 409, 'the grants of a config-declared key are the file\'s')
  t.match(patch.body, { error: { code: 'config_owned' } })
  t.equal((await admin('POST', `/keys/${other}/rotate`, {})).status, 409, 'so is its secret')

  t.equal((await admin('DELETE', `/keys/${id}`)).status, 200)
  t.equal(await eventually(2000, async () => await call(KEY), (s) => s === 401), 401, 'revoked')

  const listed = await run(process.execPath, [fromRoot('dist', 'cli', 'index.js'), 'keys', 'list', '--config', gw.configFile], { env: childEnv({}) })
  t.match(listed.stdout, new RegExp(`${id}.*revoked`), 'the CLI lists it revoked')
  t.equal(await call(KEY), 401, 'and listing it brought nothing back')

  t.equal((await admin('POST', '/reload')).status, 200)
  t.equal(await call(KEY), 401, 'a reload brings nothing back')
  t.equal(await call(OTHER), 200, 'the other key of the file works')

  gw.kill('SIGTERM')
  await gw.exited
  gw = await spawnGateway(t, config, ['--workers', '1'], { LOG_LEVEL: 'warn' })
  t.equal(await call(KEY), 401, 'nor does a restart')
  t.match(await gw.stdout(/stays revoked/), new RegExp(`config lists key ${id}.*revoked: it stays revoked`), 'the start log says the file still lists it')

  const audit = (await admin('GET', '/audit?limit=100')).body.data as Array<{ action: string, target: string, actor: string }>
  t.same(audit.filter((a) => a.target === id).map((a) => `${a.action} ${a.actor}`), ['key.revoke admin', 'key.create config'], 'the key\'s history: made by the file, revoked by the operator, nothing since')
})
