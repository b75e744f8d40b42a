import t from 'tap'
import { spawn } from 'node:child_process'
import { existsSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import type { FastifyInstance } from 'fastify'
import { buildApp } from '../../app.js'
import { fromRoot } from '../../paths.js'
import { startMockUpstream } from '../mock-upstream.js'
import { childEnv, KEY_A, mockCatalog, testConfig } from '../helper.js'
import { tempDir } from '../temp-dir.js'

// The real Codex CLI (`codex exec`, which speaks only the Responses API) through the gateway to
// the mock upstream, for a model of each upstream protocol. Codex comes from its own package
// (test/agents, installed with `npm ci --prefix test/agents`: its native binary is about 400 MB),
// so it stays out of modelgate's own install; without it these tests are skipped.

const CODEX = fromRoot('test', 'agents', 'node_modules', '.bin', 'codex')

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

t.test('codex exec "say hello" through the gateway, on a model of each upstream protocol', { skip: existsSync(CODEX) ? false : 'the Codex CLI is not installed: run `npm ci --prefix test/agents`' }, async (t) => {
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
