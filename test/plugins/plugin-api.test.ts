import t from 'tap'
import { execFile } from 'node:child_process'
import { copyFileSync, mkdirSync, symlinkSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { pathToFileURL } from 'node:url'
import { promisify } from 'node:util'
import { Writable } from 'node:stream'
import { buildApp } from '../../app.js'
import { ConfigError } from '../../config/load.js'
import { loadGatewayConfig, resolveGatewayConfig } from '../../engine/host/index.js'
import type { CallOutcome } from '../../plugins/api/index.js'
import { fromRoot } from '../../paths.js'
import { childEnv, KEY_A, testConfig } from '../helper.js'
import { tempDir } from '../temp-dir.js'

const run = promisify(execFile)
const BUILTINS = ['auth', 'balance', 'cache', 'cors', 'diagnostics', 'guardrails', 'idempotency', 'quota', 'rate-limit', 'usage', 'metrics', 'tracing']

/**
 * The example plugin as a project that installed modelgate would hold it: a copy of its file in a
 * folder whose node_modules/modelgate is this package, so that its `import 'modelgate/plugin'`
 * resolves as it does outside the project (to the built API).
 */
function exampleTagger (): string {
  const dir = tempDir('tagger')
  mkdirSync(join(dir, 'node_modules'))
  symlinkSync(fromRoot(), join(dir, 'node_modules', 'modelgate'))
  const file = join(dir, 'call-tagger.mjs')
  copyFileSync(fromRoot('examples', 'plugins', 'call-tagger', 'index.mjs'), file)
  return file
}

t.test('each built-in plugin module can be imported alone, in a process that imported nothing else', async (t) => {
  // one process per module, all at once, from the sources as test/build.mjs transpiles them file
  // by file into .build/ (the same modules importing the same modules; dist/ bundles them, and
  // compiling TypeScript in each process would cost it more than the import): each plugin's own
  // behaviour is in test/plugins/<name>.test.ts
  const seen = await Promise.all(BUILTINS.map(async (name) => {
    const file = pathToFileURL(fromRoot('.build', 'plugins', `${name}.js`)).href
    const { stdout } = await run(process.execPath, ['--input-type=module', '-e', `const m = await import(${JSON.stringify(file)}); console.log(m.default.name, typeof m.default.plugin)`], { env: childEnv() })
    return stdout.trim()
  }))
  t.same(seen, BUILTINS.map((name) => `${name} function`))
})

interface HookEntry { label: string, hook: string, model?: string, org?: string | null, provider?: string, attempt?: number, outcome?: CallOutcome, body?: Record<string, unknown> }
const hookLog = (): HookEntry[] => ((globalThis as { __hookLog?: HookEntry[] }).__hookLog ??= [])

/** A config file in a temp folder naming the test recorder and the example plugin by path. */
function configFile (plugins: unknown[], extra: Record<string, unknown> = {}): string {
  const dir = tempDir('plugins')
  const file = join(dir, 'gw.json')
  const base = JSON.parse(JSON.stringify(testConfig())) as Record<string, unknown>
  writeFileSync(file, JSON.stringify({ ...base, plugins, ...extra }))
  return file
}

t.test('plugins from outside the project: loaded by path from the config, hooks in config order with model, principal and outcome', async (t) => {
  const recorder = fromRoot('test', 'fixtures', 'plugins', 'recorder.mjs')
  const tagger = exampleTagger()
  const file = configFile([
    { name: 'auth' },
    { name: 'first', module: recorder, options: { label: 'first' } },
    { name: 'call-tagger', module: tagger, options: { tag: 'blue' } },
    { name: 'second', module: recorder, options: { label: 'second' } },
    { name: 'usage' }
  ])
  const config = await loadGatewayConfig(file, {})
  const app = await buildApp(config)
  t.teardown(() => app.close())
  hookLog().length = 0
  const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { authorization: `Bearer ${KEY_A}` }, payload: { model: 'demo/gpt', messages: [{ role: 'user', content: 'hi' }] } })
  t.equal(res.statusCode, 200)
  t.equal(res.headers['x-call-tag'], 'blue', 'the example plugin tagged the answer')
  const log = hookLog()
  t.same(log.map((e) => `${e.label}:${e.hook}`), [
    'first:onAdmission', 'second:onAdmission',
    'first:onUpstreamRequest', 'second:onUpstreamRequest',
    'first:onResponseBody', 'second:onResponseBody',
    'first:onCallEnd', 'second:onCallEnd'
  ], 'each phase in config order')
  t.match(log[0], { model: 'demo/gpt', org: 'acme' }, 'admission sees the resolved model and the principal')
  t.match(log[2], { provider: 'demo', attempt: 1, model: 'gpt-sim' }, 'the upstream attempt sees the provider and the upstream body')
  const outcome = log[6]?.outcome as CallOutcome
  t.match(outcome, { endpoint: 'chat.completions', model: 'demo/gpt', provider: 'demo', status: 'ok', httpStatus: 200, billed: true, attempted: true, principal: { org: 'acme', project: 'web' } })
  t.ok(outcome.usage.prompt_tokens > 0 && outcome.costNano > 0, 'with usage and cost')
  t.ok(Object.isFrozen(outcome), 'the outcome is immutable')
  t.equal(log[7]?.outcome, outcome, 'every plugin gets the same record')
  const tags = await app.inject({ method: 'GET', url: '/v1/call-tags', headers: { authorization: `Bearer ${KEY_A}` } })
  t.same(tags.json(), { org: 'acme', tag: 'blue', calls: { 'demo/gpt': 1 } }, 'the example plugin counted the call through its outcome')
})

t.test('a streamed call runs the stream hooks on each client event', async (t) => {
  const recorder = fromRoot('test', 'fixtures', 'plugins', 'recorder.mjs')
  const app = await buildApp(await loadGatewayConfig(configFile([{ name: 'auth' }, { name: 'rec', module: recorder, options: { label: 'rec' } }]), {}))
  t.teardown(() => app.close())
  hookLog().length = 0
  const res = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { authorization: `Bearer ${KEY_A}` }, payload: { model: 'demo/gpt', stream: true, messages: [{ role: 'user', content: 'one two three' }] } })
  t.equal(res.statusCode, 200)
  const hooks = hookLog().map((e) => e.hook)
  t.ok(hooks.filter((h) => h === 'onStreamEvent').length >= 3, 'one call per event')
  t.equal(hooks.at(-1), 'onCallEnd')
  t.match(hookLog().at(-1)?.outcome, { stream: true, status: 'ok', billed: true })
})

t.test('a plugin that throws fails its request with a 500 in the route\'s shape, the trace id logged; the next request is served', async (t) => {
  const recorder = fromRoot('test', 'fixtures', 'plugins', 'recorder.mjs')
  const lines: string[] = []
  const sink = new Writable({ write (chunk, _enc, cb) { lines.push(String(chunk)); cb() } })
  const config = await loadGatewayConfig(configFile([{ name: 'auth' }, { name: 'bad', module: recorder, options: { label: 'bad', throwIn: 'onAdmission' } }]), {})
  const app = await buildApp(config, { logger: { level: 'error', stream: sink } })
  t.teardown(() => app.close())
  const chat = await app.inject({ method: 'POST', url: '/v1/chat/completions', headers: { authorization: `Bearer ${KEY_A}` }, payload: { model: 'demo/gpt', messages: [{ role: 'user', content: 'hi' }] } })
  t.equal(chat.statusCode, 500)
  t.same(Object.keys(chat.json().error).sort(), ['code', 'message', 'type'])
  const trace = chat.headers['x-svc-trace-id'] as string
  t.match(chat.json().error.message, trace, 'the message quotes the trace id')
  t.ok(lines.some((l) => l.includes(trace) && l.includes('bad failed in onAdmission')), 'logged with the trace id')
  const messages = await app.inject({ method: 'POST', url: '/v1/messages', headers: { authorization: `Bearer ${KEY_A}` }, payload: { model: 'demo/claude', max_tokens: 5, messages: [{ role: 'user', content: 'hi' }] } })
  t.equal(messages.statusCode, 500)
  t.equal(messages.json().type, 'error', 'the Messages shape on /v1/messages')
  t.equal((await app.inject({ method: 'GET', url: '/v1/models', headers: { authorization: `Bearer ${KEY_A}` } })).statusCode, 200, 'the gateway goes on')
})

t.test('config check: a missing module, a module with no plugin, and bad options name the entry', async (t) => {
  const dir = tempDir('plugins')
  writeFileSync(join(dir, 'not-a-plugin.mjs'), 'export default { hello: 1 }\n')
  const problems = async (plugins: unknown[]): Promise<string[]> => {
    try {
      await resolveGatewayConfig({ ...JSON.parse(JSON.stringify(testConfig())), plugins }, { env: {}, baseDir: dir })
    } catch (err) {
      if (err instanceof ConfigError) return err.problems
      throw err
    }
    return []
  }
  const tagger = exampleTagger()
  t.match(await problems([{ name: 'auth' }, { name: 'x', module: './missing.mjs' }]), [/^plugins\[1\]\.module: cannot load \.\/missing\.mjs: no file /])
  t.match(await problems([{ name: 'x', module: './not-a-plugin.mjs' }]), [/^plugins\[0\]\.module: cannot load \.\/not-a-plugin\.mjs: exports no plugin/])
  t.match(await problems([{ name: 'x', module: 'no-such-package-anywhere' }]), [/^plugins\[0\]\.module: cannot load no-such-package-anywhere: cannot find the package/])
  t.same(await problems([{ name: 'auth' }, { name: 'tagger', module: tagger }]), ['plugins[1].options.tag: is required'])
  t.same(await problems([{ name: 'auth' }, { name: 'tagger', module: tagger, options: { tag: 'x', colour: 'red', header: 5 } }]).then((p) => p.sort()), ['plugins[1].options.colour: is not a known option', 'plugins[1].options.header: must be a string'])
  t.same(await problems([{ name: 'tagger', module: tagger, options: { tag: 'x' } }]), ['plugins[0]: tagger needs auth enabled before it'], 'its declared dependency')
  t.same(await problems([{ name: 'auth', module: tagger, options: { tag: 'x' } }]), [`plugins[0].name: auth is a built-in plugin; give the plugin from ${tagger} another name`])
  t.same(await problems([{ name: 'auth' }, { name: 'metrics' }]), ['plugins[1].name: metrics is switched on by the config\'s own `metrics:` section, not listed here'])
  t.same(await problems([{ name: 'guardrails', options: { rules: [{ name: 'r', pattern: '(' }] } }]).then((p) => p.map((l) => l.replace(/:.*$/, ''))), ['plugins[0].options.rules[0].pattern'], 'a plugin\'s own checks')
  t.same(await problems([{ name: 'auth' }, { name: 'tagger', module: tagger, options: { tag: 'x' } }]), [], 'a good entry')
})

t.test('modelgate config check and modelgate plugins, on a config with an outside plugin', async (t) => {
  const cli = fromRoot('dist', 'cli', 'index.js')
  const tagger = exampleTagger()
  const bad = configFile([{ name: 'auth' }, { name: 'tagger', module: tagger, options: { colour: 'red' } }], { store: { sqlite: ':memory:' } })
  const checked = await run(process.execPath, [cli, 'config', 'check', bad], { env: childEnv() }).then(() => null, (err: { code: number, stderr: string }) => err)
  t.equal(checked?.code, 2)
  t.match(checked?.stderr, /plugins\[1\]\.options\.tag: is required/)
  t.match(checked?.stderr, /plugins\[1\]\.options\.colour: is not a known option/)
  const good = configFile([{ name: 'auth' }, { name: 'tagger', module: tagger, options: { tag: 'blue' } }], { store: { sqlite: ':memory:' } })
  const { stdout } = await run(process.execPath, [cli, 'plugins', '--config', good], { env: childEnv() })
  t.match(stdout, /built-in plugins:/)
  t.match(stdout, /guardrails - /)
  t.match(stdout, /2\. tagger \(from file:.*call-tagger\.mjs\)/)
  t.match(stdout, /tag: string \(required\) = "blue"/)
  t.match(stdout, /header: string, default "x-call-tag"/)
})
