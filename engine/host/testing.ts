import type { FastifyInstance } from 'fastify'
import { Registry } from 'prom-client'
import { parseConfig } from '../../config/load.js'
import { API_PREFIXES, apiRoutes } from '../../routes/api.js'
import { routeValidatorCompiler } from '../../routes/schemas.js'
import type { AnyGatewayPlugin, Clock, Gateway } from '../../plugins/api/index.js'
import { createGateway, installGateway } from '../gateway/core.js'
import { SqliteStore } from '../store/sqlite/index.js'
import { builtinPlugin, PluginHost } from './index.js'

// The plugin API's test helper (what an outside package imports as `modelgate/testing`): a
// gateway on a bare Fastify instance, with an in-memory store and two simulated providers (one
// per upstream protocol), for testing one plugin alone. The plugins given to `use` go through the
// plugin host exactly as a config's chain does when the gateway serves: options validated and
// defaulted by the same validator, dependencies checked in order, 'app' plugins on the whole app
// and the others in the API's scope beside the routes, a plugin's own routes under /v1.
//
//   const app = Fastify()
//   const gw = await testGateway(app)
//   await gw.use(myPlugin, { tag: 'blue' })
//   await gw.routes()                     // mounts the chain and the /v1 (and /v1beta) routes
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
   * Adds a plugin to the chain as a config entry would: options validated against its schema and
   * defaulted, its dependencies checked against the plugins added before it (an Error otherwise).
   * A built-in is named by its name (`use('auth')`), so a plugin's own tests can put it behind
   * the gateway's key check.
   */
  use: <O extends Record<string, unknown>>(plugin: AnyGatewayPlugin | string, options?: O) => Promise<void>
  /**
   * Mounts the chain and the gateway's routes as a serving gateway does: the API's scope with the
   * plugins in the order given, /v1 (chat, messages, responses, models, Gemini's method calls),
   * the Gemini API under /v1beta, and the pass-through routes of the config's providers; call it
   * once, after `use`.
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
  const host = PluginHost.empty()
  let mounted = false
  return {
    app,
    gateway: core.gateway,
    auth: { authorization: `Bearer ${TEST_KEY}` },
    async use (which, options = {} as never) {
      if (mounted) throw new Error('testGateway: use() comes before routes()')
      const plugin = typeof which === 'string' ? await builtinPlugin(which) : which
      if (plugin === undefined) throw new Error(`no built-in plugin ${String(which)}`)
      host.add(plugin, options)
    },
    async routes () {
      if (mounted) throw new Error('testGateway: routes() is called once')
      mounted = true
      app.setValidatorCompiler(routeValidatorCompiler())
      await host.mount(app, async (api) => { await apiRoutes(api, config) }, { corePrefixes: API_PREFIXES })
    }
  }
}
