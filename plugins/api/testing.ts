import type { FastifyInstance } from 'fastify'
import fp from 'fastify-plugin'
import { Registry } from 'prom-client'
import { parseConfig } from '../../config/load.js'
import type { Clock, Gateway, GatewayPlugin } from './index.js'
import { createGateway, installGateway } from '../gateway/core.js'
import { checkOptions } from '../gateway/plugin-options.js'
import { builtinPlugin } from '../gateway/registry.js'
import { SqliteStore } from '../store/sqlite/index.js'

// The plugin API's test helper (what an outside package imports as `modelgate/testing`): a gateway on a bare Fastify instance, with an in-memory
// store and two simulated providers (one per upstream protocol), for testing one plugin alone.
//
//   const app = Fastify()
//   const gw = await testGateway(app)
//   await gw.use(myPlugin, { tag: 'blue' })
//   await gw.routes()                     // the /v1 (and /v1beta) call routes, after the plugins
//   const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: gw.auth, payload: {...} })

export const TEST_KEY = 'mg-test-gateway-key-0123456789abcdef'

export interface TestGatewayOptions {
  /**
   * Config sections (as in the config file) to use instead of the defaults: a catalog of
   * `test/echo` (OpenAI protocol) and `test/claude` (Messages protocol) answered in-process, and
   * one tenant `acme` with a project `web` whose key is TEST_KEY.
   */
  config?: Record<string, unknown>
  clock?: Clock
}

export interface TestGateway {
  readonly app: FastifyInstance
  readonly gateway: Gateway
  /** Headers that authenticate as the default tenant's key (for a test that registers the auth plugin). */
  readonly auth: Record<string, string>
  /**
   * Registers a plugin as the chain would: options validated against its schema and defaulted.
   * A built-in is named by its name (`use('auth')`), so a plugin's own tests can put it behind
   * the gateway's key check.
   */
  use: <O extends Record<string, unknown>>(plugin: GatewayPlugin | string, options?: O) => Promise<void>
  /**
   * Mounts the gateway's routes under /v1 (chat, messages, responses, models, Gemini's method
   * calls) and the Gemini API under /v1beta; call it after `use`.
   */
  routes: () => Promise<void>
}

const model = (id: string, provider: string): Record<string, unknown> => ({
  id,
  name: id,
  provider,
  context_length: 100_000,
  max_output_tokens: 4096,
  architecture: { input_modalities: ['text', 'image'], output_modalities: ['text'] },
  supported_parameters: ['temperature', 'top_p', 'max_tokens', 'stop', 'stop_sequences', 'tools', 'tool_choice', 'user', 'metadata'],
  pricing: { input: 1, cached_input: 0.5, output: 2 }
})

const DEFAULTS: Record<string, unknown> = {
  store: { sqlite: ':memory:' },
  providers: [
    { id: 'test-openai', protocol: 'openai', builtin: 'demo' },
    { id: 'test-messages', protocol: 'messages', builtin: 'demo' }
  ],
  models: [model('test/echo', 'test-openai'), model('test/claude', 'test-messages')],
  tenants: [{ org: 'acme', balance_usd: 10, projects: [{ id: 'web', keys: [{ key: TEST_KEY, name: 'test' }] }] }]
}

export async function testGateway (app: FastifyInstance, opts: TestGatewayOptions = {}): Promise<TestGateway> {
  const config = parseConfig({ ...DEFAULTS, ...opts.config, plugins: [] }, {})
  const store = new SqliteStore(':memory:', { now: opts.clock?.now })
  await store.syncTenants(config, (opts.clock ?? { now: Date.now }).now())
  const core = createGateway({ config, store, clock: opts.clock, log: app.log, metrics: new Registry() })
  installGateway(app, core)
  app.addHook('onClose', async () => {
    await core.gateway.upstreams.close()
    await store.close()
  })
  let n = 0
  return {
    app,
    gateway: core.gateway,
    auth: { authorization: `Bearer ${TEST_KEY}` },
    async use (which, options = {} as never) {
      const plugin = typeof which === 'string' ? builtinPlugin(which) : which
      if (plugin === undefined) throw new Error(`no built-in plugin ${String(which)}`)
      const values: Record<string, unknown> = { ...options }
      const problems = plugin.options === undefined ? [] : checkOptions(plugin.options, values, 'options')
      if (problems.length === 0 && plugin.validate !== undefined) problems.push(...plugin.validate(values as never).map((p) => `options.${p}`))
      if (problems.length > 0) throw new Error(`plugin ${plugin.name}: ${problems.join('; ')}`)
      await app.register(fp(async (i, o) => { await plugin.plugin(i, o as never) }, { name: `modelgate-${plugin.name}-${++n}` }), values)
    },
    async routes () {
      const { routeValidatorCompiler } = await import('../../routes/schemas.js')
      app.setValidatorCompiler(routeValidatorCompiler())
      const v1 = (await import('../../routes/v1/index.js')).default
      const gemini = (await import('../../routes/v1/gemini.js')).default
      await app.register(v1, { prefix: '/v1' })
      await app.register(gemini, { prefix: '/v1beta', underOpenAI: false })
    }
  }
}
