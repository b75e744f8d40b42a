import t from 'tap'
import { execFile } from 'node:child_process'
import { readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { promisify } from 'node:util'
import YAML from 'yaml'
import { loadConfig } from '../config/load.js'
import { fromRoot } from '../paths.js'
import { build, childEnv } from './helper.js'
import { tempDir } from './temp-dir.js'

// `modelgate models add | check` and GET /admin/v1/prices/check against the price database the
// gateway ships (@pydantic/genai-prices, its bundled data as installed by package-lock.json).
// The prices expected below are the providers' published list prices.

const run = promisify(execFile)
const CLI = fromRoot('dist', 'cli', 'index.js')

async function cli (args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [CLI, ...args], { env: childEnv() })
    return { code: 0, stdout, stderr }
  } catch (err) {
    const e = err as { code: number, stdout: string, stderr: string }
    return { code: e.code, stdout: e.stdout, stderr: e.stderr }
  }
}

const PROVIDERS = `providers:
  - { id: openai, protocol: openai, base_url: https://api.openai.com/v1 }
  - { id: anthropic, protocol: messages, base_url: https://api.anthropic.com }
  - { id: google, protocol: gemini, base_url: https://generativelanguage.googleapis.com }
`

/** A config file of the three providers and `models` (YAML lines), with a comment to keep. */
function configFile (models = 'models: []\n'): string {
  const file = join(tempDir('models'), 'gateway.yaml')
  writeFileSync(file, `# my gateway\nstore: { sqlite: ':memory:' }\n${PROVIDERS}${models}`)
  return file
}

/**
 * What `models add` printed for a provider's model, on the config file of the three providers
 * alone: a printing changes no file, and the same one is asked for by more than one test.
 */
const printed = new Map<string, Promise<{ code: number, stdout: string, stderr: string }>>()
let plainFile: string | undefined
async function added (args: string[]): Promise<{ code: number, stdout: string, stderr: string }> {
  plainFile ??= configFile()
  const key = args.join(' ')
  let res = printed.get(key)
  if (res === undefined) { res = cli(['models', 'add', ...args, '--config', plainFile]); printed.set(key, res) }
  return await res
}

/** The entry `models add` printed, parsed. */
const entryOf = (stdout: string): Record<string, any> => (YAML.parse(stdout) as Array<Record<string, any>>)[0] as Record<string, any>

t.test('models add: an entry with context length, modalities and every price, for current models of each provider', async (t) => {
  const file = configFile()
  const cases: Array<{ args: string[], want: Record<string, unknown> }> = [
    { args: ['anthropic', 'claude-sonnet-4-5'], want: { context_length: 200000, architecture: { input_modalities: ['text', 'image'], output_modalities: ['text'] }, pricing: { input: 3, cached_input: 0.3, cache_write: 3.75, cache_write_1h: 6, output: 15, server_tools: { web_search: 0.01 } } } },
    { args: ['anthropic', 'claude-haiku-4-5'], want: { context_length: 200000, pricing: { input: 1, cached_input: 0.1, cache_write: 1.25, cache_write_1h: 2, output: 5, server_tools: { web_search: 0.01 } } } },
    { args: ['anthropic', 'claude-opus-4-1'], want: { pricing: { input: 15, cached_input: 1.5, cache_write: 18.75, cache_write_1h: 30, output: 75, server_tools: { web_search: 0.01 } } } },
    { args: ['openai', 'gpt-4o-mini'], want: { context_length: 128000, pricing: { input: 0.15, cached_input: 0.075, output: 0.6, server_tools: { web_search: 0.01, file_search: 0.0025 } } } },
    { args: ['openai', 'gpt-4.1'], want: { pricing: { input: 2, cached_input: 0.5, output: 8, server_tools: { web_search: 0.01, file_search: 0.0025 } } } },
    { args: ['openai', 'text-embedding-3-small'], want: { context_length: 8192, architecture: { input_modalities: ['text'], output_modalities: ['embeddings'] }, pricing: { input: 0.02 }, supported_parameters: [] } },
    // audio input at its own rate (Gemini 2.5 Flash: $1.00 per million audio tokens)
    { args: ['google', 'gemini-2.5-flash'], want: { context_length: 1048576, pricing: { input: 0.3, cached_input: 0.03, output: 2.5, input_audio: 1 } } },
    { args: ['openai', 'gpt-4o-realtime-preview'], want: { context_length: 32000, pricing: { input: 5, cached_input: 2.5, output: 20, input_audio: 40, output_audio: 80 } } },
    { args: ['google', 'gemini-2.5-pro', '--context-length', '1048576'], want: { context_length: 1048576, pricing: { input: 1.25, cached_input: 0.125, output: 10, tiers: [{ above_input_tokens: 200000, input: 2.5, cached_input: 0.25, output: 15 }] } } }
  ]
  for (const c of cases) {
    const res = await added(c.args)
    t.equal(res.code, 0, `${c.args.join(' ')}: ${res.stderr}`)
    const entry = entryOf(res.stdout)
    t.match(entry, { id: `${c.args[0] as string}/${c.args[1] as string}`, provider: c.args[0], upstream_model: c.args[1], ...c.want }, c.args.join(' '))
    t.same(entry.pricing, c.want.pricing, `${c.args.join(' ')}: exactly these prices`)
    t.match(res.stdout, /^# from @pydantic\/genai-prices@\d+\.\d+\.\d+ /, 'the source first, as a comment')
  }
  const sonnet = await added(['anthropic', 'claude-sonnet-4-5'])
  t.match(sonnet.stdout, /# tiers above the context length \(200000\) left out/, 'a tier no prompt reaches is left out, and said so')
  t.notMatch(sonnet.stdout, /# not billed by the gateway: web_searches_kcount/, 'web searches are billed, at their price per use')

  const pro = await cli(['models', 'add', 'google', 'gemini-2.5-pro', '--config', file])
  t.equal(pro.code, 2)
  t.match(pro.stderr, /no context length for gemini-2\.5-pro: give --context-length N/)
  const unknown = await cli(['models', 'add', 'openai', 'gpt-nonexistent-9', '--config', file])
  t.equal(unknown.code, 2)
  t.match(unknown.stderr, /does not know gpt-nonexistent-9 of openai/)
  const whisper = await cli(['models', 'add', 'openai', 'whisper-1', '--config', file])
  t.equal(whisper.code, 2)
  t.match(whisper.stderr, /prices whisper-1 in no unit the gateway bills by \(audio_hours.*\): write its pricing by hand/, 'no entry rather than a free one')
  const noProvider = await cli(['models', 'add', 'mistral', 'x', '--config', file])
  t.match(noProvider.stderr, /mistral is no provider of .*it has openai, anthropic, google/)
})

t.test('models add: a display name as the model\'s maker writes it, and the output limit given', async (t) => {
  const file = configFile()
  const named = async (provider: string, model: string): Promise<string> => entryOf((await added([provider, model])).stdout).name as string
  t.equal(await named('openai', 'gpt-4.1-nano'), 'GPT-4.1 nano', 'not the database\'s "gpt 4.1 nano"')
  t.equal(await named('openai', 'gpt-4o-mini'), 'GPT-4o mini')
  t.equal(await named('anthropic', 'claude-sonnet-4-5'), 'Claude Sonnet 4.5', 'the database\'s own, where someone wrote it')
  t.equal(await named('google', 'gemini-2.0-flash-lite'), 'Gemini 2.0 Flash Lite')
  t.equal(await named('openai', 'o4-mini'), 'o4-mini', 'not the database\'s "o4 Mini High", another model\'s name')
  t.equal(await named('openai', 'text-embedding-3-small'), 'text-embedding-3-small', 'an id of no family known: itself')
  const { displayName } = await import('../engine/gateway/price-reference.js')
  t.equal(displayName('gpt 4o', 'gpt-4o-2024-08-06'), 'GPT-4o (2024-08-06)', 'a dated snapshot')
  t.equal(displayName('Claude Sonnet 4.5', 'claude-sonnet-4-5-20250929'), 'Claude Sonnet 4.5 (2025-09-29)')
  t.equal(displayName(undefined, 'claude-3-5-haiku'), 'Claude 3.5 Haiku', 'numbers in a row are one version')
  t.equal(displayName(undefined, 'llama-3.1-70b-versatile'), 'Llama 3.1 70B Versatile')

  const unknown = await added(['openai', 'gpt-4.1-nano'])
  t.notOk('max_output_tokens' in entryOf(unknown.stdout), 'no output limit the database does not know')
  t.match(unknown.stdout, /# max_output_tokens: the database names no output limit; give --max-output-tokens N/, 'and it says so')
  const given = await cli(['models', 'add', 'openai', 'gpt-4.1-nano', '--max-output-tokens', '32768', '--write', '--config', file])
  t.equal(given.code, 0, given.stderr)
  t.match((await loadConfig(file, {})).models, [{ id: 'openai/gpt-4.1-nano', name: 'GPT-4.1 nano', context_length: 1000000, max_output_tokens: 32768 }], 'written with the limit given')
  t.match(readFileSync(file, 'utf8'), /context_length: 1000000,? max_output_tokens: 32768\b/, 'beside the context length')
  const bad = await cli(['models', 'add', 'openai', 'gpt-4o', '--max-output-tokens', 'lots', '--config', file])
  t.equal(bad.code, 2)
  t.match(bad.stderr, /--max-output-tokens: a whole number above 0: lots/)
})

t.test('models add --write: the entry appended to the config, which stays valid and keeps its comments', async (t) => {
  const file = configFile()
  const res = await cli(['models', 'add', 'anthropic', 'claude-haiku-4-5', '--id', 'claude/haiku', '--write', '--config', file])
  t.equal(res.code, 0, res.stderr)
  t.match(res.stdout, /added claude\/haiku to /)
  const text = readFileSync(file, 'utf8')
  t.match(text, /^# my gateway/, 'the file\'s own comments kept')
  t.match(text, /pricing: \{ input: 1, cached_input: 0\.1, cache_write: 1\.25, cache_write_1h: 2, output: 5, server_tools: \{ web_search: 0\.01 \} \}/, 'one line of prices, as the shipped catalog writes them')
  const config = await loadConfig(file, {})
  t.match(config.models, [{ id: 'claude/haiku', provider: 'anthropic', upstream_model: 'claude-haiku-4-5', context_length: 200000, pricing: { cache_write: 1.25 } }])
  const again = await cli(['models', 'add', 'anthropic', 'claude-haiku-4-5', '--id', 'claude/haiku', '--write', '--config', file])
  t.equal(again.code, 2)
  t.match(again.stderr, /already has a model claude\/haiku/)
  t.equal(readFileSync(file, 'utf8'), text, 'the file is left as it was')

  const check = await cli(['models', 'check', '--config', file])
  t.equal(check.code, 0, 'an entry of the database matches it')
  t.match(check.stdout, /1 priced models checked .*\n.*no price differs/)
})

t.test('models check: a changed price, a missing cache write price and a tier are caught; --json lists them', async (t) => {
  const file = configFile(`models:
  - id: anthropic/claude-sonnet-4-5
    name: Sonnet
    provider: anthropic
    upstream_model: claude-sonnet-4-5
    context_length: 1000000
    pricing: { input: 3, cached_input: 0.3, output: 14 }
  - id: openai/gpt-4o-mini
    name: mini
    provider: openai
    upstream_model: gpt-4o-mini-2024-07-18
    context_length: 128000
    pricing: { input: 0.15, cached_input: 0.075, output: 0.6 }
  - id: mine/local
    name: local
    provider: openai
    upstream_model: my-finetune
    context_length: 8192
    pricing: { input: 1, output: 1 }
`)
  const text = await cli(['models', 'check', '--config', file])
  t.equal(text.code, 1, 'exit status 1: prices differ')
  t.match(text.stdout, /anthropic\/claude-sonnet-4-5 {2}output: 14 in the catalog, 15 in the database/)
  t.match(text.stdout, /not in the database: mine\/local/)

  const res = await cli(['models', 'check', '--json', '--config', file])
  t.equal(res.code, 1)
  const body = JSON.parse(res.stdout) as { object: string, data: Array<Record<string, string>>, unknown: string[], checked: number }
  t.equal(body.object, 'list')
  t.equal(body.checked, 2, 'the dated snapshot gpt-4o-mini-2024-07-18 is found as gpt-4o-mini')
  t.same(body.unknown, ['mine/local'])
  const diff = (field: string): Record<string, string> | undefined => body.data.find((d) => d.model === 'anthropic/claude-sonnet-4-5' && d.field === field)
  t.match(diff('output'), { catalog: '14', reference: '15', source: /^@pydantic\/genai-prices@[\d.]+ anthropic\/claude-sonnet-4-5$/ }, 'the changed price')
  t.match(diff('cache_write'), { catalog: '3', reference: '3.75' }, 'cache writes billed at the input rate by default, where the provider charges 1.25×')
  t.match(diff('cache_write_1h'), { catalog: '3', reference: '6' })
  // the catalog says a million tokens of context: the provider's tier past 200k applies
  t.match(diff('tiers[above_input_tokens=200000].input'), { catalog: '3', reference: '6' })
  t.match(diff('tiers[above_input_tokens=200000].output'), { catalog: '14', reference: '22.5' })
  t.notOk(body.data.some((d) => d.model === 'openai/gpt-4o-mini'), 'a catalog price equal to the database\'s is not listed')
})

t.test('GET /admin/v1/prices/check: the same list, for the operator', async (t) => {
  const admin = 'admin-token-0123456789abcdef'
  const app = await build(t, {
    admin: { token: admin },
    providers: [{ id: 'demo', protocol: 'openai', builtin: 'demo' }, { id: 'anthropic', protocol: 'messages', base_url: 'https://api.anthropic.com' }],
    models: [
      { id: 'demo/gpt', name: 'demo', provider: 'demo', upstream_model: 'gpt-4o', context_length: 1000, pricing: { input: 1, output: 2 } },
      { id: 'anthropic/claude-haiku-4-5', name: 'Haiku', provider: 'anthropic', upstream_model: 'claude-haiku-4-5', context_length: 200000, pricing: { input: 1, cached_input: 0.1, output: 5 } }
    ]
  })
  const res = await app.inject({ url: '/admin/v1/prices/check', headers: { authorization: `Bearer ${admin}` } })
  t.equal(res.statusCode, 200)
  const body = res.json() as { object: string, data: Array<Record<string, string>>, unknown: string[], checked: number }
  t.same(body.data.map((d) => [d.model, d.field, d.catalog, d.reference]), [
    ['anthropic/claude-haiku-4-5', 'cache_write', '1', '1.25'],
    ['anthropic/claude-haiku-4-5', 'cache_write_1h', '1', '2']
  ])
  t.equal(body.checked, 1, 'the demo models are not checked')
  t.equal((await app.inject({ url: '/admin/v1/prices/check' })).statusCode, 401, 'the admin token is needed')
})
