import { isDeepStrictEqual } from 'node:util'
import type { FastifyInstance, FastifyServerOptions } from 'fastify'
import { parseConfig } from '../config/load.js'
import type { Config } from '../config/schema.js'
import type { AnyGatewayPlugin, Clock } from '../plugins/api/index.js'
import type { TestGateway } from '../engine/host/testing.js'
import type { SqliteStore } from '../engine/store/sqlite/index.js'
import { childEnv } from './child-env.js'
import { tempDir } from './temp-dir.js'

// The app, Fastify and the test gateway are imported where they are used: a test that only
// starts gateway processes (or only uses a store) does not load the whole app into its process.

export { childEnv }

export const KEY_A = 'mg-test-key-a-0123456789abcdef'
export const KEY_B = 'mg-test-key-b-0123456789abcdef'
export const KEY_OTHER_ORG = 'mg-test-key-z-0123456789abcdef'

type Overrides = Record<string, unknown>

const model = (id: string, provider: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  id,
  name: id,
  provider,
  context_length: 128000,
  architecture: { input_modalities: ['text', 'image'], output_modalities: ['text'] },
  supported_parameters: ['temperature', 'top_p', 'max_tokens', 'stop', 'stop_sequences', 'tools', 'tool_choice', 'user', 'metadata'],
  pricing: { input: 1, cached_input: 0.5, output: 2 },
  ...extra
})

/** A small config on ':memory:'; `overrides` replace whole top-level sections (server is merged). */
export function testConfig (overrides: Overrides = {}): Config {
  const base: Record<string, unknown> = {
    server: { request_timeout_s: 5 },
    store: { sqlite: ':memory:' },
    plugins: [{ name: 'auth' }, { name: 'diagnostics' }],
    providers: [
      { id: 'demo', protocol: 'openai', builtin: 'demo' },
      { id: 'demo-messages', protocol: 'messages', builtin: 'demo' }
    ],
    models: [
      model('demo/gpt', 'demo', { upstream_model: 'gpt-sim' }),
      model('demo/claude', 'demo-messages', { upstream_model: 'claude-sim' }),
      model('anthropic/claude-x', 'demo-messages'),
      model('anthropic/claude-old', 'demo-messages', { status: 'deprecated' }),
      model('anthropic/claude-gone', 'demo-messages', { status: 'offline' }),
      model('openai/no-price', 'demo', { pricing: undefined, architecture: { input_modalities: ['text'], output_modalities: ['text'] } })
    ],
    tenants: [
      {
        org: 'acme',
        balance_usd: 25,
        projects: [
          { id: 'web', keys: [{ key: KEY_A, name: 'a', models: ['*'] }, { key: KEY_B, name: 'b', models: ['anthropic/*'] }] }
        ]
      },
      { org: 'zeta', projects: [{ id: 'app', keys: [{ key: KEY_OTHER_ORG }] }] }
    ]
  }
  const merged: Record<string, unknown> = { ...base, ...overrides }
  if (overrides.server !== undefined) merged.server = { ...(base.server as object), ...(overrides.server as object) }
  // JSON round trip drops `undefined` fields (a model without pricing)
  return parseConfig(JSON.parse(JSON.stringify(merged)), {})
}

export interface BuildExtras { clock?: Clock, logger?: FastifyServerOptions['logger'] }

export interface Teardown { teardown: (fn: () => unknown) => void }

/** An app on ':memory:' built from testConfig(overrides), closed when the test ends. */
export async function build (t: Teardown, overrides: Overrides = {}, extras: BuildExtras = {}): Promise<FastifyInstance> {
  const { buildApp } = await import('../app.js')
  const app = await buildApp(testConfig(overrides), { logger: extras.logger ?? false, clock: extras.clock })
  t.teardown(() => app.close())
  return app
}

export interface BareOptions {
  /** Config sections for the test gateway (engine/host/testing.ts has the defaults). */
  config?: Record<string, unknown>
  clock?: Clock
  /** Options of the bare Fastify instance (trustProxy, logger). */
  fastify?: FastifyServerOptions
}

/** The plugin API's test gateway on a bare Fastify, nothing added yet (`use`, then `routes`); closed when the test ends. */
export async function testGatewayAlone (t: Teardown, opts: BareOptions = {}): Promise<TestGateway> {
  const { default: Fastify } = await import('fastify')
  const { testGateway } = await import('../engine/host/testing.js')
  const app = Fastify({ logger: false, ...opts.fastify })
  t.teardown(() => app.close())
  return await testGateway(app, { config: opts.config, clock: opts.clock })
}

/** A plugin as bareGateway takes it: a definition or a built-in's name, with its options or with none. */
export type PluginEntry = AnyGatewayPlugin | string | [AnyGatewayPlugin | string, Record<string, unknown>]

/**
 * A bare Fastify with the plugin API's test gateway (an in-memory store, in-process providers
 * `test/echo` and `test/claude`, the tenant acme/web whose key is in `gw.auth`), closed when the
 * test ends; no plugin and no routes yet: `gw.use`, then `gw.routes()` (or bareGateway).
 */
export async function emptyGateway (t: Teardown, opts: BareOptions = {}): Promise<TestGateway> {
  const { default: Fastify } = await import('fastify')
  const { testGateway } = await import('../engine/host/testing.js')
  const app = Fastify({ logger: false, ...opts.fastify })
  t.teardown(() => app.close())
  return await testGateway(app, { config: opts.config, clock: opts.clock })
}

/** emptyGateway with the given plugins registered in order, then the /v1 routes. */
export async function bareGateway (t: Teardown, plugins: PluginEntry[], opts: BareOptions = {}): Promise<TestGateway> {
  const gw = await emptyGateway(t, opts)
  for (const entry of plugins) {
    const [plugin, options] = Array.isArray(entry) ? entry : [entry, {}]
    await gw.use(plugin, options)
  }
  await gw.routes()
  return gw
}

export const bearer = (key: string): Record<string, string> => ({ authorization: `Bearer ${key}` })

/**
 * Holds the answers under `prefix` to their response schemas: an answer whose JSON, once
 * serialized by its route's schema, differs from what its handler returned (a field left out of
 * the schema is dropped, a value of another type coerced) is refused with a 500 and listed in the
 * array returned, so that a test reading the answer fails where a field went missing.
 */
export function watchAnswers (app: FastifyInstance, prefix = '/admin/v1/'): string[] {
  const returned = new WeakMap<object, string>()
  const changed: string[] = []
  app.addHook('preSerialization', async (request, _reply, payload: unknown) => {
    if (request.url.startsWith(prefix)) returned.set(request, JSON.stringify(payload))
    return payload
  })
  app.addHook('onSend', async (request, _reply, payload: unknown) => {
    const before = returned.get(request)
    if (before === undefined || typeof payload !== 'string' || isDeepStrictEqual(JSON.parse(payload), JSON.parse(before))) return payload
    changed.push(`${request.method} ${request.url}: the handler returned ${before.slice(0, 400)}; the schema sent ${payload.slice(0, 400)}`)
    throw new Error(`the answer of ${request.method} ${request.url} lost or changed a field in its response schema`)
  })
  return changed
}

/** A clock tests move by hand. */
export class FakeClock implements Clock {
  constructor (public t = Date.UTC(2026, 0, 15, 12, 0, 0)) {}
  now = (): number => this.t
  /** The pauses asked of it (a retry's), in ms: it moves on by each at once. */
  readonly slept: number[] = []
  sleep = async (ms: number): Promise<void> => { this.slept.push(ms); this.t += ms }
  advance (ms: number): void { this.t += ms }
  set (ms: number): void { this.t = ms }
}

export const UPSTREAM_OPENAI_KEY = 'sk-upstream-openai-secret'
export const UPSTREAM_ANTHROPIC_KEY = 'sk-ant-upstream-secret'

/** Providers and models pointing at a running mock upstream (test/mock-upstream.ts). */
export function mockCatalog (mock: { openaiBaseUrl: string, messagesBaseUrl: string }, extraModels: Array<Record<string, unknown>> = []): Overrides {
  const params = ['temperature', 'top_p', 'max_tokens', 'stop', 'stop_sequences', 'tools', 'tool_choice', 'parallel_tool_calls', 'user', 'metadata', 'thinking']
  const model = (id: string, provider: string | string[], upstream: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    id,
    name: id,
    provider,
    upstream_model: upstream,
    context_length: 200000,
    architecture: { input_modalities: ['text', 'image'], output_modalities: ['text'] },
    supported_parameters: params,
    pricing: { input: 3, cached_input: 0.3, output: 15 },
    ...extra
  })
  return {
    providers: [
      { id: 'mock-openai', protocol: 'openai', base_url: mock.openaiBaseUrl, api_key: UPSTREAM_OPENAI_KEY },
      { id: 'mock-messages', protocol: 'messages', base_url: mock.messagesBaseUrl, api_key: UPSTREAM_ANTHROPIC_KEY },
      // nothing listens on port 9 of loopback: connection refused
      { id: 'mock-dead', protocol: 'openai', base_url: 'http://127.0.0.1:9/v1', api_key: 'x' },
      { id: 'mock-nokey', protocol: 'openai', base_url: mock.openaiBaseUrl }
    ],
    models: [
      model('openai/gpt-test', 'mock-openai', 'gpt-upstream-name', { default_parameters: { temperature: 0.25 } }),
      model('anthropic/claude-test', 'mock-messages', 'claude-upstream-name'),
      model('openai/failover', ['mock-dead', 'mock-openai'], 'gpt-upstream-name'),
      model('openai/video', 'mock-openai', 'gpt-video', { architecture: { input_modalities: ['text', 'image', 'video'], output_modalities: ['text'] } }),
      model('openai/text-only', 'mock-openai', 'gpt-text', { architecture: { input_modalities: ['text'], output_modalities: ['text'] } }),
      model('openai/unusable', 'mock-nokey', 'gpt-x'),
      ...extraModels
    ]
  }
}

export const UPSTREAM_GEMINI_KEY = 'AIzaSy-upstream-gemini-secret'

/**
 * mockCatalog with a Gemini provider besides (`mock-gemini`, the mock's Gemini API) and its model
 * `google/gemini-test` (sent upstream as `gemini-upstream-name`), which lists the Gemini-side
 * parameters (top_k, reasoning_effort) too.
 */
export function mockCatalogWithGemini (mock: { openaiBaseUrl: string, messagesBaseUrl: string, geminiBaseUrl: string }, extraModels: Array<Record<string, unknown>> = []): Overrides {
  const catalog = mockCatalog(mock, extraModels)
  const openai = (catalog.models as Array<Record<string, unknown>>)[0] as Record<string, unknown>
  return {
    providers: [...catalog.providers as unknown[], { id: 'mock-gemini', protocol: 'gemini', base_url: mock.geminiBaseUrl, api_key: UPSTREAM_GEMINI_KEY }],
    models: [
      ...catalog.models as unknown[],
      {
        ...openai,
        id: 'google/gemini-test',
        name: 'google/gemini-test',
        provider: 'mock-gemini',
        upstream_model: 'gemini-upstream-name',
        default_parameters: {},
        supported_parameters: [...openai.supported_parameters as string[], 'top_k', 'reasoning_effort', 'seed', 'response_format']
      }
    ]
  }
}

/** The SQLite store behind an app, for tests that look at its tables. */
export function sqliteOf (app: FastifyInstance): SqliteStore {
  const store = app.gateway.store
  if (store.kind !== 'sqlite') throw new Error('not a SQLite store')
  return store as SqliteStore
}

export interface ListeningGateway {
  app: FastifyInstance
  mock: import('./mock-upstream.js').MockUpstream
  /** http://127.0.0.1:<port> */
  base: string
  /** The usage records, newest first. */
  rows: () => Promise<import('../engine/store/types.js').UsageRow[]>
}

/**
 * A gateway on a real socket in front of a fresh mock upstream (its catalog from mockCatalog),
 * with auth and usage; `configure` gets the mock and returns the config sections to use. Both
 * are closed when the test ends.
 */
export async function listeningGateway (t: Teardown, configure: (mock: import('./mock-upstream.js').MockUpstream) => Overrides = () => ({})): Promise<ListeningGateway> {
  const { startMockUpstream } = await import('./mock-upstream.js')
  const { buildApp } = await import('../app.js')
  const mock = await startMockUpstream()
  const app = await buildApp(testConfig({ ...mockCatalog(mock), plugins: [{ name: 'auth' }, { name: 'usage' }], ...configure(mock) }))
  await app.listen({ host: '127.0.0.1', port: 0 })
  const port = (app.server.address() as { port: number }).port
  t.teardown(async () => { await app.close(); await mock.close() })
  return { app, mock, base: `http://127.0.0.1:${port}`, rows: async () => await app.gateway.store.usage.page({}, 100) }
}

/**
 * Polls `get` until `ok` holds of its value or `ms` have passed, and returns the last value: for
 * what another process makes true in its own time (a change heard over the store's bus, a
 * worker's restart). The test asserts on the value; no test waits a fixed time.
 */
export async function eventually<T> (ms: number, get: () => T | Promise<T>, ok: (v: T) => boolean, everyMs = 25): Promise<T> {
  const until = Date.now() + ms
  for (;;) {
    const v = await get()
    if (ok(v) || Date.now() > until) return v
    await new Promise((resolve) => setTimeout(resolve, everyMs))
  }
}

/** Lets end-of-response work (metering, ledger, idempotency) that follows a response run. */
export const settled = async (): Promise<void> => { await new Promise((resolve) => setImmediate(resolve)) }

export interface SpawnedGateway {
  port: number
  /** The serving process (with --workers, the cluster's primary). */
  pid: number
  exited: Promise<number | null>
  kill: (signal?: NodeJS.Signals) => void
  /** Resolves with everything written to stdout so far, once it matches `re`. */
  stdout: (re: RegExp) => Promise<string>
  /** The config file it serves (a test may rewrite it and ask for a reload). */
  configFile: string
}

/**
 * `modelgate serve` in a child process on a config written to a temp file (`gw.json` in `dir`,
 * a new folder by default); killed when the test ends.
 */
export async function spawnGateway (t: Teardown, config: Record<string, unknown>, args: string[] = [], env: Record<string, string> = {}, dir = tempDir('serve')): Promise<SpawnedGateway> {
  const { spawn } = await import('node:child_process')
  const { writeFileSync } = await import('node:fs')
  const { join } = await import('node:path')
  const { fromRoot } = await import('../paths.js')
  const file = join(dir, 'gw.json')
  // a SQLite file of its own unless the test names one, never the checkout's data/modelgate.db
  // (the pid file goes beside it, with a PostgreSQL store too)
  const store = { sqlite: join(dir, 'gw.db'), ...(config.store as Record<string, unknown> | undefined) }
  writeFileSync(file, JSON.stringify({ server: { port: 0 }, ...config, store }))
  // the built CLI (npm test builds first): compiling the sources in each child would take seconds
  const child = spawn(process.execPath, [fromRoot('dist', 'cli', 'index.js'), 'serve', '--config', file, ...args], {
    cwd: fromRoot(), env: childEnv({ LOG_LEVEL: 'warn', ...env }), stdio: ['ignore', 'pipe', 'pipe']
  })
  // what it says on stderr goes on to the test's, and its end is kept for the message of an early exit
  let err = ''
  child.stderr.on('data', (d: Buffer) => { process.stderr.write(d); err = (err + String(d)).slice(-4000) })
  // 'close': the process is gone and its output read to the end
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve))
  t.teardown(() => { if (child.exitCode === null) child.kill('SIGKILL') })
  let out = ''
  child.stdout.on('data', (d: Buffer) => { out += String(d) })
  const stdout = async (re: RegExp): Promise<string> => await new Promise((resolve, reject) => {
    const check = (): void => {
      if (!re.test(out)) return
      child.stdout.off('data', check)
      resolve(out)
    }
    child.stdout.on('data', check)
    check()
    void exited.then((code) => reject(new Error(`gateway exited with ${String(code)}; its output: ${out}; its stderr: ${err}`)))
  })
  const listening = await stdout(/listening on http:\/\/[^/]+:(\d+)/)
  const port = Number(/listening on http:\/\/[^/]+:(\d+)/.exec(listening)?.[1])
  return { port, pid: child.pid as number, exited, kill: (signal = 'SIGTERM') => child.kill(signal), stdout, configFile: file }
}
