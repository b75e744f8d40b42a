import t from 'tap'
import { writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { ConfigError, loadConfig, parseConfig } from '../../config/load.js'
import { uncredentialedProviders } from '../../cli/credentials.js'
import { tempDir } from '../temp-dir.js'

// The cloud platforms' config: what each platform needs and takes, the protocols it serves, the
// kinds of model it serves, and the credentials `config check` says are missing, by variable.

const problemsOf = (raw: unknown): string[] => {
  try {
    parseConfig(raw, {})
  } catch (err) {
    if (err instanceof ConfigError) return err.problems
    throw err
  }
  return []
}
const chat = (id: string, provider: unknown, out = ['text']): Record<string, unknown> => ({ id, name: id, provider, context_length: 1000, architecture: { input_modalities: ['text'], output_modalities: out } })

t.test('each platform\'s fields and protocols, errors naming the path', async (t) => {
  const good = [
    { id: 'az', protocol: 'openai', platform: 'azure', base_url: 'https://r.openai.azure.com', api_key: 'k', api_version: '2024-10-21' },
    { id: 'vx', protocol: 'gemini', platform: 'vertex', project: 'p', location: 'us-central1', access_token: 'tok' },
    { id: 'vc', protocol: 'messages', platform: 'vertex', project: 'p', location: 'us-east5', credentials_file: '/sa.json' },
    { id: 'br', protocol: 'converse', platform: 'bedrock', region: 'us-east-1' }
  ]
  t.same(problemsOf({ providers: good, models: [chat('m', [{ id: 'vc', upstream_model: 'claude@1' }, { id: 'br', upstream_model: 'anthropic.claude:0' }, 'az'])] }), [], 'valid, base_url optional on bedrock and vertex')
  const bad = problemsOf({
    providers: [
      { id: 'c', protocol: 'converse', base_url: 'https://x' },
      { id: 'a', protocol: 'messages', platform: 'azure', base_url: 'https://x', region: 'us-east-1' },
      { id: 'v', protocol: 'openai', platform: 'vertex', location: 'us-central1', credentials_file: 'f', access_token: 't' },
      { id: 'b', protocol: 'converse', platform: 'bedrock' },
      { id: 'o', protocol: 'openai', base_url: 'https://x', project: 'p' }
    ],
    models: []
  })
  for (const want of [
    /^providers\[0\]\.protocol: converse is AWS Bedrock's API: it needs platform: bedrock$/,
    /^providers\[1\]\.protocol: platform azure serves openai, not messages$/,
    /^providers\[1\]\.api_version: is required for platform azure$/,
    /^providers\[1\]\.region: is not a field of platform azure$/,
    /^providers\[2\]\.protocol: platform vertex serves gemini or messages, not openai$/,
    /^providers\[2\]\.project: is required for platform vertex$/,
    /^providers\[2\]\.access_token: set credentials_file or access_token, not both$/,
    /^providers\[3\]\.region: is required for platform bedrock$/,
    /^providers\[4\]\.project: is for a cloud platform's provider only/
  ]) t.ok(bad.some((p) => want.test(p)), `${String(want)} in ${bad.join(' | ')}`)

  const kinds = problemsOf({ providers: good, models: [chat('e', 'vx', ['embeddings']), chat('i', ['az', 'br'], ['image']), chat('ea', 'az', ['embeddings'])] })
  t.same(kinds, [
    'models[0].provider: vx is on Google Vertex AI, where the gateway serves chat models only (embedding models: the vendor\'s own API or azure)',
    'models[1].provider[1]: br is on AWS Bedrock, where the gateway serves chat models only (image models: the vendor\'s own API or azure)'
  ], 'embedding and image models on bedrock or vertex refused, on azure served')
})

t.test('config check names the variable of a missing credential', async (t) => {
  const dir = tempDir('platform-config')
  const file = join(dir, 'gateway.yaml')
  writeFileSync(file, [
    'providers:',
    '  - { id: az, protocol: openai, platform: azure, base_url: "https://r.openai.azure.com", api_key: "${AZURE_OPENAI_API_KEY:-}", api_version: "2024-10-21" }',
    '  - { id: vx, protocol: gemini, platform: vertex, project: p, location: global, credentials_file: "${GOOGLE_APPLICATION_CREDENTIALS:-}" }',
    '  - { id: br, protocol: converse, platform: bedrock, region: us-east-1 }',
    '  - { id: ok, protocol: gemini, platform: vertex, project: p, location: global, access_token: "${VERTEX_TOKEN:-}" }',
    'models: []'
  ].join('\n'))
  const config = await loadConfig(file, { VERTEX_TOKEN: 'set' })
  const missing = uncredentialedProviders(config, file, { VERTEX_TOKEN: 'set' })
  t.same(missing.map((m) => `${m.provider.id}: ${m.what}`), [
    'az: AZURE_OPENAI_API_KEY is not set',
    'vx: GOOGLE_APPLICATION_CREDENTIALS is not set',
    'br: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY are not set'
  ])
  const withAws = uncredentialedProviders(config, file, { VERTEX_TOKEN: 'set', AWS_ACCESS_KEY_ID: 'a', AWS_SECRET_ACCESS_KEY: 'b' })
  t.notOk(withAws.some((m) => m.provider.id === 'br'), 'Bedrock takes the environment\'s AWS keys')
  t.equal(config.providers[1]?.credentials_file, '', 'an empty file is no credential')
})
