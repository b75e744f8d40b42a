import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import Fastify, { type FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { testGateway, TEST_KEY } from '../../engine/host/testing.js'
import { testConfig } from '../helper.js'
import { tempDir } from '../temp-dir.js'

// A plugin author's test runs the way production runs the plugin: `modelgate/testing` and a
// serving gateway both go through the plugin host, so a plugin sees the same scope (its hooks on
// the API's routes, not on the gateway's own), the same prefix for its own routes (under /v1),
// and the same check of its dependencies.

const PLUGIN = `
export default {
  name: 'parity',
  dependencies: ['auth'],
  options: { type: 'object', properties: { tag: { type: 'string', default: 'p' } }, additionalProperties: false },
  plugin: async (fastify, opts) => {
    fastify.addHook('onSend', async (_request, reply) => { reply.header('x-parity', opts.tag) })
    fastify.get('/parity', async (request) => ({ caller: request.principal?.org ?? null, tag: opts.tag }))
  }
}
`

async function plugin (): Promise<{ url: string, def: Parameters<Awaited<ReturnType<typeof testGateway>>['use']>[0] }> {
  const file = join(tempDir('parity'), 'parity.mjs')
  writeFileSync(file, PLUGIN)
  const url = pathToFileURL(file).href
  return { url, def: (await import(url) as { default: Parameters<Awaited<ReturnType<typeof testGateway>>['use']>[0] }).default }
}

async function probe (app: FastifyInstance, key: string): Promise<Record<string, unknown>> {
  const own = await app.inject({ method: 'GET', url: '/v1/parity', headers: { authorization: `Bearer ${key}` } })
  const bare = await app.inject({ method: 'GET', url: '/parity', headers: { authorization: `Bearer ${key}` } })
  const models = await app.inject({ method: 'GET', url: '/v1/models', headers: { authorization: `Bearer ${key}` } })
  const anonymous = await app.inject({ method: 'GET', url: '/v1/parity' })
  return {
    'its own route, under /v1': [own.statusCode, own.json()],
    'not at the root': bare.statusCode,
    'its hook on the API\'s routes': models.headers['x-parity'],
    'behind auth, as the chain puts it': anonymous.statusCode
  }
}

t.test('a plugin registered through modelgate/testing sees the scope, prefix and dependency check it sees when served', async (t) => {
  const { url, def } = await plugin()

  const served = await buildApp(testConfig({ plugins: [{ name: 'auth' }, { name: 'parity', module: url, options: { tag: 'x' } }], tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: TEST_KEY }] }] }] }), { logger: false })
  t.teardown(() => served.close())
  const app = Fastify({ logger: false })
  t.teardown(() => app.close())
  const gw = await testGateway(app)
  await gw.use('auth')
  await gw.use(def, { tag: 'x' })
  await gw.routes()

  const inProduction = await probe(served, TEST_KEY)
  const inTest = await probe(app, TEST_KEY)
  t.same(inTest, inProduction, 'the same answers')
  t.same(inProduction, { 'its own route, under /v1': [200, { caller: 'acme', tag: 'x' }], 'not at the root': 404, 'its hook on the API\'s routes': 'x', 'behind auth, as the chain puts it': 401 })
  t.equal((await served.inject({ method: 'GET', url: '/healthz' })).headers['x-parity'], undefined, 'served: its hooks stay out of the gateway\'s own routes')

  // the same dependency check, the same option check
  await t.rejects(buildApp(testConfig({ plugins: [{ name: 'parity', module: url }] }), { logger: false }), { name: 'ConfigError', problems: ['plugins[0]: parity needs auth enabled before it'] })
  const bare = (): FastifyInstance => { const a = Fastify({ logger: false }); t.teardown(() => a.close()); return a }
  const lone = await testGateway(bare())
  await t.rejects(lone.use(def), { name: 'ConfigError', problems: ['plugin parity: parity needs auth enabled before it'] })
  await t.rejects(buildApp(testConfig({ plugins: [{ name: 'auth' }, { name: 'parity', module: url, options: { tag: 5 } }] }), { logger: false }), { name: 'ConfigError', problems: ['plugins[1].options.tag: must be a string'] })
  const typed = await testGateway(bare())
  await typed.use('auth')
  await t.rejects(typed.use(def, { tag: 5 }), { name: 'ConfigError', problems: ['plugin parity.options.tag: must be a string'] })
})
