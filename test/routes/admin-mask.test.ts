import t from 'tap'
import { isSecretKey, MASK, maskSecrets, maskUrl } from '../../routes/admin/mask.js'

// What the admin API masks in the configured values it shows (plugin options, base URLs).

t.test('keys that name a secret', async (t) => {
  for (const key of ['token', 'admin_token', 'accessToken', 'secret', 'client_secret', 'password', 'passwd', 'api_key', 'apikey', 'apiKey', 'x-api-key', 'DD-API-KEY',
    'authorization', 'Authorization', 'credentials', 'cookie', 'private_key']) t.ok(isSecretKey(key), key)
  for (const key of ['accesstoken', 'client-secret', 'db.password', 'AUTH_TOKEN', 'bearer', 'clientCredentials']) t.ok(isSecretKey(key), key)
  for (const key of ['tag', 'header', 'url', 'endpoint', 'retention_days', 'store_content', 'key', 'keys', 'scope']) t.notOk(isSecretKey(key), key)
  // counts and settings named after tokens are not secrets
  for (const key of ['max_tokens', 'maxTokens', 'tokens', 'tokenizer', 'default_max_tokens', 'tpm', 'auth']) t.notOk(isSecretKey(key), key)
})

t.test('a switch under a secret\'s name is shown: CORS\'s credentials: false is no secret', async (t) => {
  t.same(maskSecrets({ origins: ['*'], credentials: false, max_age_s: 600 }), { origins: ['*'], credentials: false, max_age_s: 600 })
  t.same(maskSecrets({ credentials: true, token: true }), { credentials: true, token: true })
  t.same(maskSecrets({ credentials: 'user:pw', token: 0 }), { credentials: MASK, token: MASK }, 'any other value under such a name is masked')
})

t.test('URLs with credentials', async (t) => {
  for (const url of ['https://user:pass@host/v1', 'http://user@host', 'postgres://u:p@db:5432/x', 'redis://:pw@127.0.0.1:6379']) t.equal(maskUrl(url), MASK, url)
  for (const text of ['https://host/v1', 'https://host/path?x=a@b', 'https://host/a@b', 'mailto:someone@example.com', 'user@example.com', 'plain text']) t.equal(maskUrl(text), text, text)
})

t.test('options: secrets masked at any depth, everything else as it is, the input unchanged', async (t) => {
  const options = {
    api_key: 'sk-1',
    token: { nested: 'object under a secret key' },
    password: null,
    endpoint: 'https://svc:pw@vault.example/v1',
    public: 'https://vault.example/v1',
    count: 3,
    on: true,
    rules: [{ name: 'r', pattern: 'secret-\\d+', client_secret: 's' }, 'redis://:pw@h:1'],
    headers: { 'x-team': 'abc', Authorization: 'Bearer x' },
    deep: { deeper: { credential: 42, label: 'kept' } }
  }
  const before = JSON.stringify(options)
  t.same(maskSecrets(options), {
    api_key: MASK,
    token: MASK,
    password: null,
    endpoint: MASK,
    public: 'https://vault.example/v1',
    count: 3,
    on: true,
    rules: [{ name: 'r', pattern: 'secret-\\d+', client_secret: MASK }, MASK],
    headers: { 'x-team': MASK, Authorization: MASK },
    deep: { deeper: { credential: MASK, label: 'kept' } }
  })
  t.equal(JSON.stringify(options), before, 'the options themselves are not changed')
  const proto = JSON.parse('{"__proto__": {"token": "t"}, "a": 1}') as Record<string, unknown>
  const masked = maskSecrets(proto) as Record<string, unknown>
  t.same(Object.keys(masked), ['__proto__', 'a'], 'a key named __proto__ stays a key')
  t.same(Object.getOwnPropertyDescriptor(masked, '__proto__')?.value, { token: MASK })
  t.equal(maskSecrets('https://a:b@c/'), MASK)
  t.equal(maskSecrets(7), 7)
})
