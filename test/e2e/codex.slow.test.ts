import t, { type Test } from 'tap'
import { spawn } from 'node:child_process'
import { existsSync, mkdirSync, writeFileSync } from 'node:fs'
import { createServer } from 'node:net'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { fromRoot } from '../../paths.js'
import { startMockUpstream } from '../mock-upstream.js'
import { childEnv, KEY_A, mockCatalog, mockCatalogWithGemini, testConfig } from '../helper.js'
import { tempDir } from '../temp-dir.js'

// The real agent CLIs through the gateway to the mock upstream, for a model of each upstream
// protocol: the Codex CLI (`codex exec`, which speaks only the Responses API) and the Gemini CLI
// (`gemini -p`, which speaks only Google's Gemini API). They come from their own package
// (test/agents, installed with `npm ci --prefix test/agents`: Codex's native binary is about
// 400 MB), so they stay out of modelgate's own install; without it these tests are skipped.

const CODEX = fromRoot('test', 'agents', 'node_modules', '.bin', 'codex')
const GEMINI = fromRoot('test', 'agents', 'node_modules', '.bin', 'gemini')
const NOT_INSTALLED = 'test/agents is not installed: run `npm ci --prefix test/agents`'

interface Run { code: number | null, stdout: string, stderr: string }

// stdin is closed: `codex exec` reads a piped stdin to its end before it starts
function codex (home: string, cwd: string, args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(CODEX, ['exec', '--skip-git-repo-check', ...args], { cwd, timeout: 60_000, stdio: ['ignore', 'pipe', 'pipe'], env: childEnv({ CODEX_HOME: home, MODELGATE_KEY: KEY_A }) })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => { stdout += String(d) })
    child.stderr.on('data', (d: Buffer) => { stderr += String(d) })
    child.on('close', (code) => { resolve({ code, stdout, stderr }) })
  })
}

t.test('codex exec "say hello" through the gateway, on a model of each upstream protocol', { skip: existsSync(CODEX) ? false : NOT_INSTALLED }, async (t) => {
  const mock = await startMockUpstream()
  const app: FastifyInstance = await buildApp(testConfig({ ...mockCatalog(mock), plugins: [{ name: 'auth' }, { name: 'usage' }] }))
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { await app.close(); await mock.close() })
  const port = (app.server.address() as { port: number }).port
  const home = tempDir('codex-home')
  const work = tempDir('codex-work')
  writeFileSync(join(home, 'config.toml'), [
    'model_provider = "modelgate"',
    '[model_providers.modelgate]',
    'name = "modelgate"',
    `base_url = "http://127.0.0.1:${port}/v1"`,
    'env_key = "MODELGATE_KEY"',
    'wire_api = "responses"',
    'request_max_retries = 0',
    'stream_max_retries = 0',
    ''
  ].join('\n'))

  for (const model of ['openai/gpt-test', 'anthropic/claude-test']) {
    const before = mock.requests.length
    const run = await codex(home, work, ['-m', model, 'say hello'])
    t.equal(run.code, 0, `${model}: codex exits 0 (${run.stderr.split('\n').filter((l) => /error/i.test(l)).slice(0, 3).join(' | ')})`)
    t.match(run.stdout, /Echo: /, `${model}: its answer is the upstream's`)
    const sent = mock.requests.slice(before)
    t.ok(sent.length >= 1, 'the call reached the upstream')
    t.equal(sent[0]?.path, model.startsWith('anthropic/') ? '/v1/messages' : '/v1/chat/completions', 'translated to the upstream\'s protocol')
    const body = sent[0]?.body as Record<string, unknown>
    t.equal(body.stream, true, 'codex streams')
    t.ok(Array.isArray(body.tools) && body.tools.length > 0, 'its function tools went upstream')
  }
  const records = await app.gateway.store.usage.page({}, 20)
  t.ok(records.length >= 2)
  t.ok(records.every((r) => r.endpoint === 'responses' && r.status === 'ok' && r.prompt_tokens > 0), 'metered as Responses calls')
})

// what `gemini -p` reaches besides its base URL (Google's usage statistics, update checks...) goes
// through HTTPS_PROXY: a listener that takes note of each connection and closes it
async function proxyTrap (t: Test): Promise<{ url: string, seen: string[] }> {
  const seen: string[] = []
  const server = createServer((socket) => {
    socket.once('data', (d: Buffer) => { seen.push(String(d).split('\r\n', 1)[0] ?? '') })
    socket.on('error', () => {})
    setTimeout(() => socket.destroy(), 50)
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  t.teardown(() => new Promise<void>((resolve) => server.close(() => resolve())))
  return { url: `http://127.0.0.1:${(server.address() as { port: number }).port}`, seen }
}

function gemini (env: Record<string, string>, cwd: string, args: string[]): Promise<Run> {
  return new Promise((resolve) => {
    const child = spawn(GEMINI, args, { cwd, timeout: 90_000, stdio: ['ignore', 'pipe', 'pipe'], env: childEnv(env) })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d: Buffer) => { stdout += String(d) })
    child.stderr.on('data', (d: Buffer) => { stderr += String(d) })
    child.on('close', (code) => { resolve({ code, stdout, stderr }) })
  })
}

t.test('gemini -p "say hello" through the gateway, on a model of each upstream protocol', { skip: existsSync(GEMINI) ? false : NOT_INSTALLED }, async (t) => {
  const mock = await startMockUpstream()
  const app: FastifyInstance = await buildApp(testConfig({ ...mockCatalogWithGemini(mock), plugins: [{ name: 'auth' }, { name: 'usage' }] }))
  await app.listen({ host: '127.0.0.1', port: 0 })
  t.teardown(async () => { await app.close(); await mock.close() })
  const port = (app.server.address() as { port: number }).port
  const trap = await proxyTrap(t)
  const home = tempDir('gemini-home')
  const work = tempDir('gemini-work')
  mkdirSync(join(home, '.gemini'))
  // API-key auth; no usage statistics, telemetry or update checks
  writeFileSync(join(home, '.gemini', 'settings.json'), JSON.stringify({
    security: { auth: { selectedType: 'gemini-api-key' } },
    privacy: { usageStatisticsEnabled: false },
    telemetry: { enabled: false },
    general: { enableAutoUpdate: false, enableAutoUpdateNotification: false }
  }))
  const env = {
    HOME: home,
    GEMINI_CLI_HOME: home,
    GEMINI_CLI_SYSTEM_SETTINGS_PATH: join(home, 'system-settings.json'),
    GOOGLE_GEMINI_BASE_URL: `http://127.0.0.1:${port}`,
    GEMINI_API_KEY: KEY_A,
    GEMINI_CLI_TRUST_WORKSPACE: 'true',
    GEMINI_TELEMETRY_ENABLED: 'false',
    HTTPS_PROXY: trap.url,
    HTTP_PROXY: trap.url,
    NO_PROXY: '127.0.0.1,localhost'
  }

  for (const model of ['google/gemini-test', 'openai/gpt-test', 'anthropic/claude-test']) {
    const before = mock.requests.length
    const run = await gemini(env, work, ['-p', 'say hello', '-m', model])
    t.equal(run.code, 0, `${model}: gemini exits 0 (${run.stderr.split('\n').filter((l) => /error/i.test(l)).slice(0, 3).join(' | ')})`)
    t.match(run.stdout, /^Echo: /, `${model}: it printed the model's answer`)
    const sent = mock.requests.slice(before)
    t.ok(sent.length >= 1, 'the call reached the upstream')
    const want = model === 'google/gemini-test' ? '/v1beta/models/gemini-upstream-name:streamGenerateContent' : model.startsWith('anthropic/') ? '/v1/messages' : '/v1/chat/completions'
    t.equal(sent[0]?.path, want, 'in the upstream\'s protocol')
    const body = sent[0]?.body as Record<string, unknown>
    const tools = model === 'google/gemini-test' ? (body.tools as Array<{ functionDeclarations: unknown[] }>)[0]?.functionDeclarations : body.tools as unknown[]
    t.ok(Array.isArray(tools) && tools.length > 0, 'its function tools went upstream')
  }
  t.same(trap.seen, [], 'the CLI reached nothing but the gateway')
  const records = await app.gateway.store.usage.page({}, 20)
  t.ok(records.length >= 3)
  t.ok(records.every((r) => r.endpoint === 'generate_content' && r.status === 'ok' && r.stream === 1 && r.prompt_tokens > 0), 'metered as streamed generate_content calls')
})
