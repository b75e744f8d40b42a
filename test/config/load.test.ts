import t from 'tap'
import { Ajv, type ValidateFunction } from 'ajv'
import { writeFileSync } from 'node:fs'
import { createRequire } from 'node:module'
import { join } from 'node:path'
import { ConfigError, displayPath, loadConfig, parseConfig, readConfigFile } from '../../config/load.js'
import { resolveGatewayConfig } from '../../engine/host/index.js'
import { schemasAhead } from '../../engine/host/schemas-ahead.js'
import { ajvOptions, checkSchema, schemaKey } from '../../engine/kernel/schema-check.js'
import { fromRoot } from '../../paths.js'
import { tempDir } from '../temp-dir.js'

const problemsOf = (raw: unknown, env: Record<string, string> = {}): string[] => {
  try {
    parseConfig(raw, env)
  } catch (err) {
    if (err instanceof ConfigError) return err.problems
    throw err
  }
  return []
}

t.test('the shipped config is valid', async (t) => {
  const config = await loadConfig(fromRoot('config', 'gateway.yaml'), {})
  t.equal(config.server.port, 8080)
  t.equal(config.server.host, '127.0.0.1')
  t.ok(config.models.some((m) => m.pricing === undefined && m.status === 'active'), 'a model with no public price')
  t.ok(config.models.some((m) => m.id.startsWith('demo/')), 'demo models')
  t.ok(config.models.some((m) => m.id.startsWith('anthropic/')) && config.models.some((m) => m.id.startsWith('openai/')))
})

t.test('defaults are applied', async (t) => {
  const config = parseConfig({}, {})
  t.same(config.server, { host: '127.0.0.1', port: 8080, body_limit_mb: 64, request_timeout_s: 120, header_prefix: 'X-SVC-', trust_proxy: false, shutdown_timeout_s: 30, headers_timeout_s: 30, client_timeout_s: 120, keep_alive_timeout_s: 72, media_urls: { resolve_hosts: false } })
  t.equal(config.store.sqlite, 'data/modelgate.db')
  t.equal(config.admin.token, '')
})

t.test('several mistakes are all reported, each with its path, the chain\'s with the file\'s', async (t) => {
  const raw = {
    server: { port: 'eighty', colour: 'blue' },
    providers: [{ id: 'p', protocol: 'grpc', base_url: 'https://x' }],
    models: [
      { id: 'm1', name: 'M1', provider: 'p', context_length: 10, pricing: { input: 1, output: 1 } },
      { id: 'm2', name: 'M2', provider: 'p', context_length: 10, pricing: { input: -1, output: 1 } },
      { id: 'm3', name: 'M3', provider: 'p', context_length: 10 },
      { id: 'm4', name: 'M4', provider: 'p', context_length: 0, pricing: { input: 1, output: 1 } }
    ],
    plugins: [{ name: 'auth', options: { cache_size: -5 } }, { name: 'nope' }]
  }
  const problems = await resolveGatewayConfig(raw, { env: {} }).then(() => [], (err: unknown) => err instanceof ConfigError ? err.problems : [String(err)])
  t.same(problemsOf(raw).filter((p) => p.startsWith('plugins')), [], 'the config loader knows no plugin')
  const text = problems.join('\n')
  t.match(text, /server\.port: /)
  t.match(text, /server\.colour: is not a known key/)
  t.match(text, /providers\[0\]\.protocol: must be one of "openai", "messages"/)
  t.match(text, /models\[1\]\.pricing\.input: must be >= 0/)
  t.match(text, /models\[3\]\.context_length: must be >= 1/)
  t.match(text, /plugins\[0\]\.options\.cache_size: must be >= 0/)
  t.match(text, /plugins\[1\]\.name: unknown plugin "nope"/)
  t.ok(problems.length >= 7, `each problem on its own line:\n${text}`)
})

t.test('semantic mistakes: unknown provider, duplicates, price precision', async (t) => {
  const problems = problemsOf({
    providers: [{ id: 'p', protocol: 'openai', base_url: 'https://x' }, { id: 'p', protocol: 'openai' }],
    models: [
      { id: 'm', name: 'M', provider: ['p', 'ghost'], context_length: 10, pricing: { input: 0.0001, output: 1 } },
      { id: 'm', name: 'M', provider: 'p', context_length: 10 }
    ]
  })
  const text = problems.join('\n')
  t.match(text, /providers: the id p is used twice/)
  t.match(text, /providers\[1\]\.base_url: is required/)
  t.match(text, /models\[0\]\.provider\[1\]: no provider has the id ghost/)
  t.match(text, /models\[0\]\.pricing\.input: at most three decimals/)
  t.match(text, /models: the id m is used twice/)
})

t.test('aliases and fallbacks: unknown targets, an alias of an alias, cycles, kinds that differ, alias_of beside provider, each named by its path', async (t) => {
  const chat = (id: string, extra: Record<string, unknown> = {}): Record<string, unknown> => ({ id, name: id, provider: 'p', context_length: 10, ...extra })
  const embed = { id: 'e', name: 'E', provider: 'p', context_length: 10, architecture: { input_modalities: ['text'], output_modalities: ['embeddings'] } }
  const problems = problemsOf({
    providers: [{ id: 'p', protocol: 'openai', base_url: 'https://x' }],
    models: [
      chat('a', { fallbacks: [{ models: ['b', 'ghost'] }] }),
      chat('b', { fallbacks: [{ models: ['c'], on: ['timeout'] }] }),
      chat('c', { fallbacks: [{ models: ['a'], on: ['context_length'] }] }),
      chat('d', { fallbacks: [{ models: ['e', 'd'] }] }),
      embed,
      { id: 'smart', alias_of: ['a', 'nowhere'] },
      { id: 'meta', alias_of: ['smart'] },
      { id: 'mixed', alias_of: ['a', 'e'] },
      { id: 'both', alias_of: ['a'], provider: 'p' },
      { id: 'bare' }
    ]
  })
  const text = problems.join('\n')
  t.match(text, /models\[0\]\.fallbacks\[0\]\.models\[1\]: no model has the id ghost/, 'an unknown fallback')
  t.match(text, /models\[\d\]\.fallbacks: a cycle: (a → b → c → a|b → c → a → b|c → a → b → c)/, 'a cycle, its models named')
  t.match(text, /models\[3\]\.fallbacks\[0\]\.models\[0\]: e is a model of another kind \(embeddings, this one is chat\)/, 'a fallback of another kind')
  t.match(text, /models\[3\]\.fallbacks\[0\]\.models\[1\]: a model does not fall back to itself/)
  t.match(text, /models\[5\]\.alias_of\[1\]: no model has the id nowhere/, 'an unknown target')
  t.match(text, /models\[6\]\.alias_of\[0\]: smart is an alias itself/, 'an alias of an alias')
  t.match(text, /models\[7\]\.alias_of: its models are of different kinds/, 'targets of different kinds')
  t.match(text, /models\[8\]\.provider: an alias \(alias_of\) takes no provider/, 'alias_of beside provider')
  t.match(text, /models\[9\]\.provider: is required \(or alias_of, for an alias\)/, 'a model needs a provider')
  t.match(problemsOf({ providers: [{ id: 'p', protocol: 'openai', base_url: 'https://x' }], models: [chat('a'), chat('f', { fallbacks: [{ models: ['a'], on: ['sometimes'] }] })] }).join('\n'),
    /models\[1\]\.fallbacks\[0\]\.on\[0\]: must be one of "rate_limited"/, 'an unknown class')
  // a valid chain loads, with the default classes
  const config = parseConfig({
    providers: [{ id: 'p', protocol: 'openai', base_url: 'https://x' }],
    models: [chat('a', { fallbacks: [{ models: ['b'] }, { models: ['c'], on: ['context_length'] }] }), chat('b'), chat('c'), { id: 'smart', name: 'Smart', alias_of: ['a', 'c'] }],
    upstream: { retries: { attempts: 2, max_wait_s: 5 } }
  }, {})
  t.same(config.models[0]?.fallbacks?.[0]?.on, ['rate_limited', 'unavailable', 'timeout', 'content_filtered'], 'the default classes: all but context_length')
  t.same(config.upstream.retries, { attempts: 2, max_wait_s: 5 })
  t.same(config.upstream.retry, { attempts: 1, backoff_ms: 50 }, 'the older retry section still loads beside it')
})

t.test('environment substitution', async (t) => {
  const config = parseConfig({
    server: { port: '${PORT:-9000}', host: '${HOST}' },
    admin: { token: '${TOKEN:-}' }
  }, { HOST: '0.0.0.0' })
  t.equal(config.server.port, 9000, 'a default, converted to the schema type')
  t.equal(config.server.host, '0.0.0.0')
  t.equal(config.admin.token, '')
  t.match(problemsOf({ admin: { token: '${SECRET_TOKEN}' } }).join('\n'), /admin\.token: environment variable SECRET_TOKEN is not set/)
})

t.test('loadConfig reads YAML and JSON files, and reports unreadable ones', async (t) => {
  const dir = tempDir('config')
  writeFileSync(join(dir, 'a.yaml'), 'server:\n  port: 1234\n')
  writeFileSync(join(dir, 'b.json'), JSON.stringify({ server: { port: 4321 } }))
  writeFileSync(join(dir, 'c.yaml'), 'server: [unclosed\n')
  t.equal((await loadConfig(join(dir, 'a.yaml'), {})).server.port, 1234)
  t.equal((await loadConfig(join(dir, 'b.json'), {})).server.port, 4321)
  await t.rejects(loadConfig(join(dir, 'c.yaml'), {}), /not valid YAML/)
  await t.rejects(loadConfig(join(dir, 'missing.yaml'), {}), /cannot read/)
})

t.test('a YAML config is read by YAML 1.2\'s core schema, as one document', async (t) => {
  const dir = tempDir('config-yaml')
  const file = (name: string, text: string): string => { writeFileSync(join(dir, name), text); return join(dir, name) }
  t.equal((await loadConfig(file('empty.yaml', ''), {})).server.port, 8080, 'an empty file is an empty config: every default')
  t.equal((await loadConfig(file('comments.yaml', '# nothing set yet\n'), {})).server.port, 8080, 'so is one of comments only')
  t.same(readConfigFile(file('core.yaml', 'a: 2026-01-01\nb: yes\nc: 0o17\nd: 1_000\ne: ~\n<<: { f: 1 }\n')), { a: '2026-01-01', b: 'yes', c: 15, d: '1_000', e: null, '<<': { f: 1 } }, 'no dates, no YAML 1.1 booleans, no merge keys')
  t.throws(() => readConfigFile(file('twice.yaml', 'server:\n  port: 1\nserver:\n  port: 2\n')), /not valid YAML: duplicated mapping key/, 'a key given twice is refused')
  t.throws(() => readConfigFile(file('two.yaml', 'server: {}\n---\nserver: {}\n')), /not valid YAML: a config is one YAML document; this file holds 2/, 'so is a second document')
})

t.test('displayPath', async (t) => {
  t.equal(displayPath('/models/3/pricing/input'), 'models[3].pricing.input')
  t.equal(displayPath(''), '(root)')
})

t.test('client timeouts must fit together', async (t) => {
  t.match(problemsOf({ server: { headers_timeout_s: 60, client_timeout_s: 30 } }).join('\n'), /server\.headers_timeout_s: must be <= server\.client_timeout_s/)
  t.match(problemsOf({ server: { request_timeout_s: 120, idle_timeout_s: 60 } }).join('\n'), /server\.idle_timeout_s: must be > server\.request_timeout_s/)
  t.same(problemsOf({ server: { headers_timeout_s: 5, client_timeout_s: 5, idle_timeout_s: 121 } }), [])
})

t.test('tracing.timeout_s must be a positive number of seconds', async (t) => {
  t.match(problemsOf({ tracing: { timeout_s: 0 } }).join('\n'), /tracing\.timeout_s/)
  t.match(problemsOf({ tracing: { timeout_s: 'soon' } }).join('\n'), /tracing\.timeout_s/)
  t.same(problemsOf({ tracing: { otlp_endpoint: 'http://127.0.0.1:4318/v1/traces', timeout_s: 0.5 } }), [])
})

t.test('pass-through: only providers with a base_url, and keys name only such providers', async (t) => {
  const { parseConfig } = await import('../../config/load.js')
  const base = { providers: [{ id: 'demo', protocol: 'openai', builtin: 'demo', passthrough: true }, { id: 'up', protocol: 'openai', base_url: 'http://127.0.0.1:9/v1' }], models: [], tenants: [{ org: 'o', projects: [{ id: 'p', keys: [{ key: 'mg-0123456789abcdef0123', passthrough: ['up'] }] }] }] }
  const err = t.throws(() => parseConfig(base, {})) as Error
  t.match(err.message, /providers\[0\]\.passthrough: needs a base_url/)
  t.match(err.message, /keys\[0\]\.passthrough: up is not a provider with passthrough: true/)
  const up = { id: 'up', protocol: 'openai', base_url: 'http://127.0.0.1:9/v1' }
  t.match(problemsOf({ providers: [{ ...up, passthrough_shared: true }], models: [] }), [/providers\[0\]\.passthrough_shared: needs passthrough: true/], 'sharing an account\'s objects needs its pass-through')
  t.same(problemsOf({ providers: [{ ...up, passthrough: true, passthrough_shared: true }], models: [] }), [])
  t.equal(parseConfig({ providers: [{ ...up, passthrough: true }], models: [] }, {}).providers[0]?.passthrough_shared, false, 'objects are kept apart by default')
})

t.test('the SQLite file is relative to the config file\'s folder; absolute paths and :memory: are kept', async (t) => {
  const dir = tempDir('load')
  const file = (name: string, sqlite: string): string => {
    const path = join(dir, name)
    writeFileSync(path, JSON.stringify({ store: { sqlite } }))
    return path
  }
  t.equal((await loadConfig(file('a.json', 'data/gw.db'), {})).store.sqlite, join(dir, 'data', 'gw.db'))
  t.equal((await loadConfig(file('b.json', '../gw.db'), {})).store.sqlite, join(dir, '..', 'gw.db'))
  t.equal((await loadConfig(file('c.json', '/var/lib/modelgate/gw.db'), {})).store.sqlite, '/var/lib/modelgate/gw.db')
  t.equal((await loadConfig(file('d.json', ':memory:'), {})).store.sqlite, ':memory:')
  t.equal((await loadConfig(file('e.json', '${DB}'), { DB: 'from-env.db' })).store.sqlite, join(dir, 'from-env.db'), 'a path from a variable too')
  writeFileSync(join(dir, 'f.json'), '{}')
  t.equal((await loadConfig(join(dir, 'f.json'), {})).store.sqlite, join(dir, 'data', 'modelgate.db'), 'the default as well')
  t.equal((await loadConfig(fromRoot('config', 'gateway.yaml'), {})).store.sqlite, fromRoot('data', 'modelgate.db'), 'the shipped config keeps the checkout\'s data/')
})

t.test('a key\'s models name at least one glob: an empty list is a mistake, not a key that may call everything', async (t) => {
  const problems = problemsOf({ tenants: [{ org: 'acme', projects: [{ id: 'web', keys: [{ key: 'mg-empty-grants-0123456789', models: [] }] }] }] })
  t.match(problems, [/^tenants\[0\]\.projects\[0\]\.keys\[0\]\.models: /])
})

t.test('mcp.servers: what each transport needs, unique ids without "__", a stdio server runs in the config file\'s folder', async (t) => {
  const shape = problemsOf({
    mcp: { servers: [{ id: 'bad id', transport: 'ws', url: 'ftp://x', colour: 'blue' }] },
    tenants: [{ org: 'o', projects: [{ id: 'p', keys: [{ key: 'mg-0123456789abcdef0123', mcp: [''] }] }] }]
  })
  for (const p of [
    /^mcp\.servers\[0\]\.id: /,
    /^mcp\.servers\[0\]\.transport: must be one of "http", "stdio"$/,
    /^mcp\.servers\[0\]\.url: /,
    /^mcp\.servers\[0\]\.colour: is not a known key$/,
    /^tenants\[0\]\.projects\[0\]\.keys\[0\]\.mcp\[0\]: /
  ]) t.ok(shape.some((x) => p.test(x)), `${String(p)} in ${JSON.stringify(shape)}`)
  const problems = problemsOf({
    mcp: {
      servers: [
        { id: 'docs', transport: 'http' },
        { id: 'docs', transport: 'stdio', url: 'http://x/mcp', args: ['a'] },
        { id: 'a__b', transport: 'http', url: 'http://x/mcp', command: 'node', pricing: { per_call: 0.0000000001 } }
      ]
    }
  })
  t.same(problems.sort(), [
    'mcp.servers: the id docs is used twice',
    'mcp.servers[0].url: is required for transport http',
    'mcp.servers[1].command: is required for transport stdio',
    'mcp.servers[1].url: is for transport http only',
    'mcp.servers[2].command: is for transport stdio only',
    'mcp.servers[2].id: must not contain "__" (it separates the server from the tool in tool names)',
    'mcp.servers[2].pricing.per_call: at most nine decimals (nano-dollars)'
  ])
  t.same(parseConfig({ tenants: [{ org: 'o', projects: [{ id: 'p', keys: [{ key: 'mg-0123456789abcdef0123' }] }] }] }, {}).tenants[0]?.projects[0]?.keys[0]?.mcp, [], 'a key has no MCP tools unless it names some')
  // `d` with a tool `_echo` and `d_` with a tool `echo` would both be `d___echo`
  t.same(problemsOf({ mcp: { servers: [{ id: 'd', transport: 'http', url: 'http://x/mcp' }, { id: 'd_', transport: 'http', url: 'http://y/mcp' }] } }), [
    'mcp.servers[1].id: must not end with "_" (a tool name would read two ways: d___echo is also server d\'s tool _echo)'
  ])
  const mcp = parseConfig({ mcp: { servers: [{ id: 'docs', transport: 'http', url: 'http://x/mcp' }] } }, {}).mcp
  t.same({ ...mcp, servers: mcp.servers.map((s) => s.shared) }, { servers: [false], max_result_mb: 8, max_sessions: 32, session_idle_s: 300 }, 'the defaults: a session per organization, 8 MB, 32 sessions, 5 minutes')

  const dir = tempDir('load-mcp')
  writeFileSync(join(dir, 'gw.json'), JSON.stringify({ mcp: { servers: [{ id: 'files', transport: 'stdio', command: 'node', args: ['./server.mjs'] }, { id: 'other', transport: 'stdio', command: 'node', cwd: 'servers' }] } }))
  const servers = (await loadConfig(join(dir, 'gw.json'), {})).mcp.servers
  t.equal(servers[0]?.cwd, dir, 'it runs in the config file\'s folder, so ./server.mjs is beside the file')
  t.equal(servers[1]?.cwd, join(dir, 'servers'), 'a cwd of its own is relative to that folder')
})

t.test('admin tokens and single sign-on: roles with their organizations, names and tokens apart, the identity provider and callback over HTTPS unless on loopback', async (t) => {
  const token = (extra: Record<string, unknown>): Record<string, unknown> => ({ token: 'a-viewer-token-0123456789', role: 'viewer', name: 'finance', ...extra })
  const sso = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
    issuer: 'https://login.example.com/realms/acme', client_id: 'modelgate', client_secret: 's3cret', redirect_url: 'https://gw.example.com/console/auth/callback', roles: [{ group: 'ops', role: 'admin' }], ...extra
  })
  const ok = parseConfig({ admin: { token: 'the-admin-token-0123456789', tokens: [token({}), token({ token: 'an-acme-token-0123456789', role: 'org_admin', org: 'acme', name: 'acme-ci' })] }, sso: sso() }, {})
  t.match(ok.sso, { groups_claim: 'groups', session_hours: 8, scopes: ['openid', 'email', 'profile'], token_endpoint_auth_method: 'client_secret_basic' }, 'the defaults')
  t.same(problemsOf({ admin: { tokens: [token({ role: 'org_admin' })] } }), ['admin.tokens[0].org: is required for role org_admin (the organization it manages)'])
  t.same(problemsOf({ admin: { tokens: [token({ org: 'acme' })] } }), ['admin.tokens[0].org: is for role org_admin only (role viewer reaches every organization)'])
  t.same(problemsOf({ admin: { token: 'a-viewer-token-0123456789', tokens: [token({ name: 'admin' })] } }), [
    'admin.tokens[0].token: is admin.token itself (each token has one role)',
    'admin.tokens[0].name: "admin" names admin.token in the audit log; choose another'
  ])
  t.same(problemsOf({ admin: { tokens: [token({}), token({})] } }), ['admin.tokens: the name finance is used twice', 'admin.tokens: the same token is listed twice'])
  t.match(problemsOf({ admin: { tokens: [token({ token: 'short', role: 'owner' })] } }), [/admin\.tokens\[0\]\.token/, /admin\.tokens\[0\]\.role/])
  t.same(problemsOf({ sso: sso({ issuer: 'http://login.example.com', redirect_url: 'http://gw.example.com/console/auth/callback' }) }), [
    'sso.issuer: must be https:// (plain http only on a loopback address)',
    'sso.redirect_url: must be https:// (plain http only on a loopback address)'
  ], 'plain HTTP is refused off loopback: the session cookie would be sent in clear')
  t.same(problemsOf({ sso: sso({ issuer: 'http://127.0.0.1:9000', redirect_url: 'http://localhost:8080/console/auth/callback' }) }), [], 'and taken on loopback')
  t.same(problemsOf({ sso: sso({ redirect_url: 'https://gw.example.com/callback' }) }), ['sso.redirect_url: must end with /console/auth/callback (the gateway\'s callback as the browser reaches it)'])
  t.same(problemsOf({ sso: sso({ post_logout_redirect_url: 'https://gw.example.com/console/admin/' }) }), [], 'where the provider sends the browser after its logout')
  t.same(problemsOf({ sso: sso({ post_logout_redirect_url: 'http://localhost:8080/console/admin/' }) }), [], 'plain HTTP on loopback')
  t.same(problemsOf({ sso: sso({ post_logout_redirect_url: 'http://gw.example.com/console/admin/' }) }), ['sso.post_logout_redirect_url: must be https:// (plain http only on a loopback address)'])
  t.same(problemsOf({ sso: sso({ post_logout_redirect_url: 'https://' }) }), ['sso.post_logout_redirect_url: is not a URL'])
  t.match(problemsOf({ sso: sso({ post_logout_redirect_url: 'javascript:alert(1)' }) }), [/sso\.post_logout_redirect_url/])
  t.same(problemsOf({ sso: sso({ scopes: ['email'], roles: [{ group: 'devs', role: 'org_admin' }] }) }), [
    'sso.roles[0].org: is required for role org_admin (the organization it manages)',
    'sso.scopes: must include openid'
  ])
  t.same(problemsOf({ sso: sso({ client_secret: '' }) }), ['sso.client_secret: is required unless token_endpoint_auth_method is none'])
  t.same(problemsOf({ sso: sso({ token_endpoint_auth_method: 'none' }) }), ['sso.client_secret: a public client (token_endpoint_auth_method: none) has no secret'])
  t.same(problemsOf({ sso: sso({ roles: [], colour: 1 }) }), ['sso.colour: is not a known key', 'sso.roles: must not be empty'])
})

// The validators the build compiles ahead (dist/validators.cjs, ajv's standalone code) are found
// for every schema the build lists, and judge as the same schema compiled in the process does:
// the same problems, the same defaults filled in, the same values coerced.

const ahead = createRequire(import.meta.url)(fromRoot('dist', 'validators.cjs')) as Record<string, ValidateFunction | undefined>

/** What a validator makes of a copy of `value`: its verdict, its errors (without the schema objects), and the copy after it. */
function judged (validate: ValidateFunction, value: unknown): unknown {
  const copy = structuredClone(value)
  const ok = validate(copy)
  return { ok, errors: (validate.errors ?? []).map((e) => ({ ...e, schema: undefined, parentSchema: undefined })), after: copy }
}

t.test('every schema the build lists is compiled ahead, and judges as one compiled now', async (t) => {
  const listed = await schemasAhead()
  t.ok(listed.length > 10, 'the config\'s schema and the built-in plugins\' options')
  const shipped = readConfigFile(fromRoot('config', 'gateway.yaml')) as Record<string, unknown>
  const samples: unknown[] = [
    {},
    { origins: ['x'], max: '12', window_s: -1, rules: [{ pattern: '(', action: 'nope' }], unknown_option: true },
    JSON.parse(JSON.stringify(shipped).replace(/\$\{[A-Z_]+:-([^}]*)\}/g, '$1')),
    { server: { port: '8081', host: '' }, store: { sqlite: 5 }, models: [{ id: 'm', pricing: { input: -1 } }], plugins: [{}], nope: 1 }
  ]
  for (const { schema, defaults, coerce } of listed) {
    const mine = ahead[schemaKey(schema, defaults, coerce)]
    if (mine === undefined) { t.fail(`not compiled ahead: ${JSON.stringify(schema).slice(0, 80)}`); continue }
    const now = new Ajv(ajvOptions(defaults, coerce)).compile(schema)
    for (const sample of samples) t.same(judged(mine, sample), judged(now, sample), `${(schema as { title?: string }).title ?? JSON.stringify(schema).slice(0, 40)}: the same verdict on ${JSON.stringify(sample).slice(0, 40)}`)
  }
})

t.test('a schema the build did not see is compiled when it is first checked', async (t) => {
  const schema = { type: 'object', properties: { every: { type: 'integer', minimum: 1, default: 5 } }, additionalProperties: false }
  t.equal(ahead[schemaKey(schema, true, false)], undefined, 'not among those compiled ahead')
  const value: Record<string, unknown> = {}
  t.same(checkSchema(schema, value, 'opts'), [])
  t.same(value, { every: 5 }, 'its defaults filled in')
  t.same(checkSchema(schema, { every: 0, other: 1 }, 'opts', { noun: 'option' }), ['opts.other: is not a known option', 'opts.every: must be >= 1'])
})
