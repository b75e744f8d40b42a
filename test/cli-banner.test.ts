import t from 'tap'
import { spawnGateway } from './helper.js'

// The start banner of `modelgate serve` (a file of its own: cli.slow.test.ts already spawns many gateways).

t.test('serve: the banner prints the shipped demo key, and no other key', async (t) => {
  const DEMO = 'mg-demo-local-only-0123456789abcdef'
  const tenant = (key: string): Record<string, unknown> => ({ tenants: [{ org: 'demo', projects: [{ id: 'playground', keys: [{ key }] }] }] })
  const cases: Array<[string, Record<string, unknown>, Record<string, string>, string | null]> = [
    ['the shipped demo key', tenant(DEMO), {}, DEMO],
    ['an operator key in the config', tenant('mg-operator-secret-0123456789abcdef'), {}, null],
    ['MODELGATE_DEMO_KEY', tenant('${MODELGATE_DEMO_KEY:-' + DEMO + '}'), { MODELGATE_DEMO_KEY: 'mg-from-the-env-0123456789abcdef' }, null]
  ]
  for (const [name, config, env, shown] of cases) {
    const gw = await spawnGateway(t, config, ['--workers', '1'], env)
    const out = await gw.stdout(/demo key:|API keys:/)
    if (shown !== null) {
      t.match(out, `demo key: ${shown}`, name)
    } else {
      t.notMatch(out, /mg-/, `${name}: no key printed`)
      t.match(out, /API keys: the tenants' keys in the config, or `modelgate keys create/, name)
    }
    gw.kill()
    await gw.exited
  }
})

t.test('serve: the banner points at the operator\'s console when the admin API is on, never printing the token', async (t) => {
  const ADMIN = 'banner-admin-token-0123456789abcdef'
  const tenants = [{ org: 'o', projects: [{ id: 'p', keys: [{ key: 'mg-operator-secret-0123456789abcdef' }] }] }]
  const on = await spawnGateway(t, { tenants, admin: { token: ADMIN } }, ['--workers', '1'])
  const out = await on.stdout(/API keys:/)
  t.match(out, /operator: http:\/\/127\.0\.0\.1:\d+\/console\/admin \(sign in with the admin token\)/)
  t.notMatch(out, ADMIN, 'the token itself is never printed')
  on.kill()
  await on.exited
  // the same gateway answers for the next test's last case: its providers all have credentials
  const off = await spawnGateway(t, { tenants }, ['--workers', '1'])
  const plain = await off.stdout(/API keys:/)
  t.notMatch(plain, /operator:/, 'no admin token: no operator console to point at')
  t.notMatch(plain, /no credentials/, 'every provider can be called: nothing said')
  off.kill()
  await off.exited
})

t.test('serve: the banner names the providers without credentials, what to set, and the models they leave unserved', async (t) => {
  const tenants = [{ org: 'o', projects: [{ id: 'p', keys: [{ key: 'mg-operator-secret-0123456789abcdef' }] }] }]
  const gw = await spawnGateway(t, {
    tenants,
    providers: [
      { id: 'demo', protocol: 'openai', builtin: 'demo' },
      { id: 'openai', protocol: 'openai', base_url: 'https://api.openai.com/v1', api_key: '${MG_BANNER_TEST_OPENAI_KEY:-}' },
      { id: 'bare', protocol: 'messages', base_url: 'https://api.anthropic.com', api_key: '' }
    ],
    models: [
      { id: 'demo/echo', name: 'Echo', provider: 'demo', context_length: 8192 },
      { id: 'openai/gpt', name: 'GPT', provider: 'openai', context_length: 8192 },
      { id: 'bare/claude', name: 'Claude', provider: 'bare', context_length: 8192 }
    ]
  }, ['--workers', '1'])
  const out = await gw.stdout(/not listed or served/)
  t.match(out, /no credentials: openai \(MG_BANNER_TEST_OPENAI_KEY is not set\), bare \(its api_key is empty\)/)
  t.match(out, /not listed or served: openai\/gpt, bare\/claude; set the variables and restart/)
  gw.kill()
  await gw.exited
  // a config whose every provider can be called says nothing of credentials: the banner without
  // an admin token above is of that config
})
